"""The step as it runs without the profiler: what torch.profiler costs a trace, taken out of the
critical-path graph's weights.

The profiler costs the host a share of a launch call for every event it records (more for Inductor's
Triton launches and Lightning's record functions), and it traces every node of a CUDA graph replay,
which slows the replay's call and spaces out its kernels. ``unprofiled`` gives the graph's weights
without either; ``whatif.Model`` re-times them into the headline's step, and each what-if's gain
without the profiler starts from them.
"""

from __future__ import annotations

import numpy as np

from .graph import Graph
from .timing import Weights

# The gap between two kernels of one CUDA graph replay without the profiler, which traces every node
# of a replay and so spaces its kernels out: on the ten replayed steps recorded with their step also
# timed without the profiler (the tiny MLP's 492-kernel step on six H100 hosts and in four H200
# recordings, the sample's among them), the unprofiled step less the traced kernels' time leaves
# 0.090-0.114 µs a kernel (median 0.112), where the traces show 0.256 (their median gap, on every
# host); the traced step re-timed without the profiler's host cost alone read 8-36 % long.
GRAPH_GAP_UNPROFILED_US = 0.11
# What a graph's launch call costs without the profiler, as a share of what it cost under it: the
# profiler traces every node in the call. Measured directly on an H100 (validation/profiler_cost,
# profiler_event_cost.py --graphs): graphs of 128 and 512 one-kernel nodes took 41.7 and 147.6 µs to
# launch without the profiler and 114.9 and 414.0 µs with it (0.36 both; 16 nodes: 16.2 and 22.4 µs,
# where a launch call's own cost is most of it).
GRAPH_LAUNCH_UNPROFILED_SHARE = 0.36


# What torch.profiler (record_shapes=True) costs the host per recorded event (an op, a runtime or
# driver call), as a share of the trace's median launch call. The cost is the host's own work, so it
# scales with how fast that host runs, and the launch call is the trace's own measure of that: the
# same for-loop AdamW step cost the profiler 2.0 µs an event on one H200 host and 3.5 µs on another,
# where its launch calls took 5.1 and 7.3 µs. Measured directly, one kind of host work at a time
# (validation/profiler_event_cost.py): 0.27-0.60 of a launch call, the median over the kinds 0.39 and
# 0.38 on two H100 hosts. Against the step times measured without the profiler, the share each host's
# host-bound traces needed has its median at 0.48 (H200s), 0.47, 0.34 and 0.39 (three H100 hosts); at
# 0.4 the median step is 2.1 %, 1.9 %, 1.1 % and 1.1 % from its truth, 43 of 65, 18 of 27, 23 of 27
# and 29 of 31 within 5 % (as many or more than at 0.5), and the H100 hosts' worst trace 13, 10 and
# 9 % off (25, 24 and 23 % at 0.5; validation/fit_profiler_drag.py prints the tables). The profiler does
# not slow the GPU's kernels, so a GPU-bound step hides it and a host-bound one shows it
# (docs/diagnosis.md).
PROFILER_EVENT_LAUNCHES = 0.4
# where the trace has no launch call to measure the host by: the best constant of the same fit
PROFILER_EVENT_US = 4.0
# What each of Inductor's Triton launches costs the profiler on top of that, in launch calls. While the
# profiler runs, and only then, Inductor's launcher builds a record function's arguments (the kernel's
# file, hash and config string) and opens it over every input, shapes recorded
# (graph.TRITON_LAUNCH_PREFIX); so a compiled step loses more to the profiler than its events say
# (torch.compile'd GPT: 22.2 ms profiled against 12.0 ms without; half a launch call an event took
# out 4.4 ms of the 10.2). Fitted on the six traces of the same 65 that launch Triton kernels: at 4
# launch calls their median error falls from 4.2 % to 1.5 % and the worst from 48 % to 13 %, and on
# the two held-out H100 traces that launch them from 12.9 % to 4.3 % (the worst 24 % to 7 %); no
# trace without Triton launches changes.
PROFILER_TRITON_LAUNCHES = 4.0
# What each record function of Lightning's PyTorchProfiler costs the host, in launch calls: the Python
# around it (a forward pre-hook and hook on every submodule for ``[pl][module]``, the profiler's
# start/stop for ``[pl][profile]``) exists only while that profiler is attached, and it is an annotation,
# which the cost per event does not count. Four launch calls, as a Triton launch's record function costs
# beyond its event: the same kind of work, a record function Python opens only under the profiler.
# Measured on the two Lightning traces with truth (88 such record functions a step): the hooks alone, in
# the same process after the profiler stopped, cost 1.8 and 4.6 launch calls each (H200, H100), and the
# step without the profiler needed 3.7 and 7.4 (validation/mfu_truth, validation/h100/mfu_truth).
PROFILER_LIGHTNING_LAUNCHES = 4.0
# How far the profiler's true cost on one recording strays from that estimate: the same .item() step,
# recorded twice minutes apart on an H100, needed 0.12 and 0.31 of a launch call an event to meet its
# truth, and nothing in the two traces (their launch calls, the gaps between their ops) told them
# apart. So the estimate comes with a range: from 0.30 to 0.75 of a launch call, the 10th and 90th
# percentiles of the share the host-bound traces needed (0.29 and 0.74 on the H200s, 0.31 and 0.79 on
# the first H100 host), as multiples of the estimate. The headline MFU carries it (Summary.mfu_range);
# validation/fit_profiler_drag.py prints how often it held the truth.
PROFILER_COST_RANGE = (0.30 / PROFILER_EVENT_LAUNCHES, 0.75 / PROFILER_EVENT_LAUNCHES)


