"""The critical path of one step as the stretches it runs through, on the timeline's lanes.

``analysis.critical_path.path`` walks each step back from its end and sums the stretches by class;
this walk is the same one (``_Walker``'s own steps), with each stretch kept with its time and the
node it belongs to: a GPU op (its lane), a stretch of the merged host chain (the thread of the call
it lies in, else of the host lane drawn there), or an edge (the lane of the work that waited at its
end: a launch's latency and a queue gap on the op's stream, a sync's wait on the host).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..critical_path import classes as cls
from ..critical_path.graph import Graph, paint
from ..critical_path.path import _Walker
from .bins import FINEST_DIVISIONS
from .types import TimelinePath

_GAP = cls.CODE[cls.GPU_GAP]


@dataclass(frozen=True)
class PathLanes:
    """How the graph's nodes map to the timeline's lanes."""

    op_lane: np.ndarray  # per graph op: its lane, -1 not drawn
    call_lane: np.ndarray  # per launch call of the graph: the lane of its thread, -1 not drawn
    sync_lane: np.ndarray  # per sync of the graph: the lane of its thread, -1 not drawn
    host_lane: int  # the lane of host stretches outside any call (the busiest launching thread)


class _Recorder(_Walker):
    """A walker that keeps each stretch it adds: (start, duration, class code, node), where a node
    is ``("op", index)`` or ``("host", segment)``. Durations are the walk's own terms (an op's
    duration, a host segment's length), not differences of timestamps, so they sum by class to what
    the walk sums: timestamps of 10^15 µs keep a quarter of a µs."""

    def __init__(self, g: Graph) -> None:
        super().__init__(g)
        self.stretches: list[tuple[float, float, int, str, int]] = []
        self._node: tuple[str, int] = ("host", 0)

    def _keep(self, t0: float, dur: float, code: int, node: tuple[str, int]) -> None:
        if dur > 0:
            self.stretches.append((t0, dur, code, *node))

    def _op_pred(self, r: int) -> tuple[bool, int, float]:
        self._node = ("op", r)  # the edge the walk adds next ends at op r
        return super()._op_pred(r)

    def _add(self, acc: np.ndarray, code: int, t0: float, t1: float, lo: float) -> None:  # type: ignore[override]
        super()._add(acc, code, t0, t1, lo)
        if t1 > lo:
            self._keep(max(t0, lo), t1 - max(t0, lo), code, self._node)

    def _add_run(self, acc: np.ndarray, r: int, j: int, lo: float) -> None:
        gap_before = float(acc[_GAP])
        super()._add_run(acc, r, j, lo)
        ops = self.g.ops
        if float(self.b[j]) <= lo:
            return
        m = r
        if float(ops.a[r]) < lo:
            m = min(j, r + int(np.searchsorted(self.b_mono[r : j + 1], lo, side="right")))
        gaps = float(acc[_GAP]) - gap_before
        if gaps < 0:  # ops overlapping by more than the stream's waits (a hostile trace): drawn clipped
            self._clipped(r, m, j, lo)
            return
        a_m = max(float(ops.a[m]), lo)
        self._keep(a_m, max(0.0, float(self.b[m]) - a_m), int(ops.cls[m]), ("op", m))
        for k in range(m + 1, j + 1):
            self._keep(float(ops.a[k]), float(ops.d[k]), int(ops.cls[k]), ("op", k))
        self._gaps(r, m, j, lo, gaps)

    def _clipped(self, r: int, m: int, j: int, lo: float) -> None:
        """Ops ``m..j`` each from where the one before ended: the run's time, never counted twice."""
        ops = self.g.ops
        cursor = max(float(ops.a[r]), lo)
        for k in range(m, j + 1):
            a, b = max(float(ops.a[k]), lo), float(self.b[k])
            self._keep(cursor, a - cursor, _GAP, ("op", k))
            self._keep(max(a, cursor), b - max(a, cursor), int(ops.cls[k]), ("op", k))
            cursor = max(cursor, b)

    def _gaps(self, r: int, m: int, j: int, lo: float, total: float) -> None:
        """The stream's waits between ops ``m..j`` of the run from ``r``, which the walk sums to
        ``total``: an op that starts before the one before it ended (a few ns, in some traces) takes
        that overlap out of the next wait, as the walk's sum does."""
        ops = self.g.ops
        at: list[float] = []
        length: list[float] = []
        before: list[int] = []  # the op each wait comes before
        cursor, debt = max(float(ops.a[r]), lo), 0.0
        for k in range(m, j + 1):
            gap = max(float(ops.a[k]), lo) - cursor
            paid = min(max(gap, 0.0), debt)
            debt += max(-gap, 0.0) - paid
            if gap - paid > 0:
                at.append(cursor + paid)
                length.append(gap - paid)
                before.append(k)
            cursor = float(self.b[k])
        found = sum(length)
        if total <= 0:
            return
        if found <= 0:
            at, length, before, found = [max(float(ops.a[r]), lo)], [total], [m], total
        for t0, x, k in zip(at, length, before, strict=True):
            self._keep(t0, x * total / found, _GAP, ("op", k))

    def _add_host(self, acc: np.ndarray, q: int, i: int, lo: float) -> None:
        super()._add_host(acc, q, i, lo)
        t = self.g.host.t
        self._node = ("host", max(q - 1, 0))  # a sync's wait, which the walk adds next, ends at point q
        for k in range(max(q, int(np.searchsorted(t, lo, side="right")) - 1), i):
            t0 = max(float(t[k]), lo)
            self._keep(
                t0,
                float(t[k + 1]) - t0 if t0 > float(t[k]) else float(self.seg[k]),
                int(self.g.host.cls[k]),
                ("host", k),
            )


