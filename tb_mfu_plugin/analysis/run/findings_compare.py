"""Findings of two runs side by side: which were fixed, which are new, which remain.

Computed here once for every face: the CLI's ``compare`` prints ``compare_findings``, the plugin's
``/compare`` body carries ``findings_against_baseline`` (every pair of a run's worker and the
baseline's, so the tab only looks up the pair it shows)."""

from __future__ import annotations

import msgspec

from ..report import Finding, RunReport, WorkerReport

FIXED, NEW, REMAINS = "fixed", "new", "remains"


class FindingChange(msgspec.Struct, kw_only=True):
    id: str
    subject: str | None
    title: str
    status: str  # fixed (in the baseline only), new (in the other run only), remains (both)
    baseline_gain_us_per_step: float | None
    gain_us_per_step: float | None
    # The same finding's severity and gain as a share of the step, in each run (None where absent).
    baseline_severity: str | None = None
    severity: str | None = None
    baseline_gain_share: float | None = None
    gain_share: float | None = None


class FindingsAgainstBaseline(msgspec.Struct, kw_only=True):
    """One worker of a compared run against one worker of the baseline run (indices into each
    run's ``workers``): its findings fixed, new or remaining."""

    run: str
    worker: int
    baseline_worker: int
    changes: list[FindingChange]


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
                baseline_severity=b.severity if b else None,
                severity=o.severity if o else None,
                baseline_gain_share=b.est_gain_share if b else None,
                gain_share=o.est_gain_share if o else None,
            )
        )
    order = {NEW: 0, FIXED: 1, REMAINS: 2}
    out.sort(key=lambda c: order[c.status])
    return out


def _usable(run: RunReport) -> list[tuple[int, WorkerReport]]:
    return [(i, w) for i, w in enumerate(run.workers) if w.error is None and w.summary is not None]


def findings_against_baseline(runs: list[RunReport | None]) -> list[FindingsAgainstBaseline]:
    """For each run after the first (the baseline), every pair of its usable workers with the
    baseline's; nothing while the baseline (or the run) is not loaded (None)."""
    if not runs or runs[0] is None:
        return []
    base = _usable(runs[0])
    out = []
    for run in runs[1:]:
        if run is None:
            continue
        for i, w in _usable(run):
            for j, b in base:
                changes = compare_findings(b.findings, w.findings)
                out.append(FindingsAgainstBaseline(run=run.name, worker=i, baseline_worker=j, changes=changes))
    return out
