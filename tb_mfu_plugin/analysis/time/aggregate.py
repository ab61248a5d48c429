"""The analysed steps as one: per-step ``Step`` metrics -> the ``Summary``.

Every share is **time-weighted over the analysed steps**: the sum over the steps of the
part (kernel time, busy time, ...) divided by the sum of their durations. That is a ratio
of sums, the aggregation of ``summary.mfu`` (all FLOPs / all time) and of torch-tb-profiler's
GPU Utilization and Est. SM Efficiency (the kernel union over all steps' time). A median of
per-step shares would weigh a short step like a long one: on a run with one slow step it
reads higher than what the GPU did over the run, and it would not add up with MFU.

- Time shares (busy, kernel, memcpy, memset, idle, idle after syncs, host blocked in syncs, the
  breakdown):
  Σ share_i · dur_i / Σ dur_i, which is Σ part_i / Σ dur_i.
- ``sm_efficiency`` (and ``sm_efficiency_tb``, torch-tb-profiler's): Σ capped coverage / Σ time over
  the steps that have it (steps whose kernels report no blocks per SM have none and are left out
  of both sums).
- ``achieved_occupancy``: kernel-time-weighted over all the steps' kernels that report it.
- ``tensor_core_kernel_share`` (and the unknown-core and CUDA-core matmul shares beside it):
  Σ kernel time of that class / Σ kernel time.
- Per-step counts (bytes, syncs, kernels): total over the steps / their number (the mean).
- ``step_time_us`` is the **mean** step, Σ dur / steps: the step every share, the breakdown, MFU
  and the waterfall apply to (``step_time_mean_us`` is the same figure, kept for schema 2's
  readers); the median step is another aggregation, under its own name (``step_time_median_us``).

The per-step spread (median, p10, p90, min, max) of the step time and of the main shares
goes to ``Summary.distribution``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..kernels.kernels import weighted_mean
from ..report import Spread, Step, Summary
from . import windows

BREAKDOWN_KEYS = ("kernel", "memcpy", "memset", "idle_after_sync", "idle_other")

# Shares that are a part of the step's time: Σ share·dur / Σ dur.
TIME_SHARES = (
    "gpu_busy_share",
    "kernel_time_share",
    "memcpy_time_share",
    "memset_time_share",
    "idle_share",
    "gpu_idle_after_sync_share",
    "host_sync_blocked_share",
)
# Counts per step: Σ / n.
PER_STEP_COUNTS = (
    "h2d_bytes_per_step",
    "d2h_bytes_per_step",
    "d2d_bytes_per_step",
    "p2p_bytes_per_step",
    "sync_count_per_step",
    "kernels_per_step",
)
# Time-weighted over the steps that have them, like sm_efficiency, with no spread kept.
OTHER_SHARES = ("sm_efficiency_tb",)
# The per-step figures whose spread the summary keeps (``mfu`` is added by analysis.mfu).
DISTRIBUTION_KEYS = (
    "gpu_busy_share",
    "kernel_time_share",
    "idle_share",
    "sm_efficiency",
    "tensor_core_kernel_share",
)


@dataclass(frozen=True)
class KernelTotals:
    """Kernel time of all the analysed steps' kernels, for the kernel-weighted summary figures."""

    kernel_us: float  # Σ kernel durations
    tensor_core_us: float  # Σ durations of tensor-core kernels
    occupancy: float | None  # kernel-time-weighted mean over kernels that report it
    unknown_core_us: float = 0.0  # Σ durations of GEMM-like kernels of unknown core (kernel_families)
    cuda_core_matmul_us: float = 0.0  # Σ durations of matmuls on CUDA cores

    @classmethod
    def of(
        cls,
        dur_us: np.ndarray,
        occupancy: np.ndarray,
        tensor_core: np.ndarray,
        unknown_core: np.ndarray | None = None,
        cuda_core_matmul: np.ndarray | None = None,
    ) -> KernelTotals:
        """From the durations, occupancies (NaN: unknown) and core classes of the kernels."""
        return cls(
            kernel_us=float(dur_us.sum()),
            tensor_core_us=float(dur_us[tensor_core].sum()),
            occupancy=weighted_mean(occupancy, dur_us),
            unknown_core_us=float(dur_us[unknown_core].sum()) if unknown_core is not None else 0.0,
            cuda_core_matmul_us=float(dur_us[cuda_core_matmul].sum()) if cuda_core_matmul is not None else 0.0,
        )

    def share(self, part_us: float) -> float:
        return part_us / self.kernel_us if self.kernel_us > 0 else 0.0


