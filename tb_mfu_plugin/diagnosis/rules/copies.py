"""The copy rules: pageable host memory, many small copies, copies on the critical path.

Copy time is reported once, under the most specific cause (the rules run in this order):
pageable_memcpy names the copies from or to pageable host memory; small_copies the small and
device-to-device copies outside them that run with no kernel alongside (a copy that overlaps a
kernel costs the step nothing); memcpy_bound the rest of the time copies run with no kernel
alongside."""

from __future__ import annotations

import numpy as np

from ...analysis.evidence.copies import (
    CopyRow,
    MemcpyBoundEvidence,
    PageableCopy,
    PageableMemcpyEvidence,
    SmallCopiesEvidence,
)
from ...analysis.time import copies as cp
from .. import fixes
from ..context import Context
from ..cost_time import claimed_by, rows_in, rows_time
from ..registry import Fired, Hit, rule


def _pinned_gbps(ctx: Context, direction: str) -> tuple[float, str]:
    """Pinned bandwidth of ``direction``: measured on the trace's large pinned copies, else assumed."""
    th = ctx.th
    for c in ctx.report.copies:
        if (
            c.direction == direction
            and c.memory == "pinned"
            and c.gbps
            and c.count_per_step > 0
            and c.bytes_per_step / c.count_per_step >= th.pinned_measure_min_bytes
        ):
            return float(c.gbps), "measured on this trace's pinned copies"
    cc = ctx.report.device.compute_capability if ctx.report.device else None
    try:
        major = float(cc) if cc else None
    except ValueError:
        major = None
    if major is None:
        return th.pinned_gbps_unknown, "assumed (device unknown)"
    for min_cc, gbps in th.pinned_gbps_by_cc:
        if major >= min_cc:
            return gbps, f"assumed for compute capability {cc} hosts"
    return th.pinned_gbps_unknown, "assumed"


def _pageable_rows(ctx: Context) -> np.ndarray:
    """The view's copies from or to pageable host memory, in the steps (as ``report.copies``)."""
    _, memory = cp.classify(ctx.names, ctx.tables.gpu_name_codes)
    return ctx.is_memcpy & (ctx.view.step >= 0) & (memory[ctx.view.gpu.name] == cp.MEMORY_KINDS.index("pageable"))


@rule(
    title="Pageable memory copies: {bytes:bytes} and {us:time} per step",
    fix={
        "": "Use pinned host memory: `DataLoader(..., pin_memory=True)`, or allocate reused host buffers with "
        "`torch.empty(..., pin_memory=True)` / `t.pin_memory()`, then copy with "
        "`t.to(device, non_blocking=True)` (device-to-host: `.to('cpu', non_blocking=True)` into a pinned "
        "buffer).",
        "alone": "They run with no kernel alongside ({alone:share} of their time): once pinned, prefetch the next "
        "batch on a side stream (`with torch.cuda.stream(s): x = x_pinned.to(device, non_blocking=True)`, then "
        "`torch.cuda.current_stream().wait_stream(s)`) so they overlap compute, or keep the data resident on "
        "the GPU.",
    },
    note="the gain counts the faster pinned transfer only; with non_blocking=True the copy can also overlap compute",
    thresholds=(
        "pageable_min_bytes_per_step",
        "pageable_min_share",
        "pinned_measure_min_bytes",
        "pinned_gbps_by_cc",
        "pinned_gbps_unknown",
    ),
)
def pageable_memcpy(ctx: Context) -> list[Hit]:
    """Copies from/to pageable host memory: staged through a driver bounce buffer, slower
    than pinned, and they block the host."""
    th = ctx.th
    pages = [c for c in ctx.report.copies if c.memory == "pageable"]
    if not pages:
        return []
    nbytes = sum(c.bytes_per_step for c in pages)
    time = sum(c.time_us_per_step for c in pages)
    if nbytes < th.pageable_min_bytes_per_step and time < th.pageable_min_share * ctx.step_us:
        return []
    gain = 0.0
    dirs = []
    gbps: dict[str, float] = {}
    for c in pages:
        pinned, source = _pinned_gbps(ctx, c.direction)
        gbps[c.direction] = pinned
        at_pinned = c.bytes_per_step / (pinned * 1e3) if pinned > 0 else c.time_us_per_step  # GB/s -> bytes/µs
        gain += max(0.0, c.time_us_per_step - at_pinned)
        dirs.append(
            PageableCopy(
                direction=c.direction,
                count_per_step=c.count_per_step,
                bytes_per_step=c.bytes_per_step,
                us_per_step=c.time_us_per_step,
                gbps=c.gbps,
                pinned_gbps=pinned,
                pinned_gbps_source=source,
                us_per_step_if_pinned=at_pinned,
            )
        )
    copies = rows_time(ctx, _pageable_rows(ctx))
    alone = copies.minus(rows_time(ctx, ctx.is_kernel & ctx.in_step)).us / max(copies.us, 1e-9)
    evidence = PageableMemcpyEvidence(copies=dirs, bytes_per_step=nbytes, us_per_step=time, with_no_kernel_share=alone)
    args = {"bytes": nbytes, "us": time, "alone": alone}
    fix = ("", "alone") if alone >= 0.5 else ("",)
    change = fixes.pinned(ctx, _pageable_rows(ctx), gbps)
    return [Hit(cost_us=time, gain_us=gain, evidence=evidence, args=args, fix=fix, time=copies, change=change)]


