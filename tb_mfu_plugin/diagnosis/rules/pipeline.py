"""``pipeline_bubble``: a pipeline stage waiting on its neighbours with nothing to compute."""

from __future__ import annotations

from ...analysis.distributed.blocks import Pipeline
from ...analysis.evidence.distributed import PipelineBubbleEvidence
from ...analysis.fmt import pct
from ..context import Context
from ..cost_time import rows_time
from ..registry import Hit, rule
from .communication import pipeline_p2p


def _analytic(p: int, m: int, v: int) -> float:
    """The bubble share of a synchronous schedule: (p-1)/(v·m+p-1)."""
    return (p - 1) / (v * m + p - 1)


def _fixes(pp: Pipeline, share: float, analytic: float | None) -> tuple[str, ...]:
    """The levers the run does not pull yet: more micro-batches, a schedule with a smaller bubble,
    balanced stages when the measured bubble is well above the analytic one."""
    fix = []
    p, m = pp.pipeline_size or 0, pp.microbatches or 0
    if not p or not m:
        fix.append("microbatches_unknown")
    elif m < 4 * p:
        fix.append("microbatches")
    if pp.schedule in (None, "GPipe", "1F1B"):
        fix.append("interleave")
    elif pp.schedule == "interleaved 1F1B":
        fix.append("zero_bubble")
    if analytic is None or share > analytic + 0.05:
        fix.append("balance")
    return tuple(fix) or ("balance",)


@rule(
    title="Pipeline bubble: stage {stage} waits {bubble:time} per step on its neighbours ({share:share} of the step; "
    "{analytic_text})",
    fix={
        "microbatches": "Split the batch into more micro-batches (`n_microbatches`; now {m}): the bubble of a "
        "{p}-stage pipeline is (p−1)/(m+p−1), {next_share:share} at m={m2}.",
        "microbatches_unknown": "Split the batch into more micro-batches (`n_microbatches`): the bubble of a "
        "p-stage pipeline with m micro-batches is (p−1)/(m+p−1) of the step, so it shrinks as m grows "
        "(the trace does not tell {unknown}).",
        "interleave": "Run several stages per rank with an interleaved schedule "
        "(`torch.distributed.pipelining.ScheduleInterleaved1F1B`, or `ScheduleInterleavedZeroBubble` / "
        "`ScheduleZBVZeroBubble`), which divides the bubble by the stages per rank.",
        "zero_bubble": "Split each backward into input and weight gradients and fill the bubble with the "
        "latter: `ScheduleInterleavedZeroBubble` or `ScheduleZBVZeroBubble`.",
        "balance": "Balance the stages: the measured bubble is above the schedule's own (p−1)/(v·m+p−1), so "
        "the slowest stage or the send/recv transfers hold the others; move layers off the slowest stage "
        "(embedding and loss head weigh on the first and last) and check the send/recv bandwidth.",
    },
    note="bubble: send/recv kernels with no compute kernel alongside; gain: the part of it that doubling "
    "the micro-batches removes from the analytic bubble, plus any excess over the analytic bubble",
    thresholds=("bubble_min_share",),
)
def pipeline_bubble(ctx: Context) -> list[Hit]:
    pp = ctx.report.pipeline
    if pp is None or ctx.step_us <= 0 or pp.bubble_share < ctx.th.bubble_min_share:
        return []
    p, m, v = pp.pipeline_size, pp.microbatches, max(1, len(pp.stages))
    analytic = pp.analytic_bubble_share
    bubble = pp.bubble_us_per_step
    if p and m and analytic is not None:
        excess = max(0.0, pp.bubble_share - analytic) * ctx.step_us
        shrink = (analytic - _analytic(p, 2 * m, v)) * ctx.step_us
        gain = min(bubble, excess + shrink)
        next_share = _analytic(p, 2 * m, v)
    else:
        gain, next_share = 0.5 * bubble, 0.0
    args = {
        "stage": pp.stage if pp.stage is not None else "?",
        "bubble": bubble,
        "share": pp.bubble_share,
        "analytic_text": f"the schedule's own bubble is {pct(analytic)}"
        if analytic is not None
        else "analytic bubble unknown",
        "m": m or 0,
        "m2": 2 * (m or 0),
        "p": p or 0,
        "next_share": next_share,
        "unknown": " and ".join(w for w, known in (("the stages", p), ("the micro-batches", m)) if not known)
        or "nothing",
    }
    evidence = PipelineBubbleEvidence(
        stage=pp.stage,
        stages=pp.stages,
        pipeline_size=p,
        microbatches=m,
        schedule=pp.schedule,
        bubble_us_per_step=bubble,
        bubble_share=pp.bubble_share,
        analytic_bubble_share=analytic,
        p2p_us_per_step=pp.p2p_us_per_step,
    )
    g = ctx.view.gpu
    waiting = rows_time(ctx, pipeline_p2p(ctx)).minus(rows_time(ctx, ctx.is_kernel & ~ctx.comm_code[g.name]))
    fix = _fixes(pp, pp.bubble_share, analytic)
    return [Hit(cost_us=bubble, gain_us=gain, evidence=evidence, args=args, fix=fix, time=waiting)]