def profiler_event_us(g: Graph) -> float:
    """What the profiler cost this trace's host per recorded event."""
    launch = g.launch_call_us
    return PROFILER_EVENT_US if not np.isfinite(launch) else PROFILER_EVENT_LAUNCHES * launch


def profiler_triton_us(g: Graph) -> float:
    """What the profiler cost this trace's host per Triton launch, on top of its events' cost (none
    where the trace has no single launch call to measure the host by)."""
    launch = g.launch_call_us
    return PROFILER_TRITON_LAUNCHES * launch if np.isfinite(launch) else 0.0


def profiler_lightning_us(g: Graph) -> float:
    """What Lightning's profiler cost this trace's host per record function it opened (none where the
    trace has no launch call to measure the host by)."""
    launch = g.launch_call_us
    return PROFILER_LIGHTNING_LAUNCHES * launch if np.isfinite(launch) else 0.0


def profiler_us(g: Graph, scale: float = 1.0) -> np.ndarray:
    """What the profiler cost the host in each segment of the host chain (``scale`` x the estimate)."""
    per_segment = profiler_event_us(g) * g.host.events + profiler_triton_us(g) * g.host.triton
    cost: np.ndarray = scale * (per_segment + profiler_lightning_us(g) * g.host.lightning)
    return cost


def unprofiled(g: Graph, scale: float = 1.0) -> Weights:
    """The graph's weights with the profiler's cost taken out: each host segment ``profiler_us``
    shorter (never below 0), and each CUDA graph replay as it runs without the profiler
    (``_replays_unprofiled``)."""
    base = Weights.of(g)
    w = np.maximum(base.w - profiler_us(g, scale), 0.0)
    w, gap, lat = _replays_unprofiled(g, w, base.gap, base.lat)
    # what an earlier step left in the queue is that step's work: in the steady state the last step
    # leaves as much to the next, which the re-timed span does not count
    d = np.where(g.ops.carried, 0.0, base.d)
    return Weights(w, d, gap, lat, base.sync_keep)


