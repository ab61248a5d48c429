"""The evidence of the rules about the host and the GPU's idle time (``diagnosis/rules/syncs.py``,
``dataloader.py``, ``launches.py``, ``idle.py``). Per step: the mean analysed step."""

from __future__ import annotations

import msgspec

from .common import FindingEvidence, KernelRow
from .units import Count, Flag, Share, Text, Time, Timestamp


class SyncCall(msgspec.Struct, kw_only=True):
    path: Text  # root op > op > API
    count_per_step: Count


class SyncPointEvidence(FindingEvidence, tag="sync_point"):
    call: Text  # the user-facing call behind the syncs (the finding's subject)
    explicit: Flag  # an explicit synchronize outside any op
    api: Text
    op: Text | None
    root_op: Text | None
    copy_direction: Text | None
    nesting: list[SyncCall]
    count_per_step: Count
    host_blocked_us_per_step: Time
    gpu_idle_recovered_us_per_step: Time


class DataloaderStallEvidence(FindingEvidence, tag="dataloader_stall"):
    ops: list[Text]
    calls_per_step: Count
    host_us_per_step: Time
    gpu_idle_us_per_step: Time
    single_process: Flag  # num_workers=0


class LaunchBoundEvidence(FindingEvidence, tag="launch_bound"):
    kernels_per_step: Count  # launched one by one
    median_kernel_us: Time | None
    short_kernel_share: Share
    graph_kernels_per_step: Count
    graph_launches_per_step: Count
    launch_api_us_per_step: Time
    launch_gaps_per_step: Count
    launch_gap_us_per_step: Time
    median_launch_gap_us: Time | None
    gap_max_us: Time  # the longest gap that counts as a launch gap (launch_gap_max_us)
    longer_host_gaps_us_per_step: Time
    in_optimizer_step_us_per_step: Time


class TinyKernelsInGraphsEvidence(FindingEvidence, tag="tiny_kernels_in_graphs"):
    graph_launches_per_step: Count
    graph_kernels_per_step: Count
    median_kernel_us: Time | None
    short_kernel_share: Share
    graph_kernel_us_per_step: Time
    gaps_in_graphs_per_step: Count
    gap_us_per_step: Time
    median_gap_us: Time | None
    kernels: list[KernelRow]


class HostActivity(msgspec.Struct, kw_only=True):
    name: Text
    us: Time  # overlapping the gap


class IdleGap(msgspec.Struct, kw_only=True):
    start_us: Timestamp
    us: Time
    host_launched_during_gap: Flag
    host_activity: list[HostActivity]


class GpuIdleEvidence(FindingEvidence, tag="gpu_idle"):
    idle_us_per_step: Time
    unexplained_us_per_step: Time
    # the unexplained idle by cause, with what the rules that fired claim left out
    short_gaps_us_per_step: Time
    host_gaps_us_per_step: Time
    no_launch_us_per_step: Time
    dataloader_us_per_step: Time
    sync_us_per_step: Time
    graph_gaps_us_per_step: Time
    largest_gaps: list[IdleGap]
