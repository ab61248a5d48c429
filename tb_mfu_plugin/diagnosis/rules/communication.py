"""``exposed_communication``: collective kernels running while no compute kernel runs."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ...analysis.distributed.communication import comm_rows, p2p_mask
from ...analysis.evidence.distributed import ExposedCommunicationEvidence
from ...analysis.report import Distributed
from .. import fixes
from ..context import Context
from ..cost_time import rows_time
from ..registry import Hit, rule
from .evidence import top_kernels

# NCCL/RCCL kernel names carry the collective: ncclDevKernel_AllReduce_Sum_f32_RING_LL.
_COLLECTIVE = re.compile(
    r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll)", re.IGNORECASE
)


def _tp_like(ctx: Context) -> bool:
    """All-reduces launched during the forward pass are tensor parallelism's, not DDP's."""
    return any("_c10d_functional::all_reduce" in n or "Redistribute" in n for n in ctx.names)


def _guess(ctx: Context, by_kind: dict[str, float]) -> str:
    """The parallelism the kernel names point to, for traces whose collectives carry no group:
    pp, fsdp, tp or ddp (a key of the fix texts)."""
    main = max(by_kind, key=by_kind.__getitem__)
    if main in ("sendrecv", "send", "recv"):
        return "pp"
    if {"allgather", "reducescatter"} & set(by_kind):
        return "fsdp"
    if ctx.report.distributed is not None and _tp_like(ctx):
        return "tp"
    return "ddp"


def pipeline_p2p(ctx: Context) -> np.ndarray:
    """The view's send/recv kernels when the rank is a pipeline stage (``report.pipeline``), else none."""
    if ctx.report.pipeline is None:
        return np.zeros(len(ctx.view.gpu), bool)
    return p2p_mask(comm_rows(ctx.tables, ctx.view.gpu))


# The detected strategy (analysis.strategy) -> its fix text, in the order they are given.
_FIX_OF = {"FSDP": "fsdp", "DDP": "ddp", "DP": "dp", "TP": "tp", "PP": "pp", "EP": "ep"}


def _fix_keys(ctx: Context, by_kind: dict[str, float]) -> tuple[str, ...]:
    """Fix texts for every strategy the rank runs, the biggest exposure first, plus the fp32
    levers only where the collectives do travel in fp32."""
    comm = ctx.report.communication
    if comm is None or not comm.strategy:
        return (_guess(ctx, by_kind),)
    exposed: dict[str, float] = defaultdict(float)
    fp32: set[str] = set()
    for c in comm.collectives:
        if c.role is not None:
            exposed[c.role] += c.exposed_us_per_step
            if c.dtype == "Float" and c.kind in ("allgather", "allreduce", "reducescatter"):
                fp32.add(c.role)
    roles = sorted(comm.strategy, key=lambda r: -exposed.get(r, 0.0))
    keys: list[str] = []
    for r in roles:
        keys.append(_FIX_OF[r])
        if r in fp32 and r in ("FSDP", "DDP", "DP"):
            keys.append(f"{_FIX_OF[r]}_fp32")
    return tuple(keys)


