"""Each step's critical path, walked back from the step's end, and its time by class.

The walk follows the edge that bound each node (``graph``): along a stream while its ops were
queued one behind the other, to the launch call when an op waited for its launch, to another
stream's op when it waited for that one, along the host chain until a sync whose return the GPU
held, and from that sync to the op it waited for. Every edge it takes spans exactly the time
between its two ends, so the stretches it passes add up to the step; a stretch that starts
before the step began counts only from the step's start.

The walk takes one Python step per change of chain (a launch-bound op, a wait, a sync), not
per event: runs of queued ops and stretches of host time are summed with one numpy call each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import classes as cls
from .graph import BY_LAUNCH, BY_ORIGIN, BY_STREAM, BY_WAIT, Graph

_N = len(cls.CLASSES)


@dataclass(frozen=True)
class Walk:
    """The critical path of each step of a graph, µs by class."""

    us: np.ndarray  # (steps x classes)
    hops: np.ndarray  # changes of chain each step's walk took

    def of_step(self, i: int) -> dict[str, float]:
        return {c: float(self.us[i, k]) for k, c in enumerate(cls.CLASSES)}


class _Walker:
    def __init__(self, g: Graph) -> None:
        self.g = g
        ops = g.ops
        self.max_hops = 2 * (len(ops) + len(g.syncs.row)) + 4
        idx = np.arange(len(ops))
        self.run_start = np.maximum.accumulate(np.where(ops.bind != BY_STREAM, idx, 0)) if len(ops) else idx
        self.b = ops.b
        # per stream, ends made monotone for the search of where a clip falls
        self.b_mono = self.b.copy()
        for s in range(len(ops.first) - 1):
            lo, hi = int(ops.first[s]), int(ops.first[s + 1])
            self.b_mono[lo:hi] = np.maximum.accumulate(self.b[lo:hi])
        host = g.host
        self.seg = np.diff(host.t)  # the trace's own lengths (the model's sync segments weigh less)
        mark = np.full(len(host.t), -1, np.int64)
        bound = np.flatnonzero(g.syncs.bound >= 0)
        mark[g.syncs.p1[bound]] = bound
        self.sync_at = mark
        pts = np.arange(len(host.t))
        self.prev_sync_pt = np.maximum.accumulate(np.where(mark >= 0, pts, 0))
        # each step's op that ends last (-1 none)
        self.last_op = np.full(g.steps, -1, np.int64)
        if len(ops):
            order = np.lexsort((self.b, ops.step))
            heads = np.r_[ops.step[order][1:] != ops.step[order][:-1], True]
            self.last_op[ops.step[order][heads]] = order[heads]

    def step(self, i: int) -> tuple[np.ndarray, int]:
        g = self.g
        lo, hi = float(g.step_start[i]), float(g.step_end[i])
        acc = np.zeros(_N)
        node_is_op, node = self._end_node(i, hi)
        hops = 0
        while hops < self.max_hops:  # every hop goes back in time; the bound only guards odd clocks
            hops += 1
            if node_is_op:
                r = int(self.run_start[node])
                self._add_run(acc, r, node, lo)
                a_r = float(g.ops.a[r])
                if a_r <= lo:
                    break
                node_is_op, node, t_prev = self._op_pred(r)
                self._add(acc, cls.CODE[_EDGE_CLASS[int(g.ops.bind[r])]], t_prev, a_r, lo)
                if node < 0 or t_prev <= lo:
                    break
            else:
                q = int(self.prev_sync_pt[node])
                self._add_host(acc, q, node, lo)
                t_q = float(g.host.t[q])
                k = int(self.sync_at[q])
                if t_q <= lo or k < 0:
                    break
                op = int(g.syncs.bound[k])
                t_prev = float(self.b[op])
                self._add(acc, cls.CODE[cls.SYNC], t_prev, t_q, lo)
                if t_prev <= lo:
                    break
                node_is_op, node = True, op
        return acc, hops

    def _end_node(self, i: int, hi: float) -> tuple[bool, int]:
        g = self.g
        host_pt = int(g.step_host_end[i])
        j = int(self.last_op[i])
        if j >= 0 and self.b[j] >= g.host.t[host_pt]:
            return True, j
        return False, host_pt

    def _op_pred(self, r: int) -> tuple[bool, int, float]:
        """The node before the run that starts at op ``r``, and its time (node -1: the origin)."""
        ops = self.g.ops
        kind = int(ops.bind[r])
        if kind == BY_LAUNCH:
            p = int(ops.launch[r])
            return False, p, float(self.g.host.t[p])
        if kind == BY_WAIT:
            x = int(ops.wait[r])
            return True, x, float(self.b[x])
        return False, -1, float(self.g.host.t[0])

    @staticmethod
    def _add(acc: np.ndarray, code: int, t0: float, t1: float, lo: float) -> None:
        if t1 > lo:
            acc[code] += t1 - max(t0, lo)

    def _add_run(self, acc: np.ndarray, r: int, j: int, lo: float) -> None:
        """Ops ``r..j`` of one stream, each queued behind the one before: their times by class and
        the gaps between them, from ``lo`` on."""
        ops = self.g.ops
        end = float(self.b[j])
        if end <= lo:
            return
        m = r
        if float(ops.a[r]) < lo:
            m = r + int(np.searchsorted(self.b_mono[r : j + 1], lo, side="right"))
            m = min(m, j)
        part = np.bincount(ops.cls[m + 1 : j + 1], weights=ops.d[m + 1 : j + 1], minlength=_N)
        acc += part
        first = max(0.0, float(self.b[m]) - max(float(ops.a[m]), lo))
        acc[int(ops.cls[m])] += first
        acc[cls.CODE[cls.GPU_GAP]] += (end - max(float(ops.a[r]), lo)) - float(part.sum()) - first

    def _add_host(self, acc: np.ndarray, q: int, i: int, lo: float) -> None:
        """Host segments from point ``q`` to point ``i``, from ``lo`` on."""
        t = self.g.host.t
        if float(t[i]) <= lo:
            return
        m = max(q, int(np.searchsorted(t, lo, side="right")) - 1)
        if float(t[m]) < lo:
            acc[int(self.g.host.cls[m])] += float(t[m + 1]) - lo
            m += 1
        if i > m:
            acc += np.bincount(self.g.host.cls[m:i], weights=self.seg[m:i], minlength=_N)


_EDGE_CLASS = {BY_LAUNCH: cls.LAUNCH, BY_WAIT: cls.STREAM_WAIT, BY_ORIGIN: cls.OTHER, BY_STREAM: cls.GPU_GAP}


def walk(g: Graph) -> Walk:
    """The critical path of every step of ``g``."""
    w = _Walker(g)
    us = np.zeros((g.steps, _N))
    hops = np.zeros(g.steps, np.int64)
    for i in range(g.steps):
        us[i], hops[i] = w.step(i)
    return Walk(us, hops)
