"""The rules: one concept each, a small function from the ``Context`` to findings.

Every rule states the time its cause takes per step (``cost``) and an estimated gain that
never exceeds it (``make_finding`` clamps, the tests check). Add a rule by writing a
function and appending it to ``RULES``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..analysis import copies as cp
from ..analysis import kernel_families
from ..analysis import name_patterns as nm
from ..analysis import patterns as pt
from ..analysis.idle_gaps import GRAPH, HOST, LAUNCH, OTHER
from ..trace.tables import OP
from .context import Context
from .finding import Finding, make_finding
from .roofline_rule import below_roofline

Rule = Callable[[Context], list[Finding]]


def _finding(ctx: Context, **kw: Any) -> Finding:
    return make_finding(
        step_us=ctx.step_us, mfu=ctx.mfu, high_share=ctx.th.high_share, medium_share=ctx.th.medium_share, **kw
    )


def _top_kernels(ctx: Context, mask: np.ndarray, limit: int = 5, weights: np.ndarray | None = None) -> list[dict]:
    """The kernels (by name) in ``mask``, by time per step."""
    g = ctx.view.gpu
    rows = np.flatnonzero(mask)
    if not len(rows):
        return []
    codes, inv = np.unique(g.name[rows], return_inverse=True)
    t = np.bincount(inv, weights=g.dur[rows])
    c = np.bincount(inv)
    extra = np.bincount(inv, weights=weights[rows]) if weights is not None else None
    out = []
    for k in np.argsort(-t, kind="stable")[:limit]:
        d: dict[str, Any] = {
            "name": ctx.names[codes[k]],
            "count_per_step": c[k] / ctx.n,
            "us_per_step": t[k] / ctx.n,
        }
        if extra is not None:
            d["weighted"] = extra[k] / ctx.n
        out.append(d)
    return out


# --------------------------------------------------------------------------- sync_point

_SYNC_FIX = {
    "scalar": (
        "Keep the value on the GPU inside the loop: accumulate `loss.detach()` into a GPU tensor and call "
        "`.item()` only every N steps (when logging); avoid `float(t)`, `if t:` and `print(t)` on GPU tensors "
        "in the hot loop."
    ),
    "h2d": (
        "Copy from pinned memory without blocking: `DataLoader(..., pin_memory=True)` (or `t.pin_memory()` "
        "once for reused host buffers) and `t.to(device, non_blocking=True)`."
    ),
    "d2h": (
        "Do not read results back every step: log every N steps, or copy into a pinned buffer with "
        "`.to('cpu', non_blocking=True)` and read it after a later `torch.cuda.Event.synchronize()`."
    ),
    "data_dependent": (
        "Avoid data-dependent shapes in the step: use masks with `torch.where`, `torch.nonzero_static` or "
        "fixed-size ops instead of `nonzero` / boolean indexing / `unique`."
    ),
    "explicit": (
        "Remove the per-step synchronize: time with `torch.cuda.Event(enable_timing=True)` pairs and read them "
        "after the loop (or every N steps); the profiler already records GPU time."
    ),
    "other": "Move the call out of the hot loop or make it asynchronous (`non_blocking=True`).",
}


def _sync_fix(subject: str) -> str:
    if subject.startswith(("torch.cuda.", "a synchronous")):
        return _SYNC_FIX["explicit"]
    if "host-to-device" in subject:
        return _SYNC_FIX["h2d"]
    if "device-to-host" in subject:
        return _SYNC_FIX["d2h"]
    if "data-dependent" in subject:
        return _SYNC_FIX["data_dependent"]
    if ".item()" in subject or "tensor" in subject or "torch.equal" in subject or "allclose" in subject:
        return _SYNC_FIX["scalar"]
    return _SYNC_FIX["other"]


def _path(*names: str | None) -> str:
    out: list[str] = []
    for n in names:
        if n and (not out or out[-1] != n):
            out.append(n)
    return " > ".join(out)


def sync_point(ctx: Context) -> list[Finding]:
    """Host-device syncs inside steps, one finding per cause. A sync drains the GPU queue; its cost is
    the GPU idle it causes, at most the host time blocked in it (see ``Context.gaps``)."""
    ev, causes, gaps = ctx.sync_events, ctx.sync_causes, ctx.gaps
    if not len(ev.rows):
        return []
    cpu = ctx.tables.cpu
    row_pos = {int(r): i for i, r in enumerate(ev.rows.tolist())}
    by: dict[str, dict[str, Any]] = {}
    for i, c in enumerate(causes):
        d = by.setdefault(c.subject, {"count": 0, "blocked": 0.0, "idle": 0.0, "calls": defaultdict(int), "cause": c})
        d["count"] += 1
        d["blocked"] += float(cpu.dur[ev.rows[i]])
        d["calls"][_path(c.root_op, c.op, c.api)] += 1
    for r, us in gaps.sync_us_by_row.items():
        by[causes[row_pos[r]].subject]["idle"] += us
    groups = sorted(by.items(), key=lambda kv: (-kv[1]["idle"], -kv[1]["count"]))
    out: list[Finding] = []
    for subject, d in groups:
        count = d["count"] / ctx.n
        if count < ctx.th.sync_min_per_step:
            continue
        c = d["cause"]
        explicit = c.op is None and c.root_op is None
        idle = d["idle"] / ctx.n
        evidence = {
            "call": subject,
            "explicit": explicit,
            "api": c.api,
            "op": c.op,
            "root_op": c.root_op,
            "copy_direction": c.direction,
            "nesting": [{"path": k, "count_per_step": v / ctx.n} for k, v in d["calls"].items()],
            "count_per_step": count,
            "host_blocked_us_per_step": d["blocked"] / ctx.n,
            "gpu_idle_recovered_us_per_step": idle,
            "note": "gain: per sync, min(GPU idle gap it returned in, host time blocked in it): a GPU-bound "
            "loop keeps the GPU fed, a host-bound one launches that much earlier",
        }
        how = "an explicit call outside any op" if explicit else f"inside {c.root_op or c.op}"
        out.append(
            _finding(
                ctx,
                id="sync_point",
                subject=subject,
                title=f"Host-device sync: {subject}, {count:g}x per step ({how})",
                evidence=evidence,
                cost_us=idle,
                gain_us=idle,
                recommendation=_sync_fix(subject),
            )
        )
    return out[: ctx.th.sync_max_findings]


# --------------------------------------------------------------------------- copies


def _pinned_gbps(ctx: Context, direction: str) -> tuple[float, str]:
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


def pageable_memcpy(ctx: Context) -> list[Finding]:
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
    for c in pages:
        pinned, source = _pinned_gbps(ctx, c.direction)
        at_pinned = c.bytes_per_step / (pinned * 1e3) if pinned > 0 else c.time_us_per_step  # GB/s -> bytes/µs
        saved = max(0.0, c.time_us_per_step - at_pinned)
        gain += saved
        dirs.append(
            {
                "direction": c.direction,
                "count_per_step": c.count_per_step,
                "bytes_per_step": c.bytes_per_step,
                "us_per_step": c.time_us_per_step,
                "gbps": c.gbps,
                "pinned_gbps": pinned,
                "pinned_gbps_source": source,
                "us_per_step_if_pinned": at_pinned,
            }
        )
    return [
        _finding(
            ctx,
            id="pageable_memcpy",
            title=f"Pageable memory copies: {nbytes / 2**20:.1f} MiB and {time:.0f} µs per step",
            evidence={
                "copies": dirs,
                "bytes_per_step": nbytes,
                "us_per_step": time,
                "note": "the gain counts the faster pinned transfer only; with non_blocking=True the copy can "
                "also overlap compute",
            },
            cost_us=time,
            gain_us=gain,
            recommendation=(
                "Use pinned host memory: `DataLoader(..., pin_memory=True)`, or allocate reused host buffers with "
                "`torch.empty(..., pin_memory=True)` / `t.pin_memory()`, then copy with "
                "`t.to(device, non_blocking=True)` (device-to-host: `.to('cpu', non_blocking=True)` into a pinned "
                "buffer)."
            ),
        )
    ]


def memcpy_bound(ctx: Context) -> list[Finding]:
    """Copies take a large share of the step with no kernel running alongside."""
    s = ctx.report.summary
    if s is None:
        return []
    copy_only = s.breakdown.get("memcpy", 0.0) * ctx.step_us
    union = s.memcpy_time_share * ctx.step_us
    if copy_only < ctx.th.memcpy_bound_share * ctx.step_us:
        return []
    overlapped = min(copy_only, ctx.step_us - union)  # step >= max(copies, everything else)
    return [
        _finding(
            ctx,
            id="memcpy_bound",
            title=f"Memcpy-bound: copies alone occupy {copy_only / ctx.step_us:.0%} of the step",
            evidence={
                "copy_only_us_per_step": copy_only,
                "copy_us_per_step": union,
                "memcpy_time_share": s.memcpy_time_share,
                "gain_if_overlapped_us_per_step": overlapped,
                "bytes_per_step": {
                    "H2D": s.h2d_bytes_per_step,
                    "D2H": s.d2h_bytes_per_step,
                    "D2D": s.d2d_bytes_per_step,
                    "P2P": s.p2p_bytes_per_step,
                },
                "copies": [
                    {"direction": c.direction, "memory": c.memory, "us_per_step": c.time_us_per_step, "gbps": c.gbps}
                    for c in sorted(ctx.report.copies, key=lambda c: -c.time_us_per_step)
                ],
                "note": "gain: the copy-only time, if the copies left the critical path (data kept on the GPU); "
                "overlapping them with compute alone saves gain_if_overlapped_us_per_step",
            },
            cost_us=copy_only,
            gain_us=copy_only,
            recommendation=(
                "Keep data resident on the GPU (move datasets and reused tensors once, outside the loop), prefetch "
                "the next batch on a side stream (`s = torch.cuda.Stream()`; `with torch.cuda.stream(s): "
                "x = x_pinned.to(device, non_blocking=True)`; then `torch.cuda.current_stream().wait_stream(s)`) "
                "so copies overlap compute, and avoid copying results back every step."
            ),
        )
    ]


def small_copies(ctx: Context) -> list[Finding]:
    """Many small or device-to-device copies per step (and ``torch.cat`` in loops)."""
    th, g = ctx.th, ctx.view.gpu
    m = ctx.is_memcpy & ctx.in_step
    direction, _ = cp.classify(ctx.names)
    small = m & (g.bytes >= 0) & (g.bytes < cp.SMALL_COPY_BYTES)
    d2d = m & (direction[g.name] == cp.DIRECTIONS.index("D2D"))
    n_small = small.sum() / ctx.n
    n_d2d = d2d.sum() / ctx.n
    n_cat = ctx.op_count_in_steps("aten::cat") / ctx.n
    if n_small < th.small_copies_per_step and n_d2d < th.d2d_copies_per_step and n_cat < th.cat_ops_per_step:
        return []
    sel = small | d2d
    time = float(g.dur[sel].sum()) / ctx.n
    if time < th.small_copies_min_share * ctx.step_us:
        return []
    return [
        _finding(
            ctx,
            id="small_copies",
            title=f"Many small copies: {n_small:.0f} under 64 KiB and {n_d2d:.0f} device-to-device per step",
            evidence={
                "small_copies_per_step": n_small,
                "d2d_copies_per_step": n_d2d,
                "d2d_bytes_per_step": float(np.maximum(g.bytes[d2d], 0).sum(dtype=np.float64)) / ctx.n,
                "cat_ops_per_step": n_cat,
                "us_per_step": time,
                "note": "gain: the time of those copies, if they were avoided (preallocated, in-place)",
            },
            cost_us=time,
            gain_us=time,
            recommendation=(
                "Preallocate buffers and write into them (`out=` arguments, slicing, `index_copy_`) instead of "
                "`torch.cat`/`torch.stack` in loops; batch small host-device transfers into one pinned buffer; drop "
                "needless `.clone()` / `.contiguous()` / `.to()` copies."
            ),
        )
    ]


# --------------------------------------------------------------------------- attention


def _fused_attention_present(ctx: Context) -> bool:
    g = ctx.view.gpu
    fused = nm.fused_attention_kernel_mask(ctx.names)
    if (fused[g.name] & ctx.is_kernel & ctx.in_step).any():
        return True
    cpu = ctx.tables.cpu
    codes = [i for i, n in enumerate(ctx.names) if n in nm.FUSED_ATTENTION_OPS]
    if not codes:
        return False
    rows = np.flatnonzero((cpu.kind == OP) & np.isin(cpu.name, codes))
    return bool(ctx.host_in_steps(cpu.ts[rows]).any())


def naive_attention(ctx: Context) -> list[Finding]:
    """matmul -> softmax -> (dropout) -> matmul on batched operands, and no fused attention kernel.
    The gain is the non-matmul GPU time of the chains (scale, mask, softmax, dropout and copies over
    the B x H x T x T scores), which a fused kernel does not spend; the matmul FLOPs remain."""
    chains = ctx.attention_chains
    if not chains or _fused_attention_present(ctx):
        return []
    g = ctx.view.gpu
    rows = ctx.attention_rows
    cost = float(g.dur[rows].sum()) / ctx.n
    mm = rows & ctx.is_kernel & ctx.mm_code[g.name]
    gain = cost - float(g.dur[mm].sum()) / ctx.n
    fwd = [c for c in chains if not c.backward]
    bwd = [c for c in chains if c.backward]
    four = [c.four_d for c in chains if c.four_d is not None]
    example = fwd[0] if fwd else chains[0]
    return [
        _finding(
            ctx,
            id="naive_attention",
            title=(
                f"Hand-written attention: {len(fwd) / ctx.n:g} forward and {len(bwd) / ctx.n:g} backward "
                "matmul-softmax-matmul chains per step, no fused attention kernel"
            ),
            evidence={
                "chains_per_step": len(chains) / ctx.n,
                "forward_per_step": len(fwd) / ctx.n,
                "backward_per_step": len(bwd) / ctx.n,
                "ops": list(example.ops),
                "backward_ops": list(bwd[0].ops) if bwd else None,
                "matmul_input_dims": json.loads(example.shapes) if example.shapes else None,
                "four_d": all(four) if four else None,
                "gpu_us_per_step": cost,
                "matmul_us_per_step": cost - gain,
                "non_matmul_us_per_step": gain,
                "kernels": _top_kernels(ctx, rows & (ctx.is_kernel | ctx.is_memcpy)),
                "note": "gain: the non-matmul time of the chains (scale, mask, softmax, dropout, copies of the "
                "scores), which a fused kernel avoids; the matmuls are assumed to cost the same",
            },
            cost_us=cost,
            gain_us=gain,
            recommendation=(
                "Replace the chain with `torch.nn.functional.scaled_dot_product_attention(q, k, v, "
                "attn_mask=..., dropout_p=..., is_causal=True)`, which dispatches to FlashAttention / "
                "memory-efficient / cuDNN kernels (or use the flash-attn package); it never materialises the "
                "B x H x T x T scores."
            ),
        )
    ]


# --------------------------------------------------------------------------- optimizer

_FUSED_CAPABLE = {"Adam", "AdamW", "SGD", "Adagrad"}


def unfused_optimizer(ctx: Context) -> list[Finding]:
    """Many small per-parameter kernels under ``Optimizer.step``."""
    th, g = ctx.th, ctx.view.gpu
    rows = ctx.optimizer_rows
    if not len(rows):
        return []
    launched = ctx.optimizer_launched & ctx.is_kernel & ~ctx.comm_code[g.name]
    n_k = launched.sum() / ctx.n
    if n_k < th.optimizer_min_kernels_per_step:
        return []
    multi = nm.multi_tensor_kernel_mask(ctx.names)[g.name] & launched
    multi_share = float(multi.sum()) / max(1, int(launched.sum()))
    w = pt.Windows.of_rows(ctx.tables, rows)
    fused_ops = pt.ops_named_in(ctx.tables, w, ("aten::_fused_", "aten::_foreach_"))
    if multi_share > th.optimizer_max_multi_tensor_share or any(k.startswith("aten::_fused_") for k in fused_ops):
        return []
    busy = ctx.per_step_union(launched) / ctx.n
    span = 0.0
    for i in range(ctx.n):
        mine = launched & (ctx.step_of == i)
        if mine.any():
            span += float(g.end[mine].max() - g.ts[mine].min())
    span /= ctx.n
    gain = span - th.optimizer_fused_work_ratio * busy
    names = sorted({m.group(1) for r in rows if (m := nm.OPTIMIZER_STEP.match(ctx.names[ctx.tables.cpu.name[r]]))})
    cls = names[0] if names else "Optimizer"
    zg = ctx.zero_grad_launched & ctx.is_kernel
    host_us = float(ctx.tables.cpu.dur[rows].sum()) / ctx.n
    if cls in _FUSED_CAPABLE:
        fix = f"`torch.optim.{cls}(params, ..., fused=True)` (or `foreach=True`)"
    else:
        fix = f"the foreach implementation of {cls} (`foreach=True`) or a fused optimizer"
    rec = (
        f"Use {fix}: one multi-tensor launch set per step instead of a few kernels per parameter. "
        "Outside torch.optim: `apex.optimizers.FusedAdam` or DeepSpeed's `FusedAdam`."
    )
    if zg.any():
        rec += " Also call `optimizer.zero_grad(set_to_none=True)` (the default since torch 2.0)."
    return [
        _finding(
            ctx,
            id="unfused_optimizer",
            title=f"Per-parameter optimizer: {n_k:.0f} kernels per step under Optimizer.step ({cls})",
            evidence={
                "optimizer": names,
                "kernels_per_step": n_k,
                "multi_tensor_kernel_share": multi_share,
                "foreach_or_fused_ops": fused_ops,
                "host_us_per_step": host_us,
                "gpu_span_us_per_step": span,
                "gpu_busy_us_per_step": busy,
                "median_kernel_us": float(np.median(g.dur[launched])),
                "kernels": _top_kernels(ctx, launched),
                "zero_grad_kernels_per_step": zg.sum() / ctx.n,
                "zero_grad_us_per_step": float(g.dur[zg].sum()) / ctx.n,
                "note": f"gain: the GPU span of the optimizer step minus {th.optimizer_fused_work_ratio:g} x its "
                "kernel busy time (what a fused/foreach version is assumed to need)",
            },
            cost_us=span,
            gain_us=gain,
            recommendation=rec,
        )
    ]


# --------------------------------------------------------------------------- elementwise


def unfused_elementwise(ctx: Context) -> list[Finding]:
    """Long runs of small elementwise / normalisation kernels between matmuls; fusing a run
    leaves about one kernel as long as its longest member."""
    th, g = ctx.th, ctx.view.gpu
    krows = np.flatnonzero(ctx.is_kernel & ctx.in_step)
    claimed = ctx.optimizer_launched | ctx.zero_grad_launched | ctx.attention_rows
    kern = g.take(krows)
    ew = nm.elementwise_kernel_mask(ctx.names)
    runs = pt.elementwise_runs(kern, ew, ~claimed[krows], th.elementwise_min_run)
    if not runs:
        return []
    cost = sum(float(kern.dur[r].sum()) for r in runs) / ctx.n
    gain = sum(float(kern.dur[r].sum() - kern.dur[r].max()) for r in runs) / ctx.n
    if gain < th.elementwise_min_share * ctx.step_us:
        return []
    lens = np.array([len(r) for r in runs])
    in_runs = np.zeros(len(g), bool)
    in_runs[krows[np.concatenate(runs)]] = True
    longest = runs[int(np.argmax([kern.dur[r].sum() for r in runs]))]
    return [
        _finding(
            ctx,
            id="unfused_elementwise",
            title=(
                f"Unfused elementwise chains: {len(runs) / ctx.n:.0f} runs of >= {th.elementwise_min_run} "
                "non-matmul kernels per step"
            ),
            evidence={
                "runs_per_step": len(runs) / ctx.n,
                "kernels_per_run_median": float(np.median(lens)),
                "kernels_per_run_max": int(lens.max()),
                "kernels_per_step": int(lens.sum()) / ctx.n,
                "us_per_step": cost,
                "kernels": _top_kernels(ctx, in_runs),
                "costliest_run": [ctx.names[c] for c in kern.name[longest][:12]],
                "note": "gain: each run fused into one kernel as long as its longest member",
            },
            cost_us=cost,
            gain_us=gain,
            recommendation=(
                "Fuse them: `torch.compile(model)` (Inductor generates fused Triton kernels), fused LayerNorm/RMSNorm "
                "(`torch.nn.functional.layer_norm` / `rms_norm`, Apex `FusedLayerNorm`), a fused MLP/activation "
                "kernel, or a custom Triton kernel for the hot run."
            ),
        )
    ]


# --------------------------------------------------------------------------- launch_bound


def _kernel_stats(ctx: Context, mask: np.ndarray) -> tuple[float, float | None, float]:
    """Kernels of the steps in ``mask``: per step, their median µs, and the share under 10 µs.
    Kernels belong to the step that launched them, as in ``LaunchStats``."""
    dur = ctx.view.gpu.dur[mask & ctx.is_kernel & (ctx.view.step >= 0)]
    if not len(dur):
        return 0.0, None, 0.0
    return len(dur) / ctx.n, float(np.median(dur)), float((dur < ctx.th.launch_short_kernel_us).mean())


def _tiny(median_us: float | None, short_share: float, max_us: float, min_share: float) -> bool:
    return (median_us is not None and median_us <= max_us) or short_share >= min_share


def is_launch_bound(ctx: Context) -> bool:
    """Many tiny kernels that the host launched one by one (graph replays' kernels do not count: the
    host launched the whole replay once; nor do kernels with no launch call in the trace), and the
    host-caused idle (launch gaps plus longer gaps in which the host was launching) is a large
    share of the step."""
    th = ctx.th
    count, median, short = _kernel_stats(ctx, ctx.launched_one_by_one)
    if count < th.launch_min_kernels_per_step:
        return False
    host_gaps = (ctx.gaps.total(LAUNCH) + ctx.gaps.total(HOST)) / ctx.n
    tiny = _tiny(median, short, th.launch_short_kernel_us, th.launch_short_kernel_share)
    return tiny and host_gaps >= th.launch_gap_min_share * ctx.step_us


def launch_bound(ctx: Context) -> list[Finding]:
    """Many tiny kernels with the GPU idle between them while the host launches the next."""
    th, gaps, la = ctx.th, ctx.gaps, ctx.report.launches
    if la is None or not is_launch_bound(ctx):
        return []
    count, median, short_share = _kernel_stats(ctx, ctx.launched_one_by_one)
    in_graphs = la.graph_kernels_per_step
    short = gaps.total(LAUNCH) / ctx.n
    long = gaps.total(HOST) / ctx.n
    sel = gaps.cause == LAUNCH
    idle = short + long
    if in_graphs > 0:
        graphs_fix = (
            f"The step already replays {la.graph_launches_per_step:.3g} CUDA graph(s) ({in_graphs:.0f} kernels); "
            f"capture the {count:.0f} kernels launched outside them as well (`torch.cuda.CUDAGraph` around more of "
            "the step, or remove what breaks the capture: syncs, CPU tensors, dynamic shapes), "
        )
    else:
        graphs_fix = (
            'Cut per-kernel host overhead: capture the step with CUDA Graphs (`torch.compile(model, mode="reduce-'
            'overhead")`, or `torch.cuda.CUDAGraph` / `torch.cuda.make_graphed_callables`), '
        )
    return [
        _finding(
            ctx,
            id="launch_bound",
            title=(
                f"Launch-bound: {count:.0f} kernels per step launched one by one (median {median or 0:.1f} µs), "
                f"GPU idle {idle / ctx.step_us:.0%} of the step waiting for the host to launch"
            ),
            evidence={
                "kernels_per_step": count,
                "median_kernel_us": median,
                "short_kernel_share": short_share,
                "graph_kernels_per_step": in_graphs,
                "graph_launches_per_step": la.graph_launches_per_step,
                "launch_api_us_per_step": la.launch_api_us_per_step,
                "launch_gaps_per_step": sel.sum() / ctx.n,
                "launch_gap_us_per_step": short,
                "median_launch_gap_us": float(np.median(gaps.end[sel] - gaps.start[sel])) if sel.any() else None,
                "gap_max_us": th.launch_gap_max_us,
                "longer_host_gaps_us_per_step": long,
                "note": "kernels: those the host launched one by one (a graph replay's kernels are launched once, "
                "with the replay, and its inner gaps are not counted); gain: the GPU idle the host caused (gaps "
                "<= gap_max_us between kernels, and longer gaps in which the host was launching), with no sync or "
                "data loading involved; CUDA Graphs remove it. The profiler slows the host, so this is an upper "
                "bound.",
            },
            cost_us=idle,
            gain_us=idle,
            recommendation=(
                f"{graphs_fix}fuse small ops with `torch.compile`, and give each kernel more work (a larger batch)."
            ),
        )
    ]


# --------------------------------------------------------------------------- tiny_kernels_in_graphs


def _tiny_graph_kernels(ctx: Context) -> tuple[float, float | None, float] | None:
    """(kernels per step, median µs, short share) of the graph replays' kernels when they fire the rule."""
    th = ctx.th
    count, median, short = _kernel_stats(ctx, ctx.graph_launched)
    if count < th.graph_min_kernels_per_step or not _tiny(
        median, short, th.graph_short_kernel_us, th.graph_short_kernel_share
    ):
        return None
    if ctx.gaps.total(GRAPH) / ctx.n < th.graph_gap_min_share * ctx.step_us:
        return None
    return count, median, short


