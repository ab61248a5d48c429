"""The ranks of one distributed run side by side, and the straggler they wait for.

A collective's kernel runs until every rank has joined it, so the fast ranks show the
slow rank's lateness as communication with no compute alongside, while the slow rank
shows little of it. The rank with the least exposed communication, when the others
have much more, is the one they wait for.
"""

from __future__ import annotations

import msgspec

from ..fmt import pct, us
from ..report import Distributed, Finding, RankRow, RankSummary, Straggler, WorkerReport
from .job_mfu import job_mfu, mfu_note, waited_note

__all__ = ["RankClock", "RankRow", "RankSummary", "Straggler", "compare_ranks"]

# The spread of exposed communication between ranks that names a straggler, as a share
# of the median step time.
STRAGGLER_MIN_SPREAD = 0.10
# What holds a straggler back, from its own GPU: busy at least this share of the step, its GPU
# work (it computes longer than the others); idle at least IDLE_BLAME of it, its host.
BUSY_BLAME = 0.80
IDLE_BLAME = 0.50
# Findings of GPU idle that the host causes; the waits on other ranks say nothing of the straggler
# (it is the one the others wait for); every other rule names GPU work (compute, copies).
_HOST_FINDINGS = frozenset({"gpu_idle", "launch_bound", "dataloader_stall", "sync_point"})
_WAIT_FINDINGS = frozenset({"exposed_communication", "low_bus_bandwidth", "pipeline_bubble"})


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
    findings = {(w.name, w.span): w.findings for w, _ in ok}
    job = job_mfu([w for w, _ in ok])
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
                waited_note=waited_note(w, job),
            )
        )
    rows.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.worker))
    first = ok[0][0].distributed
    return RankSummary(
        world_size=first.world_size if first else None,
        ranks=rows,
        straggler=_straggler(rows, findings),
        mfu_note=mfu_note(rows, [w for w, _ in ok], job),
        job=job,
    )


def _blame(row: RankRow, findings: list[Finding]) -> str:
    """What holds the straggler back, by what its GPU does: busy, its GPU work; idle, its host;
    and its own largest finding of that side."""
    busy, idle = row.gpu_busy_share, row.idle_share
    own = [f for f in findings if f.id not in _WAIT_FINDINGS]  # engine order: largest gain first
    if busy >= BUSY_BLAME:
        text = (
            f"Its GPU is busy {pct(busy)} of the step: it has more GPU work than the others (unbalanced layers, "
            "shards or sequence lengths) or slower kernels"
        )
        own = [f for f in own if f.id not in _HOST_FINDINGS]
    elif idle >= IDLE_BLAME:
        text = f"Its GPU is idle {pct(idle)} of the step: its host holds it back (host work, launches, data loading)"
        own = [f for f in own if f.id in _HOST_FINDINGS]
    else:
        text = (
            f"Its GPU is busy {pct(busy)} and idle {pct(idle)} of the step: both its GPU work and its host hold it back"
        )
    if not own:
        return text + "; its own findings name no cause of that."
    return f"{text}; its largest finding: {own[0].title}."


def _straggler(rows: list[RankRow], findings: dict[tuple[str, str], list[Finding]]) -> Straggler | None:
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
            f"than {slow.worker} does: they wait for it. {_blame(slow, findings.get((slow.worker, slow.span), []))}"
        ),
    )
