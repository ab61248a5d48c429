"""What-if: the step re-timed with a change applied.

A ``Change`` says what a fix does to the trace, in the trace's own terms: which GPU ops get
faster (by a factor; 0 and ``fused``: folded into a neighbour, so their launches and the gaps
before them go too), which host time shrinks (windows on the host time line, by a factor), which
syncs go, which launch calls get cheaper, whether the step's launches are replayed from a CUDA
graph. ``weights`` turns changes into the graph's weights; several changes applied together take,
for each weight, the smallest any of them leaves (the same time is never saved twice); ``Model``
re-times the graph (``timing``) and gives the new step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import classes as cls
from .graph import Graph, paint
from .timing import Retimer, Timing, Weights
from .unprofiled import GRAPH_GAP_UNPROFILED_US, PROFILER_COST_RANGE, calls_scaled, unprofiled

# The gap between two kernels of one CUDA graph replay under the profiler, where the trace has no
# replay to measure it on: about a quarter of a µs (the replays of the 492-kernel tiny MLP step in
# validation/whatif_pairs/cuda_graph/after: median 0.256 µs, the same on every host recorded since).
# Without the profiler they run closer (unprofiled.GRAPH_GAP_UNPROFILED_US).
GRAPH_GAP_US = 0.26


@dataclass(frozen=True)
class OpChange:
    rows: np.ndarray  # rows of the device view (DeviceView.gpu)
    factor: np.ndarray | float  # new duration = factor x duration
    fused: bool = False  # folded into a neighbour: no gap before it on its stream, and no launch of its own
    no_gap: bool = False  # no gap before it on its stream (it follows the op before it at once)


@dataclass(frozen=True)
class HostChange:
    lo: np.ndarray  # windows on the host time line
    hi: np.ndarray
    factor: float | np.ndarray  # the host time in them x factor (one for all, or one per window)
    only: tuple[str, ...] = ()  # only segments of these classes (classes.HOST...), () all


@dataclass(frozen=True)
class Change:
    what: str  # the change, in words: the evidence says which change was simulated
    ops: tuple[OpChange, ...] = ()
    host: tuple[HostChange, ...] = ()
    syncs: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # cpu rows of the syncs removed
    calls: tuple[tuple[np.ndarray, np.ndarray], ...] = ()  # (cpu rows of launch calls, their new duration)
    graph_replay: bool = False  # each step's launches replayed from one CUDA graph


def _dur_factors(
    g: Graph, view_pos: np.ndarray, changes: Sequence[Change]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op: the smallest duration factor, whether a change folds it into a neighbour, and whether
    one takes the gap before it away."""
    factor = np.ones(len(g.ops))
    gone = np.zeros(len(g.ops), bool)
    no_gap = np.zeros(len(g.ops), bool)
    for ch in changes:
        for oc in ch.ops:
            rows = np.asarray(oc.rows, np.int64)
            ok = (rows >= 0) & (rows < len(view_pos))
            pos = view_pos[rows[ok]]
            f = np.broadcast_to(np.asarray(oc.factor, np.float64), rows.shape)[ok]
            keep = pos >= 0
            pos, f = pos[keep], np.clip(f[keep], 0.0, 1.0)
            np.minimum.at(factor, pos, f)
            if oc.fused:
                gone[pos] = True
            if oc.fused or oc.no_gap:
                no_gap[pos] = True
    return factor, gone, no_gap


def weights(
    g: Graph,
    view_pos: np.ndarray,
    changes: Sequence[Change],
    base: Weights | None = None,
    replay_gap_us: float = GRAPH_GAP_US,
) -> Weights:
    """The graph's weights (``base``: as the trace has them) with ``changes`` applied together.
    ``view_pos``: for each row of the device view, its op in the graph (-1 none); ``replay_gap_us``:
    the gap between two kernels of a graph replay a change adopts (``GRAPH_GAP_UNPROFILED_US`` over
    the weights without the profiler)."""
    base = base if base is not None else Weights.of(g)
    factor, gone, no_gap = _dur_factors(g, view_pos, changes)
    d = base.d * factor
    gap = np.where(no_gap & np.isfinite(base.gap), 0.0, base.gap)
    # a folded op stays a node of no length where it was, so that what waited behind it still
    # waits for what it waited for (its stream, its launch's place on the host time line)
    lat = base.lat
    w = base.w.copy()
    keep = np.ones(len(g.syncs.row), bool)
    seg_sync = _segments_of(g, g.syncs.p0, g.syncs.p1)
    for ch in changes:
        if len(ch.syncs):
            drop = np.isin(g.syncs.row, ch.syncs)
            keep &= ~drop
            w[np.isin(seg_sync, np.flatnonzero(drop))] = 0.0
        for hc in ch.host:
            w = np.minimum(w, _host_scaled(g, base.w, hc))
        for rows, new_dur in ch.calls:
            w = np.minimum(w, calls_scaled(g, base.w, rows, new_dur))
        if ch.graph_replay:
            w, gap = _graph_replay(g, w, gap, replay_gap_us)
    w = np.minimum(w, _launches_gone(g, base.w, gone))
    return Weights(w, d, gap, lat, keep)