def total_us(dur_us: np.ndarray) -> float:
    """The steps' time added as Python adds floats: the one sum behind the mean step (the summary's
    ``step_time_us``, the facts' ``step_us``, the waterfall's first bar), so they are equal to the bit."""
    return float(sum(dur_us.tolist()))


def time_weighted(values: Iterable[float | None], dur_us: Iterable[float]) -> float | None:
    """Σ value·dur / Σ dur over the pairs whose value is known; None when none is."""
    num = den = 0.0
    for v, d in zip(values, dur_us, strict=True):
        if v is not None:
            num += float(v) * float(d)
            den += float(d)
    return num / den if den > 0 else None


def spread(values: Iterable[float | None] | np.ndarray) -> Spread | None:
    """Median, p10, p90, min and max of the known values; None when none is known."""
    if isinstance(values, np.ndarray):
        v = values.astype(np.float64)
    else:
        v = np.array([float(x) for x in values if x is not None], np.float64)
    if not len(v):
        return None
    p10, med, p90 = np.percentile(v, [10, 50, 90])
    return Spread(median=float(med), p10=float(p10), p90=float(p90), min=float(v.min()), max=float(v.max()))


def summarize(steps: list[Step], kernels: KernelTotals) -> Summary:
    """The ``Summary`` of at least one analysed step (``flops_per_step``/``mfu``: analysis.mfu)."""
    keys = {*TIME_SHARES, *PER_STEP_COUNTS, *DISTRIBUTION_KEYS, *OTHER_SHARES}
    values = {k: np.array([getattr(s, k) for s in steps], dtype=object) for k in keys}
    known = {k: np.array([x is not None for x in v], bool) for k, v in values.items()}
    floats = {k: np.where(known[k], v, 0.0).astype(np.float64) for k, v in values.items()}
    breakdown = {k: np.array([s.breakdown.get(k, 0.0) for s in steps], np.float64) for k in BREAKDOWN_KEYS}
    return summarize_columns(np.array([s.dur_us for s in steps], np.float64), floats, known, breakdown, kernels)


def _time_weighted(values: np.ndarray, dur: np.ndarray, known: np.ndarray | None = None) -> float | None:
    """``time_weighted`` of columns, added left to right as it adds."""
    if known is not None:
        values, dur = values[known], dur[known]
    den = windows.running_total(dur)
    return windows.running_total(values * dur) / den if den > 0 else None


def _spread(values: np.ndarray, known: np.ndarray | None = None) -> Spread | None:
    return spread(values[known] if known is not None else values)


def summarize_columns(
    dur: np.ndarray,
    values: dict[str, np.ndarray],
    known: dict[str, np.ndarray],
    breakdown: dict[str, np.ndarray],
    kernels: KernelTotals,
) -> Summary:
    """``summarize`` of the steps as columns (``step_metrics.StepColumns``): ``values[f]`` per step,
    ``known[f]`` where an optional figure is not None, ``breakdown[k]`` per step."""
    n = len(dur)
    if not n:
        raise ValueError("summarize needs at least one step")
    total = total_us(dur)
    # (typed Any: as keywords they fill the Summary's float fields by name, which mypy cannot match)
    shares: dict[str, Any] = {k: _time_weighted(values[k], dur, known.get(k)) or 0.0 for k in TIME_SHARES}
    counts: dict[str, Any] = {k: float(sum(values[k].tolist())) / n for k in PER_STEP_COUNTS}
    bd = {k: _time_weighted(breakdown[k], dur) if k in breakdown else 0.0 for k in BREAKDOWN_KEYS}
    median = float(np.median(dur))
    distribution = {"step_time_us": spread(dur)}
    distribution.update({k: _spread(values[k], known.get(k)) for k in DISTRIBUTION_KEYS})
    return Summary(
        steps=n,
        step_time_us=total / n,
        step_time_median_us=median,
        step_time_mean_us=total / n,
        breakdown={k: v or 0.0 for k, v in bd.items()},
        breakdown_us_per_step={k: (v or 0.0) * total / n for k, v in bd.items()},
        sm_efficiency=_time_weighted(values["sm_efficiency"], dur, known.get("sm_efficiency")),
        sm_efficiency_tb=(
            _time_weighted(values["sm_efficiency_tb"], dur, known.get("sm_efficiency_tb"))
            if "sm_efficiency_tb" in values
            else None
        ),
        achieved_occupancy=kernels.occupancy,
        tensor_core_kernel_share=kernels.share(kernels.tensor_core_us),
        unknown_core_kernel_share=kernels.share(kernels.unknown_core_us),
        cuda_core_matmul_kernel_share=kernels.share(kernels.cuda_core_matmul_us),
        distribution={k: v for k, v in distribution.items() if v is not None},
        **shares,
        **counts,
    )
