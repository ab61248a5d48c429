"""MFU: the counted FLOPs over step time and the peak, and the GPU time MFU leaves out.

Which ops count and their FLOPs are ``flops/count_once.py`` (the count-once rule), which of
them the headline uses ``flops/source.py``, the peak ``mfu_peak.py``; this module is the
formula, and ``mfu_report.apply_to_report`` fills one device's report with it:

- MFU = FLOPs per step / step time / peak FLOP/s (``mfu_for``), aggregated over the analysed
  steps as all their FLOPs over all their time (``overall_mfu``);
- three conventions (``op_flops``): the headline MFU leaves activation-checkpoint re-runs
  out, HFU (``hfu``) counts every executed FLOP, ``mfu_model`` removes all recompute (PaLM);
- the kernel time launched outside every counted op (``unattributed_kernel_time``): what
  the FLOP count cannot see, such as ops whose shapes were not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from ...core.distinct import distinct_inverse
from ...trace.tables import KERNEL, TraceTables
from ..flops import shapes as F
from ..flops.detail import FlopsDetail, OpFlopsShare, PeakFacts, UnattributedOp
from ..flops.per_window import OpFlops, WindowFlops, flops_in_windows
from ..flops.source import UserFlops
from ..time import intervals
from .dtype_choice import DtypeChoice
from .peaks import PeakChoice


@dataclass(frozen=True)
class UnattributedEntry:
    op: str
    kernel_us: float
    kernels: int


@dataclass(frozen=True)
class UnattributedTime:
    kernel_us: float  # all kernel time considered
    attributed_us: float  # kernels launched inside counted ops
    unattributed_us: float
    top: list[UnattributedEntry]

    @property
    def unattributed_share(self) -> float | None:
        return self.unattributed_us / self.kernel_us if self.kernel_us > 0 else None


def unattributed_kernel_time(
    tables: TraceTables, of: OpFlops, selected: np.ndarray | None = None, top: int = 10
) -> UnattributedTime:
    """Kernel time launched outside every counted op, grouped by the launching op.

    Kernels are those of ``selected`` (a mask of ``tables.gpu`` rows: ``steps.launched_in_steps``,
    the rows the steps launched, as every figure of the report counts them), else all. The group
    is the op named by the kernel's external id (the innermost op that launched it), else the
    outermost op around its launch call, else ``(no op)``.
    """
    g = tables.gpu
    sel = g.kind == KERNEL
    if selected is not None:
        sel &= selected
    dur = g.dur
    total = float(dur[sel].sum())
    att = float(dur[sel & of.kernel_counted].sum())
    un = sel & ~of.kernel_counted
    entries: list[UnattributedEntry] = []
    if un.any():
        uniq, inv = distinct_inverse(of.kernel_op_name[un])
        sums = np.bincount(inv, weights=dur[un])
        counts = np.bincount(inv)
        for i in np.argsort(-sums)[: max(top, 0)]:
            code = int(uniq[i])
            nm = tables.names[code] if code >= 0 else "(no op)"
            if F.formula_of(nm) is not None:
                nm += " (shapes not recorded)"
            entries.append(UnattributedEntry(nm, float(sums[i]), int(counts[i])))
    return UnattributedTime(total, att, total - att, entries)


def flop_rate(flops: float | None, time_us: float | None) -> float | None:
    """FLOP/s: FLOPs over a time in µs. None if either is unknown, no FLOPs were counted or the time
    is not positive."""
    if flops is None or time_us is None:
        return None
    rate, known = flop_rates(np.array([float(flops)]), np.array([float(time_us)]))
    return float(rate[0]) if known[0] else None


def flop_rates(flops: np.ndarray, time_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``flop_rate`` of arrays, element by element: the rates and where they are known (not where
    no FLOPs were counted or the time is not positive; a NaN passes, as it does the scalar's tests)."""
    known = (flops != 0) & (time_us != 0) & ~(time_us <= 0)
    with np.errstate(all="ignore"):  # NaN and inf give what the scalar gives, silently as it does
        rate = np.divide(flops, time_us * 1e-6, out=np.zeros(len(flops)), where=known)
    return rate, known


def mfu_for(flops_per_step: float | None, step_time_us: float | None, peak_flops: float | None) -> float | None:
    """MFU = FLOPs per step / step time / peak FLOP/s (a fraction, 0-1). None if any is unknown.

    The one MFU formula: the summary, the steps, HFU and its variants, the Strategies table, the
    Scalars export and ``MfuMonitor`` all call it (the steps through ``mfus_for``)."""
    rate = flop_rate(flops_per_step, step_time_us)
    if rate is None or not peak_flops or peak_flops <= 0:
        return None
    return rate / float(peak_flops)