def tiny_kernels_in_graphs(ctx: Context) -> list[Finding]:
    """Graph replays of many tiny kernels: the host launches are gone, but every kernel still costs the
    GPU its own start-up and the idle before the next one. Fewer, larger kernels are the lever."""
    found = _tiny_graph_kernels(ctx)
    la = ctx.report.launches
    if found is None or la is None:
        return []
    count, median, short = found
    gap_us = ctx.gaps.total(GRAPH) / ctx.n
    sel = ctx.gaps.cause == GRAPH
    mask = ctx.graph_launched & ctx.is_kernel & (ctx.view.step >= 0)
    return [
        _finding(
            ctx,
            id="tiny_kernels_in_graphs",
            title=(
                f"{count:.0f} tiny kernels per step in CUDA graph replays (median {median or 0:.1f} µs): GPU idle "
                f"{gap_us / ctx.step_us:.0%} of the step between them"
            ),
            evidence={
                "graph_launches_per_step": la.graph_launches_per_step,
                "graph_kernels_per_step": count,
                "median_kernel_us": median,
                "short_kernel_share": short,
                "graph_kernel_us_per_step": float(ctx.view.gpu.dur[mask].sum()) / ctx.n,
                "gaps_in_graphs_per_step": sel.sum() / ctx.n,
                "gap_us_per_step": gap_us,
                "median_gap_us": float(np.median(ctx.gaps.end[sel] - ctx.gaps.start[sel])) if sel.any() else None,
                "kernels": _top_kernels(ctx, mask),
                "note": "the host launched each replay once, so these gaps are not launch overhead and CUDA "
                "Graphs are already in use; gain: the GPU idle between the replays' kernels, which fewer, fused "
                "kernels remove (their own time may shrink too; not counted)",
            },
            cost_us=gap_us,
            gain_us=gap_us,
            recommendation=(
                "The step already runs as CUDA graph replays, so launch overhead is not the limit: the number of "
                "kernels is. Fuse the small ops with `torch.compile` (Inductor fuses elementwise chains and "
                'reductions into Triton kernels; `mode="reduce-overhead"` keeps the graphs), use fused kernels '
                "(`torch.optim.AdamW(..., fused=True)`, fused norms, `F.scaled_dot_product_attention`), and give "
                "each kernel more work (a larger batch, wider layers)."
            ),
        )
    ]


