"""Runs of one model under different parallel strategies, side by side: the table that asks
which strategy gives the best MFU on these GPUs (``tb-mfu compare`` with several runs, the tab's
Strategies view; docs/distributed.md).

One row per run, its ranks summed up: the slowest rank's step (every rank waits for it), the job's
MFU (``job_mfu``: one figure for the run, which the table sorts by), each rank's MFU (the headline
figure of its report, over its steady-state steps, as Compare and the Overview show it: the lowest,
the mean and the highest over the ranks), and the mean over ranks of
the exposed communication, the overlap and the pipeline bubble; and the lowest and highest peak
allocated memory over the ranks (FSDP against DDP is largely a memory trade), known only for traces recorded with
``profile_memory=True``.
"""

from __future__ import annotations

from statistics import fmean

import msgspec

from ..report import RunReport, Summary, WorkerReport
from .ranks import RankSummary


class StrategyRow(msgspec.Struct, kw_only=True):
    run: str
    strategy: list[str]  # the run's (analysis.strategy); empty on one GPU
    ranks: int  # workers analysed
    device: str | None
    step_time_us: float | None  # the slowest rank's step (summary.step_time_us: its mean steady-state step)
    # the job's MFU (RankSummary.job) of several ranks; on one GPU, its MFU; None where unknown
    job_mfu: float | None
    # the step it is over: the job's (the shortest of the ranks' without the profiler), or the one GPU's
    job_step_time_unprofiled_us: float | None
    # each rank's MFU (summary.mfu, the headline): lowest, mean and highest over the ranks
    mfu_min: float | None
    mfu_mean: float | None
    mfu_max: float | None
    flops_per_step: float | None  # per rank, mean
    exposed_communication_us_per_step: float | None  # mean over ranks
    exposed_communication_share: float | None  # of the mean step, mean over ranks
    overlap_ratio: float | None  # mean over ranks with communication
    collective_wait_us_per_step: float | None  # mean over ranks, clocks aligned
    bubble_share: float | None  # mean over pipeline stages
    busbw_gbps: float | None  # the largest collective's bus bandwidth (by time), mean over ranks
    link: str | None
    # each rank's peak allocated memory (analysis.memory), lowest and highest over the ranks that have it
    peak_allocated_min: int | None = None
    peak_allocated_max: int | None = None


def _mean(xs: list[float | None]) -> float | None:
    known = [x for x in xs if x is not None]
    return fmean(known) if known else None


def _ranks(run: RunReport) -> RankSummary | None:
    """``RunReport.ranks`` is typed Any (analysis does not import diagnosis): a dict once decoded."""
    if run.ranks is None or isinstance(run.ranks, RankSummary):
        return run.ranks
    return msgspec.convert(run.ranks, RankSummary)


def _job(ranks: RankSummary | None, summaries: list[Summary]) -> tuple[float | None, float | None]:
    """The run's one MFU and the step it is over: the job's over its ranks, or the one GPU's own."""
    if ranks is not None:
        job = ranks.job
        return (job.mfu, job.step_time_unprofiled_us) if job is not None else (None, None)
    if len(summaries) == 1 and summaries[0].mfu is not None:
        s = summaries[0]
        # over the step without the profiler where the MFU is (mfu_status.basis), else the traced one
        return s.mfu, s.step_time_unprofiled_us if s.step_time_unprofiled_us is not None else s.step_time_us
    return None, None


def strategy_row(run: RunReport) -> StrategyRow:
    ok: list[WorkerReport] = [w for w in run.workers if w.error is None and w.summary is not None]
    summaries = [w.summary for w in ok if w.summary is not None]
    comm = [
        (w.communication, s.step_time_us) for w, s in zip(ok, summaries, strict=True) if w.communication is not None
    ]
    mfu = [s.mfu for s in summaries if s.mfu is not None]
    ranks = _ranks(run)
    main = [max(c.collectives, key=lambda x: x.us_per_step) for c, _ in comm if c.collectives]
    peaks = [w.memory.peak_allocated_bytes for w in ok if w.memory is not None and w.memory.peak_allocated_bytes]
    job_mfu, job_step = _job(ranks, summaries)
    return StrategyRow(
        run=run.name,
        strategy=list(run.strategy),
        ranks=len(ok),
        device=next((w.device.name for w in ok if w.device is not None and w.device.name), None),
        step_time_us=max((s.step_time_us for s in summaries), default=None),
        job_mfu=job_mfu,
        job_step_time_unprofiled_us=job_step,
        mfu_min=min(mfu) if mfu else None,
        mfu_mean=fmean(mfu) if mfu else None,
        mfu_max=max(mfu) if mfu else None,
        flops_per_step=_mean([s.flops_per_step for s in summaries]),
        exposed_communication_us_per_step=_mean([c.exposed_us_per_step for c, _ in comm]),
        exposed_communication_share=_mean([c.exposed_us_per_step / step for c, step in comm if step > 0]),
        overlap_ratio=_mean([c.overlap_ratio for c, _ in comm]),
        collective_wait_us_per_step=_mean([r.collective_wait_us_per_step for r in ranks.ranks] if ranks else []),
        bubble_share=_mean([w.pipeline.bubble_share for w in ok if w.pipeline is not None]),
        busbw_gbps=_mean([c.busbw_gbps for c in main]),
        link=next((c.link for c, _ in comm if c.link), None),
        peak_allocated_min=min(peaks) if peaks else None,
        peak_allocated_max=max(peaks) if peaks else None,
    )


def strategy_table(runs: list[RunReport]) -> list[StrategyRow]:
    """One row per run, in the order given."""
    return [strategy_row(r) for r in runs]
