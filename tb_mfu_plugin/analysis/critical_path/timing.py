"""Re-timing the graph: every point and op as early as its edges allow (the longest path to it).

The host chain and each stream are sequences, so between two syncs the longest path is a running
maximum along each of them: a stream's op ends at ``max(previous end + gap + d, ready + d)``, where
``ready`` is what its launch (and a wait on another stream) allows, and with ``C`` the running sum
of ``gap + d`` that is ``C + running max(ready + d - C)``: one numpy pass per stream. A sync is where
the host waits for the GPU, so the sweep goes from one sync's return to the next: the host's
points up to the sync, the ops launched there, then the sync's return. Waits between streams
inside one such piece are settled by repeating the piece's streams until nothing moves (the times
only grow, and the graph has no cycle). The work is one pass over the graph plus a few numpy calls
per sync and stream, never a Python step per event.

With the weights the graph was built with, this gives back the trace's own times: the tests check
it, and the critical path (``path``) walks those times.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .graph import Graph

# Repeats of one piece's streams before giving up on settling waits between them (each repeat
# moves at least one op later; a real step settles in a handful).
MAX_SETTLE = 64


@dataclass(frozen=True)
class Weights:
    """The graph's weights, as a change leaves them (``whatif``): host segments, op durations,
    stream gaps, launch edges, and which syncs are kept."""

    w: np.ndarray
    d: np.ndarray
    gap: np.ndarray
    lat: np.ndarray
    sync_keep: np.ndarray

    @staticmethod
    def of(g: Graph) -> Weights:
        return Weights(g.host.w, g.ops.d, g.ops.gap, g.ops.lat, np.ones(len(g.syncs.row), bool))


@dataclass(frozen=True)
class Timing:
    t: np.ndarray  # host points
    a: np.ndarray  # op starts
    b: np.ndarray  # op ends
    step_end: np.ndarray  # each step's end (its host end or its last op's, never before the step before)
    origin: float  # the first step's start, which no change moves

    @property
    def span_us(self) -> float:
        return float(self.step_end[-1] - self.origin) if len(self.step_end) else 0.0

    @property
    def step_dur(self) -> np.ndarray:
        starts = np.concatenate([[self.origin], self.step_end[:-1]])
        dur: np.ndarray = self.step_end - starts
        return dur


@dataclass(frozen=True)
class _Plan:
    cuts: np.ndarray  # the host points where a sync returns, sorted
    syncs_at: list[np.ndarray]  # per cut, the syncs returning there
    groups: list[list[tuple[int, int, int]]]  # per piece: (start, stop) into ``order``, and the stream
    order: np.ndarray  # ops grouped by piece and stream, each group in stream order
    settle: list[bool]  # per piece: an op waits for an op of another stream in the same piece


def _plan(g: Graph) -> _Plan:
    ops, host = g.ops, g.host
    cuts, where = np.unique(g.syncs.p1, return_inverse=True)
    syncs_at = [np.flatnonzero(where.reshape(-1) == k) for k in range(len(cuts))]
    anchor = np.where(ops.launch >= 0, ops.launch, np.searchsorted(host.t, ops.a, side="right") - 1)
    piece = np.searchsorted(cuts, np.maximum(anchor, 0), side="right").astype(np.int64)
    for s in range(len(ops.first) - 1):  # a stream runs in order: no op in an earlier piece than the one before it
        lo, hi = int(ops.first[s]), int(ops.first[s + 1])
        piece[lo:hi] = np.maximum.accumulate(piece[lo:hi])
    n_streams = max(len(ops.first) - 1, 1)
    key = piece * n_streams + ops.stream
    order = np.argsort(key, kind="stable")
    skey = key[order]
    heads = np.flatnonzero(np.r_[True, skey[1:] != skey[:-1]]) if len(skey) else np.empty(0, np.int64)
    # no op at all (a step with no GPU work): no group, rather than one stop without a head
    stops = np.r_[heads[1:], len(skey)].astype(np.int64) if len(heads) else np.empty(0, np.int64)
    groups: list[list[tuple[int, int, int]]] = [[] for _ in range(len(cuts) + 1)]
    for h, e in zip(heads.tolist(), stops.tolist(), strict=True):
        k = int(skey[h])
        groups[k // n_streams].append((h, e, k % n_streams))
    waits = ops.wait >= 0
    inner = np.zeros(len(cuts) + 1, bool)
    same = waits & (piece[np.maximum(ops.wait, 0)] == piece)
    inner[np.unique(piece[same])] = True
    return _Plan(cuts, syncs_at, groups, order, inner.tolist())


class Retimer:
    """Re-times one graph under any weights; the piece structure is worked out once."""

    def __init__(self, g: Graph) -> None:
        self.g = g

    @cached_property
    def plan(self) -> _Plan:
        return _plan(self.g)

    def run(self, wt: Weights) -> Timing:
        g, plan = self.g, self.plan
        ops = g.ops
        t = np.empty(len(g.host.t))
        t[0] = g.host.t[0]
        b = np.full(len(ops), np.nan)
        tail = np.full(len(ops.first) - 1, -np.inf)
        c_all = np.where(np.isfinite(wt.gap), wt.gap, 0.0) + wt.d
        lo = 0
        for k in range(len(plan.cuts) + 1):
            hi = int(plan.cuts[k]) if k < len(plan.cuts) else len(t)
            if hi - 1 > lo:
                t[lo + 1 : hi] = t[lo] + np.cumsum(wt.w[lo : hi - 1])
            self._piece(k, t, b, tail, wt, c_all)
            if k < len(plan.cuts):
                t[hi] = max(t[hi - 1] + wt.w[hi - 1], self._release(k, b, wt))
            lo = hi
        a = b - wt.d
        return Timing(t, a, b, self._step_ends(t, b), float(g.step_start[0]))

    def _piece(self, k: int, t: np.ndarray, b: np.ndarray, tail: np.ndarray, wt: Weights, c_all: np.ndarray) -> None:
        plan, ops = self.plan, self.g.ops
        groups = plan.groups[k]
        if not groups:
            return
        start_tail = tail.copy()
        for _ in range(MAX_SETTLE if plan.settle[k] else 1):
            moved = False
            for lo, hi, s in groups:
                idx = plan.order[lo:hi]
                ready = np.where(ops.launch[idx] >= 0, t[np.maximum(ops.launch[idx], 0)] + wt.lat[idx], -np.inf)
                ready = np.maximum(ready, t[0] + ops.origin_w[idx])
                w_idx = ops.wait[idx]
                has = w_idx >= 0
                if has.any():
                    src = b[np.maximum(w_idx, 0)]
                    ready = np.maximum(ready, np.where(has & ~np.isnan(src), src + ops.wait_w[idx], -np.inf))
                c = np.cumsum(c_all[idx])
                run = np.maximum.accumulate(np.concatenate([[start_tail[s]], ready + wt.d[idx] - c]))[1:]
                new = c + run
                if not moved and not np.array_equal(new, b[idx]):
                    moved = True
                b[idx] = new
                tail[s] = new[-1]
            if not moved:
                break

    def _release(self, k: int, b: np.ndarray, wt: Weights) -> float:
        """When the syncs returning at cut ``k`` return, as the GPU allows (-inf: removed, or no op)."""
        sy = self.g.syncs
        best = -np.inf
        for j in self.plan.syncs_at[k].tolist():
            if not wt.sync_keep[j]:
                continue
            waits = sy.waits[j]
            ends = b[waits[waits >= 0]]
            ends = ends[~np.isnan(ends)]
            if len(ends):
                best = max(best, float(ends.max()) + float(sy.lat[j]))
        return best

    def _step_ends(self, t: np.ndarray, b: np.ndarray) -> np.ndarray:
        g = self.g
        end = t[g.step_host_end].copy()
        ok = ~np.isnan(b)
        np.maximum.at(end, g.ops.step[ok], b[ok])
        out: np.ndarray = np.maximum.accumulate(end)
        return out