# --------------------------------------------------------------------------- kernel efficiency


def low_sm_efficiency(ctx: Context) -> list[Finding]:
    """Kernels launching fewer blocks than SMs, for long enough to matter: part of the GPU
    sits idle while they run. Lost time: duration x (1 - blocks per SM)."""
    th, g, bps = ctx.th, ctx.view.gpu, ctx.view.bps
    sel = (
        ctx.is_kernel
        & ctx.in_step
        & ~ctx.comm_code[g.name]  # collectives use few blocks by design
        & ~np.isnan(bps)
        & (bps < th.low_blocks_per_sm)
        & (g.dur >= th.low_sm_min_kernel_us)
    )
    if not sel.any():
        return []
    lost_rows = np.where(sel, g.dur * (1.0 - np.clip(np.nan_to_num(bps), 0.0, 1.0)), 0.0)
    lost = float(lost_rows.sum()) / ctx.n
    if lost < th.low_sm_min_share * ctx.step_us:
        return []
    time = float(g.dur[sel].sum()) / ctx.n
    top = _top_kernels(ctx, sel, weights=lost_rows)
    rows = np.flatnonzero(sel)
    for k in top:
        code = ctx.names.index(k["name"])
        mine = rows[g.name[rows] == code]
        k["mean_blocks_per_sm"] = float(np.average(bps[mine], weights=g.dur[mine]))
        k["lost_us_per_step"] = k.pop("weighted")
    return [
        _finding(
            ctx,
            id="low_sm_efficiency",
            title=f"Low SM efficiency: kernels with < {th.low_blocks_per_sm:g} block per SM run {time:.0f} µs per step",
            evidence={
                "us_per_step": time,
                "lost_us_per_step": lost,
                "share_of_step": time / ctx.step_us,
                "num_sms": ctx.report.device.num_sms if ctx.report.device else None,
                "kernels": top,
                "note": "gain: duration x (1 - blocks per SM), the idle SMs' share, assuming the work would "
                "spread over all SMs and no other stream fills them",
            },
            cost_us=time,
            gain_us=lost,
            recommendation=(
                "Give these kernels more parallel work: a larger batch (or sequence), fusing them with neighbours "
                "(`torch.compile`), or running independent work on another `torch.cuda.Stream`; for small GEMMs "
                "batch them (`torch.bmm`, grouped GEMM)."
            ),
        )
    ]


