"""Impossible figures are never reported as if true.

MFU (and HFU and their variants) above 100 % cannot happen: the peak, the FLOPs or the step
is wrong. Such a value is removed from its key (``summary.mfu``, ``steps[i].mfu``,
``flops.hfu``... become null), kept under ``flops.impossible.values``, and the report gets
the flag ``impossible_mfu`` and a note naming the likely cause. A share above 1 (beyond float
rounding) gets the flag ``impossible_share`` and a note; the CLI and the tab show any share
above 100 % as "impossible", never as a figure.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from ..flops.detail import FlopsDetail, Impossible, ImpossibleValues
from ..fmt import flop_rate
from ..report import WorkerReport
from ..time.step_metrics import StepColumns
from .peaks import PEAKS, PeakChoice

IMPOSSIBLE_MFU = "impossible_mfu"
IMPOSSIBLE_SHARE = "impossible_share"
# Rounding in sums of float µs can push an exact 1.0 a hair above it.
_ROUNDING = 1e-6
# FLOP-rate figures of the FLOPs detail block that are fractions of the peak.
MFU_KEYS = ("hfu", "mfu_model", "mfu_user", "mfu_at_bf16_peak")


def _likely_cause(raw: float, choice: PeakChoice, flops_source: str | None, flags: list[str]) -> tuple[str, str]:
    """(cause, sentence): the peak, the FLOPs or the step."""
    g = PEAKS.get(choice.name or "")
    # the peak is suspect when its dtype was assumed or is a CUDA-core/TF32 one that faster units beat
    suspect = choice.dtype_source == "assumed" or choice.dtype in ("fp32", "tf32")
    if g is not None and choice.peak_flops and suspect:
        rate = raw * choice.peak_flops
        fits = sorted((tf, d) for d, tf in g.tflops.items() if tf * 1e12 >= rate and tf * 1e12 > choice.peak_flops)
        if fits:
            tf, d = fits[0]
            return "peak", (
                f"the peak: it is the {choice.dtype} peak ({flop_rate(choice.peak_flops)}, dtype from "
                f"{choice.dtype_source}), but the run reached {flop_rate(rate)}; the {d} peak ({flop_rate(tf * 1e12)}) "
                "would hold it. Give the dtype's peak with --peak-tflops or record shapes (record_shapes=True)"
            )
    if flops_source and not flops_source.startswith("shapes"):
        return "flops", (
            f"the FLOPs: the figure from {flops_source} is more than the GPU can do in a step; it should count "
            "one step of this GPU (not the global batch, not all ranks)"
        )
    if "no_step_markers" in flags:
        return "step", "the step: the trace has no ProfilerStep markers, so the step window is a guess"
    return "flops" if flops_source else "step", (
        "the FLOPs or the step: the counted FLOPs exceed what the peak allows in the step windows "
        "(FLOPs of work outside the window, or a step marker around only part of the step)"
    )


def guard_mfu(report: WorkerReport, detail: FlopsDetail, choice: PeakChoice, flops_source: str | None) -> None:
    """Null every MFU-like fraction above 1 in ``report``/``detail``, keep the raw values, flag, explain."""
    raw = ImpossibleValues()
    s = report.summary
    if s is not None and s.mfu is not None and s.mfu > 1.0:
        raw.mfu = s.mfu
        s.mfu = None
    over = [report.steps[i] for i in _above_one([st.mfu for st in report.steps])]
    steps = {str(st.step): st.mfu for st in over if st.mfu is not None and st.mfu > 1.0}
    for st in over:
        st.mfu = None
    if steps:
        raw.steps = steps
    for key in MFU_KEYS:
        v = getattr(detail, key)
        if isinstance(v, int | float) and v > 1.0:
            setattr(raw, key, float(v))
            setattr(detail, key, None)
    figures = [v for v in (getattr(raw, k) for k in ("mfu", *MFU_KEYS)) if v is not None]
    if not figures and not steps:
        return
    worst = max(figures) if figures else max(steps.values())
    cause, why = _likely_cause(worst, choice, flops_source, report.flags)
    report.flags.append(IMPOSSIBLE_MFU)
    detail.impossible = Impossible(values=raw, likely_cause=cause, explanation=why)
    # the raw value stays in the JSON (``flops.impossible.values``) for debugging, never in a sentence
    report.notes.append(f"MFU came out above 100 %, which is impossible, so it is not reported. Likely cause: {why}.")


def _metric_shares(obj: Any) -> dict[str, float]:
    return {f: getattr(obj, f) for f in _share_fields(obj) if isinstance(getattr(obj, f), float)}


def _share_fields(obj: Any) -> list[str]:
    fields = getattr(obj, "__struct_fields__", ())
    return [f for f in fields if f.endswith("_share") or f in ("sm_efficiency", "achieved_occupancy")]


def _above_one(values: list[Any]) -> np.ndarray:
    """Indexes of the values above 1 (None and NaN are not), found array-wide."""
    return np.flatnonzero(np.array(values, dtype=np.float64) > 1.0)


def _clamp(obj: Any, key: str, v: Any, bad: set[str], breakdown: bool = False) -> None:
    """Rounding above 1 becomes 1 (``obj.key``, or ``obj.breakdown[key]``); a real excess goes to ``bad``."""
    if not isinstance(v, float) and not breakdown:
        return
    if 1.0 < v <= 1.0 + _ROUNDING:
        if breakdown:
            obj.breakdown[key] = 1.0
        else:
            setattr(obj, key, 1.0)
    elif v > 1.0 + _ROUNDING:
        bad.add(f"breakdown.{key}" if breakdown else key)


def _column(steps: list[Any], key: str) -> np.ndarray:
    """``step.key`` of every step as float64, None as NaN."""
    values = list(map(attrgetter(key), steps))
    try:
        return np.fromiter(values, np.float64, len(values))
    except TypeError:  # a None among them
        return np.array(values, dtype=np.float64)


def _steps_above_one(steps: list[Any], keys: list[str], columns: StepColumns | None) -> tuple[list[int], list[int]]:
    """The steps with a share field above 1, and those with a breakdown part above 1 (None and
    NaN never are). Read from ``columns``, the arrays the steps were built from, when given: each
    pass over 100,000 structs scattered in memory costs about 0.1 s, a column's test nothing."""
    if columns is not None:
        share = [np.flatnonzero(columns.values[k] > 1.0) for k in keys]
        parts = [np.flatnonzero(v > 1.0) for v in columns.breakdown.values()]
    else:
        share = [np.flatnonzero(_column(steps, k) > 1.0) for k in keys]
        breakdowns = list(map(attrgetter("breakdown"), steps))
        counts = np.fromiter(map(len, breakdowns), np.int64, len(breakdowns))
        # floats only (a breakdown holds no None): read in C, as one array
        values = np.fromiter(chain.from_iterable(map(dict.values, breakdowns)), np.float64, int(counts.sum()))
        parts = [np.repeat(np.arange(len(steps)), counts)[np.flatnonzero(values > 1.0)]]
    return sorted(set(np.concatenate([*share, np.zeros(0, np.int64)]).tolist())), sorted(
        set(np.concatenate([*parts, np.zeros(0, np.int64)]).tolist())
    )


