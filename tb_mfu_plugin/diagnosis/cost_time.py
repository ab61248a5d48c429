"""The time a finding's cost covers, as a set of intervals on the device's clock, and the gain of
fixing every finding at once.

Each rule says which stretches of the analysed steps its cause takes (``Hit.time``): the kernels
or copies it names, or its share of the GPU's idle gaps. Two findings whose stretches overlap
report the same time twice; the engine keeps them apart (``overlap_us``) and never adds their
gains: fixing all the findings together saves ``combined_gain``, each finding's gain scaled by
the part of its time that no finding of larger gain has already claimed. That is at least the
largest single gain and at most the union of the costs, so never more than the step.

An idle gap has no position for each of its causes (the data loading, the syncs and the rest
split its length, not its span): each part is laid end to end from the gap's start, in that
order, so the parts of one gap never overlap and their lengths are exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..analysis.report import Finding
from ..analysis.time import intervals
from .context import Context


@dataclass(frozen=True)
class TimeSet:
    """Disjoint half-open intervals ``[start, end)``, sorted, on the device's clock (µs)."""

    start: np.ndarray
    end: np.ndarray

    @staticmethod
    def of(starts: np.ndarray, ends: np.ndarray) -> TimeSet:
        keep = ends > starts
        return TimeSet(*intervals.merge(np.asarray(starts, np.float64)[keep], np.asarray(ends, np.float64)[keep]))

    @property
    def us(self) -> float:
        return float((self.end - self.start).sum())

    def union(self, *others: TimeSet) -> TimeSet:
        return union([self, *others])

    def intersect(self, other: TimeSet) -> TimeSet:
        """The time in both (each set disjoint: where two intervals are open at once)."""
        if not len(self.start) or not len(other.start):
            return EMPTY
        pts = np.concatenate([self.start, self.end, other.start, other.end])
        delta = np.concatenate(
            [np.ones(len(self.start)), -np.ones(len(self.end)), np.ones(len(other.start)), -np.ones(len(other.end))]
        )
        order = np.lexsort((delta, pts))  # an end before a start at the same point: half-open
        p, depth = pts[order], np.cumsum(delta[order])
        both = np.flatnonzero(depth[:-1] == 2)
        return TimeSet.of(p[both], p[both + 1])

    def minus(self, other: TimeSet) -> TimeSet:
        """The time in this set and not in ``other``."""
        if not len(other.start) or not len(self.start):
            return self
        gaps_start = np.concatenate([[-np.inf], other.end])
        gaps_end = np.concatenate([other.start, [np.inf]])
        return self.intersect(TimeSet(gaps_start, gaps_end))


EMPTY = TimeSet(np.empty(0), np.empty(0))


def union(sets: Iterable[TimeSet]) -> TimeSet:
    found = [s for s in sets if len(s.start)]
    if not found:
        return EMPTY
    return TimeSet.of(np.concatenate([s.start for s in found]), np.concatenate([s.end for s in found]))


def in_windows(s: TimeSet, lo: np.ndarray, hi: np.ndarray) -> TimeSet:
    """``s`` cut to the windows ``[lo, hi)`` (the steps on the GPU clock)."""
    return s.intersect(TimeSet.of(np.asarray(lo, np.float64), np.asarray(hi, np.float64)))


def laid_out(start: np.ndarray, offset: np.ndarray, length: np.ndarray) -> TimeSet:
    """For each gap: ``length`` µs laid from ``start + offset`` (a part of an idle gap)."""
    a = start + offset
    return TimeSet.of(a, a + length)


class Findings(list[Finding]):
    """What one rule found, for the rules after it: its findings, and the union of their times
    (what a later rule leaves out, so that no time is reported under two causes)."""

    def __init__(self, claimed: Iterable[tuple[Finding, TimeSet | None]] = ()) -> None:
        pairs = list(claimed)
        super().__init__(f for f, _ in pairs)
        self.time = union(t for _, t in pairs if t is not None)


def claimed_by(fired: Mapping[str, Findings], *rule_ids: str) -> TimeSet:
    """The time the findings of ``rule_ids`` claim (those that fired)."""
    return union(fired[r].time for r in rule_ids if r in fired)


