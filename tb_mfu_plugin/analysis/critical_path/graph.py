"""The dependency graph of a device's steps, as arrays.

Two kinds of chains, each a sequence in time:

- **the host chain**: the device's launching threads merged on one time line (the main thread
  and autograd's backward thread take turns). It is cut into segments at every boundary of a
  launch call, a host-device sync and a DataLoader call, and at the step markers; each segment
  has a weight (its length) and a class (``classes``);
- **one chain per stream**: the stream's kernels, copies and memsets in order.

Edges between them: a launch call's start to the op it launched (by correlation id); an op to
the next op of its stream; an op of another stream to an op that waited for it (an event wait:
inferred where an op started when another stream's op ended, later than its launch and its
stream allow, since Kineto exports do not say which event a ``cudaStreamWaitEvent`` waits on);
the last GPU op a sync waited for to the sync's end (a sync returns after the ops launched
before it that had ended when it returned). Collective kernels are ops of their stream with the
duration the trace gives, so the wait for peers inside them is their time.

Every edge gets the weight that reproduces the trace: of an op's incoming edges, the one that
bound it (the latest to allow its start) has exactly the time between them, the others the
smallest weight the trace shows for their kind, so that re-timing the unchanged graph gives back
every timestamp (``timing``), and a change moves only what depends on it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ...trace.tables import ANNOTATION, MEMCPY, OP, CpuTable, GpuTable, TraceTables, name_lookup
from ..time.patterns import dataloader_rows
from ..time.steps import Steps
from . import classes as cls

# The binding edge of an op.
BY_STREAM, BY_LAUNCH, BY_WAIT, BY_ORIGIN = 0, 1, 2, 3

# An op that starts this much later than its launch and its stream allow is looked at for a
# wait on another stream, which must have ended at most WAIT_MATCH_US before it started.
WAIT_SLACK_US = 5.0
WAIT_MATCH_US = 20.0
# A sync "waited for" the GPU ops that had ended when it returned, up to this late (clock skew).
SYNC_TOLERANCE_US = 5.0
# Defaults where the trace shows no example: a launch call's start to its kernel's start on an
# idle stream, two queued ops' gap on one stream, a sync's return after its last op.
DEFAULT_LAUNCH_LATENCY_US = 5.0
DEFAULT_STREAM_GAP_US = 1.0
DEFAULT_SYNC_LATENCY_US = 5.0
# What Inductor names the host op of each Triton kernel it launches while the profiler runs (the
# record function its launcher opens then, and only then: torch/_inductor/runtime/triton_heuristics.py)
TRITON_LAUNCH_PREFIX = "triton_"
# What Lightning's PyTorchProfiler names the record functions it opens from Python: one around each hook
# and step function it profiles (``[pl][profile]…``) and one around each submodule's forward
# (``[pl][module]…``, from the forward hooks it registers on every module). A run without the profiler
# has neither the record functions nor the hooks (lightning/pytorch/profilers/pytorch.py).
LIGHTNING_RECORD_PREFIX = "[pl]"


@dataclass(frozen=True)
class HostChain:
    t: np.ndarray  # float64: the points, sorted and distinct; t[0] is the origin
    w: np.ndarray  # float64 (len(t) - 1): segment i is [t[i], t[i+1]], weighted as the model re-times it
    cls: np.ndarray  # int8 class code of each segment (classes.CODE)
    call: np.ndarray  # int64: the launch call (index into ``calls``) each segment lies in, -1 none
    events: np.ndarray  # int64: host events (ops, runtime and driver calls) that start in each segment
    # int64: of those, Inductor's Triton launches (``TRITON_LAUNCH_PREFIX``), whose record function
    # exists only under the profiler and costs it more than an event (unprofiled.PROFILER_TRITON_LAUNCHES)
    triton: np.ndarray
    # int64: Lightning's profiler's record functions (``LIGHTNING_RECORD_PREFIX``) that start in each
    # segment: annotations, so not among ``events``, whose Python exists only under Lightning's profiler
    # (unprofiled.PROFILER_LIGHTNING_LAUNCHES)
    lightning: np.ndarray


@dataclass(frozen=True)
class Calls:
    """The launch calls of the ops in the graph."""

    row: np.ndarray  # cpu row
    p0: np.ndarray  # point of its start
    p1: np.ndarray  # point of its end
    dur: np.ndarray


@dataclass(frozen=True)
class Syncs:
    row: np.ndarray  # cpu row of the sync call
    p0: np.ndarray
    p1: np.ndarray
    own: np.ndarray  # what the call costs when nothing is left to wait for
    lat: np.ndarray  # its return after the last op it waited for
    waits: np.ndarray  # int64 (syncs x streams): the last op of each stream it waited for, -1 none
    bound: np.ndarray  # int64: the op whose end it returned after (it waited for the GPU), -1 none


@dataclass(frozen=True)
class Ops:
    """The GPU ops of the graph, stream by stream, each stream in its order."""

    row: np.ndarray  # row of the device view (``DeviceView.gpu``)
    stream: np.ndarray  # int64, 0..streams-1
    a: np.ndarray  # start
    d: np.ndarray  # duration
    cls: np.ndarray  # int8 class code
    step: np.ndarray  # int64 index of the step (in the graph's steps)
    launch: np.ndarray  # int64 point of its launch call's start, -1 none
    call: np.ndarray  # int64 index into Calls, -1 none
    lat: np.ndarray  # weight of the launch edge (-inf: none)
    gap: np.ndarray  # weight of the stream edge from the op before it (-inf: none)
    wait: np.ndarray  # int64 op it waited for on another stream, -1 none
    wait_w: np.ndarray  # weight of that edge
    origin_w: np.ndarray  # weight of an edge from the origin (-inf: none)
    bind: np.ndarray  # int8: BY_STREAM, BY_LAUNCH, BY_WAIT or BY_ORIGIN
    first: np.ndarray  # int64 (streams + 1): where each stream's ops begin
    # bool: put in the queue by a step before the first modelled one (launched before its host
    # began, or before the trace, so with no launch call in it) and run in it (``_carried``)
    carried: np.ndarray

    def __len__(self) -> int:
        return len(self.row)

    @property
    def b(self) -> np.ndarray:
        end: np.ndarray = self.a + self.d
        return end


@dataclass(frozen=True)
class Graph:
    host: HostChain
    calls: Calls
    syncs: Syncs
    ops: Ops
    step_number: np.ndarray
    step_start: np.ndarray  # as the analysis found them (steps.start, steps.end)
    step_end: np.ndarray
    step_host_end: np.ndarray  # int64 point of each step's host end (cpu_end)
    launch_latency_us: float  # the typical launch-to-start latency on an idle stream
    stream_gap_us: float  # the typical gap between two queued ops of a stream
    launch_call_us: float  # the median launch call on the host, NaN none: how fast this host runs the runtime

    @property
    def steps(self) -> int:
        return len(self.step_number)


@dataclass(frozen=True)
class Device:
    """What the graph is built from: one device's GPU rows (``DeviceView.gpu``), the step of each
    (-1 none), the cpu row of each one's launch call (-1 none), the host-device sync calls in the
    steps, and the kernel classes of the names."""

    gpu: GpuTable
    step: np.ndarray
    launcher: np.ndarray
    sync_rows: np.ndarray
    name_class: np.ndarray  # class code of a kernel of each name (classes.name_lut)


def build(tables: TraceTables, dev: Device, steps: Steps, n_steps: int) -> Graph:
    """The graph of the first ``n_steps`` analysed steps of one device (at least one)."""
    n = max(1, min(n_steps, len(steps)))
    cpu, g = tables.cpu, dev.gpu
    origin = float(min(steps.start[0], steps.cpu_start[0]))
    host_hi = float(steps.cpu_end[n - 1])
    sel = np.flatnonzero((dev.step >= 0) & (dev.step < n))
    rows = sel[np.lexsort((g.ts[sel], g.stream[sel]))]
    launcher = dev.launcher[rows]
    launched = launcher >= 0
    call_rows, inverse = np.unique(launcher[launched], return_inverse=True)
    op_call = np.full(len(rows), -1, np.int64)
    op_call[launched] = inverse.reshape(-1)
    syncs_in = dev.sync_rows[(cpu.ts[dev.sync_rows] >= origin) & (cpu.ts[dev.sync_rows] <= host_hi)]
    loader = dataloader_rows(tables)
    loader = loader[(cpu.ts[loader] >= origin) & (cpu.ts[loader] <= host_hi)]
    t = _points(
        origin,
        [cpu.ts[call_rows], cpu.end[call_rows], cpu.ts[syncs_in], cpu.end[syncs_in]],
        [cpu.ts[loader], cpu.end[loader], steps.cpu_start[:n], steps.cpu_end[:n]],
    )
    calls = Calls(call_rows, _at(t, cpu.ts[call_rows]), _at(t, cpu.end[call_rows]), cpu.dur[call_rows])
    copy_call = np.zeros(len(call_rows), bool)
    copy_call[op_call[launched & (g.kind[rows] == MEMCPY)]] = True
    ops, lat0, gap0 = _ops(g, rows, dev, op_call, calls, t, steps, n)
    ops = dataclasses.replace(ops, carried=_carried(ops, launcher, cpu.ts, float(steps.cpu_start[0])))
    syncs = _syncs(cpu.ts[syncs_in], cpu.end[syncs_in], syncs_in, t, ops)
    seg_cls = _segment_classes(t, calls, copy_call, syncs, cpu.ts[loader], cpu.end[loader])
    w = np.diff(t)
    _scale_sync_segments(w, syncs, t)
    return Graph(
        HostChain(
            t,
            w,
            seg_cls,
            paint(len(t) - 1, calls.p0, calls.p1),
            _events(cpu, t),
            _events(cpu, t, _named(tables, OP, TRITON_LAUNCH_PREFIX)),
            _events(cpu, t, _named(tables, ANNOTATION, LIGHTNING_RECORD_PREFIX)),
        ),
        calls,
        syncs,
        ops,
        steps.number[:n].copy(),
        steps.start[:n].copy(),
        steps.end[:n].copy(),
        _at(t, steps.cpu_end[:n]),
        lat0,
        gap0,
        _launch_call_us(calls, op_call),
    )


def _launch_call_us(calls: Calls, op_call: np.ndarray) -> float:
    """The median call that launched at most one op: a CUDA graph's launch puts all its kernels in
    the queue in one call, hundreds of launches' worth, which says nothing of a single launch's cost
    (and under the profiler far less: it traces every node, validation/profiler_event_cost.py)."""
    launched = np.bincount(op_call[op_call >= 0], minlength=len(calls.dur))
    single = calls.dur[launched <= 1]
    return float(np.median(single)) if len(single) else float("nan")


def _events(cpu: CpuTable, t: np.ndarray, only: np.ndarray | None = None) -> np.ndarray:
    """How many host events (not annotations; of ``only``'s rows, where given) start in each segment."""
    mine = (cpu.kind != ANNOTATION) if only is None else only
    ts = cpu.ts[mine & (cpu.ts >= t[0]) & (cpu.ts < t[-1])]
    k = np.searchsorted(t, ts, side="right") - 1
    return np.bincount(k, minlength=len(t) - 1)[: len(t) - 1].astype(np.int64)


def _named(tables: TraceTables, kind: int, prefix: str) -> np.ndarray:
    """The cpu rows of ``kind`` whose names start with ``prefix``: Inductor's Triton launches (ops named
    ``triton_<kind>_...``, as every kernel Inductor generates is) and Lightning's record functions
    (annotations named ``[pl]…``)."""
    cpu = tables.cpu
    named = name_lookup(tables.names, lambda n: n.startswith(prefix), tables.cpu_name_codes((kind,)))
    out: np.ndarray = (cpu.kind == kind) & named[cpu.name]
    return out


def _points(origin: float, exact: list[np.ndarray], loose: list[np.ndarray]) -> np.ndarray:
    """The host chain's points: the origin, and every time given (none before the origin)."""
    allp = np.concatenate([[origin], *exact, *loose])
    pts: np.ndarray = np.unique(allp[allp >= origin])
    return pts


def _at(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The point of each time of ``x`` (each is one of ``t``'s, or after the last one's start)."""
    return np.minimum(np.searchsorted(t, x, side="left"), len(t) - 1).astype(np.int64)


def _cover(n_seg: int, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """Which segments lie inside one of the point ranges ``[p0, p1)``."""
    diff = np.bincount(p0, minlength=n_seg + 1)[: n_seg + 1] - np.bincount(p1, minlength=n_seg + 1)[: n_seg + 1]
    out: np.ndarray = np.cumsum(diff)[:n_seg] > 0
    return out


def paint(n_seg: int, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """For each segment, the index of a range ``[p0, p1)`` holding it (the last one), -1 none."""
    out = np.full(n_seg, -1, np.int64)
    length = np.maximum(p1 - p0, 0)
    if not length.sum():
        return out
    owner = np.repeat(np.arange(len(p0)), length)
    starts = np.repeat(p0 - np.cumsum(length) + length, length)
    out[np.arange(len(owner)) + starts] = owner
    return out


def _segment_classes(
    t: np.ndarray, calls: Calls, copy_call: np.ndarray, syncs: Syncs, loader_ts: np.ndarray, loader_end: np.ndarray
) -> np.ndarray:
    """Each segment's class: in a sync, else in a copy's call, else in a launch call, else in a
    DataLoader call, else host work."""
    n_seg = len(t) - 1
    out = np.full(n_seg, cls.CODE[cls.HOST], np.int8)
    out[_cover(n_seg, _at(t, loader_ts), _at(t, loader_end))] = cls.CODE[cls.DATALOADER]
    out[_cover(n_seg, calls.p0, calls.p1)] = cls.CODE[cls.LAUNCH]
    out[_cover(n_seg, calls.p0[copy_call], calls.p1[copy_call])] = cls.CODE[cls.COPY]
    out[_cover(n_seg, syncs.p0, syncs.p1)] = cls.CODE[cls.SYNC]
    return out


def _median(x: np.ndarray, lo: float, hi: float, default: float) -> float:
    return float(np.clip(np.median(x), lo, hi)) if len(x) else default


def _ops(
    g: GpuTable, rows: np.ndarray, dev: Device, op_call: np.ndarray, calls: Calls, t: np.ndarray, steps: Steps, n: int
) -> tuple[Ops, float, float]:
    """The ops with the edge that bound each one's start, and the typical launch latency and
    stream gap the non-binding edges get."""
    a, d = g.ts[rows], g.dur[rows]
    b = a + d
    streams, sidx = np.unique(g.stream[rows], return_inverse=True)
    sidx = sidx.reshape(-1).astype(np.int64)
    first = np.searchsorted(sidx, np.arange(len(streams) + 1)).astype(np.int64)
    has_pred = np.zeros(len(rows), bool)
    has_pred[1:] = sidx[1:] == sidx[:-1]
    prev_end = np.full(len(rows), -np.inf)
    prev_end[1:] = b[:-1]
    prev_end[~has_pred] = -np.inf
    launched = op_call >= 0
    lp = np.where(launched, calls.p0[np.maximum(op_call, 0)], -1) if len(calls.p0) else np.full(len(rows), -1)
    launch_t = np.where(launched, t[np.maximum(lp, 0)], -np.inf)
    lat0 = _median((a - launch_t)[launched & (prev_end < launch_t)], 0.0, 100.0, DEFAULT_LAUNCH_LATENCY_US)
    queued = has_pred & (~launched | (launch_t + lat0 < prev_end))
    gap0 = _median((a - prev_end)[queued], 0.0, 20.0, DEFAULT_STREAM_GAP_US)
    cand_l, cand_s = launch_t + lat0, prev_end + gap0
    best = np.maximum(cand_l, cand_s)
    bind = np.where(cand_l > cand_s, BY_LAUNCH, BY_STREAM).astype(np.int8)
    bind[~launched & ~has_pred] = BY_ORIGIN
    wait = _waits(a, b, sidx, first, best)
    bind[wait >= 0] = BY_WAIT
    wait_w = np.where(wait >= 0, a - b[np.maximum(wait, 0)], -np.inf)
    origin = float(t[0])
    lat = np.where(launched, np.where(bind == BY_LAUNCH, a - launch_t, np.minimum(lat0, a - launch_t)), -np.inf)
    gap = np.where(has_pred, np.where(bind == BY_STREAM, a - prev_end, np.minimum(gap0, a - prev_end)), -np.inf)
    origin_w = np.where(bind == BY_ORIGIN, a - origin, -np.inf)
    op_cls = cls.op_classes(g.kind[rows], g.name[rows], dev.name_class)
    ops = Ops(
        rows,
        sidx,
        a,
        d,
        op_cls,
        dev.step[rows].astype(np.int64),
        lp.astype(np.int64),
        op_call,
        lat,
        gap,
        wait,
        wait_w,
        origin_w,
        bind,
        first,
        np.zeros(len(rows), bool),
    )
    return ops, lat0, gap0


def _carried(ops: Ops, launcher: np.ndarray, cpu_ts: np.ndarray, first_host: float) -> np.ndarray:
    """The first step's ops an earlier step put in the queue: launched before the step's host began,
    or, where the trace has no launch call for them, each stream's run of such ops before its first
    launched one (the trace began with the GPU still working through them)."""
    launched = launcher >= 0
    early = launched & (cpu_ts[np.maximum(launcher, 0)] < first_host)
    # launched ops so far on each op's stream, up to and including it (ops are in stream order)
    count = np.cumsum(launched)
    head = ops.first[:-1]
    before_stream = count[head] - launched[head] if len(ops) else np.zeros(0, np.int64)
    seen_launch = count - before_stream[ops.stream] > 0
    out: np.ndarray = (ops.step == 0) & (early | (~launched & ~seen_launch))
    return out


def _waits(a: np.ndarray, b: np.ndarray, sidx: np.ndarray, first: np.ndarray, best: np.ndarray) -> np.ndarray:
    """For each op that started more than WAIT_SLACK_US after its launch and stream allowed: the op
    of another stream that ended last before it started, when that was at most WAIT_MATCH_US
    before and after what the launch and stream allowed (-1 for none)."""
    out = np.full(len(a), -1, np.int64)
    late = np.flatnonzero(a - best > WAIT_SLACK_US)
    if not len(late) or len(first) <= 2:
        return out
    found_end = np.full(len(late), -np.inf)
    for s in range(len(first) - 1):
        lo, hi = int(first[s]), int(first[s + 1])
        if hi <= lo:
            continue
        order = np.argsort(b[lo:hi], kind="stable")
        ends = b[lo:hi][order]
        k = np.searchsorted(ends, a[late], side="right") - 1
        ok = (k >= 0) & (sidx[late] != s)
        cand = np.where(ok, ends[np.maximum(k, 0)], -np.inf)
        better = cand > found_end
        found_end = np.where(better, cand, found_end)
        out[late[better]] = lo + order[np.maximum(k, 0)][better]
    good = (a[late] - found_end <= WAIT_MATCH_US) & (found_end >= best[late])
    out[late[~good]] = -1
    return out


def _syncs(s0: np.ndarray, s1: np.ndarray, rows: np.ndarray, t: np.ndarray, ops: Ops) -> Syncs:
    """Each sync with the ops it waited for: on each stream, the last op launched before the sync
    began that had ended when it returned. It waited for the GPU when the last of them ended after
    it began; its return latency is then the time from that end to its own."""
    n_streams = len(ops.first) - 1
    waits = np.full((len(rows), n_streams), -1, np.int64)
    b = ops.b
    launch_t = np.where(ops.launch >= 0, t[np.maximum(ops.launch, 0)], ops.a)
    for s in range(n_streams):
        lo, hi = int(ops.first[s]), int(ops.first[s + 1])
        if hi <= lo:
            continue
        before = np.searchsorted(np.maximum.accumulate(launch_t[lo:hi]), s0, side="left")
        done = np.searchsorted(np.maximum.accumulate(b[lo:hi]), s1 + SYNC_TOLERANCE_US, side="right")
        last = np.minimum(before, done) - 1
        waits[:, s] = np.where(last >= 0, lo + last, -1)
    ends = np.where(waits >= 0, b[np.maximum(waits, 0)], -np.inf)
    k = np.argmax(ends, axis=1) if n_streams else np.zeros(len(rows), np.int64)
    last_end = ends[np.arange(len(rows)), k] if n_streams else np.full(len(rows), -np.inf)
    bound_mask = last_end > s0
    bound = np.where(bound_mask, waits[np.arange(len(rows)), k] if n_streams else -1, -1).astype(np.int64)
    lat_b = s1 - last_end
    typical = _median(lat_b[bound_mask], 0.0, 100.0, DEFAULT_SYNC_LATENCY_US)
    lat = np.where(bound_mask, lat_b, np.minimum(typical, lat_b))
    own = np.where(bound_mask, np.clip(lat_b, 0.0, s1 - s0), s1 - s0)
    return Syncs(rows, _at(t, s0), _at(t, s1), own, lat, waits, bound)


def _scale_sync_segments(w: np.ndarray, syncs: Syncs, t: np.ndarray) -> None:
    """A sync's segments weigh what the call costs with nothing left to wait for (``own``): the
    rest of its length is the wait, which the edge from the GPU gives."""
    owner = paint(len(w), syncs.p0, syncs.p1)
    has = owner >= 0
    if not has.any():
        return
    length = t[syncs.p1] - t[syncs.p0]
    factor = np.where(length > 0, syncs.own / np.where(length > 0, length, 1.0), 0.0)
    w[has] *= factor[owner[has]]
