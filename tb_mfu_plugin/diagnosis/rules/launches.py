"""The launch rules: many tiny kernels, launched one by one by the host (``launch_bound``) or
replayed by CUDA graphs (``tiny_kernels_in_graphs``), with the GPU idle between them."""

from __future__ import annotations

import numpy as np

from ...analysis.evidence.host import LaunchBoundEvidence, TinyKernelsInGraphsEvidence
from ...analysis.time.idle_gaps import GRAPH, HOST, LAUNCH
from .. import fixes
from ..context import Context
from ..cost_time import TimeSet, claimed_by, gap_time
from ..registry import GAP_THRESHOLDS, Fired, Hit, rule
from .evidence import compiled, top_kernels
from .fusion import unfused_optimizer


def _kernel_stats(ctx: Context, mask: np.ndarray) -> tuple[float, float | None, float]:
    """Kernels of the steps in ``mask``: per step, their median µs, and the share under
    ``launch_short_kernel_us``. Kernels belong to the step that launched them, as in ``LaunchStats``."""
    dur = ctx.view.gpu.dur[mask & ctx.is_kernel & (ctx.view.step >= 0)]
    if not len(dur):
        return 0.0, None, 0.0
    return len(dur) / ctx.n, float(np.median(dur)), float((dur < ctx.th.launch_short_kernel_us).mean())


def _tiny(median_us: float | None, short_share: float, max_us: float, min_share: float) -> bool:
    return (median_us is not None and median_us <= max_us) or short_share >= min_share


def host_caused_idle(ctx: Context, fired: Fired) -> tuple[TimeSet, TimeSet]:
    """The host-caused GPU idle (launch gaps, and longer gaps in which the host was launching)
    that a per-parameter optimizer does not explain: the gaps inside a fired unfused_optimizer's
    span are its own (its many small launches), reported there once. (short, long) gaps."""
    claimed = claimed_by(fired, unfused_optimizer.id)
    return gap_time(ctx, rest=(LAUNCH,)).minus(claimed), gap_time(ctx, rest=(HOST,)).minus(claimed)


def _launch_bound(ctx: Context, host_gaps: float) -> tuple[float, float | None, float] | None:
    """(kernels per step, median µs, short share) of the kernels the host launched one by one, when
    they are many and tiny and the host-caused idle ``host_gaps`` (µs per step) is a large share of
    the step. Graph replays' kernels do not count (the host launched the whole replay once), nor do
    kernels with no launch call in the trace."""
    th = ctx.th
    count, median, short = _kernel_stats(ctx, ctx.launched_one_by_one)
    if count < th.launch_min_kernels_per_step:
        return None
    tiny = _tiny(median, short, th.launch_short_kernel_us, th.launch_short_kernel_share)
    return (count, median, short) if tiny and host_gaps >= th.launch_gap_min_share * ctx.step_us else None


@rule(
    after=(unfused_optimizer,),
    # the idle shares are the waterfall's own bars ("launch gaps", "waiting for host work"), so the
    # title and the waterfall give one figure for one idle time
    title={
        "": "Launch-bound: {count:.0f} kernels per step launched one by one (median {median:time}), GPU idle "
        "{idle:share} of the step waiting for the host (launch gaps {launch:share}, host work {host:share})",
        "optimizer": "Launch-bound: {count:.0f} kernels per step launched one by one (median {median:time}), GPU "
        "idle {idle:share} of the step waiting for the host (launch gaps {launch:share}, host work {host:share}); "
        "{optimizer:share} of it is in the per-parameter optimizer step (unfused_optimizer)",
    },
    fix={
        "graphs": "The step already replays {graph_launches:.3g} CUDA graph(s) ({in_graphs:.0f} kernels); "
        "capture the {count:.0f} kernels launched outside them as well (`torch.cuda.CUDAGraph` around more of "
        "the step, or remove what breaks the capture: syncs, CPU tensors, dynamic shapes),",
        "no_graphs": 'Cut per-kernel host overhead: capture the step with CUDA Graphs (`torch.compile(model, mode="'
        'reduce-overhead")`, or `torch.cuda.CUDAGraph` / `torch.cuda.make_graphed_callables`),',
        "no_graphs_compiled": "Cut per-kernel host overhead: the run is compiled without CUDA Graphs; "
        '`torch.compile(model, mode="reduce-overhead")` replays each compiled graph with one launch,',
        "fuse": "fuse small ops with `torch.compile`, and give each kernel more work (a larger batch).",
        "fuse_compiled": "remove the graph breaks that leave small ops eager (`TORCH_LOGS=graph_breaks`), and give "
        "each kernel more work (a larger batch).",
    },
    note="kernels: those the host launched one by one (a graph replay's kernels are launched once, "
    "with the replay, and its inner gaps are not counted); gain: the GPU idle the host caused (gaps "
    "<= gap_max_us between kernels, and longer gaps in which the host was launching), with no sync or "
    "data loading involved and outside a per-parameter optimizer step that unfused_optimizer names; "
    "CUDA Graphs remove it. The profiler slows the host, so this is an upper bound.",
    thresholds=(
        "launch_min_kernels_per_step",
        "launch_short_kernel_us",
        "launch_short_kernel_share",
        "launch_gap_min_share",
        *GAP_THRESHOLDS,
    ),
)
def launch_bound(ctx: Context, fired: Fired) -> list[Hit]:
    """Many tiny kernels with the GPU idle between them while the host launches the next."""
    gaps, la = ctx.gaps, ctx.report.launches
    short_time, long_time = host_caused_idle(ctx, fired)
    short, long = short_time.us / ctx.n, long_time.us / ctx.n
    idle = short + long
    found = _launch_bound(ctx, idle) if la is not None else None
    if la is None or found is None:
        return []
    count, median, short_share = found
    sel = gaps.cause == LAUNCH
    evidence = LaunchBoundEvidence(
        kernels_per_step=count,
        median_kernel_us=median,
        short_kernel_share=short_share,
        graph_kernels_per_step=la.graph_kernels_per_step,
        graph_launches_per_step=la.graph_launches_per_step,
        launch_api_us_per_step=la.launch_api_us_per_step,
        launch_gaps_per_step=sel.sum() / ctx.n,
        launch_gap_us_per_step=short,
        median_launch_gap_us=float(np.median(gaps.end[sel] - gaps.start[sel])) if sel.any() else None,
        gap_max_us=ctx.th.launch_gap_max_us,
        longer_host_gaps_us_per_step=long,
        in_optimizer_step_us_per_step=(gaps.total(LAUNCH) + gaps.total(HOST)) / ctx.n - idle,
    )
    launch_all, host_all = gaps.total(LAUNCH) / ctx.n, gaps.total(HOST) / ctx.n
    in_optimizer = launch_all + host_all - idle
    args = {
        "count": count,
        "median": median or 0,
        "idle": (launch_all + host_all) / ctx.step_us,
        "launch": launch_all / ctx.step_us,
        "host": host_all / ctx.step_us,
        "optimizer": in_optimizer / ctx.step_us,
        "graph_launches": la.graph_launches_per_step,
        "in_graphs": la.graph_kernels_per_step,
    }
    title = "optimizer" if in_optimizer > 0.005 * ctx.step_us else ""
    done = "_compiled" if compiled(ctx) else ""
    fix = ("graphs" if la.graph_kernels_per_step > 0 else "no_graphs" + done, "fuse" + done)
    time = short_time.union(long_time)
    change = fixes.graph_replay(ctx)
    return [
        Hit(cost_us=idle, gain_us=idle, evidence=evidence, args=args, title=title, fix=fix, time=time, change=change)
    ]


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


