"""Per analysed step, from the memory events in its host window: the peak allocated and reserved,
where in the step the peak falls, the allocation at the step's start and end, and the growth from
the step before.

- The allocation at the step's start is the first event's ``Total Allocated`` less its ``Bytes``:
  what ``torch.cuda.memory_allocated()`` reads just before it. The peak is the highest
  ``Total Allocated`` of the step's events, or that start if higher: what
  ``torch.cuda.max_memory_allocated()`` reads after ``reset_peak_memory_stats()`` at the step's
  start.
- Unknown totals (the trace layer leaves impossible ones unknown) are skipped; a step with none
  known has every figure unknown. The start is unknown when the first event's change or total is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.tables import UNKNOWN_BYTES, TraceTables
from ..time.steps import Steps
from .timeline import PHASES, Timeline
from .types import MemoryStep


@dataclass(frozen=True)
class StepPeak:
    """Where one step's peak is: the event's index in the timeline (-1 when unknown)."""

    event: int
    start_event: int  # the step's first event, -1 none


def _op_name(tables: TraceTables, row: int) -> str | None:
    return tables.names[tables.cpu.name[row]] if row >= 0 else None


def _start(tl: Timeline, first: int) -> int | None:
    total, change = int(tl.mem.total_allocated[first]), int(tl.mem.bytes[first])
    if total < 0 or change == UNKNOWN_BYTES or total - change < 0:
        return None
    return total - change


def step_figures(tables: TraceTables, tl: Timeline, steps: Steps) -> tuple[list[MemoryStep], list[StepPeak]]:
    """One ``MemoryStep`` per analysed step, and where each step's peak is."""
    mem = tl.mem
    out: list[MemoryStep] = []
    peaks: list[StepPeak] = []
    prev_start: int | None = None
    prev_number = 0
    for i in range(len(steps)):
        rows = np.flatnonzero(tl.step == i)
        number = int(steps.number[i])
        known = rows[mem.total_allocated[rows] >= 0]
        if not len(known):
            out.append(_unknown(number, len(rows)))
            peaks.append(StepPeak(-1, int(rows[0]) if len(rows) else -1))
            prev_start = None
            continue
        start = _start(tl, int(rows[0]))
        k = int(known[np.argmax(mem.total_allocated[known])])
        peak = int(mem.total_allocated[k])
        at_start = start is not None and start > peak
        reserved = mem.total_reserved[rows][mem.total_reserved[rows] >= 0]
        res_at_peak = int(mem.total_reserved[k])
        growth = None
        if start is not None and prev_start is not None and number > prev_number:
            growth = round((start - prev_start) / (number - prev_number))
        out.append(
            MemoryStep(
                step=number,
                events=len(rows),
                peak_allocated_bytes=max(peak, start or 0),
                peak_reserved_bytes=int(reserved.max()) if len(reserved) else None,
                allocated_start_bytes=start,
                allocated_end_bytes=int(mem.total_allocated[known[-1]]) if known[-1] == rows[-1] else None,
                growth_bytes=growth,
                reserved_minus_allocated_bytes=res_at_peak - peak if res_at_peak >= 0 and not at_start else None,
                peak_at_us=0.0 if at_start else float(mem.ts[k] - steps.cpu_start[i]),
                peak_phase=None if at_start else PHASES[int(tl.phase[k])],  # type: ignore[arg-type]
                peak_op=None if at_start else _op_name(tables, int(tl.op[k])),
                peak_root_op=None if at_start else _op_name(tables, int(tl.root[k])),
            )
        )
        peaks.append(StepPeak(-1 if at_start else k, int(rows[0])))
        prev_start, prev_number = start, number
    return out, peaks


def _unknown(number: int, events: int) -> MemoryStep:
    return MemoryStep(
        step=number,
        events=events,
        peak_allocated_bytes=None,
        peak_reserved_bytes=None,
        allocated_start_bytes=None,
        allocated_end_bytes=None,
        growth_bytes=None,
        reserved_minus_allocated_bytes=None,
        peak_at_us=None,
        peak_phase=None,
        peak_op=None,
        peak_root_op=None,
    )


def growth_per_step(rows: list[MemoryStep]) -> float | None:
    """The median of the steps' growth (step to step, per step between them); None without two
    consecutive steps of known start."""
    known = [s.growth_bytes for s in rows if s.growth_bytes is not None]
    return float(np.median(known)) if known else None
