"""Per-step metrics of one device, every step at once: the figures of ``Step``, their time
breakdown and the GPU idle gaps of each step, from the device's GPU rows and the step windows.

Each figure is the query a loop over the steps asked of ``analysis.time.intervals`` (the rows of the
step's overlap slice, clipped to its window), computed array-wide with ``analysis.time.windows``,
bit for bit the same (tests/analysis/test_windows.py checks it against that loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...trace.tables import KERNEL, MEMCPY, MEMSET, GpuTable
from ..kernels import families as kernel_families
from ..kernels import sm_active
from ..report import Metrics, Step
from . import copies, windows
from .step_structs import structs_of_columns
from .steps import Steps


class StepRows(Protocol):
    """The GPU rows of one device and their per-row facts (``per_device.DeviceView`` is one)."""

    @property
    def gpu(self) -> GpuTable: ...
    @property
    def bps(self) -> np.ndarray: ...  # blocks per SM, NaN unknown
    @property
    def occ(self) -> np.ndarray: ...  # achieved occupancy, NaN unknown
    @property
    def step(self) -> np.ndarray: ...  # the step each row belongs to (steps.assign), -1 none
    @property
    def max_dur(self) -> float: ...


@dataclass(frozen=True)
class KernelClasses:
    """Per name code: tensor-core kernel, copy direction (index into ``copies.DIRECTIONS``) and
    core class (``analysis.kernels.families.NameClasses.core``, None to leave the core shares at 0)."""

    tensor_core: np.ndarray
    direction: np.ndarray
    core: np.ndarray | None = None


@dataclass(frozen=True)
class StepColumns:
    """The per-step figures of every analysed step, one array per ``Step`` field (``windows``
    computes them for all steps at once). ``known[f]``: where the optional field ``f`` is not None."""

    values: dict[str, np.ndarray]
    known: dict[str, np.ndarray]
    breakdown: dict[str, np.ndarray]
    gaps: np.ndarray  # the GPU idle gaps of every step, in step order (``intervals.gaps`` of each)


def step_columns(
    view: StepRows,
    steps: Steps,
    classes: KernelClasses,
    host_sync_us: np.ndarray,
    sync_count: np.ndarray,
    idle_after_sync_us: np.ndarray,
) -> StepColumns:
    """Metrics of every step window ``[start, end)`` on one device, their time breakdowns, and
    their GPU idle gaps.

    Time shares are unions of the rows' intervals clipped to the window; counts (bytes,
    kernels, occupancy) use the rows the step launched (``_launched_counts``). Each step reads
    the rows of its ``intervals.overlap_slice``, as a loop over the steps did.
    ``host_sync_us``: the host time blocked in each step's syncs; ``idle_after_sync_us``: the
    GPU idle time those syncs explain (``time.idle_gaps.sync_us_by_step``)."""
    g, n = view.gpu, len(steps)
    lo, hi = steps.start, steps.end
    dur = hi - lo
    first, stop = windows.overlap_bounds(g.ts, lo, hi, view.max_dur)
    rows, win = windows.overlap_pairs(g.ts, g.end, lo, hi, first, stop)
    s, e, kept = windows.clipped(g.ts, g.end, lo, hi, rows, win)
    kind = g.kind[rows]

    def union(mask: np.ndarray) -> np.ndarray:
        m = kept & mask
        return windows.union_lengths(*windows.merged(s[m], e[m], win[m]), n)

    segments = windows.merged(s[kept], e[kept], win[kept])
    busy = windows.union_lengths(*segments, n)
    is_k, is_c, is_s = kind == KERNEL, kind == MEMCPY, kind == MEMSET
    k_union, kc_union = union(is_k), union(is_k | is_c)
    idle = np.maximum(0.0, 1.0 - windows.share(busy, dur))
    after_sync = np.minimum(windows.share(idle_after_sync_us, dur), idle)  # (min: float rounding only)
    gaps, _ = windows.gaps(*segments, lo, hi)
    sm_eff, sm_tb, sm_known = _sm_efficiency(view, rows, win, s, e, kept & is_k, n)
    values = {
        "gpu_busy_share": windows.share(busy, dur),
        "kernel_time_share": windows.share(k_union, dur),
        "memcpy_time_share": windows.share(union(is_c), dur),
        "memset_time_share": windows.share(union(is_s), dur),
        "idle_share": idle,
        "gpu_idle_after_sync_share": after_sync,
        "host_sync_blocked_share": windows.share(host_sync_us, dur),
        "sm_efficiency": windows.share(sm_eff, dur),
        "sm_efficiency_tb": windows.share(sm_tb, dur),
        "sync_count_per_step": sync_count.astype(np.float64),
    }
    counts, known = _launched_counts(view, first, stop, classes, n)
    values.update(counts)
    known["sm_efficiency"] = known["sm_efficiency_tb"] = sm_known
    breakdown = {
        "kernel": windows.share(k_union, dur),
        "memcpy": windows.share(kc_union - k_union, dur),
        "memset": windows.share(busy - kc_union, dur),
        "idle_after_sync": after_sync,
        "idle_other": idle - after_sync,
    }
    return StepColumns(values, known, breakdown, gaps)


def _sm_efficiency(
    view: StepRows, rows: np.ndarray, win: np.ndarray, s: np.ndarray, e: np.ndarray, clipped_k: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step, ∫ min(1, Σ a) dt over its window, of the kernels in the window (the pairs
    ``rows``/``win`` of ``windows.overlap_pairs``), with ``a`` each kernel's estimated hardware SM
    efficiency (``kernels.sm_active``), then with ``a`` its blocks per SM (torch-tb-profiler's), and
    whether they are known: not when too much kernel time has no blocks per SM
    (``SM_EFFICIENCY_MAX_UNKNOWN``)."""
    g = view.gpu
    k_in = g.kind[rows] == KERNEL
    bps = view.bps[rows]
    unknown = k_in & np.isnan(bps)
    k_time = windows.sums(g.dur[rows[k_in]], np.bincount(win[k_in], minlength=n))
    unknown_time = windows.sums(g.dur[rows[unknown]], np.bincount(win[unknown], minlength=n))
    has = np.bincount(win[k_in & ~unknown], minlength=n) > 0
    ok = has & (unknown_time <= SM_EFFICIENCY_MAX_UNKNOWN * k_time)
    use = clipped_k & ~np.isnan(bps)
    per_window = np.bincount(win[use], minlength=n)
    r = rows[use]
    active = sm_active.sm_active(bps[use], g.occupancy_pct[r], g.block_threads[r], g.dur[r])
    coverage = windows.capped_coverages(s[use], e[use], active, per_window)
    coverage_tb = windows.capped_coverages(s[use], e[use], bps[use], per_window)
    return np.where(ok, coverage, 0.0), np.where(ok, coverage_tb, 0.0), ok


