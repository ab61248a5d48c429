"""One device of one trace file -> a ``WorkerReport``: step windows, per-step metrics,
their time-weighted summary (``analysis.aggregate``), copies, syncs, launch statistics and
the top kernels."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..distinct import distinct
from ..fmt import pct
from ..options import AnalysisOptions
from ..trace.tables import DRIVER, KERNEL, MEMCPY, MEMSET, RUNTIME, GpuTable, TraceTables
from . import (
    aggregate,
    copies,
    devices,
    graphs,
    idle_gaps,
    intervals,
    kernel_families,
    kernels,
    nesting,
    syncs,
    windows,
)
from .name_patterns import KERNEL_LAUNCH_CALL, name_mask
from .report import Device, IdleGaps, LaunchStats, Metrics, Step, Summary, WorkerReport
from .steps import Steps, assign, find_steps


@dataclass(frozen=True)
class DeviceView:
    """The GPU rows of one device with their per-row derived columns."""

    gpu: GpuTable
    bps: np.ndarray
    occ: np.ndarray
    step: np.ndarray  # index of the step each row belongs to, -1 for none (steps.assign)
    max_dur: float
    syncs: syncs.SyncEvents | None = None  # the host syncs inside the steps, with their callers
    # class and dtype of every kernel name (user --tensor-core-pattern included), per name code
    classes: kernel_families.NameClasses | None = None
    # the GPU idle gaps over the steps and their causes (idle_gaps.device_gaps), attributed once with
    # ``gap_thresholds``: the report's gpu_idle_after_sync_share and the diagnosis read the same gaps
    gaps: idle_gaps.Gaps | None = None
    gap_thresholds: idle_gaps.GapThresholds | None = None


def _device(found: devices.DeviceProps, device: int) -> Device:
    props = found.props
    if props is None:
        return Device(index=device, name=None, properties_match=found.how)
    major, minor = _count(props.get("computeMajor")), _count(props.get("computeMinor"))
    name = props.get("name")
    return Device(
        index=device,
        name=name if isinstance(name, str) else None,
        num_sms=_count(props.get("numSms")) or None,
        compute_capability=f"{major}.{minor}" if major is not None and minor is not None else None,
        properties_match=found.how,
    )


def _count(value: Any) -> int | None:
    """A whole non-negative number from free-form trace JSON (``108`` or ``108.0``), else None:
    the report's types are checked when it crosses a process, so a hostile ``"numSms": 1.5``
    must not reach it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 2**31:
        return None  # NaN fails the range test too
    return None if isinstance(value, float) and not value.is_integer() else int(value)


@dataclass(frozen=True)
class KernelClasses:
    """Per name code: tensor-core kernel, copy direction (index into ``copies.DIRECTIONS``) and
    core class (``kernel_families.NameClasses.core``, None to leave the core shares at 0)."""

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
    view: DeviceView,
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
    GPU idle time those syncs explain (``idle_gaps.sync_us_by_step``)."""
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
    sm_eff, sm_known = _sm_efficiency(view, rows, win, s, e, kept & is_k, n)
    values = {
        "gpu_busy_share": windows.share(busy, dur),
        "kernel_time_share": windows.share(k_union, dur),
        "memcpy_time_share": windows.share(union(is_c), dur),
        "memset_time_share": windows.share(union(is_s), dur),
        "idle_share": idle,
        "gpu_idle_after_sync_share": after_sync,
        "host_sync_blocked_share": windows.share(host_sync_us, dur),
        "sm_efficiency": windows.share(sm_eff, dur),
        "sync_count_per_step": sync_count.astype(np.float64),
    }
    counts, known = _launched_counts(view, first, stop, classes, n)
    values.update(counts)
    known["sm_efficiency"] = sm_known
    breakdown = {
        "kernel": windows.share(k_union, dur),
        "memcpy": windows.share(kc_union - k_union, dur),
        "memset": windows.share(busy - kc_union, dur),
        "idle_after_sync": after_sync,
        "idle_other": idle - after_sync,
    }
    return StepColumns(values, known, breakdown, gaps)


def _sm_efficiency(
    view: DeviceView, rows: np.ndarray, win: np.ndarray, s: np.ndarray, e: np.ndarray, clipped_k: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per step, ∫ min(1, Σ blocks per SM) dt over its window, of the kernels in the window (the
    pairs ``rows``/``win`` of ``windows.overlap_pairs``), and whether it is known: not when too
    much kernel time has no blocks per SM (``SM_EFFICIENCY_MAX_UNKNOWN``)."""
    g = view.gpu
    k_in = g.kind[rows] == KERNEL
    bps = view.bps[rows]
    unknown = k_in & np.isnan(bps)
    k_time = windows.sums(g.dur[rows[k_in]], np.bincount(win[k_in], minlength=n))
    unknown_time = windows.sums(g.dur[rows[unknown]], np.bincount(win[unknown], minlength=n))
    has = np.bincount(win[k_in & ~unknown], minlength=n) > 0
    ok = has & (unknown_time <= SM_EFFICIENCY_MAX_UNKNOWN * k_time)
    use = clipped_k & ~np.isnan(bps)
    coverage = windows.capped_coverages(s[use], e[use], bps[use], np.bincount(win[use], minlength=n))
    return np.where(ok, coverage, 0.0), ok