def _segments_of(g: Graph, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    return paint(len(g.host.w), p0, p1)


def _host_scaled(g: Graph, w: np.ndarray, hc: HostChange) -> np.ndarray:
    """The segment weights with the host time inside the windows scaled by their factor: each
    segment loses (1 - factor) of its share inside each window, windows cut where they overlap."""
    lo = np.asarray(hc.lo, np.float64)
    hi = np.asarray(hc.hi, np.float64)
    cut = np.broadcast_to(1.0 - np.clip(np.asarray(hc.factor, np.float64), 0.0, 1.0), lo.shape)
    order = np.argsort(lo, kind="stable")
    lo, hi, cut = lo[order], hi[order], cut[order]
    if len(lo) > 1:  # overlapping windows: each ends where the next begins
        hi = np.minimum(hi, np.r_[lo[1:], np.inf])
    keep = hi > lo
    lo, hi, cut = lo[keep], hi[keep], cut[keep]
    t = g.host.t
    removed = _weighted_cover(lo, hi, cut, t[:-1], t[1:])
    length = np.diff(t)
    share = np.where(length > 0, removed / np.where(length > 0, length, 1.0), 0.0)
    out: np.ndarray = w * np.clip(1.0 - share, 0.0, 1.0)
    if hc.only:
        codes = np.isin(g.host.cls, [cls.CODE[c] for c in hc.only])
        out = np.where(codes, out, w)
    return out


def _weighted_cover(lo: np.ndarray, hi: np.ndarray, weight: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each ``[a, b]``: the sum over the disjoint sorted windows of weight x the length inside."""
    if not len(lo):
        return np.zeros(len(a))
    cum = np.concatenate(([0.0], np.cumsum((hi - lo) * weight)))

    def upto(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(lo, x, side="right") - 1
        kk = np.maximum(k, 0)
        v = cum[kk] + np.clip(x - lo[kk], 0.0, hi[kk] - lo[kk]) * weight[kk]
        return np.where(k >= 0, v, 0.0)

    out: np.ndarray = np.maximum(upto(b) - upto(a), 0.0)
    return out


def _launches_gone(g: Graph, w: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """The segment weights with the launch calls of folded ops gone (a call goes when every op it
    launched is folded into another)."""
    if not gone.any() or not len(g.calls.row):
        return w
    ops = g.ops
    launched = ops.call >= 0
    n = np.bincount(ops.call[launched], minlength=len(g.calls.row))
    n_gone = np.bincount(ops.call[launched & gone], minlength=len(g.calls.row))
    call_gone = (n > 0) & (n_gone == n)
    seg_call = g.host.call
    out = w.copy()
    out[(seg_call >= 0) & call_gone[np.maximum(seg_call, 0)]] = 0.0
    return out


def _graph_replay(g: Graph, w: np.ndarray, gap: np.ndarray, gap_us: float) -> tuple[np.ndarray, np.ndarray]:
    """Each step's host work from its first launch to its last one becomes that first launch call (a
    graph replay is launched once), syncs and DataLoader calls left as they are; the ops of the
    steps follow each other as a replay's do."""
    ops, host = g.ops, g.host
    out = w.copy()
    launched = ops.launch >= 0
    for i in range(g.steps):
        mine = launched & (ops.step == i)
        if not mine.any():
            continue
        first_call = int(ops.call[mine][np.argmin(ops.launch[mine])])
        lo = int(g.calls.p1[first_call])
        hi = int(g.calls.p1[ops.call[mine]].max())
        seg = np.arange(lo, hi)
        keep = np.isin(host.cls[seg], [cls.CODE[cls.SYNC], cls.CODE[cls.DATALOADER]])
        out[seg[~keep]] = 0.0
    in_steps = ops.step >= 0
    gap = np.where(in_steps & np.isfinite(gap), np.minimum(gap, gap_us), gap)
    return out, gap


@dataclass(frozen=True)
class Outcome:
    step_us: float  # the simulated mean step over the graph's steps
    gain_us: float  # the modelled step less it
    floor_us: float  # the busiest chain's work left per step: no re-timing goes below it
    timing: Timing


class Model:
    """A graph with its re-timer and the trace's own timing: re-times it under changes."""

    def __init__(self, g: Graph, view_rows: int) -> None:
        self.g = g
        self.retimer = Retimer(g)
        pos = np.full(view_rows, -1, np.int64)
        pos[g.ops.row] = np.arange(len(g.ops))
        self.view_pos = pos
        self._cache: dict[tuple[int, bool], tuple[Change, Weights]] = {}

    @cached_property
    def base(self) -> Timing:
        return self.retimer.run(Weights.of(self.g))

    @cached_property
    def unprofiled_base(self) -> Timing:
        return self.retimer.run(self.unprofiled_weights)

    @property
    def step_us(self) -> float:
        """The mean of the modelled steps, as the analysis measured them (a change shortens it by
        what it takes off the time from the first step's start to the last step's end)."""
        return float((self.g.step_end - self.g.step_start).sum()) / max(self.g.steps, 1)

    def _after(self, timing: Timing) -> float:
        return self._after_span(timing.span_us)

    @property
    def unprofiled_step_us(self) -> float:
        """The step with the profiler's host cost taken out (``unprofiled``)."""
        return self._after(self.unprofiled_base)

    @cached_property
    def unprofiled_step_range_us(self) -> tuple[float, float]:
        """The shortest and longest the step without the profiler is likely to be: re-timed with the
        profiler's cost at each end of ``PROFILER_COST_RANGE``, the estimate always between them, and
        the short end scaled from the mean modelled step to the fastest one.

        The profiler's cost is not the same in every step (its buffers, the host's other work), and it
        only ever adds time: the step that ran fastest under it shows how short the step can be. On the
        ninth H100 host the steps spread 37-60 ms and their mean read 26-31 % below the MFU measured
        without the profiler. On the 164 sides of the recorded pairs (which the change was not chosen
        on) the truth falls inside the range on 72, not 40, and within 2 % of it on 139, not 125,
        while the median range widens from 1.004x to 1.019x (docs/mfu.md, section 6)."""
        at = [self._after(self.retimer.run(unprofiled(self.g, s))) for s in PROFILER_COST_RANGE]
        mid = self.unprofiled_step_us
        short, long = min([*at, mid]), max([*at, mid])
        steps = self.g.step_end - self.g.step_start
        if len(steps) and self.step_us > 0:
            short *= min(float(steps.min()) / self.step_us, 1.0)
        return short, long

    def _weights(self, changes: Sequence[Change], without_profiler: bool) -> Weights:
        """The weights of ``changes`` together: the smallest each leaves (each change's own are
        worked out once, then combined elementwise)."""
        base = self.unprofiled_weights if without_profiler else None
        own = [self._own(ch, without_profiler, base) for ch in changes]
        if not own:
            return base if base is not None else Weights.of(self.g)
        w, d, gap, lat, keep = own[0].w, own[0].d, own[0].gap, own[0].lat, own[0].sync_keep
        for o in own[1:]:
            w, d, gap, keep = np.minimum(w, o.w), np.minimum(d, o.d), np.minimum(gap, o.gap), keep & o.sync_keep
        return Weights(w, d, gap, lat, keep)

    def _own(self, ch: Change, without_profiler: bool, base: Weights | None) -> Weights:
        key = (id(ch), without_profiler)
        got = self._cache.get(key)
        if got is None or got[0] is not ch:
            gap_us = GRAPH_GAP_UNPROFILED_US if without_profiler else GRAPH_GAP_US
            got = (ch, weights(self.g, self.view_pos, [ch], base, gap_us))
            self._cache[key] = got
        return got[1]

    @cached_property
    def unprofiled_weights(self) -> Weights:
        return unprofiled(self.g)

    def simulate(self, changes: Sequence[Change], without_profiler: bool = False) -> Outcome:
        """The step re-timed with ``changes``; ``without_profiler``: from the unprofiled weights, the
        gain then against the unprofiled step."""
        wt = self._weights(changes, without_profiler)
        timing = self.retimer.run(wt)
        before = self.unprofiled_step_us if without_profiler else self.step_us
        # the floor is work over the span (first step's start to the last op's end), the step a mean of
        # the steps' own durations: the floor is taken into step time by the same shift as the step
        floor = self._after_span(_floor(self.g, wt))
        # no re-timing beats the work its busiest chain keeps: where the walk would (work queued across
        # the first modelled step's start, which the steady state leaves without the step before it),
        # the step is that work, never an impossible figure
        step = max(self._after(timing), floor)
        return Outcome(step, before - step, floor, timing)

    def _after_span(self, span_us: float) -> float:
        """A span's time as a mean step, as ``_after`` takes a re-timed span."""
        return self.step_us - (self.base.span_us - span_us) / max(self.g.steps, 1)


def _floor(g: Graph, wt: Weights) -> float:
    """The work no re-timing can overlap: the busiest stream's op time, or the host's time outside
    syncs from the first step's start to the last step's host end, whichever is larger, over the
    graph's steps."""
    ops = g.ops
    per_stream = np.bincount(ops.stream, weights=wt.d, minlength=max(len(ops.first) - 1, 1)) if len(ops) else [0.0]
    t = g.host.t
    seg = np.arange(len(wt.w))
    in_steps = (t[:-1] >= g.step_start[0]) & (seg < int(g.step_host_end[-1]))
    not_sync = g.host.cls != cls.CODE[cls.SYNC]
    host = float(wt.w[in_steps & not_sync].sum())
    return max(float(np.max(per_stream)), host)
