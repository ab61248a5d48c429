"""Impossible figures are never reported as if true.

MFU (and HFU and their variants) above 100 % cannot happen: the peak, the FLOPs or the step
is wrong. Such a value is removed from its key (``summary.mfu``, ``steps[i].mfu``,
``flops.hfu``... become null), kept under ``flops.impossible.values``, and the report gets
the flag ``impossible_mfu`` and a note naming the likely cause. A share above 1 (beyond float
rounding) gets the flag ``impossible_share`` and a note; the CLI and the tab show any share
above 100 % as "impossible", never as a figure.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from ..flops.detail import FlopsDetail, Impossible, ImpossibleValues
from ..fmt import flop_rate
from ..report import Summary
from ..time.step_metrics import StepColumns
from .peaks import PEAKS, PeakChoice

IMPOSSIBLE_MFU = "impossible_mfu"
IMPOSSIBLE_SHARE = "impossible_share"
# Rounding in sums of float µs can push an exact 1.0 a hair above it.
_ROUNDING = 1e-6
# FLOP-rate figures of the FLOPs detail block that are fractions of the peak.
MFU_KEYS = ("hfu", "mfu_model", "mfu_user", "mfu_at_bf16_peak", "mfu_at_compute_peak")


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


@dataclass(frozen=True)
class Guard:
    """What ``guard_mfu`` withheld: the steps whose MFU came out above 1, whether the summary's did,
    and the note that says so."""

    steps_withheld: np.ndarray  # bool per step
    summary_withheld: bool
    cause: str  # peak | flops | step
    explanation: str
    note: str


def guard_mfu(
    summary_mfu: float | None,
    step_mfu: np.ndarray,
    step_numbers: np.ndarray,
    detail: FlopsDetail,
    choice: PeakChoice,
    flops_source: str | None,
    flags: list[str],
) -> Guard | None:
    """The MFU-like fractions above 1 of one device: the detail's are nulled (their raw values kept
    in ``detail.impossible``), the steps' and the summary's named in the returned ``Guard`` for the
    caller to withhold; None when every figure is possible."""
    raw = ImpossibleValues()
    summary_over = summary_mfu is not None and summary_mfu > 1.0
    if summary_over:
        raw.mfu = summary_mfu
    over = np.nan_to_num(step_mfu, nan=0.0) > 1.0
    steps = {str(int(k)): float(v) for k, v in zip(step_numbers[over].tolist(), step_mfu[over].tolist(), strict=True)}
    if steps:
        raw.steps = steps
    for key in MFU_KEYS:
        v = getattr(detail, key)
        if isinstance(v, int | float) and v > 1.0:
            setattr(raw, key, float(v))
            setattr(detail, key, None)
    figures = [v for v in (getattr(raw, k) for k in ("mfu", *MFU_KEYS)) if v is not None]
    if not figures and not steps:
        return None
    worst = max(figures) if figures else max(steps.values())
    cause, why = _likely_cause(worst, choice, flops_source, flags)
    detail.impossible = Impossible(values=raw, likely_cause=cause, explanation=why)
    # the raw value stays in the JSON (``flops.impossible.values``) for debugging, never in a sentence
    what = "MFU" if summary_over or steps else "; ".join(_NAMES[k] for k in MFU_KEYS if getattr(raw, k) is not None)
    note = f"{what} came out above 100 %, which is impossible, so it is not reported. Likely cause: {why}."
    return Guard(over, summary_over, cause, why, note)


# what each figure of MFU_KEYS is, in the note that withholds it
_NAMES = {
    "hfu": "HFU",
    "mfu_model": "MFU without recompute",
    "mfu_user": "MFU from your FLOPs",
    "mfu_at_bf16_peak": "MFU against the bf16 peak",
    "mfu_at_compute_peak": "MFU against the peak of the units the matmuls ran on",
}


def _share_fields(fields: tuple[str, ...]) -> list[str]:
    return [f for f in fields if f.endswith("_share") or f in ("sm_efficiency", "achieved_occupancy")]


def _clamped(values: np.ndarray, key: str, bad: set[str], known: np.ndarray | None = None) -> np.ndarray:
    """Rounding above 1 becomes 1; a real excess (beyond ``_ROUNDING``) is named in ``bad`` and kept
    (the faces show a share above 100 % as impossible, never as a figure). ``known``: where the
    column holds a figure (an unknown one holds any number, which says nothing)."""
    over = np.nan_to_num(values, nan=0.0) > 1.0
    if known is not None:
        over &= known
    if not over.any():
        return values
    if (values[over] > 1.0 + _ROUNDING).any():
        bad.add(key)
    return np.where(over & (values <= 1.0 + _ROUNDING), 1.0, values)


def guard_shares(summary: Summary, cols: StepColumns) -> tuple[Summary, StepColumns, str | None]:
    """The summary and the step columns with float rounding above 1 clamped to 1, and the note
    that names any real excess (a bug or a broken trace; the report is then flagged
    ``impossible_share``). The steps are screened a column at a time."""
    bad: set[str] = set()
    shares = {}
    for key in _share_fields(summary.__struct_fields__):
        v = getattr(summary, key)
        if isinstance(v, float):
            shares[key] = float(_clamped(np.array([v]), key, bad)[0])
    breakdown = {k: float(_clamped(np.array([v]), f"breakdown.{k}", bad)[0]) for k, v in summary.breakdown.items()}
    summary = msgspec.structs.replace(summary, breakdown=breakdown, **shares)
    shared = _share_fields(tuple(cols.values))
    values = {k: _clamped(v, k, bad, cols.known.get(k)) if k in shared else v for k, v in cols.values.items()}
    parts = {k: _clamped(v, f"breakdown.{k}", bad) for k, v in cols.breakdown.items()}
    cols = StepColumns(values=values, known=cols.known, breakdown=parts, gaps=cols.gaps)
    if not bad:
        return summary, cols, None
    return (
        summary,
        cols,
        f"impossible shares above 100 % ({', '.join(sorted(bad))}): overlapping or malformed events in the "
        "trace; these figures are shown as impossible",
    )
