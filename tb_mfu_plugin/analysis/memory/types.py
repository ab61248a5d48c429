"""The report's ``memory`` block (``WorkerReport.memory``): device memory over the analysed steps.

Bytes as ints, times in µs, shares 0-1, as in the rest of the report. Every figure is None where
it could not be computed (no event in the step, a total the trace left unknown, a device of
unknown size): unknown stays unknown. docs/memory.md explains each figure.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Phase = Literal["forward", "backward", "optimizer", "other"]


class MemoryOp(msgspec.Struct, kw_only=True):
    """The allocations alive at the peak that one op made (the innermost op around the allocation
    on its thread that is not an allocation primitive such as ``aten::empty_strided``)."""

    name: str  # "aten::addmm"; "(before the step)" for what was allocated before the step began
    root_op: str | None  # the outermost op around its largest allocation: "aten::linear"
    bytes: int
    count: int  # allocations (0 for the part from before the step)


class MemoryStep(msgspec.Struct, kw_only=True):
    """One analysed step (its host window: ``ProfilerStep#N``), from the memory events inside it."""

    step: int
    events: int
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    allocated_start_bytes: int | None  # before the step's first event
    allocated_end_bytes: int | None  # after its last event
    # allocated_start_bytes - the previous step's, per step between them; None for the first step
    growth_bytes: int | None
    reserved_minus_allocated_bytes: int | None  # at the step's peak: cached or fragmented memory
    peak_at_us: float | None  # from the step's host start to the event that reached the peak
    peak_phase: Phase | None
    peak_op: str | None
    peak_root_op: str | None


class Headroom(msgspec.Struct, kw_only=True):
    """How many times the batch could grow, if the memory that scales with it (the peak above the
    step's start: activations, their gradients, workspace) scaled exactly with it and the rest
    (parameters, gradients kept across steps, optimizer state: what is allocated at the step's
    start) did not. ``method`` says so in one line."""

    fixed_bytes: int  # allocated at the start of the peak step
    batch_scaled_bytes: int  # peak allocated - fixed_bytes
    batch_factor: float | None  # (device total - fixed) / batch_scaled; None when unknown
    batch_factor_at_90: float | None  # the same, filling 90 % of the device (near_oom's line)
    method: str


class Recompute(msgspec.Struct, kw_only=True):
    """Activation checkpointing: the forward ops re-run inside backward (analysis.recompute) and
    what they cost and hold, per step."""

    regions_per_step: float  # backward nodes that re-ran forward ops
    host_us_per_step: float  # from each such node's start to the end of its last re-run forward op
    gpu_us_per_step: float  # kernels launched inside those regions
    us_per_step: float  # the longer of the two: what the recompute adds to the step, at least
    saved_bytes: int | None  # allocated inside the regions, still alive at their end, per step: an upper bound


class MemoryTimeline(msgspec.Struct, kw_only=True):
    """Allocated and reserved over the analysed steps, for the tab's chart: at most
    ``block.TIMELINE_POINTS`` points, each bucket keeping its highest allocation (the peak stays)."""

    t_us: list[float]  # from the first analysed step's host start
    allocated: list[int]
    reserved: list[int | None]
    step_starts_us: list[float] = []  # each step's host start on the same axis


class MemoryBrief(msgspec.Struct, kw_only=True):
    """The memory block's headline figures, for a comparison of two runs (``tb-mfu compare --json``)."""

    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    allocated_start_bytes: int | None
    growth_per_step_bytes: float | None
    peak_share: float | None
    batch_factor: float | None
    recompute_us_per_step: float | None
    recompute_saved_bytes: int | None


class Memory(msgspec.Struct, kw_only=True):
    """Device memory of one device over the analysed steps (analysis.memory.block)."""

    # Why there are no figures, when there are none: no memory events (record with
    # profile_memory=True), or none of this device's; None when the figures below are computed.
    unavailable: str | None = None
    events: int = 0  # memory events of this device inside the analysed steps
    events_outside_steps: int = 0
    steps: list[MemoryStep] = []
    peak_allocated_bytes: int | None = None  # the highest over the analysed steps
    peak_reserved_bytes: int | None = None
    peak_step: int | None = None  # the step that reached peak_allocated_bytes
    peak_phase: Phase | None = None
    peak_op: str | None = None
    peak_root_op: str | None = None
    peak_at_us: float | None = None
    top_ops: list[MemoryOp] = []  # alive at the peak, by bytes, largest first
    # allocated in an analysed step (but the last) and never freed in the trace, per such step: what
    # the run keeps from step to step, by the op that allocated it
    kept_ops: list[MemoryOp] = []
    allocated_start_bytes: int | None = None  # at the start of the peak step
    # the median over consecutive analysed steps of the growth of allocated_start_bytes, per step
    growth_per_step_bytes: float | None = None
    reserved_minus_allocated_bytes: int | None = None  # at the peak
    device_total_bytes: int | None = None
    device_total_source: str | None = None
    peak_share: float | None = None  # peak_allocated_bytes / device_total_bytes
    peak_reserved_share: float | None = None
    headroom: Headroom | None = None
    recompute: Recompute | None = None
    oom_events: int = 0  # the allocator's [OutOfMemory] events inside the steps
    timeline: MemoryTimeline | None = None
    notes: list[str] = []

    def brief(self) -> MemoryBrief | None:
        """The headline figures; None without memory figures."""
        if self.unavailable is not None:
            return None
        h, r = self.headroom, self.recompute
        return MemoryBrief(
            peak_allocated_bytes=self.peak_allocated_bytes,
            peak_reserved_bytes=self.peak_reserved_bytes,
            allocated_start_bytes=self.allocated_start_bytes,
            growth_per_step_bytes=self.growth_per_step_bytes,
            peak_share=self.peak_share,
            batch_factor=h.batch_factor if h is not None else None,
            recompute_us_per_step=r.us_per_step if r is not None else None,
            recompute_saved_bytes=r.saved_bytes if r is not None else None,
        )
