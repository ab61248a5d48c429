"""Which allocations are alive at a moment, and which ops made them.

An allocation (``Bytes`` > 0 at address A) lives until the next event at A: its free. The
allocator never hands out one address twice at once, so when the next event at A is another
allocation (a free the trace lost, or a hostile file), the first one is taken as gone by then: a
block is never counted twice, and no figure can exceed what was allocated. Allocations never
freed inside the trace live to its end. Events of unknown address or change are left out.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ...trace.tables import UNKNOWN_BYTES, MemoryTable, TraceTables
from .types import MemoryOp

BEFORE_STEP = "(before the step)"
TOP_OPS = 10


def free_index(mem: MemoryTable) -> np.ndarray:
    """Per event: for an allocation, the index of the event that frees its block (``len(mem)``
    when none does inside the trace); -1 for frees and for events of unknown address or change."""
    n = len(mem)
    out = np.full(n, -1, np.int64)
    rows = np.flatnonzero((mem.addr >= 0) & (mem.bytes != UNKNOWN_BYTES))
    if not len(rows):
        return out
    order = rows[np.lexsort((rows, mem.addr[rows]))]  # by address, then in time order
    addr = mem.addr[order]
    same = np.zeros(len(order), bool)
    same[:-1] = addr[1:] == addr[:-1]
    alloc = mem.bytes[order] > 0
    nxt = np.full(len(order), n, np.int64)
    nxt[:-1] = order[1:]
    out[order[alloc]] = np.where(same[alloc], nxt[alloc], n)
    return out


def alive_at(mem: MemoryTable, freed: np.ndarray, first: int, at: int) -> np.ndarray:
    """The allocations among events ``[first, at]`` still alive after event ``at``."""
    idx = np.arange(first, at + 1)
    return idx[(mem.bytes[idx] > 0) & (freed[idx] > at)]


def kept_across_steps(step: np.ndarray, freed: np.ndarray, n_steps: int) -> np.ndarray:
    """The allocations made in an analysed step but the last that no later event frees: what the
    run keeps from step to step (a leak, or a cache filling up). The last step is left out: its
    allocations may be freed after the trace ends."""
    return np.flatnonzero((step >= 0) & (step < n_steps - 1) & (freed == len(freed)))


def top_ops(
    tables: TraceTables,
    mem: MemoryTable,
    op: np.ndarray,
    root: np.ndarray,
    alive: np.ndarray,
    before: int | None,
    per: int = 1,
) -> list[MemoryOp]:
    """The ops that made the ``alive`` allocations, by bytes, largest first (at most ``TOP_OPS``), and
    what was allocated before the step (``before``: the peak less what the step's alive allocations
    hold; None when unknown, and never below zero). Bytes and counts are divided by ``per`` (steps)."""
    names = tables.names
    bytes_of: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    largest: dict[str, tuple[int, int]] = {}
    for i in alive.tolist():
        name = names[tables.cpu.name[op[i]]] if op[i] >= 0 else "(no op)"
        b = int(mem.bytes[i])
        bytes_of[name] += b
        count[name] += 1
        if b > largest.get(name, (-1, -1))[0]:
            largest[name] = (b, int(root[i]))
    out = [
        MemoryOp(
            name=name,
            root_op=names[tables.cpu.name[largest[name][1]]] if largest[name][1] >= 0 else None,
            bytes=round(b / per),
            count=round(count[name] / per),
        )
        for name, b in bytes_of.items()
    ]
    if before is not None and before > 0:
        out.append(MemoryOp(name=BEFORE_STEP, root_op=None, bytes=before, count=0))
    out.sort(key=lambda o: (-o.bytes, o.name))
    return out[:TOP_OPS]
