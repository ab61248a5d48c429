"""The host's lanes of one step: a lane per thread that launched the step's GPU work or blocked
in a sync, most launches first.

A thread's events nest (``aten::linear`` > ``aten::addmm`` > ``cudaLaunchKernel``); a lane shows
one level, what the thread was doing at each moment: blocked in a sync (``sync_wait``), in a launch
call (``launch``: it enqueued GPU work), in another runtime or driver call (``runtime``), or inside
an op (``host_op``), each stretch named by its outermost call or op and carrying the outermost op
around it. Time outside any op is not drawn (Python between ops, or nothing recorded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.tables import DRIVER, OP, RUNTIME, TraceTables
from ..critical_path.graph import paint
from ..kernels.name_patterns import LAUNCH_CALL, name_mask
from .pieces import CLASS, Lane, Pieces

MAX_HOST_LANES = 8  # threads shown at most (a step's work is launched from one to three)

# The order in which a stretch takes its class: a later one wins where both hold.
_HOST_OP, _RUNTIME, _LAUNCH, _SYNC = 0, 1, 2, 3
_CLASS_OF = np.array([CLASS["host_op"], CLASS["runtime"], CLASS["launch"], CLASS["sync_wait"]], np.int64)


@dataclass(frozen=True)
class HostLanes:
    lanes: list[Lane]
    pieces: Pieces
    threads: list[tuple[int, int]]  # (pid, tid) of each lane, in lane order
    left_out: int  # threads not shown (past MAX_HOST_LANES)


def host_lanes(
    tables: TraceTables,
    launch_rows: np.ndarray,
    sync_rows: np.ndarray,
    lo: float,
    hi: float,
    first_lane: int,
) -> HostLanes:
    """The threads of the cpu rows ``launch_rows`` (the calls that launched the window's GPU work)
    and ``sync_rows`` (the syncs in the step), over ``[lo, hi)``, numbered from ``first_lane``."""
    cpu = tables.cpu
    who = np.concatenate([launch_rows, sync_rows]).astype(np.int64)
    if not len(who):
        return HostLanes([], Pieces.join([]), [], 0)
    threads, counts = np.unique(np.stack([cpu.pid[who], cpu.tid[who]], axis=1), axis=0, return_counts=True)
    order = np.lexsort((threads[:, 1], threads[:, 0], -counts))
    picked = [(int(p), int(t)) for p, t in threads[order][:MAX_HOST_LANES].tolist()]
    near = np.flatnonzero(
        (cpu.ts < hi) & (cpu.end > lo) & np.isin(cpu.kind, np.array([OP, RUNTIME, DRIVER], cpu.kind.dtype))
    )
    launch_call = name_mask(tables.names, LAUNCH_CALL, codes=tables.call_name_codes)
    is_sync = np.zeros(len(cpu), bool)
    is_sync[sync_rows] = True
    launched = np.zeros(len(cpu), bool)  # calls that a GPU row names as its launch (memcpy, memset calls too)
    launched[tables.launcher[tables.launcher >= 0]] = True
    parts, lanes = [], []
    for i, (pid, tid) in enumerate(picked):
        mine = near[(cpu.pid[near] == pid) & (cpu.tid[near] == tid)]
        lanes.append(Lane(f"thread {tid}" + (f" (process {pid})" if pid != tid else ""), "host", pid, tid))
        parts.append(_thread(tables, mine, launch_call, is_sync, launched, lo, hi, first_lane + i))
    return HostLanes(lanes, Pieces.join(parts), picked, max(0, len(threads) - MAX_HOST_LANES))


def _outermost(ts: np.ndarray, end: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The ``rows`` of one thread inside no other of them (ties: the longer one holds)."""
    if not len(rows):
        return rows
    order = np.lexsort((-end[rows], ts[rows]))
    r = rows[order]
    reach = np.maximum.accumulate(end[r])
    inside = np.zeros(len(r), bool)
    inside[1:] = reach[:-1] >= end[r][1:]
    out: np.ndarray = r[~inside]
    return out


def _thread(
    tables: TraceTables,
    rows: np.ndarray,
    launch_call: np.ndarray,
    is_sync: np.ndarray,
    launched: np.ndarray,
    lo: float,
    hi: float,
    lane: int,
) -> Pieces:
    """One thread's stretches over ``[lo, hi)``: its outermost ops and calls painted on the points
    where any of them starts or ends, classed, named, and joined where nothing changes."""
    cpu = tables.cpu
    ts, end = np.clip(cpu.ts, lo, hi), np.clip(cpu.end, lo, hi)
    ops = _outermost(ts, end, rows[cpu.kind[rows] == OP])
    calls = _outermost(ts, end, rows[cpu.kind[rows] != OP])
    t = np.unique(np.concatenate([ts[ops], end[ops], ts[calls], end[calls]]))
    if len(t) < 2:
        return Pieces.join([])
    n = len(t) - 1
    p0, p1 = np.searchsorted(t, ts[calls]), np.searchsorted(t, end[calls])
    op_owner = paint(n, np.searchsorted(t, ts[ops]), np.searchsorted(t, end[ops]))
    call_owner = paint(n, p0, p1)
    call_kind = np.where(
        is_sync[calls], _SYNC, np.where(launch_call[cpu.name[calls]] | launched[calls], _LAUNCH, _RUNTIME)
    )
    kind = np.where(call_owner >= 0, call_kind[np.maximum(call_owner, 0)], _HOST_OP)
    covered = (call_owner >= 0) | (op_owner >= 0)
    op = np.where(op_owner >= 0, cpu.name[ops[np.maximum(op_owner, 0)]] if len(ops) else -1, -1)
    name = np.where(call_owner >= 0, cpu.name[calls[np.maximum(call_owner, 0)]] if len(calls) else -1, op)
    seg = np.flatnonzero(covered)
    # a stretch joins the one before it when it follows it at once with the same class, name and op
    same = np.zeros(len(seg), bool)
    same[1:] = (seg[1:] == seg[:-1] + 1) & (kind[seg][1:] == kind[seg][:-1])
    same[1:] &= (name[seg][1:] == name[seg][:-1]) & (op[seg][1:] == op[seg][:-1])
    # ...unless a new call starts there (two launches in a row stay two)
    same[1:] &= ~np.isin(seg[1:], p0)
    head = seg[~same]
    last = np.append(np.flatnonzero(~same)[1:] - 1, len(seg) - 1)
    tail = seg[last]
    return Pieces.of(lane, t[head], t[tail + 1], _CLASS_OF[kind[head]], name[head], op[head])
