"""One device of one trace file -> a ``WorkerReport``: step windows, per-step metrics,
their time-weighted summary (``analysis.aggregate``), copies, syncs, launch statistics and
the top kernels."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..options import AnalysisOptions
from ..trace.tables import KERNEL, MEMCPY, MEMSET, RUNTIME, GpuTable, TraceTables
from . import aggregate, copies, devices, graphs, intervals, kernel_families, kernels, syncs
from .report import Device, IdleGaps, LaunchStats, Metrics, Step, WorkerReport
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


def device_props(tables: TraceTables, device: int) -> dict[str, Any] | None:
    """The ``deviceProperties`` entry of a device (``analysis.devices``: robust to ROCm's numbering)."""
    return devices.device_properties(tables, device).props


def _device(found: devices.DeviceProps, device: int) -> Device:
    props = found.props
    if props is None:
        return Device(index=device, name=None, properties_match=found.how)
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    return Device(
        index=device,
        name=props.get("name"),
        num_sms=props.get("numSms"),
        compute_capability=f"{major}.{minor}" if major is not None else None,
        properties_match=found.how,
    )


def _rows_overlapping(view: DeviceView, lo: float, hi: float) -> slice:
    # rows are sorted by start; anything starting max_dur before lo may still overlap
    ts = view.gpu.ts
    return slice(int(np.searchsorted(ts, lo - view.max_dur)), int(np.searchsorted(ts, hi)))


def _share(x: float, dur: float) -> float:
    return x / dur if dur > 0 else 0.0


def step_metrics(
    view: DeviceView,
    index: int,
    lo: float,
    hi: float,
    tc: np.ndarray,
    direction: np.ndarray,
    sync_wait_us: float,
    sync_count: int,
    core: np.ndarray | None = None,
) -> tuple[Metrics, dict[str, float], np.ndarray]:
    """Metrics of the window [lo, hi) on one device, its time breakdown, and its GPU idle gaps.
    ``core``: class code per name (``kernel_families.NameClasses.core``)."""
    g = view.gpu
    sl = _rows_overlapping(view, lo, hi)
    kind, ts, end = g.kind[sl], g.ts[sl], g.end[sl]
    bps, occ = view.bps[sl], view.occ[sl]
    dur = hi - lo
    is_k, is_c, is_s = kind == KERNEL, kind == MEMCPY, kind == MEMSET
    busy = intervals.union_length(ts, end, lo, hi)
    k_union = intervals.union_length(ts[is_k], end[is_k], lo, hi)
    kc = is_k | is_c
    kc_union = intervals.union_length(ts[kc], end[kc], lo, hi)
    c_union = intervals.union_length(ts[is_c], end[is_c], lo, hi)
    s_union = intervals.union_length(ts[is_s], end[is_s], lo, hi)
    # kernels in the window (the slice also holds earlier rows that end before lo), and those of
    # them that report blocks
    k_in = is_k & (end > lo) & (ts < hi)
    known = k_in & ~np.isnan(bps)
    sm_eff = (
        _share(intervals.capped_coverage(ts[known], end[known], bps[known], lo, hi), dur)
        if _blocks_known(g.dur[sl], k_in, known)
        else None
    )
    # Counting metrics (bytes, kernels, occupancy) use the rows the step launched.
    own = view.step[sl] == index
    ko = is_k & own
    kdur = g.dur[sl]
    occupancy = kernels.weighted_mean(occ[ko], kdur[ko])
    k_time = float(kdur[ko].sum())
    tc_time = float(kdur[ko & tc[g.name[sl]]].sum())
    kcore = core[g.name[sl]] if core is not None else None

    def core_time(cls: str) -> float:
        return float(kdur[ko & (kcore == kernel_families.CODE[cls])].sum()) if kcore is not None else 0.0

    co = is_c & own
    nbytes = np.maximum(g.bytes[sl][co], 0)
    dirs = direction[g.name[sl][co]]
    per_dir = [float(nbytes[dirs == i].sum(dtype=np.float64)) for i in range(len(copies.DIRECTIONS))]
    idle = max(0.0, 1.0 - _share(busy, dur))
    sync_wait = min(_share(sync_wait_us, dur), idle)
    breakdown = {
        "kernel": _share(k_union, dur),
        "memcpy": _share(kc_union - k_union, dur),
        "memset": _share(busy - kc_union, dur),
        "sync_wait": sync_wait,
        "idle": idle - sync_wait,
    }
    m = Metrics(
        gpu_busy_share=_share(busy, dur),
        kernel_time_share=_share(k_union, dur),
        memcpy_time_share=_share(c_union, dur),
        memset_time_share=_share(s_union, dur),
        idle_share=idle,
        sync_wait_share=_share(sync_wait_us, dur),
        sm_efficiency=sm_eff,
        achieved_occupancy=occupancy,
        tensor_core_kernel_share=_share(tc_time, k_time),
        unknown_core_kernel_share=_share(core_time(kernel_families.UNKNOWN), k_time),
        cuda_core_matmul_kernel_share=_share(core_time(kernel_families.CUDA_CORE), k_time),
        h2d_bytes_per_step=per_dir[0],
        d2h_bytes_per_step=per_dir[1],
        d2d_bytes_per_step=per_dir[2],
        p2p_bytes_per_step=per_dir[3],
        sync_count_per_step=float(sync_count),
        kernels_per_step=float(ko.sum()),
    )
    return m, breakdown, intervals.gaps(ts, end, lo, hi)


# SM efficiency counts a kernel of unknown blocks as covering no SM; past this share of the
# kernel time unknown (ROCm kernels without a grid or launch call) the figure is not given.
SM_EFFICIENCY_MAX_UNKNOWN = 0.01


def _blocks_known(dur: np.ndarray, is_k: np.ndarray, known: np.ndarray) -> bool:
    k_time = float(dur[is_k].sum())
    return bool(known.any()) and float(dur[is_k & ~known].sum()) <= SM_EFFICIENCY_MAX_UNKNOWN * k_time


_METRIC_FIELDS = [f for f in Metrics.__struct_fields__]


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
    gpu = tables.gpu.take(np.flatnonzero(tables.gpu.device == device))
    dev_launcher = launcher[tables.gpu.device == device]
    # (indexed only where launched: a GPU-only trace has no CPU rows at all)
    launched = dev_launcher >= 0
    launch_ts = np.full(len(dev_launcher), np.nan)
    launch_ts[launched] = tables.cpu.ts[dev_launcher[launched]]
    launch_api = np.full(len(dev_launcher), -1, np.int64)
    launch_api[launched] = tables.cpu.name[dev_launcher[launched]]
    grid_unit = kernels.grid_units_per_block(gpu, launch_api, names, devices.is_rocm(tables))
    view = DeviceView(
        gpu=gpu,
        bps=kernels.blocks_per_sm(gpu, dev.num_sms, grid_unit),
        occ=kernels.occupancy(gpu),
        step=assign(steps, gpu.ts, launch_ts),
        max_dur=float(gpu.dur.max()) if len(gpu) else 0.0,
    )
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

    classes = kernel_families.classify_names(
        names, np.unique(gpu.name[gpu.kind == KERNEL]), options.tensor_core_patterns
    )
    tc = classes.mask(kernel_families.TENSOR_CORE)
    direction, _ = copies.classify(names)
    cpu = tables.cpu
    host_windows = [(float(a), float(b)) for a, b in zip(steps.cpu_start, steps.cpu_end, strict=True)]
    sync_events = syncs.find_syncs(cpu, names, host_windows)
    view = dataclasses.replace(view, syncs=sync_events, classes=classes)
    sync_step = np.searchsorted(steps.cpu_start, cpu.ts[sync_events.rows], side="right") - 1
    sync_dur = cpu.dur[sync_events.rows]

    step_list: list[Step] = []
    all_gaps: list[np.ndarray] = []
    for i in range(len(steps)):
        lo, hi = float(steps.start[i]), float(steps.end[i])
        mine = sync_step == i
        m, breakdown, gaps = step_metrics(
            view, i, lo, hi, tc, direction, float(sync_dur[mine].sum()), int(mine.sum()), classes.core
        )
        all_gaps.append(gaps)
        step_list.append(
            Step(step=int(steps.number[i]), start_us=lo, dur_us=hi - lo, **_fields(m), breakdown=breakdown)
        )
    n = len(step_list)
    report.steps = step_list
    in_steps = view.step >= 0
    ks = in_steps & (gpu.kind == KERNEL)
    report.summary = aggregate.summarize(
        step_list,
        aggregate.KernelTotals.of(
            gpu.dur[ks],
            view.occ[ks],
            tc[gpu.name[ks]],
            classes.mask(kernel_families.UNKNOWN)[gpu.name[ks]],
            classes.mask(kernel_families.CUDA_CORE)[gpu.name[ks]],
        ),
    )

    kept = gpu.take(np.flatnonzero(in_steps))
    is_k = kept.kind == KERNEL
    kern = kept.take(np.flatnonzero(is_k))
    unknown = np.isnan(view.bps[in_steps][is_k])
    if report.summary.sm_efficiency is None and unknown.any():
        share = float(kern.dur[unknown].sum()) / max(float(kern.dur.sum()), 1e-9)
        report.notes.append(
            f"SM efficiency unknown: {share:.0%} of the kernel time has no blocks per SM (no grid, or a launch "
            "call that does not say whether the grid counts blocks or work-items)."
        )
    report.top_kernels = kernels.top_kernels(
        kern, names, view.bps[in_steps][is_k], view.occ[in_steps][is_k], tc, options.top_kernels, classes
    )
    report.copies = copies.copy_stats(kept.take(np.flatnonzero(kept.kind == MEMCPY)), names, n)
    report.syncs = syncs.sync_stats(cpu, names, sync_events, n)
    # graph replays: the rows of this device in the steps that a graph launch ran
    graph = graphs.graph_launched(tables, dev_launcher) & in_steps
    report.launches = _launch_stats(
        tables,
        kern,
        steps,
        np.concatenate(all_gaps) if all_gaps else np.empty(0),
        graph_kernel=graph[in_steps][is_k],
        graph_replays=graphs.replays(dev_launcher, graph),
    )
    return report, steps, view


def _fields(m: Metrics) -> dict[str, Any]:
    return {f: getattr(m, f) for f in _METRIC_FIELDS}


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
    cpu = tables.cpu
    is_launch = np.fromiter(("launch" in s.lower() for s in tables.names), bool, len(tables.names))
    rows = np.flatnonzero((cpu.kind == RUNTIME) & is_launch[cpu.name])
    ts = cpu.ts[rows]
    inside = np.zeros(len(rows), bool)
    for a, b in zip(steps.cpu_start, steps.cpu_end, strict=True):
        inside |= (ts >= a) & (ts <= b)
    return LaunchStats(
        kernels_per_step=len(kern) / n,
        median_kernel_us=float(np.median(kern.dur)) if len(kern) else None,
        short_kernel_share=float((kern.dur < kernels.SHORT_KERNEL_US).mean()) if len(kern) else 0.0,
        launch_api_us_per_step=float(cpu.dur[rows[inside]].sum()) / n,
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
