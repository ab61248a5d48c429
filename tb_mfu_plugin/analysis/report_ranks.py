"""The report's block of a distributed run: its ranks side by side and the straggler the others wait
for (``RunReport.ranks``, built by ``analysis.run.ranks``)."""

from __future__ import annotations

import msgspec

from .interval import Interval


class RankRow(msgspec.Struct, kw_only=True):
    worker: str
    span: str
    rank: int | None
    step_time_us: float  # the rank's median step (summary.step_time_us); its shares are time-weighted
    gpu_busy_share: float
    idle_share: float
    exposed_communication_us_per_step: float | None
    mfu: float | None
    # From the communication block and the ranks' aligned clocks (diagnosis.distributed;
    # docs/distributed.md): None on ranks without collectives.
    communication_us_per_step: float | None = None
    overlap_ratio: float | None = None
    bubble_share: float | None = None  # pipeline stages only
    # What to add to this rank's timestamps to read the reference rank's clock, µs.
    clock_shift_us: float | None = None
    # Time inside collectives waiting for a member that started later (clocks aligned), per step.
    collective_wait_us_per_step: float | None = None
    # Where its own step without the profiler is well over the job's: its findings' gains are of its
    # own step (``analysis.run.job_mfu.waited_note``); None on the job's rank, or without a job's MFU
    waited_note: str | None = None


class Straggler(msgspec.Struct, kw_only=True):
    worker: str
    rank: int | None
    others_wait_us_per_step: float  # mean exposed communication of the other ranks, minus its own
    reason: str


class JobMfu(msgspec.Struct, kw_only=True):
    """The job's MFU: the ranks of one synchronous job share one step, so the job has one MFU, over
    the shortest of the ranks' steps without the profiler (``analysis.run.ranks.job_mfu``)."""

    mfu: float  # the ranks' FLOPs per step together / (the job's step x their peaks together)
    step_time_unprofiled_us: float  # the job's step: the shortest of the ranks' estimates
    worker: str  # whose estimate that is
    rank: int | None
    flops_per_step: float  # the ranks' together
    peak_flops: float  # the ranks' together
    ranks: int  # ranks counted: every analysed rank of the run
    # the ranks' FLOPs per step differ by over 1 % (pipeline stages, TP's replicated head), so a rank's
    # own MFU differs from the job's over the same step
    flops_differ: bool = False
    # over that rank's likely step without the profiler (Summary.step_time_unprofiled_range_us)
    mfu_range: Interval | None = None


class RankSummary(msgspec.Struct, kw_only=True):
    """The ranks of a distributed run side by side, and the one the others wait for
    (``analysis.run.ranks``)."""

    world_size: int | None
    ranks: list[RankRow]
    straggler: Straggler | None = None
    clock_reference: str | None = None  # the worker whose clock the shifts are relative to
    clock_residual_us: float | None = None  # median spread of a call's aligned ends across ranks
    clock_note: str | None = None  # one line: how the clocks were aligned, and by how much
    # Why the ranks' MFUs differ where they do, though the ranks of one synchronous job share a step
    # (``analysis.run.ranks.mfu_note``)
    mfu_note: str | None = None
    # The job's one MFU, where every rank has one over its step without the profiler; else None
    job: JobMfu | None = None