@rule(
    title="Exposed communication: collectives run {exposed:time} per step with no compute "
    "alongside ({share:share} of the step)",
    fix={
        "fsdp": "Overlap the FSDP all-gathers with compute: prefetch the next blocks (FSDP2 "
        "`block.set_modules_to_forward_prefetch([...])` / `set_modules_to_backward_prefetch`, FSDP1 "
        "`forward_prefetch=True`, `backward_prefetch=BackwardPrefetch.BACKWARD_PRE`), keep the last blocks "
        "gathered (`reshard_after_forward=False`), or shard over fewer GPUs (HSDP) when the model fits.",
        "fsdp_fp32": "The FSDP collectives move fp32: gather and reduce in bf16 "
        "(`MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)`) to halve the bytes.",
        "ddp": "Let DDP overlap the gradient all-reduce with backward: tune `bucket_cap_mb`, use "
        "`gradient_as_bucket_view=True` and `static_graph=True`, and accumulate gradients under "
        "`model.no_sync()` to all-reduce less often.",
        "ddp_fp32": "The gradients are all-reduced in fp32: `register_comm_hook(None, bf16_compress_hook)` "
        "halves the bytes.",
        "dp": "A gradient all-reduce with no DDP annotation runs after backward: `DistributedDataParallel` "
        "overlaps it with backward in buckets (`bucket_cap_mb`), or all-reduce each bucket asynchronously "
        "as its gradients are ready.",
        "dp_fp32": "The gradients are all-reduced in fp32: reduce in bf16 to halve the bytes.",
        "ep": "Expert-parallel all-to-alls wait on the token exchange: overlap them with the shared experts' or "
        "the next micro-batch's compute, keep the expert group inside one NVLink domain, and lower the "
        "capacity factor or balance the router so no rank receives many more tokens.",
        "pp": "Point-to-point transfers between pipeline stages wait on the pipeline: use more micro-batches per "
        "step, an interleaved schedule (`torch.distributed.pipelining.ScheduleInterleaved1F1B`), balance the "
        "stages' work, and overlap the send/recv with compute.",
        "tp": "Tensor-parallel all-reduces sit on the critical path: keep TP inside one NVLink domain, shrink "
        "the TP degree and shard the rest with FSDP, add sequence parallelism, or overlap with async TP "
        "(`torch._inductor.config._micro_pipeline_tp = True` under `torch.compile`).",
    },
    note="a collective's kernel time includes waiting for the slowest rank: compare the ranks' "
    "reports (the rank with the least exposed communication is the one the others wait for); "
    "on a pipeline stage the send/recv time with no compute alongside is the pipeline bubble "
    "(pipeline_bubble), not counted here; "
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
    busy = ctx.per_step_union(kernels)
    exposed_all = (busy - ctx.per_step_union(kernels & ~ctx.comm_code[g.name])) / ctx.n
    # On a pipeline stage the send/recv with no compute alongside is the bubble (pipeline_bubble):
    # what remains here is the other collectives' exposed time, with no send/recv running either.
    p2p = pipeline_p2p(ctx) & kernels
    exposed = (busy - ctx.per_step_union(kernels & (~ctx.comm_code[g.name] | p2p))) / ctx.n
    if exposed < ctx.th.comm_exposed_min_share * ctx.step_us:
        return []
    by_kind: dict[str, float] = defaultdict(float)
    for r in np.flatnonzero(comm & ~p2p):
        m = _COLLECTIVE.search(ctx.names[g.name[r]])
        by_kind[m.group(1).lower() if m else "other"] += float(g.dur[r]) / ctx.n
    fix = _fix_keys(ctx, by_kind)
    comm_block = ctx.report.communication
    dist = ctx.report.distributed or Distributed()
    evidence = ExposedCommunicationEvidence(
        exposed_us_per_step=exposed,
        pipeline_bubble_us_per_step=exposed_all - exposed if ctx.report.pipeline is not None else None,
        communication_us_per_step=comm_us,
        overlapped_share=1.0 - exposed / comm_us if comm_us > 0 else None,
        collectives_us_per_step=dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        kernels=top_kernels(ctx, comm),
        rank=dist.rank,
        world_size=dist.world_size,
        strategy_guess=fix[0],
        strategy=comm_block.strategy if comm_block is not None else [],
    )
    args = {"exposed": exposed, "share": exposed / ctx.step_us}
    time = rows_time(ctx, comm & ~p2p).minus(rows_time(ctx, kernels & (~ctx.comm_code[g.name] | p2p)))
    change = fixes.scaled(comm & ~p2p, 0.0, "the collectives overlapped with compute (no kernel waits for one)")
    return [Hit(cost_us=exposed, gain_us=exposed, evidence=evidence, args=args, fix=fix, time=time, change=change)]