def _launched_counts(
    view: DeviceView, first: np.ndarray, stop: np.ndarray, classes: KernelClasses, n: int
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


def analyze_device(
    tables: TraceTables,
    device: int,
    options: AnalysisOptions,
    launcher: np.ndarray | None = None,
) -> tuple[WorkerReport, Steps, DeviceView]:
    """Everything about one device of one trace, except FLOPs (see ``analysis.mfu``)."""
    names = tables.names
    if launcher is None:
        launcher = tables.launcher
    found = devices.device_properties(tables, device)
    dev = _device(found, device)
    steps = find_steps(tables, device, launcher)
    view = _device_view(tables, device, launcher, steps, dev.num_sms)
    report = WorkerReport(name="", span="", file=tables.meta.path, device=dev, trace_bytes=tables.meta.size_bytes)
    if found.note:
        report.notes.append(found.note)
    if steps.synthetic:
        report.flags.append("no_step_markers")
        report.notes.append("No ProfilerStep# markers: the whole trace is analysed as one step.")
    report.notes.extend(f"Dropped {d}" for d in steps.dropped)
    if len(steps) == 0:
        report.error = "no complete step with GPU activity on this device"
        return report, steps, view

    gpu = view.gpu
    name_classes = kernel_families.classify_names(
        names, distinct(gpu.name[gpu.kind == KERNEL]), options.tensor_core_patterns
    )
    classes = KernelClasses(
        name_classes.mask(kernel_families.TENSOR_CORE),
        copies.classify(names, tables.gpu_name_codes)[0],
        name_classes.core,
    )
    host_windows = list(zip(steps.cpu_start.tolist(), steps.cpu_end.tolist(), strict=True))
    dev_launcher = launcher[tables.gpu.device == device]
    found_syncs = syncs.find_syncs(tables.cpu, names, host_windows)
    th = idle_gaps.GapThresholds.of(options.thresholds)
    gaps = idle_gaps.device_gaps(
        tables, steps, gpu, found_syncs.rows, dev_launcher, graphs.graph_launched(tables, dev_launcher), th
    )
    view = dataclasses.replace(view, syncs=found_syncs, classes=name_classes, gaps=gaps, gap_thresholds=th)
    report.steps, cols = _step_reports(tables, view, steps, classes)
    report.summary = _summary(view, cols, steps.end - steps.start, classes.tensor_core, name_classes)
    _kernel_sections(report, tables, view, steps, dev_launcher, cols.gaps, options)
    return report, steps, view


def _device_view(
    tables: TraceTables, device: int, launcher: np.ndarray, steps: Steps, num_sms: int | None
) -> DeviceView:
    """The device's GPU rows, their blocks per SM, occupancy and step."""
    gpu = tables.gpu.take(np.flatnonzero(tables.gpu.device == device))
    dev_launcher = launcher[tables.gpu.device == device]
    # (indexed only where launched: a GPU-only trace has no CPU rows at all)
    launched = dev_launcher >= 0
    launch_ts = np.full(len(dev_launcher), np.nan)
    launch_ts[launched] = tables.cpu.ts[dev_launcher[launched]]
    launch_api = np.full(len(dev_launcher), -1, np.int64)
    launch_api[launched] = tables.cpu.name[dev_launcher[launched]]
    grid_unit = kernels.grid_units_per_block(gpu, launch_api, tables.names, devices.is_rocm(tables))
    return DeviceView(
        gpu=gpu,
        bps=kernels.blocks_per_sm(gpu, num_sms, grid_unit),
        occ=kernels.occupancy(gpu),
        step=assign(steps, gpu.ts, launch_ts),
        max_dur=float(gpu.dur.max()) if len(gpu) else 0.0,
    )


def _step_reports(
    tables: TraceTables, view: DeviceView, steps: Steps, classes: KernelClasses
) -> tuple[list[Step], StepColumns]:
    """One ``Step`` per analysed step, and the columns they were built from (with the GPU idle
    gaps of all of them). A sync belongs to the last step whose host window starts at or before
    it (``find_syncs`` kept those inside)."""
    assert view.syncs is not None
    cpu, n = tables.cpu, len(steps)
    sync_rows = view.syncs.rows
    sync_step = intervals.window_starting_before(cpu.ts[sync_rows], steps.cpu_start)
    mine = sync_step >= 0
    order = np.argsort(sync_step[mine], kind="stable")  # by step, in row order
    per_step = np.bincount(sync_step[mine], minlength=n)
    host_sync_us = windows.sums(cpu.dur[sync_rows][mine][order], per_step)
    after_sync = idle_gaps.sync_us_by_step(view.gaps, steps) if view.gaps is not None else np.zeros(n)
    cols = step_columns(view, steps, classes, host_sync_us, per_step, after_sync)
    return build_steps(steps, cols), cols


_METRIC_FIELDS = [f for f in Metrics.__struct_fields__ if f not in ("flops_per_step", "mfu", "achieved_flops")]


def build_steps(steps: Steps, cols: StepColumns) -> list[Step]:
    """The ``Step`` structs of the columns (floats as Python floats, unknowns as None)."""
    values = []
    for f in _METRIC_FIELDS:
        v: list[Any] = cols.values[f].tolist()
        if f in cols.known:
            v = [x if k else None for x, k in zip(v, cols.known[f].tolist(), strict=True)]
        values.append(v)
    keys = ("step", "start_us", "dur_us", *_METRIC_FIELDS)
    parts = (steps.number.tolist(), steps.start.tolist(), (steps.end - steps.start).tolist(), *values)
    bkeys = tuple(cols.breakdown)
    breakdowns = zip(*(cols.breakdown[k].tolist() for k in bkeys), strict=True)
    return [
        Step(**dict(zip(keys, row, strict=True)), breakdown=dict(zip(bkeys, b, strict=True)))
        for row, b in zip(zip(*parts, strict=True), breakdowns, strict=True)
    ]


def _summary(
    view: DeviceView, cols: StepColumns, dur: np.ndarray, tc: np.ndarray, classes: kernel_families.NameClasses
) -> Summary:
    """The steps as one (``aggregate``), with the kernel-weighted figures over their kernels."""
    gpu = view.gpu
    ks = (view.step >= 0) & (gpu.kind == KERNEL)
    return aggregate.summarize_columns(
        dur,
        cols.values,
        cols.known,
        cols.breakdown,
        aggregate.KernelTotals.of(
            gpu.dur[ks],
            view.occ[ks],
            tc[gpu.name[ks]],
            classes.mask(kernel_families.UNKNOWN)[gpu.name[ks]],
            classes.mask(kernel_families.CUDA_CORE)[gpu.name[ks]],
        ),
    )


def _kernel_sections(
    report: WorkerReport,
    tables: TraceTables,
    view: DeviceView,
    steps: Steps,
    dev_launcher: np.ndarray,
    gaps: np.ndarray,
    options: AnalysisOptions,
) -> None:
    """The top kernels, copies, syncs and launch statistics over the rows the steps launched."""
    assert report.summary is not None and view.syncs is not None and view.classes is not None
    names, gpu, n = tables.names, view.gpu, len(steps)
    in_steps = view.step >= 0
    kept = gpu.take(np.flatnonzero(in_steps))
    is_k = kept.kind == KERNEL
    kern = kept.take(np.flatnonzero(is_k))
    unknown = np.isnan(view.bps[in_steps][is_k])
    if report.summary.sm_efficiency is None and unknown.any():
        share = float(kern.dur[unknown].sum()) / max(float(kern.dur.sum()), 1e-9)
        report.notes.append(
            f"SM efficiency unknown: {pct(share)} of the kernel time has no blocks per SM (no grid, or a launch "
            "call that does not say whether the grid counts blocks or work-items)."
        )
    tc = view.classes.mask(kernel_families.TENSOR_CORE)
    report.top_kernels = kernels.top_kernels(
        kern, names, view.bps[in_steps][is_k], view.occ[in_steps][is_k], tc, options.top_kernels, view.classes
    )
    report.copies = copies.copy_stats(kept.take(np.flatnonzero(kept.kind == MEMCPY)), names, n)
    report.syncs = syncs.sync_stats(tables.cpu, names, view.syncs, n)
    # graph replays: the rows of this device in the steps that a graph launch ran
    graph = graphs.graph_launched(tables, dev_launcher) & in_steps
    report.launches = _launch_stats(
        tables, kern, steps, gaps, graph_kernel=graph[in_steps][is_k], graph_replays=graphs.replays(dev_launcher, graph)
    )


def _launch_stats(
    tables: TraceTables,
    kern: GpuTable,
    steps: Steps,
    gaps: np.ndarray,
    graph_kernel: np.ndarray,
    graph_replays: int,
) -> LaunchStats:
    """``graph_kernel``: which rows of ``kern`` a graph replay ran; ``graph_replays``: their launches."""
    n = len(steps)
    one_by_one, graph = _launch_api_us(tables, steps)
    return LaunchStats(
        kernels_per_step=len(kern) / n,
        median_kernel_us=float(np.median(kern.dur)) if len(kern) else None,
        short_kernel_share=float((kern.dur < kernels.SHORT_KERNEL_US).mean()) if len(kern) else 0.0,
        launch_api_us_per_step=one_by_one / n,
        graph_launch_api_us_per_step=graph / n,
        graph_launches_per_step=graph_replays / n,
        graph_kernels_per_step=float(graph_kernel.sum()) / n,
        graph_median_kernel_us=float(np.median(kern.dur[graph_kernel])) if graph_kernel.any() else None,
        idle_gaps=IdleGaps(
            count_per_step=len(gaps) / n,
            total_us_per_step=float(gaps.sum()) / n,
            median_us=float(np.median(gaps)) if len(gaps) else None,
            max_us=float(gaps.max()) if len(gaps) else None,
        ),
    )


def _launch_api_us(tables: TraceTables, steps: Steps) -> tuple[float, float]:
    """Host time in kernel launch calls inside the steps' host windows: (one-by-one launches,
    graph launches). Both the runtime API (cudaLaunchKernel, cudaLaunchKernelExC, hipLaunchKernel)
    and the driver API (cuLaunchKernel, cuLaunchKernelEx: Triton, cuBLASLt, newer PyTorch;
    hipModuleLaunchKernel) count: a kernel costs the host its launch whichever API issued it.
    Each is the union of the calls on their threads, so a runtime call that shows the driver
    call it makes nested inside it is counted once."""
    cpu = tables.cpu
    is_launch = name_mask(tables.names, KERNEL_LAUNCH_CALL, codes=tables.call_name_codes)
    rows = np.flatnonzero(((cpu.kind == RUNTIME) | (cpu.kind == DRIVER)) & is_launch[cpu.name])
    rows = rows[intervals.in_any(cpu.ts[rows], steps.cpu_start, steps.cpu_end)]
    if not len(rows):
        return 0.0, 0.0
    ax = nesting.thread_axis(tables)
    is_graph = graphs.graph_launch_codes(tables.names, tables.call_name_codes)[cpu.name[rows]]
    one, graph = rows[~is_graph], rows[is_graph]
    return intervals.union_length(ax.g0[one], ax.g1[one]), intervals.union_length(ax.g0[graph], ax.g1[graph])