@rule(
    after=(pageable_memcpy,),
    title="Many small copies: {small:.0f} under 64 kB and {d2d:.0f} device-to-device per step",
    fix=(
        "Preallocate buffers and write into them (`out=` arguments, slicing, `index_copy_`) instead of "
        "`torch.cat`/`torch.stack` in loops; batch small host-device transfers into one pinned buffer; drop "
        "needless `.clone()` / `.contiguous()` / `.to()` copies."
    ),
    note="gain: the time of those copies with no kernel running, if they were avoided (preallocated, in-place): "
    "while a kernel runs a copy costs the step nothing; pageable copies are pageable_memcpy's",
    thresholds=("small_copies_per_step", "d2d_copies_per_step", "cat_ops_per_step", "small_copies_min_share"),
)
def small_copies(ctx: Context, fired: Fired) -> list[Hit]:
    """Many small or device-to-device copies per step (and ``torch.cat`` in loops)."""
    th, g = ctx.th, ctx.view.gpu
    m = ctx.is_memcpy & ctx.in_step
    direction, _ = cp.classify(ctx.names, ctx.tables.gpu_name_codes)
    small = m & (g.bytes >= 0) & (g.bytes < cp.SMALL_COPY_BYTES)
    d2d = m & (direction[g.name] == cp.DIRECTIONS.index("D2D"))
    n_small = small.sum() / ctx.n
    n_d2d = d2d.sum() / ctx.n
    n_cat = ctx.op_count_in_steps("aten::cat") / ctx.n
    if n_small < th.small_copies_per_step and n_d2d < th.d2d_copies_per_step and n_cat < th.cat_ops_per_step:
        return []
    kernels = rows_time(ctx, ctx.is_kernel & ctx.in_step)
    alone = rows_time(ctx, small | d2d).minus(kernels).minus(claimed_by(fired, pageable_memcpy.id))
    time = alone.us / ctx.n
    if time < th.small_copies_min_share * ctx.step_us:
        return []
    evidence = SmallCopiesEvidence(
        small_copies_per_step=n_small,
        d2d_copies_per_step=n_d2d,
        d2d_bytes_per_step=float(np.maximum(g.bytes[d2d], 0).sum(dtype=np.float64)) / ctx.n,
        cat_ops_per_step=n_cat,
        us_per_step=float(g.dur[small | d2d].sum()) / ctx.n,
        us_per_step_alone=time,
    )
    args = {"small": n_small, "d2d": n_d2d}
    mine = (small | d2d) & ~_pageable_rows(ctx)
    change = fixes.copies_gone(
        ctx, mine, "the small and device-to-device copies avoided (preallocated, written in place)"
    )
    return [Hit(cost_us=time, gain_us=time, evidence=evidence, args=args, time=alone, change=change)]


@rule(
    after=(pageable_memcpy, small_copies),
    title="Memcpy-bound: copies alone occupy {share:share} of the step",
    fix=(
        "Keep data resident on the GPU (move datasets and reused tensors once, outside the loop), prefetch "
        "the next batch on a side stream (`s = torch.cuda.Stream()`; `with torch.cuda.stream(s): "
        "x = x_pinned.to(device, non_blocking=True)`; then `torch.cuda.current_stream().wait_stream(s)`) "
        "so copies overlap compute, and avoid copying results back every step."
    ),
    note="gain: the copy-only time, if the copies left the critical path (data kept on the GPU); "
    "overlapping them with compute alone saves gain_if_overlapped_us_per_step; the copies pageable_memcpy "
    "or small_copies name are theirs (named_elsewhere_us_per_step)",
    thresholds=("memcpy_bound_share",),
)
def memcpy_bound(ctx: Context, fired: Fired) -> list[Hit]:
    """Copies take a large share of the step with no kernel running alongside."""
    s = ctx.report.summary
    if s is None:
        return []
    copies = rows_time(ctx, ctx.is_memcpy & ctx.in_step).minus(rows_time(ctx, ctx.is_kernel & ctx.in_step))
    mine = copies.minus(claimed_by(fired, pageable_memcpy.id, small_copies.id))
    copy_only = s.breakdown.get("memcpy", 0.0) * ctx.step_us
    elsewhere = min(copy_only, (copies.us - mine.us) / ctx.n)
    left = copy_only - elsewhere
    union = s.memcpy_time_share * ctx.step_us
    if left < ctx.th.memcpy_bound_share * ctx.step_us:
        return []
    overlapped = min(left, ctx.step_us - union)  # step >= max(copies, everything else)
    evidence = MemcpyBoundEvidence(
        copy_only_us_per_step=copy_only,
        named_elsewhere_us_per_step=elsewhere,
        copy_us_per_step=union,
        memcpy_time_share=s.memcpy_time_share,
        gain_if_overlapped_us_per_step=overlapped,
        bytes_per_step={
            "H2D": s.h2d_bytes_per_step,
            "D2H": s.d2h_bytes_per_step,
            "D2D": s.d2d_bytes_per_step,
            "P2P": s.p2p_bytes_per_step,
        },
        copies=[
            CopyRow(direction=c.direction, memory=c.memory, us_per_step=c.time_us_per_step, gbps=c.gbps)
            for c in sorted(ctx.report.copies, key=lambda c: -c.time_us_per_step)
        ],
    )
    args = {"share": left / ctx.step_us}
    rows = ctx.is_memcpy & ctx.in_step
    rows &= ~rows_in(ctx, rows, claimed_by(fired, pageable_memcpy.id, small_copies.id))
    change = fixes.copies_gone(
        ctx, rows, "the copies kept off the step (data resident on the GPU, or prefetched on a side stream)"
    )
    return [Hit(cost_us=left, gain_us=left, evidence=evidence, args=args, time=mine, change=change)]
