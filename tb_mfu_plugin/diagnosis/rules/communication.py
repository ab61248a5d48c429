"""``exposed_communication``: collective kernels running while no compute kernel runs."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ...analysis.report import Distributed
from ..context import Context
from ..registry import Hit, rule
from .evidence import top_kernels

# NCCL/RCCL kernel names carry the collective: ncclDevKernel_AllReduce_Sum_f32_RING_LL.
_COLLECTIVE = re.compile(
    r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll)", re.IGNORECASE
)


def _tp_like(ctx: Context) -> bool:
    """All-reduces launched during the forward pass are tensor parallelism's, not DDP's."""
    return any("_c10d_functional::all_reduce" in n or "Redistribute" in n for n in ctx.names)


def _strategy(ctx: Context, by_kind: dict[str, float]) -> str:
    """The parallelism the collectives point to: pp, fsdp, tp or ddp (a key of the fix texts)."""
    main = max(by_kind, key=by_kind.__getitem__)
    if main in ("sendrecv", "send", "recv"):
        return "pp"
    if {"allgather", "reducescatter"} & set(by_kind):
        return "fsdp"
    if ctx.report.distributed is not None and _tp_like(ctx):
        return "tp"
    return "ddp"


@rule(
    title="Exposed communication: collectives run {ms:.1f} ms per step with no compute "
    "alongside ({share:.0%} of the step)",
    fix={
        "fsdp": "Overlap the FSDP all-gathers with compute: prefetch the next blocks (FSDP2 "
        "`block.set_modules_to_forward_prefetch([...])` / `set_modules_to_backward_prefetch`, FSDP1 "
        "`forward_prefetch=True`, `backward_prefetch=BackwardPrefetch.BACKWARD_PRE`), gather in bf16 "
        "(`MixedPrecisionPolicy(param_dtype=torch.bfloat16)`), keep the last blocks gathered "
        "(`reshard_after_forward=False`), or shard over fewer GPUs (HSDP) when the model fits.",
        "ddp": "Let DDP overlap the gradient all-reduce with backward: tune `bucket_cap_mb`, use "
        "`gradient_as_bucket_view=True` and `static_graph=True`, all-reduce in bf16 "
        "(`register_comm_hook(None, bf16_compress_hook)`), and accumulate gradients under `model.no_sync()` "
        "to all-reduce less often.",
        "pp": "Point-to-point transfers between pipeline stages wait on the pipeline: use more micro-batches per "
        "step, an interleaved schedule (`torch.distributed.pipelining.ScheduleInterleaved1F1B`), balance the "
        "stages' work, and overlap the send/recv with compute.",
        "tp": "Tensor-parallel all-reduces sit on the critical path: keep TP inside one NVLink domain, shrink "
        "the TP degree and shard the rest with FSDP, add sequence parallelism, or overlap with async TP "
        "(`torch._inductor.config._micro_pipeline_tp = True` under `torch.compile`).",
    },
    note="a collective's kernel time includes waiting for the slowest rank: compare the ranks' "
    "reports (the rank with the least exposed communication is the one the others wait for); "
    "gain: all the exposed time, an upper bound reached only with perfect overlap and no straggler",
    thresholds=("comm_exposed_min_share",),
)
def exposed_communication(ctx: Context) -> list[Hit]:
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
    for r in np.flatnonzero(comm):
        m = _COLLECTIVE.search(ctx.names[g.name[r]])
        by_kind[m.group(1).lower() if m else "other"] += float(g.dur[r]) / ctx.n
    strategy = _strategy(ctx, by_kind)
    dist = ctx.report.distributed or Distributed()
    evidence = {
        "exposed_us_per_step": exposed,
        "communication_us_per_step": comm_us,
        "overlapped_share": 1.0 - exposed / comm_us if comm_us > 0 else None,
        "collectives_us_per_step": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        "kernels": top_kernels(ctx, comm),
        "rank": dist.rank,
        "world_size": dist.world_size,
        "strategy_guess": strategy,
    }
    args = {"ms": exposed / 1000, "share": exposed / ctx.step_us}
    return [Hit(cost_us=exposed, gain_us=exposed, evidence=evidence, args=args, fix=(strategy,))]