# Dtypes that already run at a tensor-core data width: a bf16 GEMV on the CUDA cores is
# memory-bound by shape, and autocast or TF32 would not change it.
_NARROW = frozenset({"bf16", "fp16", "fp8", "fp4", "int8"})


def _no_tc_evidence(ctx: Context) -> tuple[np.ndarray, list[str]]:
    """Kernel rows that are positive evidence of matmul math off the tensor cores, and why.

    - CUDA-core matmul/conv kernels by name (FFMA, SIMT, SGEMM, scudnn, Winograd, GEMV), unless
      their dtype is already 16-bit or narrower;
    - GEMM-like kernels of unknown class, only when the recorded matmul inputs are all fp32 and no
      kernel of the run shows TF32 (fp32 inputs without TF32 run on CUDA cores).
    A kernel the table does not know is never evidence by itself.
    """
    g, cls = ctx.view.gpu, ctx.classes
    code = cls.core[g.name]
    base = ctx.is_kernel & ctx.in_step
    narrow = np.fromiter((d in _NARROW for d in cls.dtype), bool, len(cls.dtype))
    rows = base & (code == kernel_families.CODE[kernel_families.CUDA_CORE]) & ~narrow[g.name]
    basis = ["CUDA-core kernel names (FFMA/SIMT/SGEMM/scudnn/Winograd/GEMV)"] if rows.any() else []
    unknown = base & (code == kernel_families.CODE[kernel_families.UNKNOWN])
    types = ctx.matmul_input_dtypes
    kernel_codes = np.unique(g.name[ctx.is_kernel])
    tf32 = any(cls.dtype[int(c)] == "tf32" for c in kernel_codes)
    if unknown.any() and types and set(types) == {"float"} and not tf32:
        rows = rows | unknown
        basis.append("fp32 matmul inputs (Input type) with no TF32 kernel in the run")
    return rows, basis


