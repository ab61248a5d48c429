"""One device of one trace file -> a ``WorkerReport``: step windows, per-step metrics,
their time-weighted summary (``analysis.time.aggregate``), copies, syncs, launch statistics and
the top kernels."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.distinct import distinct
from ..trace.tables import DRIVER, KERNEL, MEMCPY, RUNTIME, GpuTable, TraceTables
from .critical_path.device import device_model
from .critical_path.whatif import Model
from .device import devices
from .fmt import pct
from .kernels import families as kernel_families
from .kernels import kernels
from .kernels.name_patterns import KERNEL_LAUNCH_CALL, name_mask
from .memory.block import memory_block
from .options import AnalysisOptions
from .report import Device, IdleGaps, LaunchStats, Step, Summary, WorkerReport
from .time import aggregate, copies, graphs, idle_gaps, intervals, nesting, syncs, windows
from .time.step_metrics import KernelClasses, StepColumns, build_steps, step_columns
from .time.steps import Steps, assign, find_steps


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
    critical: Model | None = None  # the critical-path model of the steps, which the diagnosis re-times
    # the columns the report's Steps were built from: later checks read a column, not 100,000 structs
    step_columns: StepColumns | None = None


def _device(found: devices.DeviceProps, device: int) -> Device:
    props = found.props
    if props is None:
        return Device(index=device, name=None, properties_match=found.how)
    major, minor = _count(props.get("computeMajor")), _count(props.get("computeMinor"))
    return Device(
        index=device,
        name=devices.display_name(props),
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


def analyze_device(
    tables: TraceTables,
    device: int,
    options: AnalysisOptions,
    launcher: np.ndarray | None = None,
) -> tuple[WorkerReport, Steps, DeviceView]:
    """Everything about one device of one trace, except FLOPs (see ``analysis.device.mfu``)."""
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
    view = _with_critical_path(report, tables, view, dev_launcher, steps)
    report.steps, cols = _step_reports(tables, view, steps, classes)
    view = dataclasses.replace(view, step_columns=cols)
    report.summary = _summary(view, cols, steps.end - steps.start, classes.tensor_core, name_classes)
    _kernel_sections(report, tables, view, steps, dev_launcher, cols.gaps, options)
    try:
        report.memory = memory_block(tables, device, dev.name, steps)
    except Exception as exc:  # a memory bug on odd input must not cost the rest of the report
        report.notes.append(f"memory analysis failed: {type(exc).__name__}: {exc}")
    return report, steps, view


def _with_critical_path(
    report: WorkerReport, tables: TraceTables, view: DeviceView, launcher: np.ndarray, steps: Steps
) -> DeviceView:
    """The view with the critical-path model of its steps (``analysis.critical_path``), whose
    breakdown goes in the report."""
    assert view.syncs is not None and view.classes is not None
    try:
        found = device_model(tables, view.gpu, view.step, launcher, view.syncs.rows, view.classes, steps)
    except Exception as exc:  # a bug in the model must not cost the rest of the report
        report.notes.append(f"critical path failed: {type(exc).__name__}: {exc}")
        return view
    if found is None:
        return view
    report.critical_path = found[1]
    return dataclasses.replace(view, critical=found[0])


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
