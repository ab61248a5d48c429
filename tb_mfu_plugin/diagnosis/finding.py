"""The finding: a named bottleneck with its evidence, estimated gain and fix.

``Finding`` itself is a report type (``analysis.report``: the report holds the findings);
this module makes one from what a rule measured.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..analysis.device.mfu import projected_mfu
from ..analysis.evidence import Evidence
from ..analysis.report import Benefit, Finding, Severity

__all__ = ["SEVERITIES", "Finding", "make_finding"]

SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low")


def _clean(v: Any) -> Any:
    """Plain JSON types (numpy scalars out), floats rounded for readable output."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f or f in (float("inf"), float("-inf")):
        return None
    if f.is_integer() and abs(f) < 1e15 and not isinstance(v, float):
        return int(f)
    return round_gain(f)


def _plain(v: Any) -> Any:
    """A numpy scalar as the Python number or bool it holds (``msgspec.to_builtins``' hook)."""
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"evidence holds a {type(v).__name__}, which is no JSON value")


def _checked(evidence: Evidence) -> Evidence:
    """The evidence with plain JSON values, floats rounded (``_clean``), and checked against its
    struct's types: a rule whose evidence does not fit its type fails here, not in a face."""
    raw = _clean(msgspec.to_builtins(evidence, enc_hook=_plain))
    out: Evidence = msgspec.convert(raw, type=type(evidence))
    return out


def round_gain(f: float) -> float:
    # monotone, so a rounded gain never exceeds the rounded cost it is bounded by
    return round(f, 4) if abs(f) < 10 else round(f, 1)


def make_finding(
    *,
    id: str,
    title: str,
    evidence: Evidence,
    cost_us: float,
    gain_us: float,
    step_us: float,
    mfu: float | None,
    recommendation: str,
    high_share: float,
    medium_share: float,
    subject: str | None = None,
    risk: Severity | None = None,
    benefit: Benefit | None = None,
) -> Finding:
    """A finding whose gain is clamped to [0, cost] and whose cost to the step: no estimate exceeds
    what it removes, and no cause takes more than the step (a rule that sums the durations of
    events that run at once, duplicated or on many streams, could claim more: the evidence then
    keeps the figure it measured, ``cost_above_step_us_per_step``). ``risk``: the least severity,
    for a finding about a risk rather than a time (a leak that will fill the device)."""
    measured = max(0.0, float(cost_us))
    cost = min(measured, step_us) if step_us > 0 else measured
    gain = min(max(0.0, float(gain_us)), cost)
    share = gain / step_us if step_us > 0 else 0.0
    severity: Severity = "high" if share >= high_share else "medium" if share >= medium_share else "low"
    if risk is not None:
        severity = min(severity, risk, key=SEVERITIES.index)
    # not rounded: the faces format it as they format the headline MFU, so a fix that saves nothing
    # reads the headline's figure (a projection rounded here read 32.8 % beside a headline of 32.7 %)
    after = projected_mfu(mfu, step_us, gain)
    ev = msgspec.structs.replace(evidence, cost_us_per_step=cost, cost_share=cost / step_us if step_us > 0 else 0.0)
    if measured > cost:
        ev = msgspec.structs.replace(ev, cost_above_step_us_per_step=measured)
    return Finding(
        id=id,
        severity=severity,
        title=title,
        evidence=_checked(ev),
        est_gain_us_per_step=round_gain(gain),
        est_gain_share=round(share, 4),
        est_mfu_after=after,
        recommendation=recommendation,
        subject=subject,
        benefit=benefit,
    )


def rebased(f: Finding, step_us: float, mfu: float | None, high_share: float, medium_share: float) -> Finding:
    """A finding its rule estimated on the traced step, its share, severity and projected MFU over
    ``step_us``, the step the re-timed findings' gains are of (the step without the profiler): every
    finding of a report is a share of one step, and "all together" is a share of that step too (a
    pipeline run read "all findings together: 40.5 % of the step" under a finding of 45.3 %). The gain
    is the rule's own; its severity is never lowered (it is the least severity, as a risk's is)."""
    if step_us <= 0:
        return f
    ev = f.evidence
    measured = max(ev.cost_us_per_step, ev.cost_above_step_us_per_step or 0.0)
    return make_finding(
        id=f.id,
        title=f.title,
        evidence=ev,
        cost_us=measured,
        gain_us=f.est_gain_us_per_step,
        step_us=step_us,
        mfu=mfu,
        recommendation=f.recommendation,
        high_share=high_share,
        medium_share=medium_share,
        subject=f.subject,
        risk=f.severity,
        benefit=f.benefit,
    )
