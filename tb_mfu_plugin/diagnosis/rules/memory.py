"""The memory rules, over the report's memory block (``analysis.memory``; traces recorded with
``profile_memory=True``): a leak, a peak near the device's size, a fragmented allocator, headroom
left unused by a launch-bound or SM-starved run, and activation checkpointing's trade.

They name risks and levers rather than time: their gain is 0 and their time empty, so no step time
is counted twice (the launch-bound idle a larger batch would amortise is ``launch_bound``'s gain),
and their severity is the risk's (``Hit.risk``). Without memory events none of them fires.
"""

from __future__ import annotations

import math

from ...analysis.evidence.memory import (
    ActivationCheckpointingEvidence,
    AllocatorFragmentationEvidence,
    MemoryHeadroomEvidence,
    MemoryLeakEvidence,
    MemoryOpRow,
    NearOomEvidence,
)
from ...analysis.fmt import factor as fmt_factor
from ...analysis.fmt import nbytes
from ...analysis.memory.types import Memory, MemoryOp
from ...analysis.report import Benefit, Severity
from .. import fixes
from ..context import Context
from ..cost_time import EMPTY, rows_time
from ..registry import Fired, Hit, rule
from .launches import launch_bound
from .sm_efficiency import low_sm_efficiency


def _memory(ctx: Context) -> Memory | None:
    m = ctx.report.memory
    return m if m is not None and m.unavailable is None else None


def _ops(ops: list[MemoryOp], n: int = 3) -> list[MemoryOpRow]:
    return [MemoryOpRow(op=o.name, root_op=o.root_op, bytes=o.bytes, count=o.count) for o in ops[:n]]


def _risk(fill: float | None, th: float) -> Severity:
    return "high" if fill is not None and fill <= th else "medium"


@rule(
    title={
        "fills": "Memory leak: allocated memory at step start grows {growth:bytes} a step; the device fills "
        "in about {steps:,.0f} more steps",
        "unknown": "Memory leak: allocated memory at step start grows {growth:bytes} a step",
    },
    fix={
        "": "Something keeps tensors from one step to the next: a list that collects outputs or losses "
        "(append `.detach()`ed copies, or `.item()` values), a loss summed without `.item()` (it keeps each "
        "step's graph), hooks or caches holding activations.",
        "op": "The memory kept is allocated by `{op}` (under `{root}`), {kept:bytes} a step.",
        "find": "Find the holder with `torch.cuda.memory._record_memory_history()` and "
        "`torch.cuda.memory._dump_snapshot()` (https://pytorch.org/memory_viz).",
    },
    note="growth: the median over consecutive analysed steps of the change in allocated memory at the "
    "step's start; it must be positive in every one. Gain: none in time; the risk is running out of memory",
    thresholds=("leak_min_bytes_per_step", "leak_min_steps", "leak_high_risk_steps"),
)
def memory_leak(ctx: Context) -> list[Hit]:
    """Allocated memory at step start grows step over step."""
    m, th = _memory(ctx), ctx.th
    if m is None or m.growth_per_step_bytes is None:
        return []
    known = [s for s in m.steps if s.allocated_start_bytes is not None]
    growths = [s.growth_bytes for s in m.steps if s.growth_bytes is not None]
    if len(known) < th.leak_min_steps or not growths or min(growths) <= 0:
        return []
    growth = m.growth_per_step_bytes
    if growth < th.leak_min_bytes_per_step:
        return []
    steps = None
    if m.device_total_bytes is not None and m.peak_allocated_bytes is not None:
        steps = max(0.0, (m.device_total_bytes - m.peak_allocated_bytes) / growth)
    evidence = MemoryLeakEvidence(
        growth_per_step_bytes=growth,
        allocated_start_bytes=[s.allocated_start_bytes for s in known if s.allocated_start_bytes is not None],
        steps=[s.step for s in known],
        peak_allocated_bytes=m.peak_allocated_bytes,
        device_total_bytes=m.device_total_bytes,
        steps_until_full=steps,
        kept_ops=_ops(m.kept_ops),
    )
    kept = m.kept_ops[0] if m.kept_ops else None
    args = {"growth": growth, "steps": steps or 0, "op": kept.name if kept else "", "kept": kept.bytes if kept else 0}
    args["root"] = kept.root_op if kept and kept.root_op else "its caller"
    fix = ("", "op", "find") if kept else ("", "find")
    benefit = Benefit(
        value=steps,
        unit="steps_until_oom",
        text=f"out of memory in about {steps:,.0f} more steps" if steps is not None else "out of memory in time",
    )
    return [
        Hit(
            cost_us=0.0,
            gain_us=0.0,
            evidence=evidence,
            args=args,
            title="fills" if steps is not None else "unknown",
            fix=fix,
            time=EMPTY,
            risk=_risk(steps, th.leak_high_risk_steps),
            benefit=benefit,
        )
    ]


