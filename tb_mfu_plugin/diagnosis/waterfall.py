"""The waterfall: "GPU busy X % but MFU Y %: where the rest goes".

From the step time down to the model FLOPs at peak, each ``loss`` entry removes the time
lost to one cause and each ``subtotal`` is what remains, so ``total - losses = subtotal``
at every level and the last entry (``result``) is MFU x step time. All values are µs per
step: totals over the analysed steps divided by their number (the mean step,
``summary.step_time_mean_us``), so they add up exactly. That is the aggregation of the
summary (``analysis.aggregate``: time-weighted shares, mean FLOPs per step) and of MFU, so
each level is the summary's share of the mean step: ``gpu_busy`` = ``gpu_busy_share`` x
step, ``kernels`` = ``kernel_time_share`` x step, ``mfu`` = ``summary.mfu`` x step.
(``summary.step_time_us`` is the median step and is not used here.)

    step time
      - GPU idle: data loading | after syncs | launch gaps | inside graph replays | waiting for host work | other
    = GPU busy
      - copies & memsets with no kernel running
    = kernels running
      - communication kernels (NCCL) with no compute kernel running
      - non-matmul kernels (no matmul/conv kernel running)
    = matmul/conv running
      - low SM efficiency (SMs idle while matmul/conv kernels run: < 1 block per SM)
    = matmul/conv at full SM coverage
      - matmul efficiency (below peak FLOP/s: tile shapes, memory-bound GEMMs, clocks)
    = model FLOPs at peak (MFU x step)        [only when FLOPs and peak are known]

Each level is clamped into what remains above it; when the FLOPs at peak exceed the
matmul time (FLOPs counted for work outside matmul kernels, or a wrong peak) the entry is
marked ``clamped`` and the result is the matmul time, not MFU x step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.idle_gaps import GRAPH, HOST, LAUNCH, OTHER, SYNC
from .context import Context


def waterfall(ctx: Context) -> list[dict[str, Any]]:
    if ctx.n == 0 or ctx.total_us <= 0:
        return []
    n, step = ctx.n, ctx.step_us
    g, gaps = ctx.view.gpu, ctx.gaps
    out: list[dict[str, Any]] = []
    remaining = step

    def entry(id: str, label: str, kind: str, us: float, **extra: Any) -> None:
        out.append(
            {"id": id, "label": label, "kind": kind, "us_per_step": round(us, 3), "share": round(us / step, 5), **extra}
        )

    def loss(id: str, label: str, us: float, **extra: Any) -> None:
        nonlocal remaining
        us = min(max(0.0, us), remaining)
        remaining -= us
        entry(id, label, "loss", us, **extra)

    entry("step", "Step time", "total", step)
    loss("idle_dataloader", "GPU idle: data loading", float(gaps.dataloader_us.sum()) / n, group="idle")
    loss("idle_sync", "GPU idle: after host-device syncs", gaps.total(SYNC) / n, group="idle")
    loss(
        "idle_launch",
        f"GPU idle: launch gaps (<= {ctx.th.launch_gap_max_us:g} µs)",
        gaps.total(LAUNCH) / n,
        group="idle",
    )
    loss("idle_graph", "GPU idle: between kernels of CUDA graph replays", gaps.total(GRAPH) / n, group="idle")
    loss("idle_host", "GPU idle: waiting for host work", gaps.total(HOST) / n, group="idle")
    loss("idle_other", "GPU idle: other", gaps.total(OTHER) / n, group="idle")
    entry("gpu_busy", "GPU busy", "subtotal", remaining)

    everything = np.ones(len(g), bool)
    busy = ctx.per_step_union(everything) / n
    kernel = ctx.per_step_union(ctx.is_kernel) / n
    compute = ctx.per_step_union(ctx.is_kernel & ~ctx.comm_code[g.name]) / n
    mm_mask = ctx.is_kernel & ctx.mm_code[g.name]
    matmul = ctx.per_step_union(mm_mask) / n
    bps_full = np.where(np.isnan(ctx.view.bps), 1.0, ctx.view.bps)  # unknown blocks: assume full
    covered = ctx.per_step_coverage(mm_mask, bps_full) / n

    loss("copies", "Copies & memsets with no kernel running", busy - kernel)
    entry("kernels", "Kernels running", "subtotal", remaining)
    loss("communication", "Communication kernels with no compute running", kernel - compute)
    loss("non_matmul", "Non-matmul kernels (no matmul/conv running)", compute - matmul)
    entry("matmul", "Matmul/conv running", "subtotal", remaining)
    loss(
        "low_sm_efficiency",
        "Low SM efficiency in matmul/conv (< 1 block per SM)",
        matmul - covered,
        known=bool((~np.isnan(ctx.view.bps[mm_mask])).any()),
    )
    entry("matmul_covered", "Matmul/conv at full SM coverage", "subtotal", remaining)

    s, d = ctx.report.summary, ctx.report.device
    flops = s.flops_per_step if s is not None else None
    peak = d.peak_flops if d is not None else None
    if "impossible_mfu" in ctx.report.flags:  # analysis.plausibility: never drawn as a figure
        entry("mfu", "Model FLOPs at peak (MFU impossible: above 100 %)", "result", remaining, mfu=None)
    elif flops and peak:
        ideal = float(flops) / float(peak) * 1e6
        clamped = ideal > remaining
        loss("matmul_efficiency", "Matmul efficiency (below peak FLOP/s)", remaining - ideal)
        entry("mfu", "Model FLOPs at peak (MFU)", "result", remaining, clamped=clamped, mfu=round(ideal / step, 5))
    else:
        entry("mfu", "Model FLOPs at peak (MFU unknown: no FLOPs or peak)", "result", remaining, mfu=None)
    return out