def rows_in(ctx: Context, mask: np.ndarray, claimed: TimeSet) -> np.ndarray:
    """Which of the view's rows in ``mask`` run inside ``claimed`` (by their midpoint: a claimed
    set is made of whole rows, or of the idle between rows)."""
    g = ctx.view.gpu
    out = np.zeros(len(g), bool)
    if not len(claimed.start):
        return out
    rows = np.flatnonzero(mask)
    mid = (g.ts[rows] + g.end[rows]) / 2
    k = np.searchsorted(claimed.start, mid, side="right") - 1
    out[rows] = (k >= 0) & (mid < claimed.end[np.maximum(k, 0)])
    return out


@dataclass(frozen=True)
class Claim:
    """One finding's gain (µs per step) and its cost's time (None when the rule gives none)."""

    gain_us: float
    time: TimeSet | None


def combined_gain(claims: Sequence[Claim], step_us: float) -> float:
    """The gain of fixing every finding at once, µs per step: largest gain first, each scaled by
    the share of its time that the findings before it have not covered. A finding without a
    time counts whole. At least the largest gain, at most the (mean) step ``step_us``. Times are
    totals over the steps, gains per step: only their ratios are used."""
    if not claims:
        return 0.0
    covered = EMPTY
    total = 0.0
    for c in sorted(claims, key=lambda c: -c.gain_us):
        if c.time is None or c.time.us <= 0:
            total += c.gain_us
            continue
        new = c.time.minus(covered).us
        total += c.gain_us * new / c.time.us
        covered = covered.union(c.time)
    # a gain is at most its cost and a cost at most the step (finding.make_finding), so the largest
    # gain is within the step but for the rounding of the gains (0.1 µs)
    return max(min(total, step_us), max(c.gain_us for c in claims))


def overlap_us(a: TimeSet | None, b: TimeSet | None, steps: int) -> float:
    """Time two findings both claim, µs per step (0 when either gives no time)."""
    if a is None or b is None or not steps:
        return 0.0
    return a.intersect(b).us / steps


# ---------------------------------------------------------------------- a rule's time, from the Context


def rows_time(ctx: Context, mask: np.ndarray) -> TimeSet:
    """The time the view's rows in ``mask`` run, cut to the steps."""
    g = ctx.view.gpu
    return in_windows(TimeSet.of(g.ts[mask], g.end[mask]), ctx.steps.start, ctx.steps.end)


def spans_time(ctx: Context, lo: np.ndarray, hi: np.ndarray) -> TimeSet:
    """The stretches ``[lo, hi)``, cut to the steps."""
    return in_windows(TimeSet.of(lo, hi), ctx.steps.start, ctx.steps.end)


def gap_time(
    ctx: Context,
    *,
    dataloader: bool = False,
    sync_rows: set[int] | None = None,
    rest: Sequence[int] = (),
) -> TimeSet:
    """Parts of the GPU idle gaps: the data-loading part, the parts of the syncs ``sync_rows``
    (cpu rows), the rest of the gaps whose cause is in ``rest`` (idle_gaps.LAUNCH...). Laid end
    to end from each gap's start: data loading, the syncs in the order they returned, the rest."""
    gaps = ctx.gaps
    found: list[TimeSet] = []
    if dataloader:
        found.append(laid_out(gaps.start, np.zeros(len(gaps.start)), gaps.dataloader_us))
    if sync_rows:
        offset = gaps.dataloader_us.copy()
        k, lo, hi = [], [], []
        for gap, row, us in gaps.sync_parts:
            if row in sync_rows:
                k.append(gap)
                lo.append(offset[gap])
                hi.append(offset[gap] + us)
            offset[gap] += us
        if k:
            at = gaps.start[np.asarray(k, np.int64)]
            found.append(TimeSet.of(at + np.asarray(lo), at + np.asarray(hi)))
    if len(rest):
        sel = np.isin(gaps.cause, np.asarray(rest))
        found.append(laid_out(gaps.start[sel], (gaps.dataloader_us + gaps.sync_us)[sel], gaps.rest_us[sel]))
    return union(found)
