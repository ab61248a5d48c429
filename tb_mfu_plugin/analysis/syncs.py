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

from ..trace.tables import DRIVER, OP, RUNTIME, CpuTable
from . import intervals
from .report import SyncStats

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


def sync_mask(names: Sequence[str]) -> np.ndarray:
    return np.fromiter((bool(SYNC_API.match(n)) for n in names), bool, len(names))


def find_syncs(cpu: CpuTable, names: Sequence[str], windows: list[tuple[float, float]]) -> SyncEvents:
    """Sync calls whose start lies in one of the host windows ``[lo, hi]``, with their callers."""
    is_sync = sync_mask(names)
    rows = np.flatnonzero(((cpu.kind == RUNTIME) | (cpu.kind == DRIVER)) & is_sync[cpu.name])
    if len(rows) and windows:
        lo, hi = zip(*windows, strict=True)
        rows = rows[intervals.in_any(cpu.ts[rows], np.array(lo), np.array(hi))]
    ops = np.flatnonzero(cpu.kind == OP)
    by_thread: dict[tuple[int, int], np.ndarray] = {}
    inner: list[int | None] = []
    outer: list[int | None] = []
    for r in rows:
        key = (int(cpu.pid[r]), int(cpu.tid[r]))
        cand = by_thread.get(key)
        if cand is None:
            cand = by_thread[key] = ops[(cpu.pid[ops] == key[0]) & (cpu.tid[ops] == key[1])]
        # ops are sorted by start: only those starting before the call can enclose it
        before = cand[: np.searchsorted(cpu.ts[cand], cpu.ts[r], side="right")]
        enclosing = before[cpu.end[before] >= cpu.end[r]]
        inner.append(int(enclosing[-1]) if len(enclosing) else None)
        outer.append(int(enclosing[0]) if len(enclosing) else None)
    return SyncEvents(rows, inner, outer)


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
