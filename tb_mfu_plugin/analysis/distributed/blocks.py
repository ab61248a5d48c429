"""The report blocks of distributed runs: communication, collectives, pipeline bubbles.

``WorkerReport.communication`` and ``WorkerReport.pipeline`` hold them (None on a run that
has no collective kernels, or that is not pipeline-parallel); ``docs/distributed.md``
explains every figure. Units as everywhere: µs, shares 0-1, bytes, GB/s = 1e9 bytes/s.
"""

from __future__ import annotations

import msgspec


class Collective(msgspec.Struct, kw_only=True):
    """One kind of collective on one process group, over the analysed steps."""

    kind: str  # allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, send, recv, other
    group: str | None  # the group's description ("mesh_tp", "default_pg") or name; None when unknown
    group_id: str | None = None  # name and ranks: the same on every member (SyncPoint.group)
    group_size: int | None  # ranks in the group (n of the bus-bandwidth factor)
    role: str | None = None  # the parallelism this group serves (analysis.strategy): DDP, FSDP, TP, PP, EP, DP
    dtype: str | None = None  # element type as torch writes it ("Float", "BFloat16")
    count_per_step: float
    bytes_per_step: float | None  # nccl-tests' message size summed: None when no kernel says what it moved
    us_per_step: float  # kernel time (sum of durations, waiting for peers included)
    exposed_us_per_step: float = 0.0  # of it, with no compute kernel running
    mean_message_bytes: float | None = None
    algbw_gbps: float | None  # bytes / transfer time, over the calls whose bytes are known
    busbw_gbps: float | None  # algbw x the nccl-tests factor of the kind and group size
    link_peak_share: float | None  # busbw / the peak of ``link``
    link: str | None = None  # the link this group runs over (analysis.interconnects)
    # "last arrival" when the other members' traces were analysed too: the transfer time is each
    # call's end minus the last member's start, clocks aligned (analysis.clock_skew); "kernel
    # time" otherwise, which includes waiting for the slowest member (bandwidth a lower bound).
    bandwidth_basis: str = "kernel time"
    kernel_busbw_gbps: float | None = None  # busbw from this rank's kernel time alone
    link_gbps: float | None = None  # the peak of ``link``
    # "last arrival" basis only: per step, the calls' time from the last member's start to their end,
    # and the share of the rank's kernel time spent waiting for that member.
    transfer_us_per_step: float | None = None
    wait_share: float | None = None
    kernel_protocol: str | None = None  # "RING_LL", "TREE_SIMPLE"...: only ncclKernel_* names (NCCL < 2.19) say


class CommStep(msgspec.Struct, kw_only=True):
    """Communication of one analysed step (the step window on the GPU)."""

    step: int
    communication_us: float  # union of collective kernels
    overlapped_us: float  # of it, while a compute kernel runs
    exposed_us: float  # communication_us - overlapped_us
    overlap_ratio: float | None  # overlapped / communication; None without communication


class SyncPoint(msgspec.Struct, kw_only=True, array_like=True):
    """One collective call, to match across ranks (``analysis.distributed.clock_skew``): the ``index``-th call
    on ``group`` launched in profiler step ``step``. Written as an array to keep the JSON small:
    [group, step, index, kind, dtype, bytes, start_us, end_us]."""

    group: str  # collectives.group_key: the group's name and ranks, the same string on every member
    step: int
    index: int
    kind: str
    dtype: str | None
    nbytes: int  # nccl-tests message size, -1 unknown
    start_us: float
    end_us: float


class UnlistedCommunication(msgspec.Struct, kw_only=True):
    """What the collectives' rows leave out of the communication total, so the table adds up: the
    total and its exposed part less the rows' sums. Positive: collective kernel time in the steps that
    no row lists (launched before the first analysed step, or with no launch call in the trace);
    negative: time two collectives ran at once on two streams, which each row counts and the total
    (a union) counts once."""

    us_per_step: float
    exposed_us_per_step: float
    reason: str


class Communication(msgspec.Struct, kw_only=True):
    """Collective communication of one rank, per mean analysed step (Holistic Trace Analysis's
    comm/comp overlap, restricted to the steps): see docs/distributed.md."""

    communication_us_per_step: float  # union of collective kernels in the step windows
    exposed_us_per_step: float  # of it, with no compute kernel running
    overlapped_us_per_step: float  # of it, while a compute kernel runs
    overlap_ratio: float | None  # overlapped / communication (HTA's comp_comm_overlap ratio)
    collectives: list[Collective] = []
    steps: list[CommStep] = []
    strategy: list[str] = []  # what this rank's collectives point to (analysis.strategy)
    strategy_evidence: list[str] = []  # one line per signal used
    link: str | None = None  # the interconnect the peak comes from ("NVLink 4")
    link_gbps: float | None = None  # its peak, unidirectional GB/s per GPU (the bus-bandwidth ceiling)
    link_source: str | None = None  # why this link
    sync_points: list[SyncPoint] = []  # the first calls per group, for clock alignment across ranks
    # the rest of the total that the collectives' rows do not add up to; None when they do
    unlisted: UnlistedCommunication | None = None


class Pipeline(msgspec.Struct, kw_only=True):
    """Pipeline parallelism seen from one stage: the bubble per mean analysed step."""

    stage: int | None  # the rank's place in the pipeline group (its first stage when interleaved)
    stages: list[int] = []  # every stage index the rank ran (interleaved schedules run several)
    pipeline_size: int | None = None  # p: ranks in the pipeline group
    # "send/recv kernels' group" (their args), "process group <desc> (distributedInfo)", None
    pipeline_size_source: str | None = None
    bubble_us_per_step: float  # send/recv kernel time with no compute kernel running
    bubble_share: float  # of the mean step
    analytic_bubble_share: float | None  # (p-1)/(v·m+p-1), v stages per rank
    microbatches: int | None  # m, per step
    # "annotations" (the schedule's record_function names), "send/recv count" (the host's p2p ops), None
    microbatches_source: str | None = None
    # "GPipe", "1F1B", "interleaved 1F1B", "zero bubble": from the annotations, or (GPipe, 1F1B) from
    # the order of an end stage's send/recv ops
    schedule: str | None = None
    schedule_source: str | None = None  # "annotations", "send/recv order", None
    p2p_us_per_step: float = 0.0  # all send/recv kernel time


class ProcessGroup(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One entry of the trace's ``distributedInfo.pg_config``; each key only where the
    trace has it (PyTorch versions write different ones)."""

    pg_name: str | None = None
    pg_desc: str | None = None
    backend_config: str | None = None  # "cuda:nccl"
    pg_size: int | None = None
    ranks: list[int] | None = None
    uid: int | None = None


class Distributed(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The trace's ``distributedInfo`` (``analysis.distributed.info``); each key only where the
    trace has it."""

    backend: str | None = None  # nccl, gloo...
    rank: int | None = None
    world_size: int | None = None
    pg_count: int | None = None
    pg_config: list[ProcessGroup] | None = None
    nccl_version: str | None = None
