"""Nesting of host events on their threads: which op lies inside which, the outermost ones.

Host ops nest in time on their own thread (``aten::linear`` -> ``aten::addmm`` ->
``cudaLaunchKernel``). To ask nesting questions of all threads at once, every cpu row is laid
on one time axis (``ThreadAxis``), each thread shifted by more than the trace's span, so the
questions become sorted searches and prefix maxima over plain arrays, with no per-event Python
loop. On that axis all intervals are closed, ``[start, end]``, and widened by the axis'
tolerance ``tol``: legacy traces write whole microseconds, so a child may seem to end 1 µs
after its parent.

1-D interval arithmetic (unions, windows, coverage) is ``analysis.time.intervals``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.distinct import distinct, distinct_inverse
from ...trace.tables import TraceTables
from ..per_trace import once_per_trace
from . import intervals


@dataclass(frozen=True)
class ThreadAxis:
    """All cpu rows on one time axis: ``g = ts - t0 + thread_index * span``."""

    g0: np.ndarray  # start of each cpu row
    g1: np.ndarray  # end of each cpu row
    tol: float  # µs of slack on both ends of every containment test


def _thread_axis(tables: TraceTables) -> ThreadAxis:
    """The cpu rows of ``tables`` on one axis, threads (pid, tid) side by side."""
    c = tables.cpu
    n = len(c)
    if n == 0:
        z = np.empty(0)
        return ThreadAxis(z, z, 0.0)
    _, pi = distinct_inverse(c.pid)
    tids, ti = distinct_inverse(c.tid)
    _, tidx = distinct_inverse(pi.astype(np.int64) * len(tids) + ti)
    tidx = tidx.reshape(-1)
    end = c.ts + c.dur
    t0 = float(c.ts.min())
    span = float(end.max() - t0) + 1000.0
    off = tidx.astype(np.float64) * span - t0
    # Legacy traces write whole microseconds: a child may end 1 µs after its parent.
    integral = bool(np.all(c.ts == np.floor(c.ts)) and np.all(c.dur == np.floor(c.dur)))
    tol = 1.0 if integral else 1e-3
    return ThreadAxis(c.ts + off, end + off, tol)


# Both FLOP counting and the roofline's op placement ask it of the same trace: its three
# sorts of every cpu row are done once.
thread_axis = once_per_trace(_thread_axis)


def sorted_set(ax: ThreadAxis, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` sorted by (start asc, end desc, row asc), so parents come before their children,
    with their starts and ends on the axis."""
    if not len(rows):
        e = np.empty(0)
        return rows, e, e
    order = np.lexsort((rows, -ax.g1[rows], ax.g0[rows]))
    r = rows[order]
    return r, ax.g0[r], ax.g1[r]


def nested_in_self(s1: np.ndarray, tol: float) -> np.ndarray:
    """For the ends of a ``sorted_set``: whether each interval lies inside an earlier one of the set."""
    if not len(s1):
        return np.zeros(0, bool)
    pm = np.maximum.accumulate(s1)
    prev = np.concatenate([[-np.inf], pm[:-1]])
    return prev >= s1 - tol


def outermost(ax: ThreadAxis, rows: np.ndarray) -> np.ndarray:
    """The rows that lie inside no other row of ``rows``, in ``sorted_set`` order."""
    r, _, s1 = sorted_set(ax, rows)
    out: np.ndarray = r[~nested_in_self(s1, ax.tol)]
    return out


def inside_any(q0: np.ndarray, q1: np.ndarray, s0: np.ndarray, s1: np.ndarray, tol: float) -> np.ndarray:
    """Whether each query interval ``[q0, q1]`` lies inside some interval of a ``sorted_set``.

    A query that is itself a member of the set is inside itself: use it only for
    queries outside the set, or ``nested_in_self`` for members.
    """
    out = np.zeros(len(q0), bool)
    if not len(s0) or not len(q0):
        return out
    pm = np.maximum.accumulate(s1)
    k = intervals.window_starting_before(q0 + tol, s0)
    ok = k >= 0
    out[ok] = pm[k[ok]] >= q1[ok] - tol
    return out


def containing_disjoint(p: np.ndarray, s0: np.ndarray, s1: np.ndarray, tol: float) -> np.ndarray:
    """Index into a sorted set of *disjoint* intervals (such as ``outermost`` rows) of the one
    containing each point, or -1."""
    if not len(s0) or not len(p):
        return np.full(len(p), -1, np.int64)
    return intervals.window_of(p, s0, s1, closed=True, early=tol, late=tol)


def contains_point(s0: np.ndarray, s1: np.ndarray, points: np.ndarray, tol: float) -> np.ndarray:
    """Whether each interval ``[s0, s1]`` contains at least one of the (sorted) points."""
    if not len(points):
        return np.zeros(len(s0), bool)
    return np.asarray(intervals.points_between(points, s0 - tol, s1 + tol, closed=True) > 0)


def same_name_wrappers(tables: TraceTables, ax: ThreadAxis, rows: np.ndarray) -> np.ndarray:
    """Whether each row contains another row of the same op name (a tensor subclass such as
    DTensor dispatches an op on global shapes, then runs the same op on the local shard inside)."""
    out = np.zeros(len(rows), bool)
    if not len(rows):
        return out
    codes = tables.cpu.name[rows]
    for code in distinct(codes).tolist():
        idx = np.nonzero(codes == code)[0]
        if len(idx) < 2:
            continue
        r = rows[idx]
        order = np.lexsort((r, -ax.g1[r], ax.g0[r]))  # parents before children
        s0, s1 = ax.g0[r][order], ax.g1[r][order]
        # rows after me in that order that start before I end lie inside me
        after = np.searchsorted(s0, s1, side="left") - (np.arange(len(order)) + 1)
        out[idx[order]] = after > 0
    return out


def outermost_per_thread(tables: TraceTables, rows: np.ndarray) -> np.ndarray:
    """``rows`` less those nested in a kept row on the same thread (an annotation and its mirror
    ``cpu_op`` in some exports), in time order. Containment here is exact, with closed ends and
    no tolerance, and is tested against the last row kept on the thread."""
    if len(rows) < 2:
        return rows
    cpu = tables.cpu
    order = np.lexsort((-cpu.dur[rows], cpu.ts[rows], cpu.tid[rows], cpu.pid[rows]))
    rows = rows[order]
    keep = np.ones(len(rows), bool)
    cur = rows[0]
    for i in range(1, len(rows)):
        r = rows[i]
        same = cpu.pid[r] == cpu.pid[cur] and cpu.tid[r] == cpu.tid[cur]
        if same and cpu.ts[r] >= cpu.ts[cur] and cpu.end[r] <= cpu.end[cur]:
            keep[i] = False
        else:
            cur = r
    rows = rows[keep]
    return rows[np.argsort(cpu.ts[rows], kind="stable")]
