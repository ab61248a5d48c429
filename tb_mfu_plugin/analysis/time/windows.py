"""The interval queries of ``analysis.time.intervals`` over many windows at once, in array operations.

A trace of 100,000 steps asked ``intervals`` once per step: tens of numpy calls per step,
seconds in all. These take every window at once and give, per window, the value the
one-window function gives, **bit for bit**: the same elements in the same order, summed the
way ``numpy.sum`` sums them (pairwise) or the way a Python ``+=`` loop does (left to right),
so the report does not move by a rounding when the loop becomes an array operation.

The windows are ``[lo, hi)``, sorted and disjoint (touching allowed), as step windows are.
Ragged per-window groups are handled by stacking the windows that hold the same number of
elements into one 2-D array; a Python loop runs once per distinct group size, which is a few
for real traces and at most about the square root of twice the element count.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def offsets(counts: np.ndarray) -> np.ndarray:
    """Where each group starts in the flat array of its elements, grouped in order."""
    out = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def blocks(counts: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """For each distinct non-zero group size ``L``: the groups of that size and a ``(groups, L)``
    array of the flat indices of their elements (grouped in order)."""
    counts = np.asarray(counts, np.int64)
    start = offsets(counts)
    for size in np.unique(counts[counts > 0]).tolist():
        which = np.flatnonzero(counts == size)
        yield which, start[which][:, None] + np.arange(size)


def sums(values: np.ndarray, counts: np.ndarray, dtype: type | None = None) -> np.ndarray:
    """Per group, ``values[group].sum(dtype=dtype)`` of its elements (``values`` grouped in order,
    ``counts`` elements each): numpy sums a row of a C-contiguous 2-D array exactly as it sums
    the same elements in a 1-D array. Empty groups give 0.0."""
    out = np.zeros(len(counts))
    for which, idx in blocks(counts):
        out[which] = values[idx].sum(axis=1, dtype=dtype)
    return out


def running_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per group, ``total = 0.0; for v in group: total += v``: left to right, as a Python loop adds."""
    out = np.zeros(len(counts))
    for which, idx in blocks(counts):
        out[which] = np.cumsum(np.concatenate((np.zeros((len(which), 1)), values[idx]), axis=1), axis=1)[:, -1]
    return out


def running_total(values: np.ndarray) -> float:
    """``total = 0.0; for v in values: total += v``."""
    return float(np.cumsum(np.concatenate(([0.0], values)))[-1])


def overlap_bounds(ts: np.ndarray, lo: np.ndarray, hi: np.ndarray, longest: float) -> tuple[np.ndarray, np.ndarray]:
    """``intervals.overlap_slice`` of every window: the rows (sorted by ``ts``) from ``first`` to
    ``stop`` (excluded) that can overlap it."""
    return np.searchsorted(ts, lo - longest), np.searchsorted(ts, hi)


def overlap_pairs(
    ts: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray, first: np.ndarray, stop: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, window) with ``end > lo`` and ``ts < hi`` and the row in the window's slice
    ``[first, stop)``, ordered by window and then by row: per window, the rows a loop over
    ``rows[first:stop]`` with that test keeps, in their order."""
    k0 = np.searchsorted(hi, ts, side="right")  # the first window ending after the row starts
    k1 = np.searchsorted(lo, end, side="left")  # the windows before k1 start before the row ends
    n = np.maximum(k1 - k0, 0)
    rows = np.repeat(np.arange(len(ts)), n)
    win = np.repeat(k0, n) + (np.arange(len(rows)) - np.repeat(offsets(n), n))
    ok = (rows >= first[win]) & (rows < stop[win])
    rows, win = rows[ok], win[ok]
    order = np.argsort(win, kind="stable")
    return rows[order], win[order]


def clipped(
    ts: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray, rows: np.ndarray, win: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``intervals.clip`` of each pair's row to its window: (start, end, kept), kept where not empty."""
    s = np.maximum(ts[rows], lo[win])
    e = np.minimum(end[rows], hi[win])
    return s, e, e > s


def merged(s: np.ndarray, e: np.ndarray, win: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``intervals.merge`` per window of intervals already clipped to their (disjoint, sorted)
    windows: (segment start, end, window), by window and start. The union of a window's
    intervals is one set of segments whatever the order its intervals come in."""
    if not len(s):
        return np.empty(0), np.empty(0), np.empty(0, np.int64)
    order = np.lexsort((s, win))
    s, e, win = s[order], e[order], win[order]
    # one running maximum over all windows: a window's intervals all end after its start, which
    # no earlier window's end passes
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = (s[1:] > reach[:-1]) | (win[1:] != win[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last], win[first]


def union_lengths(seg_s: np.ndarray, seg_e: np.ndarray, seg_win: np.ndarray, n: int) -> np.ndarray:
    """``intervals.union_length`` per window, from ``merged``."""
    return sums(seg_e - seg_s, np.bincount(seg_win, minlength=n))


def gaps(
    seg_s: np.ndarray, seg_e: np.ndarray, seg_win: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``intervals.gaps`` of every window, concatenated in window order, and how many each has."""
    n = len(lo)
    count = np.bincount(seg_win, minlength=n)
    at = offsets(count + 1)  # each window's block: its segments and one more stretch
    pos = np.arange(len(seg_s)) - np.repeat(offsets(count), count)
    bound_s = np.empty(n + len(seg_s))
    bound_e = np.empty(n + len(seg_s))
    bound_s[at] = lo
    bound_e[at + count] = hi
    bound_s[at[seg_win] + pos + 1] = seg_e
    bound_e[at[seg_win] + pos] = seg_s
    g = bound_e - bound_s
    keep = g > 0
    return g[keep], np.bincount(np.repeat(np.arange(n), count + 1)[keep], minlength=n)


def capped_coverages(s: np.ndarray, e: np.ndarray, w: np.ndarray, counts: np.ndarray, cap: float = 1.0) -> np.ndarray:
    """``intervals.capped_coverage`` per window, from its clipped intervals ``[s, e)`` with weights
    ``w`` (grouped by window in row order, ``counts`` each); 0.0 for a window with none."""
    out = np.zeros(len(counts))
    for which, idx in blocks(counts):
        times = np.concatenate((s[idx], e[idx]), axis=1)
        delta = np.concatenate((w[idx], -w[idx]), axis=1)
        order = np.argsort(times, axis=1, kind="stable")
        times = np.take_along_axis(times, order, axis=1)
        level = np.cumsum(np.take_along_axis(delta, order, axis=1), axis=1)
        widths = np.diff(times, axis=1)
        out[which] = (np.minimum(np.maximum(level[:, :-1], 0.0), cap) * widths).sum(axis=1)
    return out


def share(part: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``part / dur`` where ``dur > 0``, else 0.0."""
    out: np.ndarray = np.divide(part, dur, out=np.zeros(len(part)), where=dur > 0)
    return out
