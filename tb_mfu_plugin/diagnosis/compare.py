"""Findings of two runs side by side: which were fixed, which are new, which remain."""

from __future__ import annotations

from typing import Any

import msgspec

FIXED, NEW, REMAINS = "fixed", "new", "remains"


class FindingChange(msgspec.Struct, kw_only=True):
    id: str
    subject: str | None
    title: str
    status: str  # fixed (in the baseline only), new (in the other run only), remains (both)
    baseline_gain_us_per_step: float | None
    gain_us_per_step: float | None


def _key(f: dict[str, Any]) -> tuple[str, str | None]:
    # (id, subject) is unique within a report: sync_point fires once per cause
    return (str(f.get("id")), f.get("subject"))


def compare_findings(baseline: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[FindingChange]:
    """How ``other``'s findings differ from ``baseline``'s: new first, then fixed, then the rest."""
    base = {_key(f): f for f in baseline}
    then = {_key(f): f for f in other}
    out = []
    for key in list(base) + [k for k in then if k not in base]:
        b, o = base.get(key), then.get(key)
        status = REMAINS if b is not None and o is not None else (FIXED if o is None else NEW)
        out.append(
            FindingChange(
                id=key[0],
                subject=key[1],
                title=str((o or b or {}).get("title", "")),
                status=status,
                baseline_gain_us_per_step=b.get("est_gain_us_per_step") if b else None,
                gain_us_per_step=o.get("est_gain_us_per_step") if o else None,
            )
        )
    order = {NEW: 0, FIXED: 1, REMAINS: 2}
    out.sort(key=lambda c: order[c.status])
    return out