def no_tensor_cores(ctx: Context) -> list[Finding]:
    """Matmul / conv time in kernels shown to run off the tensor cores (fp32 without TF32 or AMP)."""
    th, g = ctx.th, ctx.view.gpu
    non_tc, basis = _no_tc_evidence(ctx)
    time = float(g.dur[non_tc].sum()) / ctx.n
    if time <= 0 or time < th.no_tc_min_share * ctx.step_us:
        return []
    code = ctx.classes.core[g.name]
    mm = ctx.is_kernel & ctx.in_step & (code != kernel_families.CODE[kernel_families.NOT_MATMUL])
    mm_time = float(g.dur[mm].sum()) / ctx.n
    unknown_time = float(g.dur[mm & (code == kernel_families.CODE[kernel_families.UNKNOWN])].sum()) / ctx.n
    gain = time * (1.0 - 1.0 / th.tensor_core_speedup)
    cc = ctx.report.device.compute_capability if ctx.report.device else None
    dtypes = ctx.matmul_input_dtypes
    try:
        major = float(cc) if cc else None
    except ValueError:
        major = None
    if major is not None and major < 8.0:
        rec = (
            "Run matmuls and convolutions in fp16 on the tensor cores: `with torch.autocast('cuda', "
            "dtype=torch.float16):` around the forward pass plus `torch.amp.GradScaler('cuda')` (this GPU has "
            "no TF32 or bf16 tensor cores)."
        )
    else:
        rec = (
            "Use the tensor cores: `with torch.autocast('cuda', dtype=torch.bfloat16):` around the forward pass, "
            "or at least TF32 for fp32 math: `torch.backends.cuda.matmul.allow_tf32 = True` and "
            "`torch.backends.cudnn.allow_tf32 = True` (or `torch.set_float32_matmul_precision('high')`)."
        )
    kernels = _top_kernels(ctx, non_tc)
    _describe(ctx, non_tc, kernels)
    return [
        _finding(
            ctx,
            id="no_tensor_cores",
            title=f"No tensor cores: {time / max(mm_time, 1e-9):.0%} of matmul/conv time runs on CUDA cores",
            evidence={
                "non_tensor_core_us_per_step": time,
                "matmul_conv_us_per_step": mm_time,
                "non_tensor_core_share_of_matmul": time / mm_time if mm_time > 0 else None,
                "unknown_core_us_per_step": unknown_time,
                "basis": basis,
                "compute_capability": cc,
                "matmul_input_types": dtypes,
                "kernels": kernels,
                "note": f"gain: that time x (1 - 1/{th.tensor_core_speedup:g}), a conservative tensor-core speed-up; "
                "kernels the family table does not know (unknown) are not counted unless the inputs are fp32",
            },
            cost_us=time,
            gain_us=gain,
            recommendation=rec,
        )
    ]


