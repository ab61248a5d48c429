"""Findings of two runs side by side: which were fixed, which are new, which remain."""

from __future__ import annotations

import msgspec

from ..analysis.report import Finding

FIXED, NEW, REMAINS = "fixed", "new", "remains"


class FindingChange(msgspec.Struct, kw_only=True):
    id: str
    subject: str | None
    title: str
    status: str  # fixed (in the baseline only), new (in the other run only), remains (both)
    baseline_gain_us_per_step: float | None
    gain_us_per_step: float | None


def _key(f: Finding) -> tuple[str, str | None]:
    # (id, subject) is unique within a report: sync_point fires once per cause
    return (f.id, f.subject)


def compare_findings(baseline: list[Finding], other: list[Finding]) -> list[FindingChange]:
    """How ``other``'s findings differ from ``baseline``'s: new first, then fixed, then the rest."""
    base = {_key(f): f for f in baseline}
    then = {_key(f): f for f in other}
    out = []
    for key in list(base) + [k for k in then if k not in base]:
        b, o = base.get(key), then.get(key)
        status = REMAINS if b is not None and o is not None else (FIXED if o is None else NEW)
        shown = o or b
        assert shown is not None  # the key came from one of the two
        out.append(
            FindingChange(
                id=key[0],
                subject=key[1],
                title=shown.title,
                status=status,
                baseline_gain_us_per_step=b.est_gain_us_per_step if b else None,
                gain_us_per_step=o.est_gain_us_per_step if o else None,
            )
        )
    order = {NEW: 0, FIXED: 1, REMAINS: 2}
    out.sort(key=lambda c: order[c.status])
    return out
