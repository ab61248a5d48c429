"""The ranks of one distributed run side by side, and the straggler they wait for.

A collective's kernel runs until every rank has joined it, so the fast ranks show the
slow rank's lateness as communication with no compute alongside, while the slow rank
shows little of it. The rank with the least exposed communication, when the others
have much more, is the one they wait for.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..analysis.report import WorkerReport

# The spread of exposed communication between ranks that names a straggler, as a share
# of the median step time.
STRAGGLER_MIN_SPREAD = 0.10


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


class Straggler(msgspec.Struct, kw_only=True):
    worker: str
    rank: int | None
    others_wait_us_per_step: float  # mean exposed communication of the other ranks, minus its own
    reason: str


class RankSummary(msgspec.Struct, kw_only=True):
    world_size: int | None
    ranks: list[RankRow]
    straggler: Straggler | None = None
    clock_reference: str | None = None  # the worker whose clock the shifts are relative to
    clock_residual_us: float | None = None  # median spread of a call's aligned ends across ranks
    clock_note: str | None = None  # one line: how the clocks were aligned, and by how much


class RankClock(msgspec.Struct, kw_only=True):
    """One rank's clock against the reference, and its waiting (analysis.clock_skew)."""

    shift_us: float | None
    wait_us_per_step: float | None


def _exposed(w: WorkerReport) -> float | None:
    return next((float(x["us_per_step"]) for x in w.waterfall if x.get("id") == "communication"), None)


def compare_ranks(workers: list[WorkerReport], clocks: list[RankClock | None] | None = None) -> RankSummary | None:
    """Side by side view of a run's ranks; None unless it has two or more analysed ranks.
    ``clocks``, one per worker when given, holds the aligned clocks (diagnosis.distributed)."""
    ok = [
        (w, clocks[i] if clocks else None)
        for i, w in enumerate(workers)
        if w.error is None and w.summary is not None and w.distributed
    ]
    if len(ok) < 2:
        return None
    rows = []
    for w, clock in ok:
        s = w.summary
        assert s is not None and w.distributed is not None
        comm = w.communication
        rows.append(
            RankRow(
                worker=w.name,
                span=w.span,
                rank=w.distributed.get("rank"),
                step_time_us=s.step_time_us,
                gpu_busy_share=s.gpu_busy_share,
                idle_share=s.idle_share,
                exposed_communication_us_per_step=_exposed(w),
                mfu=s.mfu,
                communication_us_per_step=comm.communication_us_per_step if comm else None,
                overlap_ratio=comm.overlap_ratio if comm else None,
                bubble_share=w.pipeline.bubble_share if w.pipeline else None,
                clock_shift_us=clock.shift_us if clock else None,
                collective_wait_us_per_step=clock.wait_us_per_step if clock else None,
            )
        )
    rows.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.worker))
    first = ok[0][0].distributed
    world: Any = first.get("world_size") if first else None
    return RankSummary(world_size=world, ranks=rows, straggler=_straggler(rows))


def _straggler(rows: list[RankRow]) -> Straggler | None:
    known = [r for r in rows if r.exposed_communication_us_per_step is not None]
    if len(known) < 2:
        return None
    slow = min(known, key=lambda r: r.exposed_communication_us_per_step or 0.0)
    others = [r.exposed_communication_us_per_step or 0.0 for r in known if r is not slow]
    wait = sum(others) / len(others) - (slow.exposed_communication_us_per_step or 0.0)
    steps = sorted(r.step_time_us for r in known)
    if wait < STRAGGLER_MIN_SPREAD * steps[len(steps) // 2]:
        return None
    return Straggler(
        worker=slow.worker,
        rank=slow.rank,
        others_wait_us_per_step=wait,
        reason=(
            f"the other ranks spend {wait / 1000:.1f} ms more per step in collectives with no compute alongside "
            f"than {slow.worker} does: they wait for it. Its GPU is idle {slow.idle_share:.0%} of the step; "
            f"its own findings say why (host work, launches, data loading)."
        ),
    )
