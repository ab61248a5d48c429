"""``diagnose``: run every rule over one device's analysis and fill the report."""

from __future__ import annotations

from ..analysis.per_device import DeviceView
from ..analysis.report import WorkerReport
from ..analysis.time.steps import Steps
from ..trace.tables import TraceTables
from .context import Context
from .cost_time import Claim, Findings, TimeSet, combined_gain
from .finding import SEVERITIES, Finding, round_gain
from .rules import RULES
from .thresholds import DEFAULT, Thresholds
from .waterfall import waterfall
from .whatif_gains import retime

Claimed = list[tuple[Finding, TimeSet | None]]


def _order(f: Finding) -> tuple[float, int, str, str]:
    return (-f.est_gain_us_per_step, SEVERITIES.index(f.severity), f.id, f.subject or "")


def run_claims(ctx: Context, report: WorkerReport) -> Claimed:
    """Every registered rule, in order, each seeing what the rules before it found, with the time
    each finding's cost covers; one that fails leaves a note instead of hiding the others."""
    fired: dict[str, Findings] = {}
    found: Claimed = []
    for rule in RULES:
        try:
            claimed = rule.claims(ctx, fired)
        except Exception as exc:  # a rule bug on odd input must not lose the whole analysis
            report.notes.append(f"diagnosis rule {rule.id} failed: {type(exc).__name__}: {exc}")
            continue
        fired[rule.id] = Findings(claimed)
        found += claimed
    found.sort(key=lambda c: _order(c[0]))
    return found


def run_rules(ctx: Context, report: WorkerReport) -> list[Finding]:
    """The findings of every rule, largest gain first (``run_claims`` without the times)."""
    return [f for f, _ in run_claims(ctx, report)]


def diagnose(
    report: WorkerReport,
    tables: TraceTables,
    steps: Steps,
    view: DeviceView,
    thresholds: Thresholds | None = None,
) -> Claimed:
    """Fill ``report.findings`` (sorted by estimated gain, largest first) and ``report.waterfall``;
    return each finding with the time its cost covers, in the findings' order (the timeline pins
    them with it: ``analysis.timeline``).

    Call after the FLOPs/MFU step, so that ``est_mfu_after`` and the waterfall's MFU bar can use
    ``summary.mfu``, ``summary.flops_per_step`` and ``device.peak_flops`` (all optional).
    """
    report.findings = []
    report.waterfall = []
    report.combined_gain_us_per_step = report.combined_gain_share = None
    report.whatif = None
    if report.error is not None or report.summary is None or len(steps) == 0:
        return []
    ctx = Context(report, tables, steps, view, thresholds or DEFAULT)
    claimed = run_claims(ctx, report)
    try:
        claimed, retimed = retime(ctx, report, claimed)  # gains from re-timing the step
    except Exception as exc:  # a bug in the re-timing must not cost the findings: their own estimates stay
        report.whatif, retimed = None, None
        report.notes.append(f"what-if re-timing failed: {type(exc).__name__}: {exc}")
    claimed.sort(key=lambda c: _order(c[0]))
    report.findings = [f for f, _ in claimed]
    combined = (
        retimed
        if retimed is not None
        else combined_gain([Claim(f.est_gain_us_per_step, t) for f, t in claimed], ctx.step_us)
    )
    # rounded as each finding's gain is, so that one finding's combined gain equals its own
    report.combined_gain_us_per_step = round_gain(combined)
    report.combined_gain_share = report.combined_gain_us_per_step / ctx.step_us if ctx.step_us > 0 else None
    try:
        report.waterfall = waterfall(ctx)
    except Exception as exc:
        report.notes.append(f"diagnosis waterfall failed: {type(exc).__name__}: {exc}")
    return claimed