def _launched_counts(
    view: StepRows, first: np.ndarray, stop: np.ndarray, classes: KernelClasses, n: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The ``Metrics`` fields counted over the rows each step launched, of those in its slice
    ``[first, stop)``: occupancy, kernel-time shares by core class, bytes copied per direction,
    kernels; and where the occupancy is known."""
    g = view.gpu
    step = view.step
    own = np.flatnonzero(step >= 0)
    own = own[(own >= first[step[own]]) & (own < stop[step[own]])]
    own = own[np.argsort(step[own], kind="stable")]  # by step, in row order
    kind, codes, kdur = g.kind[own], g.name[own], g.dur[own]

    def per_step(sel: np.ndarray, values: np.ndarray, dtype: type | None = None) -> np.ndarray:
        return windows.sums(values[sel], np.bincount(step[own][sel], minlength=n), dtype)

    ko = kind == KERNEL
    k_time = per_step(ko, kdur)
    kcore = classes.core[codes] if classes.core is not None else None

    def core_share(cls: str) -> np.ndarray:
        if kcore is None:
            return np.zeros(n)
        return windows.share(per_step(ko & (kcore == kernel_families.CODE[cls]), kdur), k_time)

    occ = view.occ[own]
    has_occ = ko & ~np.isnan(occ)
    occ_w = per_step(has_occ, kdur)
    occ_v = windows.sums((occ * kdur)[has_occ], np.bincount(step[own][has_occ], minlength=n))
    co = kind == MEMCPY
    nbytes = np.maximum(g.bytes[own], 0)
    dirs = classes.direction[codes]
    per_dir = [per_step(co & (dirs == i), nbytes, np.float64) for i in range(len(copies.DIRECTIONS))]
    values = {
        "achieved_occupancy": np.divide(occ_v, occ_w, out=np.zeros(n), where=occ_w > 0),
        "tensor_core_kernel_share": windows.share(per_step(ko & classes.tensor_core[codes], kdur), k_time),
        "unknown_core_kernel_share": core_share(kernel_families.UNKNOWN),
        "cuda_core_matmul_kernel_share": core_share(kernel_families.CUDA_CORE),
        "h2d_bytes_per_step": per_dir[0],
        "d2h_bytes_per_step": per_dir[1],
        "d2d_bytes_per_step": per_dir[2],
        "p2p_bytes_per_step": per_dir[3],
        "kernels_per_step": np.bincount(step[own][ko], minlength=n).astype(np.float64),
    }
    return values, {"achieved_occupancy": occ_w > 0}


# SM efficiency counts a kernel of unknown blocks as covering no SM; past this share of the
# kernel time unknown (ROCm kernels without a grid or launch call) the figure is not given.
SM_EFFICIENCY_MAX_UNKNOWN = 0.01


# The Step fields the columns hold; the FLOPs, MFU and FLOP/s come from analysis.device.mfu_report.
METRIC_FIELDS = [f for f in Metrics.__struct_fields__ if f not in ("flops_per_step", "mfu", "achieved_flops")]
FLOP_FIELDS = ("flops_per_step", "mfu", "achieved_flops")


def build_steps(steps: Steps, cols: StepColumns, flop_columns: dict[str, np.ndarray] | None = None) -> list[Step]:
    """The ``Step`` structs of the columns, every step kept (floats as they are, unknowns None);
    ``flop_columns``: the per-step FLOPs, MFU and FLOP/s (``FLOP_FIELDS``, NaN where unknown)."""
    values: dict[str, tuple[np.ndarray, np.ndarray | None]] = {
        "step": (steps.number, None),
        "start_us": (steps.start, None),
        "dur_us": (steps.end - steps.start, None),
    }
    values.update({f: (cols.values[f], cols.known.get(f)) for f in METRIC_FIELDS})
    for f, column in (flop_columns or {}).items():
        known = ~np.isnan(column)
        if known.any():  # all unknown: the field's default (None), no column
            values[f] = (np.where(known, column, 0.0), known)
    dur = values["dur_us"][0]
    breakdown_us = {k: share * dur for k, share in cols.breakdown.items()}
    return structs_of_columns(Step, len(steps), values, {"breakdown": cols.breakdown, "breakdown_us": breakdown_us})