def _describe(ctx: Context, rows: np.ndarray, kernels: list[dict[str, Any]]) -> None:
    """Add each evidence kernel's class, dtype and family (the table entry that matched)."""
    g, cls = ctx.view.gpu, ctx.classes
    by_name = {ctx.names[int(c)]: int(c) for c in np.unique(g.name[rows])}
    for k in kernels:
        c = by_name.get(k["name"])
        if c is None:
            continue
        k["class"] = kernel_families.CLASSES[cls.core[c]]
        k["dtype"] = cls.dtype[c]
        k["family"] = cls.family[c]


# --------------------------------------------------------------------------- idle


def dataloader_stall(ctx: Context) -> list[Finding]:
    """The GPU idle while the host is inside DataLoader calls (typically at step starts)."""
    rows = ctx.dataloader_rows
    if not len(rows):
        return []
    stall = float(ctx.gaps.dataloader_us.sum()) / ctx.n
    if stall < ctx.th.dataloader_min_share * ctx.step_us:
        return []
    cpu = ctx.tables.cpu
    names = sorted({ctx.names[c] for c in cpu.name[rows]})
    single = any("SingleProcess" in n for n in names)
    host = float(cpu.dur[rows].sum()) / ctx.n
    rec = (
        "Load data in the background: `DataLoader(..., num_workers=N, pin_memory=True, persistent_workers=True, "
        "prefetch_factor=2)` with N around the CPU cores per GPU; move heavy decoding/augmentation to the GPU "
        "or a dedicated pipeline (DALI)."
    )
    if single:
        rec = "The DataLoader runs in the training process (num_workers=0). " + rec
    return [
        _finding(
            ctx,
            id="dataloader_stall",
            title=f"DataLoader stall: GPU idle {stall / ctx.step_us:.0%} of the step while the next batch loads",
            evidence={
                "ops": names,
                "calls_per_step": len(rows) / ctx.n,
                "host_us_per_step": host,
                "gpu_idle_us_per_step": stall,
                "single_process": single,
            },
            cost_us=stall,
            gain_us=stall,
            recommendation=rec,
        )
    ]


