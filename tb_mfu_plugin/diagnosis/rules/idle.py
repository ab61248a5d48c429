"""``gpu_idle``: GPU idle that no rule which fired claims, with what the host did meanwhile."""

from __future__ import annotations

import msgspec
import numpy as np

from ...analysis.evidence.host import GpuIdleEvidence, HostActivity, IdleGap
from ...analysis.time import patterns as pt
from ...analysis.time.idle_gaps import GRAPH, HOST, LAUNCH, OTHER
from .. import fixes
from ..context import Context
from ..cost_time import TimeSet, claimed_by, gap_time, union
from ..registry import GAP_THRESHOLDS, Fired, Hit, rule
from .dataloader import dataloader_stall
from .evidence import compiled
from .fusion import unfused_optimizer
from .launches import launch_bound, tiny_kernels_in_graphs
from .syncs import sync_point

_SHORT_GAPS = (
    "Most of it is short gaps between kernels: the host issues work just in time. Cut host overhead per kernel "
)


def _unclaimed_parts(ctx: Context, fired: Fired) -> dict[str, TimeSet]:
    """The idle time per cause, with the causes of the rules that fired left out, and the gaps
    inside a per-parameter optimizer step that unfused_optimizer names (its own)."""
    empty = TimeSet.of(np.empty(0), np.empty(0))
    launch = not fired[launch_bound.id]
    parts = {
        "short_gaps_us_per_step": gap_time(ctx, rest=(LAUNCH,)) if launch else empty,
        "host_gaps_us_per_step": gap_time(ctx, rest=(HOST,)) if launch else empty,
        "no_launch_us_per_step": gap_time(ctx, rest=(OTHER,)),
        "dataloader_us_per_step": empty if fired[dataloader_stall.id] else gap_time(ctx, dataloader=True),
        "sync_us_per_step": empty if fired[sync_point.id] else gap_time(ctx, sync_rows=set(ctx.gaps.sync_us_by_row)),
        "graph_gaps_us_per_step": empty if fired[tiny_kernels_in_graphs.id] else gap_time(ctx, rest=(GRAPH,)),
    }
    optimizer = claimed_by(fired, unfused_optimizer.id)
    return {k: t.minus(optimizer) for k, t in parts.items()}


def _largest_gaps(ctx: Context, fired: Fired) -> list[IdleGap]:
    """The longest gaps not claimed by launch_bound or tiny_kernels_in_graphs, with the host's activity."""
    gaps = ctx.gaps
    free = ~np.isin(gaps.cause, (LAUNCH, HOST)) if fired[launch_bound.id] else np.ones(len(gaps.start), bool)
    if fired[tiny_kernels_in_graphs.id]:
        free &= gaps.cause != GRAPH
    rows = np.flatnonzero(free & (gaps.rest_us > 0))
    big = rows[np.argsort(-gaps.rest_us[rows], kind="stable")[: ctx.th.gpu_idle_top_gaps]]
    return [
        IdleGap(
            start_us=float(gaps.start[k]),
            us=float(gaps.weight[k]),
            host_launched_during_gap=bool(gaps.cause[k] != OTHER),
            host_activity=msgspec.convert(
                pt.host_activity(ctx.tables, float(gaps.start[k]), float(gaps.end[k])), list[HostActivity]
            ),
        )
        for k in big
    ]