def step_path(g: Graph, i: int, lanes: PathLanes, lo: float) -> TimelinePath:
    """The critical path of the graph's step ``i``, its times from ``lo`` (the step's start)."""
    rec = _Recorder(g)
    rec.step(i)
    found = sorted(rec.stretches, key=lambda s: s[0])
    in_sync = paint(len(g.host.t) - 1, g.syncs.p0, g.syncs.p1)
    lane: list[int] = []
    start: list[float] = []
    dur: list[float] = []
    code: list[int] = []
    for t0, d, c, kind, node in found:
        at = _lane(g, lanes, kind, node, in_sync)
        if lane and lane[-1] == at and code[-1] == c and abs(start[-1] + dur[-1] - (t0 - lo)) < 1e-6:
            dur[-1] += d  # one stretch of one class on one lane, however many pieces the walk added
            continue
        lane.append(at)
        start.append(t0 - lo)
        dur.append(d)
        code.append(c)
    return TimelinePath(classes=list(cls.CLASSES), lane=lane, start_us=_r(start), dur_us=_r(dur), cls=code)


def _lane(g: Graph, lanes: PathLanes, kind: str, node: int, in_sync: np.ndarray) -> int:
    """The lane of a node: an op's own; a host segment's thread (of the call or sync it lies in)."""
    if kind == "op":
        found = int(lanes.op_lane[node])
        return found if found >= 0 else lanes.host_lane
    k = min(node, len(g.host.call) - 1)
    for owner, lane_of in ((g.host.call, lanes.call_lane), (in_sync, lanes.sync_lane)):
        i = int(owner[k]) if k >= 0 else -1
        if i >= 0 and lane_of[i] >= 0:
            return int(lane_of[i])
    return lanes.host_lane


def path_within(path: TimelinePath, dur: float, most: int) -> TimelinePath:
    """``path`` with at most ``most`` stretches: runs of consecutive stretches on one lane, each
    shorter than a width (the finest of ``bins.within``'s ladder that fits),
    merged into one of the class with most of their time. Their sum stays the step."""
    if len(path.lane) <= most:
        return path
    lane, start, dur_us, code = (np.asarray(x) for x in (path.lane, path.start_us, path.dur_us, path.cls))
    width = max(dur / FINEST_DIVISIONS, 1e-3)
    while True:
        small = dur_us < width
        new = np.ones(len(lane), bool)
        new[1:] = (
            (lane[1:] != lane[:-1])
            | ~small[1:]
            | ~small[:-1]
            | (np.floor(start[1:] / width) != np.floor(start[:-1] / width))
        )
        if new.sum() <= most or width >= dur:
            break
        width *= 2
    heads = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    by_class = np.zeros((len(heads), len(path.classes)))
    np.add.at(by_class, (group, code), dur_us)
    return TimelinePath(
        classes=path.classes,
        lane=lane[heads].tolist(),
        start_us=np.round(start[heads], 3).tolist(),
        dur_us=np.round(np.add.reduceat(dur_us, heads), 3).tolist(),
        cls=np.argmax(by_class, axis=1).tolist(),
        merged_us=round(width, 3),
    )


def _r(x: list[float]) -> list[float]:
    return [round(v, 3) for v in x]
