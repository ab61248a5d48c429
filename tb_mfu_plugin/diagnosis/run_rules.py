"""The finding that needs every rank of a run: ``low_bus_bandwidth`` on the collectives' bandwidth
measured from the last member's arrival (``analysis.run.clocks``), run once the ranks' clocks are
aligned. The rank's report gains it in a copy, with its combined gain updated."""

from __future__ import annotations

import msgspec

from ..analysis.report import Finding, WorkerReport
from ..analysis.timeline.repin import repinned
from .context import ReportFacts
from .engine import finding_order
from .finding import rebased
from .rules.collective_bandwidth import low_bus_bandwidth
from .thresholds import Thresholds


def with_run_findings(w: WorkerReport, th: Thresholds) -> WorkerReport:
    """``w`` with ``low_bus_bandwidth`` run on its arrival bandwidths (its earlier finding of that
    rule replaced), in the engine's order, and the gain of fixing every finding updated."""
    if w.summary is None or w.communication is None:
        return w
    ctx = ReportFacts(w, th)
    # the step the engine's gains are shares of (without the profiler where it re-timed them): the
    # new finding's share and the combined share are of it too
    step = w.whatif.unprofiled_step_us if w.whatif is not None else ctx.step_us
    found = [rebased(f, step, ctx.mfu, th.high_share, th.medium_share) for f in low_bus_bandwidth(ctx)]
    kept = [f for f in w.findings if f.id != low_bus_bandwidth.id]
    findings = sorted(kept + found, key=finding_order)
    combined = _combined_with(w, kept, found, step)
    share = combined / step if combined is not None and step > 0 else None
    return msgspec.structs.replace(
        w,
        findings=findings,
        combined_gain_us_per_step=combined,
        combined_gain_share=share,
        timeline=repinned(w.timeline, findings, {low_bus_bandwidth.id: "communication"}),
    )


def _combined_with(w: WorkerReport, kept: list[Finding], found: list[Finding], step_us: float) -> float | None:
    """The combined gain once ``found`` (low_bus_bandwidth, from the ranks' reports alone, with no
    trace to say when) joins the engine's findings ``kept``. Its time is the exposed time of its
    collective, which lies inside exposed_communication's where that fired (adding nothing), and
    apart from every other finding's (no compute, copy or idle runs then)."""
    base = w.combined_gain_us_per_step
    if not found or base is None or len(kept) != len(w.findings):
        return base  # (kept short: the engine's combined gain already held earlier low_bus_bandwidth findings)
    extra = sum(f.est_gain_us_per_step for f in found)
    if any(f.id == "exposed_communication" for f in kept):
        extra = 0.0
    elif w.communication is not None:
        extra = min(extra, w.communication.exposed_us_per_step)
    largest = max(f.est_gain_us_per_step for f in [*kept, *found])
    return max(min(base + extra, step_us), largest)
