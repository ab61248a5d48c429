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

__all__ = ["RankClock", "RankRow", "RankSummary", "Straggler", "compare_ranks"]

# The spread of exposed communication between ranks that names a straggler, as a share
# of the median step time.
STRAGGLER_MIN_SPREAD = 0.10
# What holds a straggler back, from its own GPU: busy at least this share of the step, its GPU
# work (it computes longer than the others); idle at least IDLE_BLAME of it, its host.
BUSY_BLAME = 0.80
IDLE_BLAME = 0.50
# The spread of the ranks' headline MFUs (highest / lowest) above which the ranks card says why they
# differ: the ranks of one synchronous job run one step, so their MFUs differ only by their estimates.
MFU_SPREAD_NOTE = 1.05
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
    straggler = _straggler(rows, findings)
    return RankSummary(
        world_size=first.world_size if first else None,
        ranks=rows,
        straggler=straggler,
        mfu_note=mfu_note(rows, straggler, [w for w, _ in ok]),
    )


def mfu_note(rows: list[RankRow], straggler: Straggler | None, workers: list[WorkerReport]) -> str | None:
    """Why the ranks' headline MFUs differ, where they spread over ``MFU_SPREAD_NOTE``: each rank's step
    without the profiler is estimated on its own trace, and a rank that waits in a collective for a
    slower one keeps that rank's profiled lateness in its step. The straggler waits for none, so its
    figure keeps no other rank's lateness; the re-timing of the ranks together that would give the
    job's own is not built (docs/mfu.md, section 6, has how far each rank was from the truth)."""
    mfus = [r.mfu for r in rows if r.mfu is not None]
    unprofiled = any(
        w.summary is not None and w.summary.mfu_status is not None and w.summary.mfu_status.basis == "without_profiler"
        for w in workers
    )
    if len(mfus) < 2 or not unprofiled or min(mfus) <= 0 or max(mfus) / min(mfus) <= MFU_SPREAD_NOTE:
        return None
    text = (
        f"The ranks' MFUs range {pct(min(mfus))}–{pct(max(mfus))}, though the ranks of one job share a step: each "
        "rank's step without the profiler is estimated on its own trace, and a rank that waits in a collective "
        "for a slower one keeps that rank's profiled lateness, so it reads low."
    )
    row = next((r for r in rows if straggler is not None and r.worker == straggler.worker), None)
    if row is None or row.mfu is None:
        return text
    return f"{text} The straggler, {row.worker}, waits for none: its {pct(row.mfu)} keeps no other rank's lateness."


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
