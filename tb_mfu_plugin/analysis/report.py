"""The one report type. The CLI's ``--json``, the TensorBoard routes and the tab all
serialise these structs, so they can never disagree.

Units: time in µs, shares as fractions 0-1, bytes as ints or floats per step,
FLOPs and FLOP/s as floats. ``SCHEMA_VERSION`` changes only when a key is renamed
or removed; adding keys is free.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from .critical_path.report_types import CriticalPath, WhatIf
from .distributed.blocks import Communication, Pipeline
from .distributed.blocks import Distributed as Distributed  # re-exported: the report's types in one place
from .distributed.blocks import ProcessGroup as ProcessGroup
from .evidence import Evidence
from .flops.detail import FlopsDetail
from .interval import Interval as Interval  # re-exported: the report's types in one place
from .memory.types import Memory
from .report_ranks import JobMfu as JobMfu
from .report_ranks import RankRow as RankRow  # re-exported, as Distributed above
from .report_ranks import RankSummary as RankSummary
from .report_ranks import Straggler as Straggler
from .timeline.types import Timeline

# 2: sync_wait_share -> host_sync_blocked_share, breakdown sync_wait/idle -> idle_after_sync/idle_other
# 3: summary.step_time_us is the mean step (was the median: step_time_median_us), the one every
#    per-step figure describes (summary.basis); summary.mfu_status (docs/metrics.md, "Schema versions")
SCHEMA_VERSION = 3

MfuState = Literal["known", "unknown", "impossible"]
Severity = Literal["high", "medium", "low"]  # a finding's, from its estimated gain's share of the step
BarKind = Literal["total", "loss", "subtotal", "result"]  # a waterfall bar's


class Metrics(msgspec.Struct, kw_only=True):
    """Metrics of one step, or their aggregate over the analysed steps in ``Summary``
    (time-weighted: a ratio of sums, see ``analysis.time.aggregate``)."""

    gpu_busy_share: float
    kernel_time_share: float
    memcpy_time_share: float
    memset_time_share: float
    idle_share: float  # GPU idle: 1 - gpu_busy_share
    # Two figures about syncs, two names (issue 23; SCHEMA_VERSION 2 renamed sync_wait_share):
    # the GPU idle time host-device syncs explain (in each idle gap, the host time blocked in the
    # syncs that returned in it, at most the gap: what removing them gives back; the waterfall's
    # "GPU idle: after host-device syncs" bar), a part of idle_share...
    gpu_idle_after_sync_share: float = 0.0
    # ...and the host's time blocked in synchronising calls, a host figure: a GPU-bound loop's host
    # waits in syncs while its GPU works, so it can far exceed idle_share.
    host_sync_blocked_share: float
    # Share of the SMs active, integrated over the step: each kernel's estimated hardware SM efficiency
    # (analysis.kernels.sm_active, calibrated on Nsight Compute's sm__cycles_active). None when no
    # kernel reports blocks or a grid (ROCm).
    sm_efficiency: float | None
    # torch-tb-profiler's Est. SM Efficiency, the same integral of min(1, blocks per SM): the
    # PyTorch Profiler tab's figure, kept for parity. It reads short and tail-bound kernels as full.
    sm_efficiency_tb: float | None = None
    achieved_occupancy: float | None
    tensor_core_kernel_share: float
    # Kernel time of GEMM-like kernels that no family of analysis.kernel_families names
    # (tensor-core use unknown), and of matmul/conv kernels on CUDA cores, over all kernel time.
    unknown_core_kernel_share: float = 0.0
    cuda_core_matmul_kernel_share: float = 0.0
    h2d_bytes_per_step: float
    d2h_bytes_per_step: float
    d2d_bytes_per_step: float
    p2p_bytes_per_step: float
    sync_count_per_step: float
    kernels_per_step: float
    flops_per_step: float | None = None
    mfu: float | None = None
    # FLOP/s over the step (the summary's: all FLOPs over all time), mfu x peak; known without a
    # peak; None with the MFU when that is impossible (analysis.mfu)
    achieved_flops: float | None = None


# gc=False: a report holds one Step per step (100,000 in a long profiling window) and a Step holds
# no reference cycle (numbers and a dict of numbers), so the collector need not track them:
# tracked, building them cost twice as long, in collections that walked every one.
class Step(Metrics, kw_only=True, gc=False):
    step: int
    start_us: float
    dur_us: float
    # Where the step's time went, as fractions summing to 1: kernel, memcpy, memset (busy without
    # kernels), idle_after_sync (= gpu_idle_after_sync_share), idle_other (the rest of idle_share).
    breakdown: dict[str, float] = {}
    # The same parts as time in this step, µs (each share x dur_us): what the per-step chart draws.
    breakdown_us: dict[str, float] = {}


class Spread(msgspec.Struct, kw_only=True):
    """How one per-step figure varies over the analysed steps (percentiles by linear
    interpolation between the sorted per-step values, as ``numpy.percentile``)."""

    median: float
    p10: float
    p90: float
    min: float
    max: float


class MfuStatus(msgspec.Struct, kw_only=True):
    """Whether the headline MFU is a figure, and why (``analysis.device.mfu_report``): decided once by
    the analysis, read by every face, which shows the figure only when it is ``known``."""

    state: MfuState
    # what the figure's step is: the steady-state step with the profiler's host cost taken out (an
    # estimate: summary.step_time_unprofiled_us), or the traced step where that cannot be estimated
    basis: Literal["without_profiler", "traced"] | None = None
    reason: str  # one line: its basis, where the FLOPs and the peak come from, or why there is no figure


class LeftOutStep(msgspec.Struct, kw_only=True):
    """A step of the trace that the per-step figures leave out, and why."""

    step: int | None  # its ProfilerStep number, None when the marker gave none
    dur_us: float | None = None
    reason: str


class StepBasis(msgspec.Struct, kw_only=True):
    """Which steps a worker's per-step figures describe and how they are aggregated: every figure
    "per step" of the worker (step time, shares, breakdown, waterfall, critical path, exposed
    communication, gains, the ranks table's row) is the total over these steps divided by their
    number, the mean step; a figure of another aggregation carries another name (``*_median_*``).
    The steps are the steady state: the leading steps still warming up are left out, each named in
    ``left_out`` with why (``analysis.time.steps.steady_state``); the memory card alone reads every
    recorded step (a leak shows over all of them)."""

    steps: int
    first_step: int | None
    last_step: int | None
    aggregation: Literal["mean"] = "mean"
    left_out: list[LeftOutStep] = []
    description: str  # one line for the faces: "3 steps (#3-#5), the mean step"


class Summary(Metrics, kw_only=True):
    """The analysed steps as one: every share is time-weighted (sum over the steps of the
    part / sum of their durations, as ``mfu`` and torch-tb-profiler aggregate), every
    per-step count is the total over the steps / their number: the mean step of ``basis``."""

    steps: int
    step_time_us: float  # the MEAN step: sum of step durations / steps, the step every share applies to
    breakdown: dict[str, float] = {}  # time-weighted, sums to 1
    breakdown_us_per_step: dict[str, float] = {}  # each part's time in the mean step (share x step_time_us)
    step_time_median_us: float | None = None  # the median step: another aggregation, named as such
    step_time_mean_us: float | None = None  # = step_time_us (kept for readers of schema 2)
    # Per-step spread of step_time_us and of the main shares (median, p10, p90, min, max).
    distribution: dict[str, Spread] = {}
    basis: StepBasis | None = None
    mfu_status: MfuStatus | None = None
    # The headline MFU (``mfu``) is over the mean step estimated without the profiler's drag, as
    # training sees it, where the critical-path model can estimate it (mfu_status.basis); the MFU of
    # the steps as traced is this second, named figure, and the estimated step the one beside it.
    mfu_traced: float | None = None
    step_time_unprofiled_us: float | None = None
    # Where the estimate likely lies: the step re-timed with the profiler's cost at each end of the
    # range its recordings spread over (unprofiled.PROFILER_COST_RANGE), and the MFU over those steps;
    # None where the headline is not over the step without the profiler.
    step_time_unprofiled_range_us: Interval | None = None
    mfu_range: Interval | None = None


class Device(msgspec.Struct, kw_only=True):
    index: int | None
    name: str | None
    num_sms: int | None = None
    compute_capability: str | None = None
    peak_flops: float | None = None
    peak_source: str | None = None
    dtype: str | None = None
    # How the deviceProperties entry was found (analysis.devices): "id", "only entry", "all alike",
    # "ordinal" (ROCm), "none" (the trace lists none), "ambiguous" (unknown rather than guessed).
    properties_match: str | None = None


class CopyStats(msgspec.Struct, kw_only=True):
    """Copies of one direction and host-memory kind, per step."""

    direction: str  # H2D, D2H, D2D, P2P, other
    memory: str  # pageable, pinned, device, unknown (the host side of the copy)
    count_per_step: float
    bytes_per_step: float
    time_us_per_step: float
    gbps: float | None  # achieved bandwidth while copying, GB/s (1e9 bytes)
    small_count_per_step: float  # copies under 64 KiB


class SyncStats(msgspec.Struct, kw_only=True):
    """Host-device synchronisations grouped by API and the op that issued them."""

    api: str  # cudaStreamSynchronize, cudaMemcpy, ...
    op: str | None  # innermost CPU op around the call (aten::_local_scalar_dense)
    root_op: str | None  # outermost op in the step (aten::item), the user-facing cause
    count_per_step: float
    blocked_us_per_step: float


class IdleGaps(msgspec.Struct, kw_only=True):
    count_per_step: float
    total_us_per_step: float
    median_us: float | None
    max_us: float | None


class LaunchStats(msgspec.Struct, kw_only=True):
    kernels_per_step: float
    # kernels the host launched itself, outside graph replays (kernels_per_step - graph_kernels_per_step)
    kernels_launched_one_by_one_per_step: float = 0.0
    median_kernel_us: float | None
    short_kernel_share: float  # share of kernels under 10 µs
    # host time in kernel launch calls, runtime and driver API (cudaLaunchKernel, cuLaunchKernel...),
    # graph launches left out (graph_launch_api_us_per_step)
    launch_api_us_per_step: float
    idle_gaps: IdleGaps
    # CUDA/HIP graph replays (analysis.graphs): graph launch calls per step, and the kernels they
    # ran (counted in kernels_per_step too; the host launched kernels_per_step - graph_kernels_per_step)
    graph_launches_per_step: float = 0.0
    graph_kernels_per_step: float = 0.0
    graph_median_kernel_us: float | None = None
    graph_launch_api_us_per_step: float = 0.0  # host time in graph launch calls (cudaGraphLaunch...)


class KernelStats(msgspec.Struct, kw_only=True):
    name: str
    count: int
    total_us: float
    share: float  # of all kernel time in the analysed steps
    mean_us: float
    mean_blocks_per_sm: float | None
    sm_efficiency: float | None  # time-weighted estimated hardware SM efficiency (analysis.kernels.sm_active)
    achieved_occupancy: float | None
    tensor_core: bool
    sm_efficiency_tb: float | None = None  # torch-tb-profiler's: time-weighted min(1, blocks per SM)
    core: str | None = None  # tensor-core, cuda-core, not-a-matmul or unknown (analysis.kernel_families)
    dtype: str | None = None  # the matmul dtype the name gives (bf16, fp8, tf32...), None if it does not


class RooflineOp(msgspec.Struct, kw_only=True):
    """One op (name + recorded shapes) on the roofline, totals per step (analysis.roofline)."""

    name: str
    op_class: str = msgspec.field(name="class")  # matmul, conv, attention, elementwise, norm, ...
    shapes: str  # the recorded Input Dims
    dtype: str | None
    exact: bool  # False when the byte model needed an assumption (tensor-list dtype)
    count_per_step: float
    us_per_step: float  # GPU time of the events it launched
    flops_per_step: float
    bytes_per_step: float  # minimum HBM traffic: inputs read + outputs written once
    intensity: float | None  # FLOPs / byte
    achieved_flops: float | None  # FLOP/s over its GPU time
    achieved_bandwidth: float | None  # bytes/s over its GPU time
    roof_flops: float | None  # min(peak, bandwidth x intensity)
    roof_share: float | None  # time at the roof / GPU time; > 1 is flagged above_roof
    bound: str | None  # "memory" | "compute"
    roof_us_per_step: float | None  # max(FLOPs / peak, bytes / bandwidth)
    lost_us_per_step: float | None  # time below the roof: GPU time - time at the roof
    above_roof: bool = False
    kernels_per_call: float = 0.0  # kernels and device copies per call (> 1: several passes)
    mean_blocks_per_sm: float | None = None  # time-weighted over its kernels; < 1 leaves SMs idle


class RooflineClass(msgspec.Struct, kw_only=True):
    op_class: str = msgspec.field(name="class")
    count_per_step: float
    us_per_step: float
    flops_per_step: float
    bytes_per_step: float
    intensity: float | None
    achieved_flops: float | None
    achieved_bandwidth: float | None
    roof_share: float | None
    bound: str | None
    lost_us_per_step: float  # summed over its ops


class RooflineUnmodelled(msgspec.Struct, kw_only=True):
    """GPU work not on the roofline, by the op that launched it."""

    name: str
    reason: str  # "no byte formula" | "shapes not recorded" | launched outside any op
    count_per_step: float
    us_per_step: float


class Roofline(msgspec.Struct, kw_only=True):
    peak_flops: float | None  # the peak MFU uses
    peak_bandwidth: float | None  # HBM bytes/s (analysis.bandwidth)
    ridge_intensity: float | None  # peak_flops / peak_bandwidth, FLOPs per byte
    ops: list[RooflineOp] = []  # by GPU time, largest first (at most analysis.roofline.MAX_OPS)
    ops_left_out: int = 0
    ops_left_out_us_per_step: float = 0.0
    classes: list[RooflineClass] = []
    unmodelled: list[RooflineUnmodelled] = []
    modelled_us_per_step: float = 0.0
    unmodelled_us_per_step: float = 0.0
    coverage: float | None = None  # modelled / (modelled + unmodelled) GPU time
    peak_source: str | None = None
    bandwidth_source: str | None = None
    notes: list[str] = []


BenefitUnit = Literal["steps_until_oom", "bytes", "throughput_factor"]


class Benefit(msgspec.Struct, kw_only=True):
    """What a finding whose fix saves no step time brings, in its own unit: the steps left before a
    leak fills the device, the memory a fix frees, the throughput a larger batch would reach."""

    value: float | None  # in ``unit``; None where it cannot be known (a leak on a device of unknown size)
    unit: BenefitUnit
    text: str  # one line, the value in words


class Finding(msgspec.Struct, kw_only=True):
    """A named bottleneck with its evidence, estimated gain and fix (``diagnosis``)."""

    id: str  # fixed rule id (sync_point, naive_attention, ...): scripts match on it
    severity: Severity
    title: str
    # Numbers, ops and kernels involved: the rule's own struct (analysis.evidence), tagged with its id
    # (``rule``), each field typed with its unit. Always has ``cost_us_per_step`` (the time the cause
    # takes, which bounds the gain) and ``cost_share`` (of the step).
    evidence: Evidence
    est_gain_us_per_step: float  # what removing the cause would save, µs per step
    est_gain_share: float  # the same, as a share of the (mean) step time
    est_mfu_after: float | None  # mfu * step / (step - gain), when MFU is known
    recommendation: str  # the concrete fix, with the PyTorch API
    # What the finding is about when a rule can fire more than once (one sync_point per
    # cause): (id, subject) is unique in a report, for "fixed" / "new" in Compare.
    subject: str | None = None
    # A finding that saves no step time states what it brings in its own unit (a leak's steps until
    # out of memory, a larger batch's throughput); a medium or high finding has a gain or this.
    benefit: Benefit | None = None


class WaterfallBar(msgspec.Struct, kw_only=True):
    """One bar of the step-time waterfall (``diagnosis.waterfall``), µs per mean step."""

    id: str
    label: str
    kind: BarKind
    # None on the result bar when MFU is unknown or impossible: that bar then has no value
    us_per_step: float | None
    share: float | None  # of the step
    # Keys only some bars have (UNSET is left out of the JSON):
    group: str | UnsetType = UNSET  # "idle" on the idle losses
    known: bool | UnsetType = UNSET  # low_sm_efficiency: some matmul kernel reported its blocks
    clamped: bool | UnsetType = UNSET  # the result bar: FLOPs at peak exceed the matmul time
    mfu: float | None | UnsetType = UNSET  # the result bar; None when unknown or impossible


class WorkerReport(msgspec.Struct, kw_only=True):
    name: str
    span: str
    file: str
    error: str | None = None
    device: Device | None = None
    summary: Summary | None = None
    steps: list[Step] = []
    copies: list[CopyStats] = []
    syncs: list[SyncStats] = []
    launches: LaunchStats | None = None
    top_kernels: list[KernelStats] = []
    flops: FlopsDetail | None = None  # FLOPs detail, filled by analysis.mfu
    roofline: Roofline | None = None  # each op against its roof, filled by analysis.roofline
    findings: list[Finding] = []  # by estimated gain, largest first (diagnosis.engine)
    # The gain of fixing every finding at once, µs per mean step, and its share of the step: each
    # finding's gain counts only for the part of its time that no finding of larger gain claims
    # (diagnosis.cost_time), so it is at least the largest gain and at most the step. The gains
    # themselves overlap and never add up. None where the diagnosis did not run.
    combined_gain_us_per_step: float | None = None
    combined_gain_share: float | None = None
    waterfall: list[WaterfallBar] = []
    flags: list[str] = []  # e.g. "no_step_markers"
    notes: list[str] = []  # human-readable caveats
    distributed: Distributed | None = None
    trace_bytes: int = 0
    # Distributed runs (analysis.communication, analysis.pipeline_bubble; docs/distributed.md):
    # collectives and their overlap with compute, None without collective kernels; the pipeline
    # bubble, None unless the rank is a pipeline stage.
    communication: Communication | None = None
    pipeline: Pipeline | None = None
    # The critical path of each modelled step by class (analysis.critical_path), and the step
    # re-timed with the findings' fixes, alone and together (diagnosis.engine; docs/diagnosis.md).
    critical_path: CriticalPath | None = None
    whatif: WhatIf | None = None
    # Device memory from the allocator's [memory] events (analysis.memory, docs/memory.md); without
    # them only its ``unavailable`` says why. None where the device was not analysed.
    memory: Memory | None = None
    # One representative step as lanes of intervals, with the critical path and the findings pinned
    # to their moments (analysis.timeline, docs/timeline.md); None where no step was analysed.
    timeline: Timeline | None = None


class RunReport(msgspec.Struct, kw_only=True):
    name: str
    workers: list[WorkerReport] = []
    # Distributed runs: the ranks side by side and the straggler (analysis.run.ranks), else None.
    ranks: RankSummary | None = None
    # The parallelism of the run, from its ranks' collectives (analysis.strategy): DP, DDP, FSDP,
    # TP, PP, EP in that order, e.g. ["FSDP", "TP"]; empty on one GPU.
    strategy: list[str] = []


class Report(msgspec.Struct, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    tool_version: str = ""
    runs: list[RunReport] = []


_encoder = msgspec.json.Encoder()


def to_json(obj: Any) -> bytes:
    return _encoder.encode(obj)