def _dataloader_fires(ctx: Context) -> bool:
    return len(ctx.dataloader_rows) > 0 and (
        float(ctx.gaps.dataloader_us.sum()) / ctx.n >= ctx.th.dataloader_min_share * ctx.step_us
    )


def gpu_idle(ctx: Context) -> list[Finding]:
    """GPU idle that no fired rule claims: the data-loading part when dataloader_stall fired, the
    sync part when sync_point did, the host-caused gaps when launch_bound did."""
    th, gaps = ctx.th, ctx.gaps
    n = ctx.n
    parts = {
        "short_gaps_us_per_step": gaps.total(LAUNCH) / n,
        "host_gaps_us_per_step": gaps.total(HOST) / n,
        "no_launch_us_per_step": gaps.total(OTHER) / n,
        "dataloader_us_per_step": float(gaps.dataloader_us.sum()) / n,
        "sync_us_per_step": float(gaps.sync_us.sum()) / n,
    }
    if is_launch_bound(ctx):
        parts["short_gaps_us_per_step"] = parts["host_gaps_us_per_step"] = 0.0
    parts["graph_gaps_us_per_step"] = 0.0 if _tiny_graph_kernels(ctx) else gaps.total(GRAPH) / n
    if _dataloader_fires(ctx):
        parts["dataloader_us_per_step"] = 0.0
    if len(sync_point(ctx)):
        parts["sync_us_per_step"] = 0.0
    idle = sum(parts.values())
    if idle < th.gpu_idle_min_share * ctx.step_us:
        return []
    free = gaps.cause != LAUNCH if is_launch_bound(ctx) else np.ones(len(gaps.start), bool)
    if _tiny_graph_kernels(ctx):
        free &= gaps.cause != GRAPH
    rows = np.flatnonzero(free & (gaps.rest_us > 0))
    big = rows[np.argsort(-gaps.rest_us[rows], kind="stable")[: th.gpu_idle_top_gaps]]
    largest = [
        {
            "start_us": float(gaps.start[k]),
            "us": float(gaps.weight[k]),
            "host_launched_during_gap": bool(gaps.cause[k] != OTHER),
            "host_activity": pt.host_activity(ctx.tables, float(gaps.start[k]), float(gaps.end[k])),
        }
        for k in big
    ]
    hints = []
    uses_graphs = ctx.report.launches is not None and ctx.report.launches.graph_launches_per_step > 0
    if parts["short_gaps_us_per_step"] >= 0.5 * idle:
        graphs_fix = (
            "capture more of the step in the CUDA graphs it already replays"
            if uses_graphs
            else 'CUDA Graphs via `torch.compile(mode="reduce-overhead")`'
        )
        hints.append(
            "Most of it is short gaps between kernels: the host issues work just in time. Cut host overhead per "
            f"kernel ({graphs_fix}; fewer, larger kernels via `torch.compile`)."
        )
    if parts["graph_gaps_us_per_step"] >= 0.5 * idle:
        hints.append(
            "Most of it is gaps between the kernels of CUDA graph replays: not host overhead, but the cost of many "
            "small kernels. Fuse them (`torch.compile`) and give each more work."
        )
    hints.append(
        "Look at what the host does in the largest gaps (evidence.largest_gaps) and take it off the critical path: "
        "move CPU work (logging, metrics, checkpointing, Python bookkeeping) out of the step or to a background "
        "thread, and keep the GPU queue ahead of the host (no syncs)."
    )
    return [
        _finding(
            ctx,
            id="gpu_idle",
            title=f"GPU idle {idle / ctx.step_us:.0%} of the step with no other finding to blame",
            evidence={
                "idle_us_per_step": float(gaps.weight.sum()) / n,
                "unexplained_us_per_step": idle,
                **parts,
                "largest_gaps": largest,
                "note": "short gaps: <= launch_gap_max_us between kernels; graph gaps: between the kernels of "
                "one CUDA graph replay; host gaps: longer, and the host launched "
                "work during them (the GPU waited for the host). The profiler slows the host, so host-caused idle "
                "in a trace is an upper bound.",
            },
            cost_us=idle,
            gain_us=idle,
            recommendation=" ".join(hints),
        )
    ]