def mfus_for(flops_per_step: np.ndarray, step_time_us: np.ndarray, peak_flops: float | None) -> list[float | None]:
    """``mfu_for`` of every step at once."""
    rate, known = flop_rates(flops_per_step, step_time_us)
    if not peak_flops or peak_flops <= 0:
        return [None] * len(rate)
    with np.errstate(all="ignore"):
        return _or_none(rate / float(peak_flops), known)


def _or_none(values: np.ndarray, known: np.ndarray) -> list[float | None]:
    return [v if k else None for v, k in zip(values.tolist(), known.tolist(), strict=True)]


def overall_mfu(flops: np.ndarray | None, dur_us: np.ndarray, peak_flops: float | None) -> float | None:
    """MFU over several steps: sum of FLOPs / sum of step time / peak."""
    if flops is None or not len(dur_us):
        return None
    return mfu_for(float(np.sum(flops)), float(np.sum(dur_us)), peak_flops)


def achieved_tflops_while_busy(flops: float | None, busy_us: float | None) -> float | None:
    """FLOPs / GPU busy time, in TFLOP/s: the rate while the GPU works (idle time excluded)."""
    rate = flop_rate(flops, busy_us)
    return None if rate is None else rate / 1e12


def projected_mfu(mfu: float | None, step_us: float, gain_us: float) -> float | None:
    """The MFU once a step of ``step_us`` is ``gain_us`` shorter with the same FLOPs:
    mfu x step / (step - gain). None when MFU is unknown, the gain takes the whole step, or the
    projection would pass 100 % (the gain or the peak it starts from is then wrong, and an
    impossible figure is never shown)."""
    if mfu is None or step_us <= 0 or gain_us >= step_us:
        return None
    after = float(mfu) * step_us / (step_us - max(0.0, gain_us))
    return after if after <= 1.0 else None


def flops_summary(
    of: OpFlops,
    start_us: np.ndarray,
    end_us: np.ndarray,
    unattributed: UnattributedTime,
    top_ops: int = 10,
) -> FlopsDetail:
    """The counted part of ``WorkerReport.flops`` (per-step figures are means over the windows
    ``[start, end)``, as the summary's: total / windows); ``apply_to_report`` adds the rest."""
    wf = flops_in_windows(of, start_us, end_us)
    in_win = intervals.window_of_unsorted(of.ts, start_us, end_us) >= 0
    nwin = max(len(wf.flops), 1)
    total = of.total
    return FlopsDetail(
        source="shapes",
        convention="FlopCounterMode",
        flops_per_step=_mean(wf.mfu_flops),
        executed_flops_per_step=_mean(wf.flops),
        model_flops_per_step=_mean(wf.model_flops),
        attention_recompute_flops_per_step=float(of.recompute_flops[in_win & ~of.checkpoint_recompute].sum()) / nwin,
        checkpoint_recompute_flops_per_step=float(of.recompute_flops[in_win & of.checkpoint_recompute].sum()) / nwin,
        ops_counted=int(in_win.sum()),
        dtype=of.dominant_dtype(),
        dtype_shares=of.dtype_shares(),
        by_op=[
            OpFlopsShare(op=k, flops_share=v / total if total else 0.0) for k, v in list(of.by_op().items())[:top_ops]
        ],
        approximate_share=float(of.flops[~of.exact].sum() / total) if total else 0.0,
        notes=list(of.notes),
        unattributed_kernel_us=unattributed.unattributed_us,
        unattributed_kernel_share=unattributed.unattributed_share,
        unattributed_top=[UnattributedOp(op=e.op, kernel_us=e.kernel_us, kernels=e.kernels) for e in unattributed.top],
    )


def _mean(values: np.ndarray) -> float | None:
    return float(np.mean(values)) if len(values) else None


def fill_detail(
    detail: FlopsDetail,
    wf: WindowFlops,
    dur: np.ndarray,
    busy_us: np.ndarray,
    has_shapes: bool,
    user: UserFlops,
    choice: PeakChoice,
    dchoice: DtypeChoice,
) -> None:
    """Every MFU that can be computed besides the headline, the achieved rate and the peak."""
    peak = choice.peak_flops
    detail.hfu = overall_mfu(wf.flops, dur, peak) if has_shapes else None
    detail.mfu_model = overall_mfu(wf.model_flops, dur, peak) if has_shapes else None
    detail.user_flops_per_step = user.flops
    detail.user_flops_source = user.source
    detail.mfu_user = overall_mfu(np.full(len(dur), user.flops), dur, peak) if user.flops else None
    # all FLOPs over all busy time, aggregated as MFU (not a median of the steps' rates)
    detail.achieved_tflops_while_busy = (
        achieved_tflops_while_busy(float(np.sum(wf.flops)), float(np.sum(busy_us))) if has_shapes else None
    )
    detail.peak = msgspec.convert(choice, PeakFacts, from_attributes=True)  # PeakChoice's fields, by name
    detail.kernel_dtype = dchoice.kernel_dtype
    detail.kernel_dtype_shares = dchoice.kernel_shares