@rule(
    title={
        "peak": "Near out of memory: the peak takes {share:share} of the device ({peak:bytes} of {total:bytes})",
        "oom": "Out of memory: the allocator failed {ooms:.0f} request(s) in the analysed steps",
    },
    fix={
        "": "Lower the peak before a larger input tips it over:",
        "ckpt": "checkpoint activations (`torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)` on "
        "the transformer blocks),",
        "accumulate": "run a smaller micro-batch with gradient accumulation (the same samples a step, fewer at once),",
        "shard": "shard parameters, gradients and optimizer state across GPUs (FSDP2 `fully_shard`),",
        "frag": "and let the allocator grow segments instead of caching odd-sized blocks "
        "(`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, if not set already).",
        "end": "and keep optimizer state in bf16 or 8 bits where the model tolerates it.",
    },
    note="peak: the highest allocated and reserved memory of the analysed steps against the device's "
    "memory; the peak happens in {phase}, in `{op}`. Gain: none in time; the risk is an OOM when an input grows",
    thresholds=("near_oom_share",),
)
def near_oom(ctx: Context) -> list[Hit]:
    """A peak above about 90 % of the device, or the allocator's own out-of-memory events."""
    m, th = _memory(ctx), ctx.th
    if m is None:
        return []
    share = max(m.peak_share or 0.0, m.peak_reserved_share or 0.0)
    if share < th.near_oom_share and not m.oom_events:
        return []
    evidence = NearOomEvidence(
        peak_allocated_bytes=m.peak_allocated_bytes,
        peak_reserved_bytes=m.peak_reserved_bytes,
        device_total_bytes=m.device_total_bytes,
        peak_share=m.peak_share,
        peak_reserved_share=m.peak_reserved_share,
        oom_events=m.oom_events,
        peak_phase=m.peak_phase,
        peak_op=m.peak_op,
        top_ops=_ops(m.top_ops),
    )
    frag = (m.reserved_minus_allocated_bytes or 0) >= 0.1 * (m.peak_reserved_bytes or math.inf)
    fix = ("", *(("ckpt",) if m.recompute is None else ()), "accumulate", "shard", "frag" if frag else "end")
    peak = max(m.peak_allocated_bytes or 0, m.peak_reserved_bytes or 0)
    args = {
        "share": share,
        "peak": peak,
        "total": m.device_total_bytes,
        "ooms": m.oom_events,
        "phase": m.peak_phase or "an unknown phase",
        "op": m.peak_op or "an unknown op",
    }
    title = "oom" if m.oom_events and share < th.near_oom_share else "peak"
    left = max(0, m.device_total_bytes - peak) if m.device_total_bytes else None
    benefit = Benefit(
        value=left,
        unit="bytes",
        text=f"{nbytes(left)} left above the peak before an out-of-memory error"
        if left is not None
        else "the allocator already failed requests",
    )
    return [
        Hit(
            cost_us=0.0,
            gain_us=0.0,
            evidence=evidence,
            args=args,
            title=title,
            fix=fix,
            time=EMPTY,
            risk="high",
            benefit=benefit,
        )
    ]


