"""One device's complete report: the analysis (``analysis.per_device``), then the findings over it
(``diagnosis``), added to a copy of the analysis' report. Nothing edits a report in place."""

from __future__ import annotations

import msgspec

from ..analysis.options import AnalysisOptions
from ..analysis.per_device import analyze_device
from ..analysis.report import WorkerReport
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
    return with_diagnosis(analysis.report, diagnose(analysis, thresholds))


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