@rule(
    title="{count:.0f} tiny kernels per step in CUDA graph replays (median {median:time}): GPU idle "
    "{idle:share} of the step between them",
    fix={
        "": "The step already runs as CUDA graph replays, so launch overhead is not the limit: the number of "
        "kernels is. Fuse the small ops with `torch.compile` (Inductor fuses elementwise chains and "
        'reductions into Triton kernels; `mode="reduce-overhead"` keeps the graphs), use fused kernels '
        "(`torch.optim.AdamW(..., fused=True)`, fused norms, `F.scaled_dot_product_attention`), and give "
        "each kernel more work (a larger batch, wider layers).",
        "compiled": "The step already runs as CUDA graph replays of compiled code, so launch overhead is not the "
        "limit: the number of kernels is. Fewer kernels: remove the graph breaks that keep Inductor from fusing "
        'across them (`TORCH_LOGS=graph_breaks`), try `mode="max-autotune"`, use fused kernels for what runs '
        "eagerly (`torch.optim.AdamW(..., fused=True)`, `F.scaled_dot_product_attention`), and give each kernel "
        "more work (a larger batch, wider layers).",
    },
    note="the host launched each replay once, so these gaps are not launch overhead and CUDA "
    "Graphs are already in use; gain: the GPU idle between the replays' kernels, which fewer, fused "
    "kernels remove (their own time may shrink too; not counted)",
    thresholds=(
        "graph_min_kernels_per_step",
        "graph_short_kernel_us",
        "graph_short_kernel_share",
        "graph_gap_min_share",
        # the short share counts kernels under launch_short_kernel_us (_kernel_stats), as it always has
        "launch_short_kernel_us",
        *GAP_THRESHOLDS,
    ),
)
def tiny_kernels_in_graphs(ctx: Context) -> list[Hit]:
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
    evidence = TinyKernelsInGraphsEvidence(
        graph_launches_per_step=la.graph_launches_per_step,
        graph_kernels_per_step=count,
        median_kernel_us=median,
        short_kernel_share=short,
        graph_kernel_us_per_step=float(ctx.view.gpu.dur[mask].sum()) / ctx.n,
        gaps_in_graphs_per_step=sel.sum() / ctx.n,
        gap_us_per_step=gap_us,
        median_gap_us=float(np.median(ctx.gaps.end[sel] - ctx.gaps.start[sel])) if sel.any() else None,
        kernels=top_kernels(ctx, mask),
    )
    args = {"count": count, "median": median or 0, "idle": gap_us / ctx.step_us}
    fix = ("compiled",) if compiled(ctx) else ("",)
    change = fixes.gapless(mask, "the graph replays' kernels fused so that none waits after the one before it")
    time = gap_time(ctx, rest=(GRAPH,))
    return [Hit(cost_us=gap_us, gain_us=gap_us, evidence=evidence, args=args, fix=fix, time=time, change=change)]