@rule(
    title="Allocator fragmentation: at the peak the allocator holds {cached:bytes} more than tensors use "
    "({share:share} of what it reserved)",
    fix=(
        "Let the caching allocator grow its segments instead of keeping many odd-sized blocks: "
        "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (if not set already). Keep shapes steady (pad "
        "variable-length batches to a few bucket sizes), and do not call `torch.cuda.empty_cache()` inside "
        "the loop."
    ),
    note="at the step of the highest allocation: reserved - allocated, over reserved. Gain: none in time; "
    "the cost is memory the next allocation cannot use",
    thresholds=("fragmentation_min_share", "fragmentation_min_bytes", "near_oom_share"),
)
def allocator_fragmentation(ctx: Context) -> list[Hit]:
    """Reserved far above allocated at the peak."""
    m, th = _memory(ctx), ctx.th
    if m is None or m.reserved_minus_allocated_bytes is None or m.peak_allocated_bytes is None:
        return []
    cached = m.reserved_minus_allocated_bytes
    reserved = cached + m.peak_allocated_bytes
    share = cached / reserved if reserved > 0 else 0.0
    if share < th.fragmentation_min_share or cached < th.fragmentation_min_bytes:
        return []
    evidence = AllocatorFragmentationEvidence(
        reserved_minus_allocated_bytes=cached,
        reserved_at_peak_bytes=reserved,
        peak_allocated_bytes=m.peak_allocated_bytes,
        share_of_reserved=share,
        peak_reserved_share=m.peak_reserved_share,
    )
    tight = (m.peak_reserved_share or 0.0) >= th.near_oom_share / 2
    risk: Severity = "medium" if tight else "low"
    args = {"cached": cached, "share": share}
    benefit = Benefit(value=cached, unit="bytes", text=f"up to {nbytes(cached)} of reserved memory made usable")
    return [Hit(cost_us=0.0, gain_us=0.0, evidence=evidence, args=args, time=EMPTY, risk=risk, benefit=benefit)]


def _suggested(factor: float, cap: float) -> int:
    """The largest power of two within the headroom and the cap."""
    return int(2 ** math.floor(math.log2(min(factor, cap))))


@rule(
    after=(launch_bound, low_sm_efficiency),
    title="Memory headroom: the batch could grow about {factor:factor} within 90 % of the device "
    "({peak_share:share} used at the peak) while the run is {why}",
    fix=(
        "Give each step more work: a batch {k}× larger (or a sequence {k}× longer) fits. The kernels per step "
        "stay about the same while each processes {k}× the tokens: kernels per token fall to about 1/{k}, "
        "and so does the {what} per token. Scale the learning rate (or use gradient accumulation to keep the "
        "optimizer's batch) as the recipe requires."
    ),
    note="headroom: (0.9 × device memory - allocated at step start) / (peak - allocated at step start), "
    "assuming the part of the peak above the step's start scales with the batch and the rest does not "
    "(memory.headroom.method). Gain: counted by {rule}, whose time a larger batch amortises",
    thresholds=("headroom_min_factor", "headroom_max_suggested"),
)
def memory_headroom(ctx: Context, fired: Fired) -> list[Hit]:
    """A large headroom while the run is launch-bound or has low SM efficiency."""
    m, th = _memory(ctx), ctx.th
    h = m.headroom if m is not None else None
    if m is None or h is None or h.batch_factor_at_90 is None or h.batch_factor_at_90 < th.headroom_min_factor:
        return []
    base = fired[launch_bound.id] or fired[low_sm_efficiency.id]
    if not base:
        return []
    f = base[0]
    k = _suggested(h.batch_factor_at_90, th.headroom_max_suggested)
    launch = f.id == launch_bound.id
    args = {
        "factor": h.batch_factor_at_90,
        "peak_share": m.peak_share or 0.0,
        "why": "launch-bound" if launch else "starving the SMs (low SM efficiency)",
        "k": k,
        "what": "launch overhead" if launch else "idle-SM time",
        "rule": f.id,
    }
    # samples per second at k x the batch: the cost its base finding names stays per step, the rest of
    # the step grows with the batch (a model: the GPU work scales, the host's launches do not)
    fixed = min(f.est_gain_us_per_step, ctx.step_us)
    throughput = k * ctx.step_us / (fixed + (ctx.step_us - fixed) * k) if ctx.step_us > 0 else None
    evidence = MemoryHeadroomEvidence(
        batch_factor=h.batch_factor,
        batch_factor_at_90=h.batch_factor_at_90,
        fixed_bytes=h.fixed_bytes,
        batch_scaled_bytes=h.batch_scaled_bytes,
        device_total_bytes=m.device_total_bytes,
        peak_share=m.peak_share,
        suggested_batch_factor=k,
        because=f.id,
        its_gain_us_per_step=f.est_gain_us_per_step,
        kernels_per_step=ctx.report.launches.kernels_per_step if ctx.report.launches else None,
        # its time for the samples of one step today, once they run in 1/k of a step (same kernels per step)
        its_us_for_these_samples_after=f.est_gain_us_per_step / k,
        throughput_factor_at_suggested=throughput,
    )
    benefit = Benefit(
        value=throughput,
        unit="throughput_factor",
        text=f"about {fmt_factor(throughput)} the samples per second at {k}x the batch (the {args['what']} stays "
        "per step, the rest grows with the batch)"
        if throughput is not None
        else f"more samples per step at {k}x the batch",
    )
    return [Hit(cost_us=0.0, gain_us=0.0, evidence=evidence, args=args, time=EMPTY, risk=f.severity, benefit=benefit)]


