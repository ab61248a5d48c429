"""Interval arithmetic on arrays of [start, end) in µs: unions, gaps, weighted coverage.

Everything else (busy shares, SM efficiency, idle gaps) is a query written with these.
"""

from __future__ import annotations

import numpy as np


def clip(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to the window [lo, hi); empty ones dropped."""
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as disjoint, sorted segments."""
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
    """Time covered by at least one interval, inside [lo, hi)."""
    s, e = clip(starts, ends, lo, hi)
    ms, me = merge(s, e)
    return float((me - ms).sum())


def gaps(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Lengths of the uncovered stretches between covered segments inside [lo, hi).

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
    """∫ min(cap, Σ weights of the intervals active at t) dt over [lo, hi).

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
