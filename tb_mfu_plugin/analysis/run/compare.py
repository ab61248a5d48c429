"""Runs compared rank by rank (``tb-mfu compare``): every analysed worker of the baseline
beside the worker of another run that holds the same rank, with the findings fixed, new or
remaining between the two; each run given after the baseline is compared with it so.

Workers are matched by their distributed rank when every worker of both runs has one (the
trace's ``distributedInfo``), else by their order in the run (discovery order, spans in time
order, as every face lists them). A rank found in one run only is listed with nothing beside it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..memory.types import MemoryBrief
from ..report import Report, Summary, WorkerReport
from .findings_compare import FindingChange, compare_findings
from .strategies import StrategyRow

COMPARISON_SCHEMA = 2  # 1 compared the first worker of each run only


class ComparedWorker(msgspec.Struct, kw_only=True):
    run: str
    worker: str
    span: str
    file: str
    summary: Summary
    flags: list[str]  # the worker's (an MFU withheld as impossible is flagged)
    memory: MemoryBrief | None = None  # profile_memory=True traces only (analysis.memory)


class ComparedRank(msgspec.Struct, kw_only=True):
    """One rank: the baseline's worker and the other run's (None where the run has no such rank)."""

    rank: int | None  # None when matched by order
    position: int  # its place among the pairs, from 0
    baseline: ComparedWorker | None
    other: ComparedWorker | None
    findings: list[FindingChange]  # fixed, new or remaining; empty unless both sides are there


class AgainstBaseline(msgspec.Struct, kw_only=True):
    """One run given after the baseline, rank by rank against it."""

    matched_by: Literal["rank", "order"]
    ranks: list[ComparedRank]


class Comparison(msgspec.Struct, kw_only=True):
    """What ``tb-mfu compare --json`` prints: ``matched_by`` and ``ranks`` are the second run against
    the baseline; ``against_baseline`` holds every run after the baseline, that one first."""

    schema_version: int = COMPARISON_SCHEMA
    matched_by: Literal["rank", "order"]
    ranks: list[ComparedRank]
    strategies: list[StrategyRow] = []  # every run given, side by side by strategy
    against_baseline: list[AgainstBaseline] = []


def analysed(report: Report) -> list[tuple[str, WorkerReport]]:
    """Each worker report with a summary, with its run's name, in the report's order."""
    return [(r.name, w) for r in report.runs for w in r.workers if w.error is None and w.summary is not None]


def _rank(w: WorkerReport) -> int | None:
    return w.distributed.rank if w.distributed is not None else None


def _compared(run: str, w: WorkerReport) -> ComparedWorker:
    assert w.summary is not None
    memory = w.memory.brief() if w.memory is not None else None
    return ComparedWorker(
        run=run, worker=w.name, span=w.span, file=w.file, summary=w.summary, flags=w.flags, memory=memory
    )


def compare_runs(baseline: Report, other: Report) -> Comparison:
    """Every rank of ``baseline`` against the same rank of ``other`` (see the module's doc)."""
    a, b = analysed(baseline), analysed(other)
    ranked = all(_rank(w) is not None for _, w in a + b) and len({_rank(w) for _, w in a}) == len(a)
    ranked = ranked and len({_rank(w) for _, w in b}) == len(b)
    if ranked:
        by_a, by_b = {_rank(w): (r, w) for r, w in a}, {_rank(w): (r, w) for r, w in b}
        keys: list[int | None] = sorted({*by_a, *by_b}, key=lambda k: k if k is not None else -1)
        pairs = [(k, by_a.get(k), by_b.get(k)) for k in keys]
    else:
        n = max(len(a), len(b))
        pairs = [(None, a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(n)]
    out = []
    for i, (rank, x, y) in enumerate(pairs):
        changes = compare_findings(x[1].findings, y[1].findings) if x is not None and y is not None else []
        out.append(
            ComparedRank(
                rank=rank,
                position=i,
                baseline=_compared(*x) if x is not None else None,
                other=_compared(*y) if y is not None else None,
                findings=changes,
            )
        )
    return Comparison(matched_by="rank" if ranked else "order", ranks=out)


def compare_all(baseline: Report, others: list[Report]) -> Comparison:
    """Every run of ``others`` against ``baseline``, rank by rank; the first one also as the
    comparison's own ``matched_by`` and ``ranks`` (what a comparison of two runs has)."""
    each = [compare_runs(baseline, other) for other in others]
    out = each[0]
    out.against_baseline = [AgainstBaseline(matched_by=c.matched_by, ranks=c.ranks) for c in each]
    return out
