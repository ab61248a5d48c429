"""The report's ``memory`` block for one device, put together once (``memory_block``).

Without memory events the block only says why (``Memory.unavailable``): the faces then show no
Memory card and the diagnosis no memory finding.
"""

from __future__ import annotations

import numpy as np

from ...trace.tables import TraceTables
from ..device.devices import props_of
from ..fmt import nbytes
from ..time.steps import Steps
from . import live, timeline
from .capacity import device_memory
from .checkpoint import recompute
from .per_step import StepPeak, growth_per_step, step_figures
from .types import Headroom, Memory, MemoryStep, MemoryTimeline

NO_EVENTS = (
    "The trace has no [memory] events: record with torch.profiler.profile(profile_memory=True) for peak memory, "
    "growth and headroom."
)
NO_TOTALS = (
    "The trace's memory events carry no Total Allocated (PyTorch before 1.10 wrote only Bytes, the change): "
    "the device's allocated memory, and so every memory figure, is unknown."
)
TIMELINE_POINTS = 2000  # the chart's points at most: buckets keep their highest allocation
NEAR_FULL = 0.9  # the share of the device near_oom warns at, and the second headroom figure fills
HEADROOM_METHOD = (
    "batch-scaled memory = peak allocated - allocated at the step's start (activations, their gradients, "
    "workspace); fixed = allocated at the step's start (parameters, optimizer state, what persists across "
    "steps); batch factor = (device memory - fixed) / batch-scaled, assuming the first scales with the batch "
    "and the second does not"
)


def memory_block(tables: TraceTables, device: int, device_name: str | None, steps: Steps) -> Memory:
    if not len(tables.memory):
        return Memory(unavailable=NO_EVENTS)
    tl = timeline.build(tables, device, steps)
    notes = [tl.note] if tl.note else []
    inside = int((tl.step >= 0).sum())
    if not inside:
        why = tl.note or (
            f"None of the trace's {len(tables.memory):,} memory events of this device lies in an analysed step."
        )
        return Memory(unavailable=why, events_outside_steps=len(tl.mem))
    if not (tl.mem.total_allocated[tl.step >= 0] >= 0).any():
        return Memory(unavailable=NO_TOTALS, events=inside, events_outside_steps=len(tl.mem) - inside, notes=notes)
    rows, peaks = step_figures(tables, tl, steps)
    out = Memory(
        events=inside,
        events_outside_steps=len(tl.mem) - inside,
        steps=rows,
        growth_per_step_bytes=growth_per_step(rows),
        oom_events=tl.ooms,
        notes=notes,
    )
    _peak(out, tables, tl, rows, peaks)
    if len(steps) > 1:
        kept = live.kept_across_steps(tl.step, live.free_index(tl.mem), len(steps))
        out.kept_ops = live.top_ops(tables, tl.mem, tl.op, tl.root, kept, None, per=len(steps) - 1)
    found = device_memory(props_of(tables, device), device_name)
    out.device_total_bytes, out.device_total_source = found.bytes, found.source
    if found.bytes is None:
        out.notes.append(f"Device memory unknown ({found.source}): no peak share and no headroom.")
    _against_device(out)
    out.recompute = recompute(tables, tl, steps, device)
    out.timeline = _timeline(tl, steps)
    return out


def _peak(
    out: Memory, tables: TraceTables, tl: timeline.Timeline, rows: list[MemoryStep], peaks: list[StepPeak]
) -> None:
    """The highest step's peak, where it falls, and the ops alive then."""
    known = [i for i, s in enumerate(rows) if s.peak_allocated_bytes is not None]
    reserved = [s.peak_reserved_bytes for s in rows if s.peak_reserved_bytes is not None]
    out.peak_reserved_bytes = max(reserved) if reserved else None
    if not known:
        return
    i = max(known, key=lambda j: (rows[j].peak_allocated_bytes or 0, -j))
    s, p = rows[i], peaks[i]
    out.peak_allocated_bytes, out.peak_step = s.peak_allocated_bytes, s.step
    out.peak_phase, out.peak_op, out.peak_root_op = s.peak_phase, s.peak_op, s.peak_root_op
    out.peak_at_us = s.peak_at_us
    out.allocated_start_bytes = s.allocated_start_bytes
    out.reserved_minus_allocated_bytes = s.reserved_minus_allocated_bytes
    if p.event < 0 or p.start_event < 0:
        return
    freed = live.free_index(tl.mem)
    alive = live.alive_at(tl.mem, freed, p.start_event, p.event)
    held = int(tl.mem.bytes[alive].sum())
    if s.peak_allocated_bytes is not None and held > s.peak_allocated_bytes:
        # the step's allocations alive at the peak add up to more than the allocator's own total there:
        # the events disagree (broken or hostile), so which ops hold the peak is unknown, not shown
        out.notes.append(
            "the allocations alive at the peak add up to more than the allocator's total at that moment: "
            "the memory events disagree, so the ops holding the peak are not shown"
        )
        return
    before = (s.peak_allocated_bytes or 0) - held if s.allocated_start_bytes is not None else None
    out.top_ops = live.top_ops(tables, tl.mem, tl.op, tl.root, alive, max(0, before) if before is not None else None)


def _against_device(out: Memory) -> None:
    total, peak, start = out.device_total_bytes, out.peak_allocated_bytes, out.allocated_start_bytes
    if total is None or peak is None:
        return
    reserved = out.peak_reserved_bytes
    if peak > total or (reserved is not None and reserved > total):
        # an impossible figure is never shown as one: no share, no headroom, and the likely cause
        out.notes.append(
            f"The peak ({nbytes(peak)} allocated, {nbytes(reserved)} reserved) exceeds the device's memory "
            f"({nbytes(total)}, {out.device_total_source}): the device size or the events are wrong, so the share "
            "of the device and the headroom are not given."
        )
        return
    out.peak_share = peak / total
    if reserved is not None:
        out.peak_reserved_share = reserved / total
    if start is None:
        return
    scaled = peak - start
    fixed = start
    factor = (total - fixed) / scaled if scaled > 0 and total > fixed else None
    at_90 = (NEAR_FULL * total - fixed) / scaled if scaled > 0 and NEAR_FULL * total > fixed else None
    out.headroom = Headroom(
        fixed_bytes=fixed,
        batch_scaled_bytes=scaled,
        batch_factor=factor,
        batch_factor_at_90=at_90,
        method=HEADROOM_METHOD,
    )


def _timeline(tl: timeline.Timeline, steps: Steps) -> MemoryTimeline:
    """The steps' events on one axis, at most TIMELINE_POINTS, each bucket keeping its highest allocation."""
    mem = tl.mem
    rows = np.flatnonzero((tl.step >= 0) & (mem.total_allocated >= 0))
    t0 = float(steps.cpu_start[0])
    if len(rows) > TIMELINE_POINTS:
        bucket = np.arange(len(rows)) * TIMELINE_POINTS // len(rows)
        # the highest allocation of each bucket: sort by (bucket, -allocated) and take each bucket's first
        order = np.lexsort((-mem.total_allocated[rows], bucket))
        first = np.flatnonzero(np.r_[True, bucket[order][1:] != bucket[order][:-1]])
        rows = np.sort(rows[order[first]])
    reserved = mem.total_reserved[rows]
    return MemoryTimeline(
        t_us=(mem.ts[rows] - t0).round(3).tolist(),
        allocated=mem.total_allocated[rows].tolist(),
        reserved=[int(r) if r >= 0 else None for r in reserved.tolist()],
        step_starts_us=(steps.cpu_start - t0).round(3).tolist(),
    )
