"""One device's FLOPs, MFU and peak, as one value (``MfuFigures``) that the report is built from.

The steps, each in its own module: which FLOPs per step (``flops/source.py``), the peak at the
compute dtype (``mfu_peak.py``), the formula over the steps (``mfu.py``), the plausibility guard
(``plausibility.py``) and what the report says besides the figure (``mfu_notes.py``). The per-step
figures are columns, so the ``Step`` structs are built once with them
(``time.step_metrics.build_steps``) and the summary's figures are decided here once, with their
status (``MfuStatus``: known, unknown or impossible, and why), which every face reads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import msgspec
import numpy as np

from ...trace.locate.sidecar import Sidecar
from ...trace.tables import TraceTables
from ..device_view import DeviceRows
from ..flops import unshaped
from ..flops.count_once import count_flops
from ..flops.detail import FlopsDetail, PeakFacts
from ..flops.per_window import OpFlops, flops_in_windows
from ..flops.source import headline, user_flops
from ..kernels.families import NameClasses
from ..options import AnalysisOptions
from ..per_trace import once_per_trace
from ..report import Interval, MfuStatus, Spread
from ..time.aggregate import spread
from ..time.steps import Steps, launched_in_steps
from . import plausibility
from .mfu import (
    fill_detail,
    flop_rate,
    flop_rates,
    flops_summary,
    mfu_for,
    mfus_for,
    overall_mfu,
    unattributed_kernel_time,
)
from .mfu_notes import SecondMfu, carried_work_note, second_mfu, uneven_steps_note
from .mfu_peak import mfu_peak
from .peaks import PeakChoice

_op_flops_cached = once_per_trace(count_flops)


@dataclass(frozen=True)
class Drag:
    """The modelled steps' step without the profiler over their traced step (the critical-path model's
    ``unprofiled_step_us / step_us``), and the same ratio at the two ends of the profiler's likely
    cost (its ``unprofiled_step_range_us``): low <= ratio <= high <= 1."""

    ratio: float
    low: float
    high: float
    # the first modelled step's kernels that a step before it put in the queue, which the step without
    # the profiler does not count (critical_path.graph.Ops.carried): how many, and their time
    carried_ops: int = 0
    carried_us: float = 0.0

    def steps(self, traced_us: float) -> tuple[float, Interval]:
        """The traced mean step without the profiler, and where it likely lies."""
        return traced_us * self.ratio, Interval(low=traced_us * self.low, high=traced_us * self.high)


@dataclass(frozen=True)
class MfuFigures:
    """The FLOPs and MFU of one device: per step (columns, NaN where unknown or withheld) and over
    the analysed steps, the FLOPs block and the peak, with the notes and flags they bring."""

    flops: np.ndarray  # per step, NaN unknown
    mfu: np.ndarray  # per step, NaN unknown or impossible
    achieved_flops: np.ndarray  # per step FLOP/s, NaN unknown or withheld with an impossible MFU
    summary_flops: float | None
    summary_mfu: float | None  # the headline: over the step estimated without the profiler where it can be
    summary_achieved: float | None  # summary_mfu x the peak
    summary_mfu_traced: float | None  # over the traced steps as they ran under the profiler
    step_unprofiled_us: float | None  # the mean step estimated without the profiler's drag
    step_unprofiled_range_us: Interval | None  # where that estimate likely lies
    mfu_range: Interval | None  # the headline MFU over those two steps
    mfu_spread: Spread | None
    status: MfuStatus
    detail: FlopsDetail
    peak: PeakChoice
    notes: list[str]
    flags: list[str]


def mfu_figures(
    tables: TraceTables,
    steps: Steps,
    rows: DeviceRows,
    classes: NameClasses,
    device: int | None,
    busy_us: np.ndarray,
    options: AnalysisOptions,
    sidecar: tuple[Sidecar, str] | None,
    flags: list[str],
    drag: Drag | None = None,
) -> MfuFigures:
    """FLOPs, MFU and the FLOPs block of one device's analysed ``steps``.

    ``busy_us``: each step's GPU busy time (for the rate while busy); ``flags``: the report's so far
    (the plausibility guard names the step as the cause where the trace has no step markers);
    ``drag``: the profiler's drag on the modelled steps, which makes the headline MFU the one training
    without the profiler sees, with its likely range; None keeps the traced steps' MFU as the headline.
    ``sidecar`` is the run's ``tb_mfu.json`` and its path, read by the caller (analysis does no I/O).

    - FLOPs per step use, in order: ``options.flops_per_step`` (``--flops-per-step``), the trace's
      shapes (FlopCounterMode convention), the run's sidecar (``tb_mfu.json``);
    - the detail: every other MFU-like figure (HFU, without recompute, the user's), the achieved
      TFLOP/s while the GPU is busy, the kernel time no counted op launched, the peak choice;
    - a figure above 100 % is withheld (``plausibility``), its raw value kept in the detail.
    """
    of = _op_flops_cached(tables)
    if device is not None:
        of = of.for_device(device)
    cpu_start = np.asarray(steps.cpu_start, np.float64)
    cpu_end = np.asarray(steps.cpu_end, np.float64)
    dur = np.asarray(steps.dur, np.float64)
    n = len(dur)
    wf = flops_in_windows(of, cpu_start, cpu_end)
    user = user_flops(options, sidecar)
    peak = mfu_peak(tables, rows, classes, of, device, user.options)
    choice = peak.peak
    has_shapes = bool(len(of)) and float(wf.flops.sum()) > 0
    head, head_source = headline(options, has_shapes, wf, user, n)
    detail = _detail(tables, steps, device, of, has_shapes)
    detail.headline_source = head_source
    scale = drag if drag is not None and 0 < drag.ratio <= 1 and n > 0 else None
    # HFU, the MFU without recompute and the user's MFU over the same step as the headline's
    fill_detail(detail, wf, dur * scale.ratio if scale else dur, busy_us, has_shapes, user, choice, peak.dtype)
    notes: list[str] = []
    if choice.dtype_source == "assumed" and head is not None:
        notes.append(f"MFU peak: {choice.source}")

    h = _headline(head, dur, choice.peak_flops, scale)
    second_note = _second_figure(detail, second_mfu(h.mfu, h.flops, h.step_basis, peak, choice, user.options))
    guard = plausibility.guard_mfu(h.mfu, h.step_mfu, steps.number, detail, choice, head_source, flags)
    out_flags: list[str] = []
    if guard is not None:
        out_flags.append(plausibility.IMPOSSIBLE_MFU)
        notes.append(guard.note)
        h = h.withheld(guard)
        if guard.summary_withheld:
            second_note = None
    uneven = uneven_steps_note(dur.tolist()) if h.step_range is not None and h.mfu is not None else None
    carried = carried_work_note(scale.carried_ops, scale.carried_us, h.step_basis) if scale and h.mfu else None
    notes += [n for n in (second_note, uneven, carried) if n is not None]
    return MfuFigures(
        flops=h.step_flops,
        mfu=h.step_mfu,
        achieved_flops=h.step_rate,
        summary_flops=h.flops,
        summary_mfu=h.mfu,
        summary_achieved=h.achieved,
        summary_mfu_traced=h.traced_mfu,
        step_unprofiled_us=h.step_unprofiled,
        step_unprofiled_range_us=h.step_range,
        mfu_range=_mfu_range(h.mfu, h.flops, h.step_range, choice.peak_flops),
        mfu_spread=spread(h.step_mfu[~np.isnan(h.step_mfu)]),  # its median is the MFU of the median step
        status=_status(h.mfu, guard, head_source, choice, h.step_unprofiled is not None),
        detail=detail,
        peak=choice,
        notes=notes,
        flags=out_flags,
    )


@dataclass(frozen=True)
class _Headline:
    """The figures over the analysed steps before the plausibility guard: per step (columns, NaN
    unknown) and over the steps, the headline over the step without the profiler where it is known."""

    step_flops: np.ndarray
    step_mfu: np.ndarray
    step_rate: np.ndarray
    flops: float | None
    traced_mfu: float | None  # over the traced steps as they ran
    step_unprofiled: float | None  # the mean step without the profiler's drag, and where it likely lies
    step_range: Interval | None
    step_basis: float | None  # the step the headline is over: the one without the profiler, else the traced
    mfu: float | None
    achieved: float | None

    def withheld(self, guard: plausibility.Guard) -> _Headline:
        """Without what the guard withholds: the FLOP/s behind a withheld MFU too, since its FLOPs (or
        the step) made the MFU impossible."""
        out = dataclasses.replace(
            self,
            step_rate=np.where(guard.steps_withheld, np.nan, self.step_rate),
            step_mfu=np.where(guard.steps_withheld, np.nan, self.step_mfu),
        )
        if guard.summary_withheld:
            out = dataclasses.replace(out, mfu=None, achieved=None, traced_mfu=None)
        return out


def _headline(head: np.ndarray | None, dur: np.ndarray, peak_flops: float | None, scale: Drag | None) -> _Headline:
    """The per-step figures and the headline over ``dur``'s steps, ``scale`` the profiler's drag on them."""
    flops, mfu, rate = _per_step(head, dur, peak_flops)
    total = float(np.mean(flops)) if head is not None else None
    step_unprofiled, step_range = scale.steps(float(dur.mean())) if scale else (None, None)
    basis = step_unprofiled if step_unprofiled is not None else (float(dur.mean()) if len(dur) else None)
    return _Headline(
        step_flops=flops,
        step_mfu=mfu,
        step_rate=rate,
        flops=total,
        traced_mfu=overall_mfu(flops, dur, peak_flops) if head is not None else None,
        step_unprofiled=step_unprofiled,
        step_range=step_range,
        step_basis=basis,
        mfu=mfu_for(total, basis, peak_flops),
        achieved=flop_rate(total, basis),
    )


def _detail(tables: TraceTables, steps: Steps, device: int | None, of: OpFlops, has_shapes: bool) -> FlopsDetail:
    """The FLOPs block of the analysed steps: the counts, the kernel time no counted op launched, and
    why FLOPs are missing where they are; no count where nothing was counted (a CUDA-graph replay
    has no ops), an unknown count and never a count of 0."""
    cpu_start, cpu_end = np.asarray(steps.cpu_start, np.float64), np.asarray(steps.cpu_end, np.float64)
    unattributed = unattributed_kernel_time(tables, of, launched_in_steps(tables, steps, device))
    detail = flops_summary(of, cpu_start, cpu_end, unattributed)
    if not has_shapes:
        detail.source = None
        detail.flops_per_step = detail.executed_flops_per_step = detail.model_flops_per_step = None
    why = unshaped.missing_flops_note(tables, np.asarray(steps.start), np.asarray(steps.end), device, has_shapes)
    if why is not None:
        detail.notes.append(why)
    return detail


def _mfu_range(
    mfu: float | None, flops: float | None, steps: Interval | None, peak_flops: float | None
) -> Interval | None:
    """The headline MFU over the longest and the shortest likely step: none where the headline is
    unknown or withheld, or where the shortest step would make it impossible (above 100 %)."""
    if mfu is None or steps is None:
        return None
    low, high = mfu_for(flops, steps.high, peak_flops), mfu_for(flops, steps.low, peak_flops)
    if low is None or high is None or high > 1.0:
        return None
    return Interval(low=min(low, mfu), high=max(high, mfu))


def _per_step(head: np.ndarray | None, dur: np.ndarray, peak_flops: float | None) -> tuple[np.ndarray, ...]:
    """Each step's FLOPs, MFU and FLOP/s, NaN where unknown (no FLOP count, or no peak)."""
    if head is None:
        return np.full(len(dur), np.nan), np.full(len(dur), np.nan), np.full(len(dur), np.nan)
    flops = np.asarray(head, np.float64)
    mfu = np.array(mfus_for(flops, dur, peak_flops), dtype=np.float64)
    r, known = flop_rates(flops, dur)
    return flops, mfu, np.where(known, r, np.nan)


def _second_figure(detail: FlopsDetail, second: SecondMfu | None) -> str | None:
    """The MFU against the other convention's peak into the detail; its note, if any."""
    if second is None:
        return None
    if second.against == "bf16":
        detail.mfu_at_bf16_peak = second.mfu
    else:
        detail.mfu_at_compute_peak = second.mfu
        detail.compute_peak = msgspec.convert(second.peak, PeakFacts, from_attributes=True)
    return second.note


def _status(
    mfu: float | None, guard: plausibility.Guard | None, source: str | None, choice: PeakChoice, unprofiled: bool
) -> MfuStatus:
    """Known, unknown or impossible, with the reason in one line: decided once, read by every face."""
    if guard is not None and guard.summary_withheld:
        why = f"above 100 %, which is impossible. Likely cause: {guard.explanation}"
        return MfuStatus(state="impossible", reason=why)
    if mfu is not None:
        basis = (
            "over the steady-state steps with the profiler's host cost taken out (estimated)"
            if unprofiled
            else "over the steady-state steps as traced (the profiler's cost could not be estimated)"
        )
        return MfuStatus(
            state="known",
            basis="without_profiler" if unprofiled else "traced",
            reason=f"{basis}; FLOPs from {source}; peak: {choice.source}",
        )
    if source is None:
        return MfuStatus(
            state="unknown",
            reason="no FLOP count: record shapes (record_shapes=True), or give --flops-per-step or a "
            "tb_mfu.json sidecar",
        )
    if not choice.peak_flops:
        return MfuStatus(state="unknown", reason=f"no peak FLOP/s for this GPU ({choice.source}): give --peak-tflops")
    return MfuStatus(state="unknown", reason="no step time to divide the FLOPs by")
