"""The job's one MFU, where the ranks of a distributed run read several.

The ranks of one synchronous job share one step: every collective ends on every rank together, so
their steps without the profiler are one. Each rank's own estimate of that step is made on its
own trace, and a rank that waited in a collective for a slower one keeps the slower rank's
lateness as it was under the profiler, which the estimate does not take out: the waiting ranks read
long steps and low MFUs (``ddp_4gpu``: three ranks at 14.5-14.7 %, one at 22.5 %, the job 28.4 %
without the profiler). The rank that waited least keeps least of it, so the job's step is the
shortest of the ranks' estimates.

Re-timing the ranks together, each collective starting when its last member arrives without the
profiler, gives about the same job MFU: on the seven multi-GPU samples within −4 to +7 % of the
shortest estimate's (``validation/joint_ranks.py`` re-times them; docs/mfu.md, section 6, has the
table). The shortest estimate is the figure the faces show: it needs no rank's graph beyond its own.
"""

from __future__ import annotations

from ..device.mfu import mfu_for
from ..fmt import pct, us
from ..interval import Interval
from ..report import JobMfu, RankRow, WorkerReport

# How much longer than the job's a rank's own step without the profiler is before its page says that
# its findings' gains are of its own step, not the job's: past the 5 % its estimate is held to.
WAITED_STEP_RATIO = 1.05
# Ranks whose FLOPs per step differ by more than this (highest / lowest) compute different work: a
# rank's own MFU then differs from the job's over the same step.
FLOPS_DIFFER = 1.01
# The spread of the ranks' headline MFUs (highest / lowest) above which the ranks card says why they
# differ: the ranks of one synchronous job run one step, so their MFUs differ only by their estimates.
MFU_SPREAD_NOTE = 1.05


def _estimated(w: WorkerReport) -> bool:
    """The rank's headline MFU is a figure over its step without the profiler, with what the job's
    needs besides: its FLOPs per step and its peak."""
    s = w.summary
    return (
        s is not None
        and s.mfu is not None
        and s.mfu_status is not None
        and s.mfu_status.state == "known"
        and s.mfu_status.basis == "without_profiler"
        and s.step_time_unprofiled_us is not None
        and s.step_time_unprofiled_us > 0
        and bool(s.flops_per_step)
        and w.device is not None
        and bool(w.device.peak_flops)
    )


def job_mfu(ranks: list[WorkerReport]) -> JobMfu | None:
    """The job's MFU over the shortest of the ranks' steps without the profiler: the ranks' FLOPs per
    step together over that step and their peaks together. None unless every rank has an estimate
    (unknown stays unknown: a rank without one may be the one the others wait for), or where the
    figure would pass 100 %."""
    if len(ranks) < 2 or not all(_estimated(w) for w in ranks):
        return None
    best = min(ranks, key=_step)
    step = _step(best)
    each = [w.summary.flops_per_step or 0.0 for w in ranks if w.summary is not None]
    flops = sum(each)
    peak = sum(w.device.peak_flops or 0.0 for w in ranks if w.device is not None)
    mfu = mfu_for(flops, step, peak)
    if mfu is None or not 0.0 < mfu <= 1.0:
        return None
    assert best.summary is not None
    steps = best.summary.step_time_unprofiled_range_us
    low = mfu_for(flops, steps.high, peak) if steps is not None else None
    high = mfu_for(flops, steps.low, peak) if steps is not None else None
    return JobMfu(
        mfu=mfu,
        step_time_unprofiled_us=step,
        worker=best.name,
        rank=best.distributed.rank if best.distributed is not None else None,
        flops_per_step=flops,
        peak_flops=peak,
        ranks=len(ranks),
        flops_differ=max(each) > FLOPS_DIFFER * min(each),
        # as the summary's: none where the shortest likely step would make it impossible
        mfu_range=Interval(low=min(low, mfu), high=max(high, mfu))
        if low is not None and high is not None and high <= 1.0
        else None,
    )


def _step(w: WorkerReport) -> float:
    s = w.summary
    return (s.step_time_unprofiled_us or 0.0) if s is not None else 0.0


def mfu_note(rows: list[RankRow], workers: list[WorkerReport], job: JobMfu | None) -> str | None:
    """Why the ranks' headline MFUs differ, where they spread over ``MFU_SPREAD_NOTE`` and some are
    over a step without the profiler, and which figure is the job's where it has one."""
    mfus = [r.mfu for r in rows if r.mfu is not None]
    unprofiled = any(
        w.summary is not None and w.summary.mfu_status is not None and w.summary.mfu_status.basis == "without_profiler"
        for w in workers
    )
    if len(mfus) < 2 or not unprofiled or min(mfus) <= 0 or max(mfus) / min(mfus) <= MFU_SPREAD_NOTE:
        return None
    text = (
        f"The ranks' MFUs range {pct(min(mfus))}–{pct(max(mfus))}, though the ranks of one job share a step: each "
        "rank's step without the profiler is estimated on its own trace, and a rank that waits in a collective "
        "for a slower one keeps that rank's profiled lateness, so it reads low."
    )
    if job is None:
        return text
    return f"{text} The job's MFU, {pct(job.mfu)}, is over the shortest of those steps, {job.worker}'s."


def waited_note(w: WorkerReport, job: JobMfu | None) -> str | None:
    """On a rank whose own step without the profiler is over ``WAITED_STEP_RATIO`` x the job's: it
    waited for other ranks, so what its findings' fixes save is of its own step, where the job's step
    shortens with the rank whose estimate it is."""
    s = w.summary
    if job is None or s is None or s.step_time_unprofiled_us is None or w.name == job.worker:
        return None
    if s.step_time_unprofiled_us <= WAITED_STEP_RATIO * job.step_time_unprofiled_us:
        return None
    return (
        f"Its step without the profiler, {us(s.step_time_unprofiled_us)}, is "
        f"{s.step_time_unprofiled_us / job.step_time_unprofiled_us:.2f}× the job's ({us(job.step_time_unprofiled_us)}, "
        f"{job.worker}'s): it waited for other ranks in its collectives. Its findings' gains are of its own step: "
        f"the job's step shortens with the fixes of {job.worker}'s findings."
    )