@rule(
    title={
        "fits": "Activation checkpointing re-runs forward ops for {us:time} a step ({share:share}) to save at "
        "most {saved:bytes}; without it the peak would stay under {without:share} of the device",
        "needed": "Activation checkpointing re-runs forward ops for {us:time} a step ({share:share}) to save at "
        "most {saved:bytes}: without it the peak could reach {without:share} of the device",
        "unknown": "Activation checkpointing re-runs forward ops for {us:time} a step ({share:share})",
    },
    fix={
        "fits": "The memory is there: turn checkpointing off, or checkpoint fewer blocks, and get the recompute "
        "time back.",
        "needed": "Keep it, but make it selective: save the matmul outputs and recompute only cheap ops "
        "(`torch.utils.checkpoint.checkpoint(..., context_fn=...)` with "
        "`create_selective_checkpoint_contexts`), or checkpoint only the blocks the memory needs.",
        "unknown": "Record with profile_memory=True to see whether the memory it saves is needed.",
    },
    note="recompute: from the start of each autograd node that re-runs forward ops to the end of the last "
    "of them (host), or the kernels they launch (GPU), the longer; saved: what the re-run allocates and "
    "still holds at its end, an upper bound (memory.recompute). Gain: the step re-timed without the recompute "
    "regions' host ops, launches and kernels, where the memory fits; none where it is needed (its benefit is "
    "the memory)",
    thresholds=("checkpoint_min_share", "near_oom_share"),
)
def activation_checkpointing(ctx: Context) -> list[Hit]:
    """Checkpointing's trade: the recompute's time beside the memory it saves."""
    m, th = ctx.report.memory, ctx.th
    r = m.recompute if m is not None else None
    if r is None or ctx.step_us <= 0 or r.us_per_step < th.checkpoint_min_share * ctx.step_us:
        return []
    assert m is not None
    share = r.us_per_step / ctx.step_us
    without = None
    if r.saved_bytes is not None and m.peak_allocated_bytes is not None and m.device_total_bytes:
        without = (m.peak_allocated_bytes + r.saved_bytes) / m.device_total_bytes
    flops = ctx.report.flops
    evidence = ActivationCheckpointingEvidence(
        recompute_us_per_step=r.us_per_step,
        recompute_host_us_per_step=r.host_us_per_step,
        recompute_gpu_us_per_step=r.gpu_us_per_step,
        recompute_regions_per_step=r.regions_per_step,
        recompute_flops_per_step=flops.checkpoint_recompute_flops_per_step if flops is not None else None,
        saved_bytes_at_most=r.saved_bytes,
        peak_allocated_bytes=m.peak_allocated_bytes,
        peak_without_share_at_most=without,
    )
    which = "unknown" if without is None else "fits" if without < th.near_oom_share else "needed"
    args = {"us": r.us_per_step, "share": share, "saved": r.saved_bytes or 0, "without": without or 0.0}
    if which == "needed":  # the memory it saves is needed: what it brings is that memory, not time
        saved = r.saved_bytes
        benefit = Benefit(value=saved, unit="bytes", text=f"up to {nbytes(saved)} of activations not held")
        return [
            Hit(
                cost_us=r.us_per_step,
                gain_us=0.0,
                evidence=evidence,
                args=args,
                title=which,
                fix=(which,),
                time=EMPTY,
                risk="low",
                benefit=benefit,
            )
        ]
    # turned off, the recompute's host ops, launches and kernels go: the engine re-times the step with that
    change, rows = fixes.recompute_removed(ctx)
    time = rows_time(ctx, rows)
    return [
        Hit(
            cost_us=r.us_per_step,
            gain_us=r.us_per_step,
            evidence=evidence,
            args=args,
            title=which,
            fix=(which,),
            time=time,
            change=change,
        )
    ]
