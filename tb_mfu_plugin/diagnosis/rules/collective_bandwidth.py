"""``low_bus_bandwidth``: collectives moving data far below what the link carries.

It fires only on bandwidth measured from the last member's arrival (``Collective.bandwidth_basis``
"last arrival"), which needs the other members' traces: ``diagnosis.run_rules`` re-runs it on
every rank of a run once the ranks' clocks are aligned (``reporting.run``). On one trace alone a collective's kernel
time includes waiting for the slowest rank, and low bandwidth would only restate that wait
(``exposed_communication`` and the ranks view name it). On a pipeline stage the send/recv
collectives are left out: their time is the stage's bubble, and ``pipeline_bubble`` names slow
transfers among its causes (one cause, one finding).
"""

from __future__ import annotations

from typing import Any

from ...analysis.distributed import collectives as co
from ...analysis.distributed.blocks import Collective
from ...analysis.evidence.distributed import LowBusBandwidthEvidence
from ...analysis.fmt import nbytes
from ..context import ReportFacts
from ..registry import Hit, rule


def _causes(c: Collective, small: float) -> tuple[tuple[str, ...], list[str]]:
    """The fix texts that apply (never one the run already follows) and the causes named."""
    fix: list[str] = []
    causes = []
    mean = c.mean_message_bytes or 0.0
    if mean < small:
        causes.append(f"small messages ({nbytes(mean)} on average; latency dominates below ~{nbytes(small)})")
        fix.append({"DDP": "ddp_small", "FSDP": "fsdp_small", "TP": "tp_small"}.get(c.role or "", "small"))
    else:
        causes.append("large messages that still move slowly: the algorithm, protocol or channels NCCL chose")
        fix.append("large")
    if c.link and "InfiniBand" in c.link:
        causes.append("a group larger than one NVLink domain, taken to cross nodes")
        fix.append("network")
    if c.dtype == "Float" and c.role in ("DDP", "DP", "FSDP") and c.kind in ("allreduce", "reducescatter"):
        fix.append("fp32_grads")
    if c.kernel_protocol is not None and "LL" in c.kernel_protocol and mean >= small:
        causes.append(f"the kernels ran {c.kernel_protocol}, a protocol for small messages")
    return tuple(fix), causes


@rule(
    title="Low bus bandwidth: {kind} on {group} reaches {busbw:bandwidth}, {share:share} of {link}'s {peak:bandwidth}",
    fix={
        "ddp_small": "Send fewer, larger gradient buckets: raise `DistributedDataParallel(bucket_cap_mb=...)` "
        "(25 by default; these average {msg:bytes}).",
        "fsdp_small": "Gather fewer, larger units: `fully_shard` groups of blocks instead of each layer, or "
        "keep small modules unsharded (these calls average {msg:bytes}).",
        "tp_small": "Tensor-parallel messages are one activation each ({msg:bytes} here): a larger micro-batch "
        "or sequence length per call, or fewer TP ranks (the rest as data parallel), sends more per call.",
        "small": "Coalesce the small collectives into fewer calls (bucketing, `torch.distributed` coalescing "
        "managers); these average {msg:bytes}.",
        "large": "Messages are large enough ({msg:bytes}), so check NCCL's choice: run nccl-tests "
        "(`all_reduce_perf -b 1M -e 1G`) on the same GPUs for the busbw the link reaches, compare "
        "`NCCL_ALGO` (Ring/Tree/NVLS) and `NCCL_PROTO` (Simple for large messages), more channels "
        "(`NCCL_MIN_NCHANNELS`), and NVLink SHARP (`NCCL_NVLS_ENABLE=1`) where it is off; `NCCL_DEBUG=INFO` "
        "prints what NCCL picked.",
        "network": "The group spans nodes: keep the bandwidth-hungry dimension (TP, then FSDP) inside a node "
        "and put data parallelism across nodes (HSDP: `fully_shard(mesh=...)` on a 2-D mesh).",
        "fp32_grads": "The gradients travel in fp32: bf16 halves the bytes (DDP "
        "`register_comm_hook(None, bf16_compress_hook)`, FSDP2 `MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)`).",
    },
    note="busbw = bytes / time from the last member's start to the end × the nccl-tests factor of the kind; "
    "gain: the exposed time above what {target:share} of the peak would take",
    thresholds=("busbw_low_share", "busbw_min_exposed_share", "busbw_target_share", "busbw_small_message_bytes"),
)
def low_bus_bandwidth(ctx: ReportFacts) -> list[Hit]:
    """Collectives whose bus bandwidth, free of waiting, is far below the link's peak and whose
    exposed time matters. One finding per (kind, group)."""
    comm = ctx.report.communication
    th = ctx.th
    if comm is None or ctx.step_us <= 0:
        return []
    hits = []
    pipeline = ctx.report.pipeline is not None
    for c in comm.collectives:
        if c.bandwidth_basis != "last arrival" or c.busbw_gbps is None or not c.link_gbps:
            continue
        if pipeline and c.kind in co.P2P:
            continue  # a stage's send/recv time is its bubble: pipeline_bubble names slow transfers
        share = c.busbw_gbps / c.link_gbps
        if share >= th.busbw_low_share or c.exposed_us_per_step < th.busbw_min_exposed_share * ctx.step_us:
            continue
        transfer = c.transfer_us_per_step or 0.0
        target = th.busbw_target_share * c.link_gbps
        gain = min(c.exposed_us_per_step, transfer * (1.0 - c.busbw_gbps / target)) if target > c.busbw_gbps else 0.0
        fix, causes = _causes(c, th.busbw_small_message_bytes)
        args: dict[str, Any] = {
            "kind": c.kind,
            "group": c.group or "?",
            "busbw": c.busbw_gbps,
            "share": share,
            "link": c.link,
            "peak": c.link_gbps,
            "msg": c.mean_message_bytes or 0.0,
            "target": th.busbw_target_share,
        }
        evidence = LowBusBandwidthEvidence(
            kind=c.kind,
            group=c.group,
            group_size=c.group_size,
            dtype=c.dtype,
            role=c.role,
            busbw_gbps=c.busbw_gbps,
            algbw_gbps=c.algbw_gbps,
            link=c.link,
            link_gbps=c.link_gbps,
            link_peak_share=share,
            mean_message_bytes=c.mean_message_bytes,
            count_per_step=c.count_per_step,
            transfer_us_per_step=transfer,
            exposed_us_per_step=c.exposed_us_per_step,
            kernel_protocol=c.kernel_protocol,
            causes=causes,
        )
        hits.append(
            Hit(
                cost_us=c.exposed_us_per_step,
                gain_us=max(0.0, gain),
                evidence=evidence,
                args=args,
                fix=fix,
                subject=f"{c.kind} {c.group or '?'} {c.dtype or ''}".strip(),
            )
        )
    return hits