@rule(
    after=(sync_point, launch_bound, tiny_kernels_in_graphs, dataloader_stall, unfused_optimizer),
    title="GPU idle {share:share} of the step with no other finding to blame",
    fix={
        "short_gaps_in_graphs": _SHORT_GAPS + "(capture more of the step in the CUDA graphs it already replays; "
        "fewer, larger kernels via `torch.compile`).",
        "short_gaps_in_graphs_compiled": _SHORT_GAPS + "(capture more of the step in the CUDA graphs it already "
        "replays: graph breaks, syncs and CPU tensors split them, and `TORCH_LOGS=graph_breaks,cudagraphs` names "
        "them; give each kernel more work with a larger batch).",
        "short_gaps": _SHORT_GAPS + '(CUDA Graphs via `torch.compile(mode="reduce-overhead")`; '
        "fewer, larger kernels via `torch.compile`).",
        "short_gaps_compiled": _SHORT_GAPS + "(the run is compiled without CUDA Graphs: "
        '`torch.compile(..., mode="reduce-overhead")` replays its graphs with one launch each; fewer, larger '
        "kernels by removing the graph breaks, `TORCH_LOGS=graph_breaks`).",
        "graph_gaps": "Most of it is gaps between the kernels of CUDA graph replays: not host overhead, but the "
        "cost of many small kernels. Fuse them (`torch.compile`) and give each more work.",
        "graph_gaps_compiled": "Most of it is gaps between the kernels of CUDA graph replays: not host overhead, "
        "but the cost of many small kernels. The run is compiled already: fewer kernels come from fewer graph "
        'breaks (`TORCH_LOGS=graph_breaks`) and `mode="max-autotune"`; give each more work (a larger batch).',
        "host_work": "Look at what the host does in the largest gaps (evidence.largest_gaps) and take it off the "
        "critical path: move CPU work (logging, metrics, checkpointing, Python bookkeeping) out of the step or "
        "to a background thread, and keep the GPU queue ahead of the host (no syncs).",
    },
    note="short gaps: <= launch_gap_max_us between kernels; graph gaps: between the kernels of "
    "one CUDA graph replay; host gaps: longer, and the host launched "
    "work during them (the GPU waited for the host). The profiler slows the host, so host-caused idle "
    "in a trace is an upper bound.",
    thresholds=("gpu_idle_min_share", "gpu_idle_top_gaps", *GAP_THRESHOLDS),
)
def gpu_idle(ctx: Context, fired: Fired) -> list[Hit]:
    """GPU idle that no fired rule claims: the data-loading part when dataloader_stall fired, the
    sync part when sync_point did, the host-caused gaps when launch_bound did, the gaps inside
    graph replays when tiny_kernels_in_graphs did, the gaps inside the optimizer step when
    unfused_optimizer did."""
    times = _unclaimed_parts(ctx, fired)
    parts = {k: t.us / ctx.n for k, t in times.items()}
    idle = sum(parts.values())
    if idle < ctx.th.gpu_idle_min_share * ctx.step_us:
        return []
    evidence = GpuIdleEvidence(
        idle_us_per_step=float(ctx.gaps.weight.sum()) / ctx.n,
        unexplained_us_per_step=idle,
        short_gaps_us_per_step=parts["short_gaps_us_per_step"],
        host_gaps_us_per_step=parts["host_gaps_us_per_step"],
        no_launch_us_per_step=parts["no_launch_us_per_step"],
        dataloader_us_per_step=parts["dataloader_us_per_step"],
        sync_us_per_step=parts["sync_us_per_step"],
        graph_gaps_us_per_step=parts["graph_gaps_us_per_step"],
        largest_gaps=_largest_gaps(ctx, fired),
    )
    fix: tuple[str, ...] = ()
    done = "_compiled" if compiled(ctx) else ""
    if parts["short_gaps_us_per_step"] >= 0.5 * idle:
        la = ctx.report.launches
        uses_graphs = la is not None and la.graph_launches_per_step > 0
        fix += (("short_gaps_in_graphs" if uses_graphs else "short_gaps") + done,)
    if parts["graph_gaps_us_per_step"] >= 0.5 * idle:
        fix += ("graph_gaps" + done,)
    fix += ("host_work",)
    time = union(times.values())
    args = {"share": idle / ctx.step_us}
    change = fixes.idle_host_work(time)
    return [Hit(cost_us=idle, gain_us=idle, evidence=evidence, args=args, fix=fix, time=time, change=change)]
