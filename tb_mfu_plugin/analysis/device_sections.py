"""The sections of one device's report over the rows its steps launched: the top kernels, the
copies, the host syncs and the launch statistics (``analysis.per_device``'s stage)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.tables import DRIVER, KERNEL, MEMCPY, RUNTIME, GpuTable, TraceTables
from .device_view import DeviceView
from .fmt import pct
from .kernels import families as kernel_families
from .kernels import kernels
from .kernels.name_patterns import KERNEL_LAUNCH_CALL, name_mask
from .options import AnalysisOptions
from .report import CopyStats, IdleGaps, KernelStats, LaunchStats, Summary, SyncStats
from .time import copies, graphs, intervals, nesting, syncs
from .time.steps import Steps


@dataclass(frozen=True)
class KernelSections:
    top_kernels: list[KernelStats]
    copies: list[CopyStats]
    syncs: list[SyncStats]
    launches: LaunchStats
    notes: list[str]


def kernel_sections(
    tables: TraceTables, view: DeviceView, steps: Steps, summary: Summary, options: AnalysisOptions
) -> KernelSections:
    """The top kernels, copies, syncs and launch statistics over the rows the steps launched."""
    names, gpu, n = tables.names, view.gpu, len(steps)
    in_steps = view.step >= 0
    kept = gpu.take(np.flatnonzero(in_steps))
    is_k = kept.kind == KERNEL
    kern = kept.take(np.flatnonzero(is_k))
    unknown = np.isnan(view.bps[in_steps][is_k])
    notes = []
    if summary.sm_efficiency is None and unknown.any():
        share = float(kern.dur[unknown].sum()) / max(float(kern.dur.sum()), 1e-9)
        notes.append(
            f"SM efficiency unknown: {pct(share)} of the kernel time has no blocks per SM (no grid, or a launch "
            "call that does not say whether the grid counts blocks or work-items)."
        )
    tc = view.classes.mask(kernel_families.TENSOR_CORE)
    top = kernels.top_kernels(
        kern, names, view.bps[in_steps][is_k], view.occ[in_steps][is_k], tc, options.top_kernels, view.classes
    )
    # graph replays: the rows of this device in the steps that a graph launch ran
    graph = graphs.graph_launched(tables, view.launcher) & in_steps
    launches = _launch_stats(
        tables,
        kern,
        steps,
        view.step_columns.gaps,
        graph_kernel=graph[in_steps][is_k],
        graph_replays=graphs.replays(view.launcher, graph),
    )
    return KernelSections(
        top_kernels=top,
        copies=copies.copy_stats(kept.take(np.flatnonzero(kept.kind == MEMCPY)), names, n),
        syncs=syncs.sync_stats(tables.cpu, names, view.syncs, n),
        launches=launches,
        notes=notes,
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
    in_graphs = float(graph_kernel.sum()) / n
    return LaunchStats(
        kernels_per_step=len(kern) / n,
        kernels_launched_one_by_one_per_step=len(kern) / n - in_graphs,
        median_kernel_us=float(np.median(kern.dur)) if len(kern) else None,
        short_kernel_share=float((kern.dur < kernels.SHORT_KERNEL_US).mean()) if len(kern) else 0.0,
        launch_api_us_per_step=one_by_one / n,
        graph_launch_api_us_per_step=graph / n,
        graph_launches_per_step=graph_replays / n,
        graph_kernels_per_step=in_graphs,
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
