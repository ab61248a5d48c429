"""The ranks of one distributed run side by side, and the straggler they wait for.

A collective's kernel runs until every rank has joined it, so the fast ranks show the
slow rank's lateness as communication with no compute alongside, while the slow rank
shows little of it. The rank with the least exposed communication, when the others
have much more, is the one they wait for.
"""

from __future__ import annotations

import msgspec

from ..analysis.report import Distributed, RankRow, RankSummary, Straggler, WorkerReport
from ..fmt import pct, us

__all__ = ["RankClock", "RankRow", "RankSummary", "Straggler", "compare_ranks"]

# The spread of exposed communication between ranks that names a straggler, as a share
# of the median step time.
STRAGGLER_MIN_SPREAD = 0.10


class RankClock(msgspec.Struct, kw_only=True):
    """One rank's clock against the reference, and its waiting (analysis.clock_skew)."""

    shift_us: float | None
    wait_us_per_step: float | None


def _exposed(w: WorkerReport) -> float | None:
    return next((bar.us_per_step for bar in w.waterfall if bar.id == "communication"), None)


def _has_rank(w: WorkerReport) -> bool:
    """Analysed, and its trace says it is part of a distributed run (a ``distributedInfo``
    with at least one key)."""
    return w.error is None and w.summary is not None and w.distributed not in (None, Distributed())


def compare_ranks(workers: list[WorkerReport], clocks: list[RankClock | None] | None = None) -> RankSummary | None:
    """Side by side view of a run's ranks; None unless it has two or more analysed ranks.
    ``clocks``, one per worker when given, holds the aligned clocks (diagnosis.distributed)."""
    ok = [(w, clocks[i] if clocks else None) for i, w in enumerate(workers) if _has_rank(w)]
    if len(ok) < 2:
        return None
    rows = []
    for w, clock in ok:
        s, dist, comm = w.summary, w.distributed, w.communication
        assert s is not None and dist is not None
        rows.append(
            RankRow(
                worker=w.name,
                span=w.span,
                rank=dist.rank,
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
    return RankSummary(world_size=first.world_size if first else None, ranks=rows, straggler=_straggler(rows))


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
            f"the other ranks spend {us(wait)} more per step in collectives with no compute alongside "
            f"than {slow.worker} does: they wait for it. Its GPU is idle {pct(slow.idle_share)} of the step; "
            f"its own findings say why (host work, launches, data loading)."
        ),
    )
