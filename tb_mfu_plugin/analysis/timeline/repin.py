"""The timeline's marks after the run's diagnosis changed a device's findings: the ranks' reports
together give findings that one trace alone cannot (``low_bus_bandwidth``, from the bandwidth
measured at the last member's arrival), and those have no time of their own in the device's claims.
They are pinned to the intervals of the class their rule is about (its collective kernels)."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import numpy as np

from .. import fmt
from ..report import Finding
from .marks import MAX_MARKS_PER_FINDING
from .types import Timeline, TimelineMark


def repinned(t: Timeline | None, findings: list[Finding], classes: Mapping[str, str]) -> Timeline | None:
    """``t`` with the marks of ``findings``: those it has (the others dropped), and for a finding
    without one, its rule's class (``classes``: finding id -> timeline class) on the timeline: the
    longest intervals of that class, else the whole step."""
    if t is None:
        return None
    keys = {(f.id, f.subject) for f in findings}
    marks = [m for m in t.marks if (m.id, m.subject) in keys]
    have = {(m.id, m.subject) for m in marks}
    for f in findings:
        if (f.id, f.subject) not in have:
            marks += _pinned(t, f, classes.get(f.id))
    return msgspec.structs.replace(t, marks=marks)


def _pinned(t: Timeline, f: Finding, cls: str | None) -> list[TimelineMark]:
    iv = t.intervals
    code = t.classes.index(cls) if cls in t.classes else -1
    rows = np.flatnonzero(np.asarray(iv.cls) == code) if code >= 0 else np.empty(0, np.int64)
    dur = np.asarray(iv.dur_us)[rows]
    keep = rows[np.argsort(-dur, kind="stable")[:MAX_MARKS_PER_FINDING]]
    out = [
        TimelineMark(
            id=f.id,
            subject=f.subject,
            lane=iv.lane[k],
            start_us=iv.start_us[k],
            dur_us=iv.dur_us[k],
            what=f"{fmt.us(iv.dur_us[k])}: {t.names[iv.name[k]]}",
        )
        for k in sorted(keep.tolist(), key=lambda k: iv.start_us[k])
    ]
    whole = "the whole step: the rule names no moment"
    return out or [TimelineMark(id=f.id, subject=f.subject, lane=None, start_us=0.0, dur_us=t.dur_us, what=whole)]
