"""``diagnose``: run every rule over one device's analysis and fill the report."""

from __future__ import annotations

from ..analysis.report import WorkerReport
from ..analysis.steps import Steps
from ..analysis.worker import DeviceView
from ..trace.tables import TraceTables
from .context import Context
from .finding import SEVERITIES, Finding
from .rules import RULES
from .thresholds import DEFAULT, Thresholds
from .waterfall import waterfall


def run_rules(ctx: Context, report: WorkerReport) -> list[Finding]:
    """Every registered rule, in order, each seeing what the rules before it found; one that
    fails leaves a note instead of hiding the others."""
    fired: dict[str, list[Finding]] = {}
    for rule in RULES:
        try:
            fired[rule.id] = rule(ctx, fired)
        except Exception as exc:  # a rule bug on odd input must not lose the whole analysis
            report.notes.append(f"diagnosis rule {rule.id} failed: {type(exc).__name__}: {exc}")
    found = [f for findings in fired.values() for f in findings]
    found.sort(key=lambda f: (-f.est_gain_us_per_step, SEVERITIES.index(f.severity), f.id, f.subject or ""))
    return found


def diagnose(
    report: WorkerReport,
    tables: TraceTables,
    steps: Steps,
    view: DeviceView,
    thresholds: Thresholds | None = None,
) -> None:
    """Fill ``report.findings`` (sorted by estimated gain, largest first) and ``report.waterfall``.

    Call after the FLOPs/MFU step, so that ``est_mfu_after`` and the waterfall's MFU bar can use
    ``summary.mfu``, ``summary.flops_per_step`` and ``device.peak_flops`` (all optional).
    """
    report.findings = []
    report.waterfall = []
    if report.error is not None or report.summary is None or len(steps) == 0:
        return
    ctx = Context(report, tables, steps, view, thresholds or DEFAULT)
    report.findings = run_rules(ctx, report)
    try:
        report.waterfall = waterfall(ctx)
    except Exception as exc:
        report.notes.append(f"diagnosis waterfall failed: {type(exc).__name__}: {exc}")
