"""One device's complete report: the analysis (``analysis.per_device``), then the findings over it
(``diagnosis``), added to a copy of the analysis' report. Nothing edits a report in place."""

from __future__ import annotations

import msgspec

from ..analysis.options import AnalysisOptions
from ..analysis.per_device import analyze_device
from ..analysis.report import WorkerReport
from ..analysis.timeline.block import timeline_block
from ..diagnosis import Diagnosis, Thresholds, diagnose
from ..trace.locate.sidecar import Sidecar
from ..trace.tables import TraceTables


def device_report(
    tables: TraceTables,
    device: int,
    options: AnalysisOptions,
    thresholds: Thresholds,
    sidecar: tuple[Sidecar, str] | None = None,
    *,
    name: str = "",
    span: str = "",
) -> WorkerReport:
    """The report of ``device`` in ``tables``: every figure, the findings, the what-if panel."""
    analysis = analyze_device(tables, device, options, sidecar, name=name, span=span)
    if analysis.view is None:
        return analysis.report
    found = diagnose(analysis, thresholds)
    report = with_diagnosis(analysis.report, found)
    # last: the timeline pins the findings to their moments, with the time each one's cost covers
    times = [(t.start, t.end) if t is not None else None for t in found.times]
    try:
        timeline = timeline_block(tables, analysis.view, analysis.steps, report, times)
    except Exception as exc:  # noqa: BLE001 - a timeline bug must not cost the rest of the report
        return msgspec.structs.replace(report, notes=[*report.notes, f"timeline failed: {type(exc).__name__}: {exc}"])
    return msgspec.structs.replace(report, timeline=timeline)


def with_diagnosis(report: WorkerReport, found: Diagnosis) -> WorkerReport:
    """A copy of the analysis' ``report`` with the diagnosis' findings, what-if panel and gains."""
    return msgspec.structs.replace(
        report,
        findings=found.findings,
        whatif=found.whatif,
        combined_gain_us_per_step=found.combined_gain_us_per_step,
        combined_gain_share=found.combined_gain_share,
        notes=report.notes + found.notes,
    )
