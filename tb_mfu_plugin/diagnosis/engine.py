"""``diagnose``: run every rule over one device's analysis and return the findings, the what-if
panel and the gain of fixing them all (``Diagnosis``); ``reporting.device`` adds them to the report."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.critical_path.report_types import WhatIf
from ..analysis.per_device import DeviceAnalysis
from ..analysis.report import Finding
from .context import Context
from .cost_time import Claim, Findings, TimeSet, combined_gain
from .finding import SEVERITIES, round_gain
from .rules import RULES
from .thresholds import DEFAULT, Thresholds
from .whatif_gains import retime

Claimed = list[tuple[Finding, TimeSet | None]]


@dataclass(frozen=True)
class Diagnosis:
    """What the rules say of one device: the findings (largest gain first) with the time each one's
    cost covers, the what-if panel, the gain of fixing every finding at once (µs per mean step and
    its share), and the notes of rules that failed."""

    findings: list[Finding] = field(default_factory=list)
    # each finding's time, in the findings' order (the timeline pins them with it: analysis.timeline)
    times: list[TimeSet | None] = field(default_factory=list)
    whatif: WhatIf | None = None
    combined_gain_us_per_step: float | None = None
    combined_gain_share: float | None = None
    notes: list[str] = field(default_factory=list)


def finding_order(f: Finding) -> tuple[float, int, str, str]:
    """The findings' order on every face: largest gain first, then severity, id and subject."""
    return (-f.est_gain_us_per_step, SEVERITIES.index(f.severity), f.id, f.subject or "")


def run_claims(ctx: Context, notes: list[str]) -> Claimed:
    """Every registered rule, in order, each seeing what the rules before it found, with the time
    each finding's cost covers; one that fails leaves a note instead of hiding the others."""
    fired: dict[str, Findings] = {}
    found: Claimed = []
    for rule in RULES:
        try:
            claimed = rule.claims(ctx, fired)
        except Exception as exc:  # a rule bug on odd input must not lose the whole analysis
            notes.append(f"diagnosis rule {rule.id} failed: {type(exc).__name__}: {exc}")
            continue
        fired[rule.id] = Findings(claimed)
        found += claimed
    found.sort(key=lambda c: finding_order(c[0]))
    return found


def run_rules(ctx: Context, notes: list[str] | None = None) -> list[Finding]:
    """The findings of every rule, largest gain first (``run_claims`` without the times)."""
    return [f for f, _ in run_claims(ctx, notes if notes is not None else [])]


def diagnose(analysis: DeviceAnalysis, thresholds: Thresholds | None = None) -> Diagnosis:
    """The findings of one device's analysis (none where it has no analysed step). The analysis has
    decided MFU already, so ``est_mfu_after`` projects from the summary's MFU and the peak."""
    report, view = analysis.report, analysis.view
    if report.error is not None or report.summary is None or view is None or len(analysis.steps) == 0:
        return Diagnosis()
    ctx = Context(report, analysis.tables, analysis.steps, view, thresholds or DEFAULT)
    notes: list[str] = []
    claimed = run_claims(ctx, notes)
    whatif: WhatIf | None = None
    try:
        claimed, retimed, whatif = retime(ctx, claimed)  # gains from re-timing the step
    except Exception as exc:  # a bug in the re-timing must not cost the findings: their own estimates stay
        retimed = None
        notes.append(f"what-if re-timing failed: {type(exc).__name__}: {exc}")
    claimed.sort(key=lambda c: finding_order(c[0]))
    # the step the findings' gains are shares of: without the profiler where the model re-timed them
    step = whatif.unprofiled_step_us if whatif is not None else ctx.step_us
    combined = (
        retimed if retimed is not None else combined_gain([Claim(f.est_gain_us_per_step, t) for f, t in claimed], step)
    )
    # rounded as each finding's gain is, so that one finding's combined gain equals its own
    gain = round_gain(combined)
    return Diagnosis(
        findings=[f for f, _ in claimed],
        times=[t for _, t in claimed],
        whatif=whatif,
        combined_gain_us_per_step=gain,
        combined_gain_share=gain / step if step > 0 else None,
        notes=notes,
    )
