"""The evidence of the memory rules (``diagnosis/rules/memory.py``), from the report's memory block
(``analysis.memory``)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from .common import FindingEvidence
from .units import ByteCount, Bytes, Count, Factor, Flops, Index, Share, Text, Time, Whole, unit

WholeFactor = Annotated[int, unit("factor")]


class MemoryOpRow(msgspec.Struct, kw_only=True):
    op: Text
    root_op: Text | None
    bytes: ByteCount
    count: Whole  # allocations


class MemoryLeakEvidence(FindingEvidence, tag="memory_leak"):
    growth_per_step_bytes: Bytes
    allocated_start_bytes: list[ByteCount]  # at each analysed step's start
    steps: list[Index]  # their numbers
    peak_allocated_bytes: ByteCount | None
    device_total_bytes: ByteCount | None
    steps_until_full: Count | None
    kept_ops: list[MemoryOpRow]


class NearOomEvidence(FindingEvidence, tag="near_oom"):
    peak_allocated_bytes: ByteCount | None
    peak_reserved_bytes: ByteCount | None
    device_total_bytes: ByteCount | None
    peak_share: Share | None
    peak_reserved_share: Share | None
    oom_events: Whole
    peak_phase: Text | None
    peak_op: Text | None
    top_ops: list[MemoryOpRow]


class AllocatorFragmentationEvidence(FindingEvidence, tag="allocator_fragmentation"):
    reserved_minus_allocated_bytes: ByteCount
    reserved_at_peak_bytes: ByteCount
    peak_allocated_bytes: ByteCount
    share_of_reserved: Share
    peak_reserved_share: Share | None


class MemoryHeadroomEvidence(FindingEvidence, tag="memory_headroom"):
    batch_factor: Factor | None
    batch_factor_at_90: Factor
    fixed_bytes: ByteCount
    batch_scaled_bytes: ByteCount
    device_total_bytes: ByteCount | None
    peak_share: Share | None
    suggested_batch_factor: WholeFactor  # a power of two
    because: Text  # the finding whose time a larger batch amortises
    its_gain_us_per_step: Time
    kernels_per_step: Count | None
    its_us_for_these_samples_after: Time
    throughput_factor_at_suggested: Factor | None


class ActivationCheckpointingEvidence(FindingEvidence, tag="activation_checkpointing"):
    recompute_us_per_step: Time
    recompute_host_us_per_step: Time
    recompute_gpu_us_per_step: Time
    recompute_regions_per_step: Count
    recompute_flops_per_step: Flops | None
    saved_bytes_at_most: ByteCount | None
    peak_allocated_bytes: ByteCount | None
    peak_without_share_at_most: Share | None  # of the device: above 1 it would not fit
