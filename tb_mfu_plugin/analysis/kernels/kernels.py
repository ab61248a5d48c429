"""Per-kernel facts: tensor-core use (``kernel_families``), blocks per SM, occupancy, and the top-kernels table."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...core.distinct import distinct_inverse
from ...trace.tables import GpuTable
from ..report import KernelStats
from . import families as kernel_families
from . import sm_active

SHORT_KERNEL_US = 10.0


def tensor_core_mask(
    names: Sequence[str], extra_patterns: Sequence[str] = (), codes: np.ndarray | None = None
) -> np.ndarray:
    """Boolean lookup table over name codes: is each name a tensor-core kernel.

    The classification is the family table in ``analysis.kernels.families``; ``extra_patterns``
    (``--tensor-core-pattern``) add tensor-core families. Names are first screened with one
    combined regex of the tensor-core families, so a large name table costs one pass.
    ``codes``: screen only these names (the kernels'); the others read as False.
    """
    screen = kernel_families.tensor_core_screen(extra_patterns)
    if codes is None:
        hits = [i for i, n in enumerate(names) if screen.search(n)]
    else:
        hits = [i for i in sorted({int(c) for c in codes}) if screen.search(names[i])]
    out = np.zeros(len(names), dtype=bool)
    if hits:
        classes = kernel_families.classify_names(names, hits, extra_patterns)
        out[hits] = classes.core[hits] == kernel_families.CODE[kernel_families.TENSOR_CORE]
    return out


# What ``grid`` counts on ROCm depends on the launch call, because Kineto copies it from the
# call's arguments (roctracer and rocprofiler-sdk alike): hipExtModuleLaunchKernel and
# hipHccModuleLaunchKernel take the global work size in work-items (hipBLASLt/Tensile, MIOpen),
# the others (hipLaunchKernel, hipModuleLaunchKernel: ATen, Triton) the grid in blocks, as CUDA.
_GRID_IN_WORK_ITEMS = re.compile(r"^hip(?:Ext|Hcc)ModuleLaunchKernel")
_GRID_IN_BLOCKS = re.compile(r"^hip(?:Ext)?(?:Module)?Launch(?:Cooperative)?Kernel")


def grid_units_per_block(gpu: GpuTable, launch_api: np.ndarray, names: Sequence[str], rocm: bool) -> np.ndarray:
    """How many ``grid`` units make one block, per row: 1 (grid in blocks), the block's threads
    (grid in work-items) or NaN (unknown: a ROCm kernel whose launch call is not known).

    ``launch_api`` is the name code of each row's launching runtime call, -1 when unknown.
    """
    if not rocm:
        return np.ones(len(gpu))
    unit = np.full(len(names) + 1, np.nan)  # the extra slot: launch call unknown (-1)
    for code, n in enumerate(names):
        if _GRID_IN_WORK_ITEMS.match(n):
            unit[code] = 0.0  # marker: the block's own thread count
        elif _GRID_IN_BLOCKS.match(n):
            unit[code] = 1.0
    per_row = unit[np.where(launch_api >= 0, launch_api, len(names))]
    threads = np.where(gpu.block_threads > 0, gpu.block_threads, np.nan).astype(np.float64)
    return np.where(per_row == 0.0, threads, per_row)


def blocks_per_sm(gpu: GpuTable, num_sms: int | None, grid_per_block: np.ndarray | None = None) -> np.ndarray:
    """Blocks per SM of each row: the trace's own figure, else grid blocks / SM count; NaN unknown.

    ``grid_per_block`` (``grid_units_per_block``) turns a ROCm grid counted in work-items into
    blocks; dividing work-items by the CUs would overstate the coverage by the block size.
    Products over the 3 dims: exact, since such a grid is the blocks times the block dims.
    """
    bps = gpu.blocks_per_sm.astype(np.float64)
    if num_sms:
        blocks = np.where(gpu.grid_blocks > 0, gpu.grid_blocks.astype(np.float64), np.nan)
        if grid_per_block is not None:
            blocks = blocks / grid_per_block
        bps = np.where(np.isnan(bps), blocks / float(num_sms), bps)
    return bps


def occupancy(gpu: GpuTable) -> np.ndarray:
    """Estimated achieved occupancy as a fraction; NaN where unknown.

    The estimator writes 0 when it fails (Hopper nvjet GEMMs, cuDNN SDPA): a kernel
    that ran blocks cannot have had 0 occupancy, so such a 0 counts as unknown.
    """
    occ = gpu.occupancy_pct.astype(np.float64) / 100.0
    has_blocks = (gpu.grid_blocks > 0) | (np.nan_to_num(gpu.blocks_per_sm) > 0)
    return np.where((occ == 0) & has_blocks, np.nan, occ)


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float | None:
    ok = ~np.isnan(values)
    w = weights[ok]
    total = w.sum()
    return float((values[ok] * w).sum() / total) if total > 0 else None


def top_kernels(
    gpu: GpuTable,
    names: Sequence[str],
    bps: np.ndarray,
    occ: np.ndarray,
    tc: np.ndarray,
    limit: int,
    classes: kernel_families.NameClasses | None = None,
) -> list[KernelStats]:
    """Kernels grouped by name, by total time. ``gpu``/``bps``/``occ`` are kernel rows only;
    ``classes`` (per name code) adds each kernel's class and dtype."""
    if len(gpu) == 0:
        return []
    codes, inv = distinct_inverse(gpu.name)
    total = np.bincount(inv, weights=gpu.dur)
    count = np.bincount(inv)
    all_time = float(gpu.dur.sum())

    def by_kernel(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = ~np.isnan(values)
        w = np.bincount(inv[ok], weights=gpu.dur[ok], minlength=len(codes))
        v = np.bincount(inv[ok], weights=(values * gpu.dur)[ok], minlength=len(codes))
        return v, w

    bps_v, bps_w = by_kernel(bps)
    eff_v, eff_w = by_kernel(sm_active.sm_active(bps, gpu.occupancy_pct, gpu.block_threads, gpu.dur))
    tb_v, tb_w = by_kernel(np.minimum(bps, 1.0))
    occ_v, occ_w = by_kernel(occ)
    out = []
    for k in np.argsort(-total, kind="stable")[:limit]:
        out.append(
            KernelStats(
                name=names[codes[k]],
                count=int(count[k]),
                total_us=float(total[k]),
                share=float(total[k] / all_time) if all_time > 0 else 0.0,
                mean_us=float(total[k] / count[k]),
                mean_blocks_per_sm=float(bps_v[k] / bps_w[k]) if bps_w[k] > 0 else None,
                sm_efficiency=float(eff_v[k] / eff_w[k]) if eff_w[k] > 0 else None,
                sm_efficiency_tb=float(tb_v[k] / tb_w[k]) if tb_w[k] > 0 else None,
                achieved_occupancy=float(occ_v[k] / occ_w[k]) if occ_w[k] > 0 else None,
                tensor_core=bool(tc[codes[k]]),
                core=kernel_families.CLASSES[classes.core[codes[k]]] if classes is not None else None,
                dtype=classes.dtype[codes[k]] if classes is not None else None,
            )
        )
    return out