def guard_shares(report: WorkerReport, columns: StepColumns | None = None) -> None:
    """Clamp float rounding above 1 to 1; flag and explain any real excess (a bug or a broken trace).
    The steps' figures are screened a column at a time (``columns``: the worker's, which the steps
    were built from and nothing has changed since); only those above 1 are looked at again."""
    bad: set[str] = set()
    if report.summary is not None:
        for key, v in _metric_shares(report.summary).items():
            _clamp(report.summary, key, v, bad)
        for key, v in (report.summary.breakdown or {}).items():
            _clamp(report.summary, key, v, bad, breakdown=True)
    steps = report.steps
    keys = _share_fields(steps[0]) if steps else []
    if columns is not None and not all(len(columns.values.get(k, ())) == len(steps) for k in keys):
        columns = None  # not the columns of these steps
    shares, parts = _steps_above_one(steps, keys, columns)
    for i in shares:
        for key in keys:
            _clamp(steps[i], key, getattr(steps[i], key), bad)
    for i in parts:
        for key, v in steps[i].breakdown.items():
            _clamp(steps[i], key, v, bad, breakdown=True)
    if bad and IMPOSSIBLE_SHARE not in report.flags:
        report.flags.append(IMPOSSIBLE_SHARE)
        report.notes.append(
            f"impossible shares above 100 % ({', '.join(sorted(bad))}): overlapping or malformed events in the "
            "trace; these figures are shown as impossible"
        )
