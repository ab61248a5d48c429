"""Interval arithmetic on arrays of µs: unions, gaps, coverage, and which window holds a point.

Every function states the ends it uses, once, in its docstring:

- ``[lo, hi)``: half-open (the end excluded), as GPU busy time and step windows on the GPU;
- ``[lo, hi]``: closed (both ends included), as host windows (a launch call that starts at the
  very end of a step's annotation still belongs to it).

Everything else (busy shares, SM efficiency, idle gaps, step attribution) is a query written
with these. Intervals on several host threads at once, and their nesting, are
``analysis.time.nesting``.
"""

from __future__ import annotations

import numpy as np


def clip(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to the window ``[lo, hi)``; those left empty are dropped."""
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as disjoint segments sorted by start, in any input order.

    Intervals that touch (one starts where another ends) join into one segment, so the union is
    the same whether the ends are read as open or closed.
    """
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    reach = np.maximum.accumulate(ends[order])
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def union_length(starts: np.ndarray, ends: np.ndarray, lo: float = -np.inf, hi: float = np.inf) -> float:
    """Time covered by at least one interval, inside ``[lo, hi)``."""
    s, e = clip(starts, ends, lo, hi)
    ms, me = merge(s, e)
    return float((me - ms).sum())


def gaps(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Lengths of the uncovered stretches between covered segments inside ``[lo, hi)``.

    The stretch before the first and after the last interval count too, so the
    gaps plus the union always add up to the window.
    """
    s, e = clip(starts, ends, lo, hi)
    ms, me = merge(s, e)
    if len(ms) == 0:
        return np.array([hi - lo]) if hi > lo else np.empty(0)
    bounds_s = np.concatenate(([lo], me))
    bounds_e = np.concatenate((ms, [hi]))
    g = bounds_e - bounds_s
    return g[g > 0]


def capped_coverage(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, lo: float, hi: float, cap: float = 1.0
) -> float:
    """∫ min(cap, Σ weights of the intervals active at t) dt over ``[lo, hi)``.

    With weights = blocks per SM this is the estimated SM efficiency integral:
    concurrent kernels add up, but the GPU can't be more than fully occupied.
    """
    s, e = clip(starts, ends, lo, hi)
    if len(s) == 0:
        return 0.0
    w = np.broadcast_to(weights, starts.shape)[(np.minimum(ends, hi) > np.maximum(starts, lo))]
    times = np.concatenate((s, e))
    delta = np.concatenate((w, -w))
    order = np.argsort(times, kind="stable")
    times = times[order]
    level = np.cumsum(delta[order])
    # level[i] holds between times[i] and times[i+1]
    widths = np.diff(times)
    return float((np.minimum(np.maximum(level[:-1], 0.0), cap) * widths).sum())


def covered_length(wlo: np.ndarray, whi: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of each ``[a, b]`` inside the union of windows ``[wlo, whi]``, which must be sorted and
    disjoint (``merge`` makes them so). An empty or reversed ``[a, b]`` covers 0."""
    if not len(wlo):
        return np.zeros(len(a))
    lens = whi - wlo
    cum = np.concatenate(([0.0], np.cumsum(lens)))

    def covered_up_to(x: np.ndarray) -> np.ndarray:
        k = window_starting_before(x, wlo)
        kk = np.maximum(k, 0)
        v = cum[kk] + np.clip(x - wlo[kk], 0.0, lens[kk])
        return np.where(k >= 0, v, 0.0)

    out: np.ndarray = np.maximum(covered_up_to(b) - covered_up_to(a), 0.0)
    return out


# ---------------------------------------------------------------------------- points in windows


def window_starting_before(points: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Index of the last window whose start is at or before each point (``starts`` sorted), -1
    where none is. Ends are not looked at: the point may lie past that window's end."""
    return np.searchsorted(starts, points, side="right") - 1


def window_of(
    points: np.ndarray, starts: np.ndarray, ends: np.ndarray, *, closed: bool, early: float = 0.0, late: float = 0.0
) -> np.ndarray:
    """Index of the window holding each point, -1 for none (and for NaN points).

    Windows are sorted by start and disjoint. ``closed``: the windows are ``[start, end]``, else
    ``[start, end)``. A point up to ``early`` before a window's start, or ``late`` after its end,
    still counts as inside (tolerances for timestamps rounded to whole µs).
    """
    out = np.full(len(points), -1, np.int64)
    k = window_starting_before(points + early if early else points, starts)
    ok = k >= 0
    if not ok.any():
        return out
    kk = k[ok]
    p = points[ok] - late if late else points[ok]
    inside = p <= ends[kk] if closed else p < ends[kk]
    out[np.flatnonzero(ok)[inside]] = kk[inside]
    return out


def in_any(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each point lies in at least one window ``[start, end]``, the windows in any order
    and possibly overlapping (ends not before starts)."""
    lo, hi = merge(np.asarray(starts, np.float64), np.asarray(ends, np.float64))
    return window_of(points, lo, hi, closed=True) >= 0


def window_of_unsorted(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``window_of`` for disjoint half-open windows ``[start, end)`` given in any order: the index
    is into the windows as given."""
    starts = np.asarray(starts, np.float64)
    ends = np.asarray(ends, np.float64)
    out = np.full(len(points), -1, np.int64)
    if not len(starts):
        return out
    order = np.argsort(starts)
    k = window_of(points, starts[order], ends[order], closed=False)
    hit = k >= 0
    out[hit] = order[k[hit]]
    return out


def points_between(points: np.ndarray, lo: np.ndarray | float, hi: np.ndarray | float, *, closed: bool) -> np.ndarray:
    """How many of the sorted ``points`` lie in each window: ``[lo, hi]`` when ``closed``, else the
    open ``(lo, hi)``. Scalars give a scalar count; a reversed window gives a negative count."""
    if closed:
        return np.searchsorted(points, hi, side="right") - np.searchsorted(points, lo, side="left")
    return np.searchsorted(points, hi, side="left") - np.searchsorted(points, lo, side="right")


def overlap_slice(starts: np.ndarray, lo: float, hi: float, longest: float) -> slice:
    """The rows (sorted by ``starts``, none longer than ``longest``) that can overlap ``[lo, hi)``:
    those starting before ``hi`` and no more than ``longest`` before ``lo``. Rows of the slice
    may still end before ``lo``; clip them (``clip``) when that matters."""
    return slice(int(np.searchsorted(starts, lo - longest)), int(np.searchsorted(starts, hi)))
