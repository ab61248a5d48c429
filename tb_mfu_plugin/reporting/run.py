"""A run's report: the reports of its files, with the run-level view of a distributed run (its
strategy, its ranks' clocks aligned, the collectives' bandwidth free of waiting, the ranks side by
side and the straggler, and the finding that needs every rank), the one way every face puts a run
together."""

from __future__ import annotations

import msgspec

from ..analysis.distributed.blocks import Communication
from ..analysis.distributed.strategy import run_strategy
from ..analysis.report import RunReport, WorkerReport
from ..analysis.run.clocks import align_ranks
from ..analysis.run.ranks import compare_ranks
from ..diagnosis import DEFAULT, Thresholds
from ..diagnosis.run_rules import with_run_findings


def run_report(name: str, workers: list[WorkerReport], thresholds: Thresholds = DEFAULT) -> RunReport:
    """The run ``name`` of ``workers`` (in the run's order) with its ranks compared, their clocks
    aligned and the strategy named. The run-level view is optional: should it fail on odd input, the
    workers' reports still make the run."""
    try:
        return _with_ranks(name, workers, thresholds)
    except Exception:  # noqa: BLE001
        try:
            return RunReport(name=name, workers=workers, ranks=compare_ranks(workers))
        except Exception:  # noqa: BLE001
            return RunReport(name=name, workers=workers)


def _with_ranks(name: str, workers: list[WorkerReport], thresholds: Thresholds) -> RunReport:
    comm: list[Communication] = [w.communication for w in workers if w.error is None and w.communication is not None]
    strategy = run_strategy([c.strategy for c in comm])
    aligned = align_ranks(workers)
    out = [
        with_run_findings(w, thresholds) if w is not before else w
        for w, before in zip(aligned.workers, workers, strict=True)
    ]
    ranks = compare_ranks(out, aligned.clocks)
    if ranks is not None and aligned.note is not None:
        ranks = msgspec.structs.replace(
            ranks,
            clock_reference=aligned.reference,
            clock_residual_us=aligned.residual_us,
            clock_note=aligned.note,
        )
    return RunReport(name=name, workers=out, ranks=ranks, strategy=strategy)