# --------------------------------------------------------------------------- exposed_communication

# NCCL/RCCL kernel names carry the collective: ncclDevKernel_AllReduce_Sum_f32_RING_LL.
_COLLECTIVE = re.compile(r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll)",
                         re.IGNORECASE)

_COMM_FIX = {
    "fsdp": (
        "Overlap the FSDP all-gathers with compute: prefetch the next blocks (FSDP2 "
        "`block.set_modules_to_forward_prefetch([...])` / `set_modules_to_backward_prefetch`, FSDP1 "
        "`forward_prefetch=True`, `backward_prefetch=BackwardPrefetch.BACKWARD_PRE`), gather in bf16 "
        "(`MixedPrecisionPolicy(param_dtype=torch.bfloat16)`), keep the last blocks gathered "
        "(`reshard_after_forward=False`), or shard over fewer GPUs (HSDP) when the model fits."
    ),
    "ddp": (
        "Let DDP overlap the gradient all-reduce with backward: tune `bucket_cap_mb`, use "
        "`gradient_as_bucket_view=True` and `static_graph=True`, all-reduce in bf16 "
        "(`register_comm_hook(None, bf16_compress_hook)`), and accumulate gradients under `model.no_sync()` "
        "to all-reduce less often."
    ),
    "pp": (
        "Point-to-point transfers between pipeline stages wait on the pipeline: use more micro-batches per "
        "step, an interleaved schedule (`torch.distributed.pipelining.ScheduleInterleaved1F1B`), balance the "
        "stages' work, and overlap the send/recv with compute."
    ),
    "tp": (
        "Tensor-parallel all-reduces sit on the critical path: keep TP inside one NVLink domain, shrink "
        "the TP degree and shard the rest with FSDP, add sequence parallelism, or overlap with async TP "
        "(`torch._inductor.config._micro_pipeline_tp = True` under `torch.compile`)."
    ),
}


def exposed_communication(ctx: Context) -> list[Finding]:
    """Collective kernels running while no compute kernel runs: the GPU communicates (or waits
    for the slowest rank inside the collective) instead of computing."""
    g = ctx.view.gpu
    comm = ctx.is_kernel & ctx.in_step & ctx.comm_code[g.name]
    if not comm.any():
        return []
    kernels = ctx.is_kernel & ctx.in_step
    comm_us = ctx.per_step_union(comm) / ctx.n
    exposed = (ctx.per_step_union(kernels) - ctx.per_step_union(kernels & ~ctx.comm_code[g.name])) / ctx.n
    if exposed < ctx.th.comm_exposed_min_share * ctx.step_us:
        return []
    by_kind: dict[str, float] = defaultdict(float)
    rows = np.flatnonzero(comm)
    for r in rows:
        m = _COLLECTIVE.search(ctx.names[g.name[r]])
        by_kind[m.group(1).lower() if m else "other"] += float(g.dur[r]) / ctx.n
    kinds = set(by_kind)
    main = max(by_kind, key=by_kind.__getitem__)
    if main in ("sendrecv", "send", "recv"):
        strategy = "pp"
    elif {"allgather", "reducescatter"} & kinds:
        strategy = "fsdp"
    elif ctx.report.distributed is not None and _tp_like(ctx):
        strategy = "tp"
    else:
        strategy = "ddp"
    dist = ctx.report.distributed or {}
    return [
        _finding(
            ctx,
            id="exposed_communication",
            title=f"Exposed communication: collectives run {exposed / 1000:.1f} ms per step with no compute "
            f"alongside ({exposed / ctx.step_us:.0%} of the step)",
            evidence={
                "exposed_us_per_step": exposed,
                "communication_us_per_step": comm_us,
                "overlapped_share": 1.0 - exposed / comm_us if comm_us > 0 else None,
                "collectives_us_per_step": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
                "kernels": _top_kernels(ctx, comm),
                "rank": dist.get("rank"),
                "world_size": dist.get("world_size"),
                "strategy_guess": strategy,
                "note": "a collective's kernel time includes waiting for the slowest rank: compare the ranks' "
                "reports (the rank with the least exposed communication is the one the others wait for); "
                "gain: all the exposed time, an upper bound reached only with perfect overlap and no straggler",
            },
            cost_us=exposed,
            gain_us=exposed,
            recommendation=_COMM_FIX[strategy],
        )
    ]


def _tp_like(ctx: Context) -> bool:
    """All-reduces launched during the forward pass are tensor parallelism's, not DDP's."""
    return any("_c10d_functional::all_reduce" in n or "Redistribute" in n for n in ctx.names)


# --------------------------------------------------------------------------- registry

RULES: list[tuple[str, Rule]] = [
    ("sync_point", sync_point),
    ("pageable_memcpy", pageable_memcpy),
    ("memcpy_bound", memcpy_bound),
    ("small_copies", small_copies),
    ("naive_attention", naive_attention),
    ("unfused_optimizer", unfused_optimizer),
    ("unfused_elementwise", unfused_elementwise),
    ("launch_bound", launch_bound),
    ("tiny_kernels_in_graphs", tiny_kernels_in_graphs),
    ("low_sm_efficiency", low_sm_efficiency),
    ("no_tensor_cores", no_tensor_cores),
    ("dataloader_stall", dataloader_stall),
    ("exposed_communication", exposed_communication),
    ("gpu_idle", gpu_idle),
    ("below_roofline", below_roofline),
]
RULE_IDS = tuple(i for i, _ in RULES)
