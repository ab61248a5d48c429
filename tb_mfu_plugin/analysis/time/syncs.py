"""Host-device synchronisations and the CPU op that issued each one.

A sync is a runtime call that blocks the host until the device catches up. The
cause is found by nesting on the same thread (``aten::item`` ->
``aten::_local_scalar_dense`` -> ``cudaStreamSynchronize``), never by op name
alone: ``aten::item`` on a CPU tensor does not touch the GPU at all.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core.distinct import distinct
from ...trace.tables import DRIVER, OP, RUNTIME, CpuTable, name_lookup
from ..report import SyncStats
from . import intervals

SYNC_API = re.compile(
    r"^(?:cuda|hip)(?:StreamSynchronize|DeviceSynchronize|EventSynchronize|Memcpy|Memcpy2D|Memcpy3D"
    r"|MemcpyToSymbol|MemcpyFromSymbol)$"
    r"|^cu(?:StreamSynchronize|CtxSynchronize|EventSynchronize|MemcpyDtoH|MemcpyHtoD|MemcpyDtoH_v2|MemcpyHtoD_v2)$"
)


@dataclass(frozen=True)
class SyncEvents:
    rows: np.ndarray  # cpu rows of the sync calls
    op: list[int | None]  # innermost enclosing op row
    root: list[int | None]  # outermost enclosing op row


def sync_mask(names: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
    """Per name code: a synchronising call; ``codes``: test only these names (``name_lookup``)."""
    return name_lookup(names, SYNC_API.match, codes)


def find_syncs(cpu: CpuTable, names: Sequence[str], windows: list[tuple[float, float]]) -> SyncEvents:
    """Sync calls whose start lies in one of the host windows ``[lo, hi]``, with their callers."""
    calls = (cpu.kind == RUNTIME) | (cpu.kind == DRIVER)
    is_sync = sync_mask(names, distinct(cpu.name[calls]))
    rows = np.flatnonzero(calls & is_sync[cpu.name])
    if len(rows) and windows:
        lo, hi = zip(*windows, strict=True)
        rows = rows[intervals.in_any(cpu.ts[rows], np.array(lo), np.array(hi))]
    ops = np.flatnonzero(cpu.kind == OP)
    inner = np.full(len(rows), -1, np.int64)
    outer = np.full(len(rows), -1, np.int64)
    if len(rows) and len(ops):
        # the syncs' threads are few (the main thread, a loader): one mask of the ops each
        threads = np.stack([cpu.pid[rows].astype(np.int64), cpu.tid[rows].astype(np.int64)], axis=1)
        for pid, tid in np.unique(threads, axis=0).tolist():
            mine = np.flatnonzero((threads[:, 0] == pid) & (threads[:, 1] == tid))
            cand = ops[(cpu.pid[ops] == pid) & (cpu.tid[ops] == tid)]
            if not len(cand):  # a thread with no ops: its syncs have no caller
                continue
            i, o = _callers(cpu.ts[cand], cpu.end[cand], cpu.ts[rows[mine]], cpu.end[rows[mine]])
            inner[mine] = np.where(i >= 0, cand[np.maximum(i, 0)], -1)
            outer[mine] = np.where(o >= 0, cand[np.maximum(o, 0)], -1)
    return SyncEvents(rows, _rows_or_none(inner), _rows_or_none(outer))


def _callers(ts: np.ndarray, end: np.ndarray, t: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For calls ``[t, e]`` on one thread whose ops (in start order) are ``[ts, end]``: the
    innermost and the outermost op enclosing each call (the last and the first op that starts
    at or before ``t`` and ends at or after ``e``), -1 for none.

    The outermost is a search in the prefix maximum of the ends; the innermost is searched
    backwards from the call in blocks, which ends within the first block for nested calls, so
    the cost is one pass over the ops instead of one per call."""
    k = np.searchsorted(ts, t, side="right")  # ops[:k] start at or before the call
    # the first op whose end reaches e: the prefix maximum first reaches e on that op's own end
    first = np.searchsorted(np.maximum.accumulate(end), e, side="left")
    outer = np.where(first < k, first, -1)
    inner = np.full(len(t), -1, np.int64)
    for n in np.flatnonzero(outer >= 0):
        lo_bound, hi, block = int(first[n]), int(k[n]), _BLOCK
        while True:
            lo = max(lo_bound, hi - block)
            hits = np.flatnonzero(end[lo:hi] >= e[n])
            if len(hits):  # never empty once lo reaches first, whose end reaches e
                inner[n] = lo + hits[-1]
                break
            hi, block = lo, block * 2
    return inner, outer


_BLOCK = 32  # ops looked at per step of the backward search (doubling)
# The memory timeline asks the same question of the allocator's events (analysis.memory.timeline).
enclosing_ops = _callers


def _rows_or_none(rows: np.ndarray) -> list[int | None]:
    return [int(r) if r >= 0 else None for r in rows]


def sync_stats(cpu: CpuTable, names: Sequence[str], syncs: SyncEvents, steps: int) -> list[SyncStats]:
    if steps == 0:
        return []
    groups: dict[tuple[str, str | None, str | None], list[float]] = defaultdict(list)
    for r, op, root in zip(syncs.rows, syncs.op, syncs.root, strict=True):
        key = (
            names[cpu.name[r]],
            names[cpu.name[op]] if op is not None else None,
            names[cpu.name[root]] if root is not None else None,
        )
        groups[key].append(float(cpu.dur[r]))
    out = [
        SyncStats(
            api=api,
            op=op,
            root_op=root,
            count_per_step=len(durs) / steps,
            blocked_us_per_step=sum(durs) / steps,
        )
        for (api, op, root), durs in groups.items()
    ]
    out.sort(key=lambda s: -s.blocked_us_per_step)
    return out