def graph_launch_unprofiled_us(g: Graph, traced_us: np.ndarray) -> np.ndarray:
    """What CUDA graph launch calls that took ``traced_us`` under the profiler cost the host without
    it: ``GRAPH_LAUNCH_UNPROFILED_SHARE`` of that, and never less than one launch call without the
    profiler (the host's median launch call less the profiler's cost of its event)."""
    launch = g.launch_call_us
    one = max(launch - profiler_event_us(g), 0.0) if np.isfinite(launch) else PROFILER_EVENT_US
    out: np.ndarray = np.maximum(GRAPH_LAUNCH_UNPROFILED_SHARE * traced_us, one)
    return out


def _replays_unprofiled(
    g: Graph, w: np.ndarray, gap: np.ndarray, lat: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The host weights, stream gaps and launch edges with each CUDA graph replay (a launch call that
    launched several ops) as it runs without the profiler: its call ``graph_launch_unprofiled_us``
    long, its first kernel held back that much less, every later one in the queue the typical
    launch latency after the call's start (the profiler's tracing of each node held them back), and
    its kernels ``GRAPH_GAP_UNPROFILED_US`` apart at most."""
    ops = g.ops
    launched = ops.call >= 0
    if not launched.any():
        return w, gap, lat
    per_call = np.bincount(ops.call[launched], minlength=len(g.calls.row))
    replay = per_call > 1
    if not replay.any():
        return w, gap, lat
    in_replay = launched & replay[np.maximum(ops.call, 0)]
    # ops are in stream order: an op follows the one before it in the arrays on its own stream
    follows = np.zeros(len(ops), bool)
    follows[1:] = in_replay[1:] & (ops.call[1:] == ops.call[:-1]) & (ops.stream[1:] == ops.stream[:-1])
    gap = np.where(follows & np.isfinite(gap), np.minimum(gap, GRAPH_GAP_UNPROFILED_US), gap)
    lat = np.where(follows & np.isfinite(lat), np.minimum(lat, g.launch_latency_us), lat)
    # a replay's first kernel waited for its call to put the graph in the queue: it waits as much less
    # as the call takes less, and no less than a launch would (it may also have waited for other work);
    # one with no op before it in the graph starts no earlier than the first step, which no change moves
    new_call = graph_launch_unprofiled_us(g, g.calls.dur)  # per call; only the replays' are used
    first = in_replay & ~follows
    call = np.maximum(ops.call, 0)
    excess = np.where(first, np.maximum(g.calls.dur[call] - new_call[call], 0.0), 0.0)
    least = np.minimum(lat, g.launch_latency_us)
    at_origin = np.where(ops.launch >= 0, g.step_start[0] - g.host.t[np.maximum(ops.launch, 0)], -np.inf)
    least = np.where(np.isfinite(gap), least, np.maximum(least, at_origin))
    lat = np.where(first & np.isfinite(lat), np.minimum(lat, np.maximum(lat - excess, least)), lat)
    gap = np.where(first & np.isfinite(gap), np.maximum(gap - excess, np.minimum(gap, g.stream_gap_us)), gap)
    w = np.minimum(w, calls_scaled(g, w, g.calls.row[replay], new_call[replay]))
    return w, gap, lat


def calls_scaled(g: Graph, w: np.ndarray, rows: np.ndarray, new_dur: np.ndarray) -> np.ndarray:
    """The segment weights with the given launch calls at their new duration."""
    calls = g.calls
    pos = np.searchsorted(calls.row, rows)
    ok = (pos < len(calls.row)) & (calls.row[np.minimum(pos, len(calls.row) - 1)] == rows) if len(calls.row) else []
    factor = np.ones(len(calls.row))
    if len(calls.row):
        f = np.asarray(np.broadcast_to(new_dur, rows.shape), np.float64)[ok]
        dur = calls.dur[pos[ok]]
        np.minimum.at(factor, pos[ok], np.clip(np.where(dur > 0, f / np.where(dur > 0, dur, 1.0), 1.0), 0.0, 1.0))
    seg_call = g.host.call
    has = seg_call >= 0
    out = w.copy()
    out[has] *= factor[seg_call[has]]
    return out
