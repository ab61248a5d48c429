"""Ranks' clocks, aligned on the collectives they share, and who waits for whom.

Each rank's trace has its own clock (one host per node, and CUPTI's GPU-to-host conversion per
process), so the same instant reads differently in two traces. A collective's kernels *end*
together on every member: the last data arrives and every rank finishes within microseconds.
They do not start together: a rank that arrives early starts its kernel and waits inside it.
So the ends are the anchors: the k-th call on a group in a step is the same call on every
member (NCCL requires every member to issue a communicator's calls in the same order), and the
median difference of their ends is the clock offset between two ranks. Offsets chain through
shared groups from the reference rank (the first analysed one, normally rank 0).

Aligned, the starts say who arrived last: each call waits for the member that starts last, and
from that moment to the end is the transfer itself. That gives each rank's time waiting for
others, and the collectives' bandwidth free of the wait.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..time import intervals
from .blocks import SyncPoint

Instance = tuple[str, int, int]  # (group, step, index)


@dataclass(frozen=True)
class Alignment:
    shift_us: list[float | None]  # per worker: add to its times to read the reference's clock
    matched: list[int]  # per worker: calls matched with another rank
    residual_us: float | None  # median spread of the aligned ends of a call: how well it fits


def _instances(points: Sequence[Sequence[SyncPoint]]) -> dict[Instance, dict[int, SyncPoint]]:
    out: dict[Instance, dict[int, SyncPoint]] = defaultdict(dict)
    for w, pts in enumerate(points):
        for p in pts:
            out[(p.group, p.step, p.index)][w] = p
    return out


def align(points: Sequence[Sequence[SyncPoint]]) -> Alignment:
    """Offsets of every worker's clock from worker 0's, through the calls they share.

    A worker with no call shared, directly or through others, with worker 0 gets None."""
    k = len(points)
    inst = _instances(points)
    diffs: dict[tuple[int, int], list[float]] = defaultdict(list)
    matched = [0] * k
    for members in inst.values():
        ws = sorted(members)
        if len(ws) < 2 or len({members[w].kind for w in ws}) > 1:
            continue
        for w in ws:
            matched[w] += 1
        for i, a in enumerate(ws):
            for b in ws[i + 1 :]:
                diffs[(a, b)].append(members[a].end_us - members[b].end_us)
    shift: list[float | None] = [None] * k
    if k:
        shift[0] = 0.0
    # Attach, one at a time, the unaligned worker with the most calls shared with an aligned one.
    while True:
        best: tuple[int, int, float] | None = None
        for (a, b), d in diffs.items():
            if best is not None and len(d) <= best[0]:
                continue
            sa, sb = shift[a], shift[b]
            # end_a + shift_a = end_b + shift_b
            if sa is not None and sb is None:
                best = (len(d), b, sa + float(np.median(d)))
            elif sb is not None and sa is None:
                best = (len(d), a, sb - float(np.median(d)))
        if best is None:
            break
        shift[best[1]] = best[2]
    return Alignment(shift_us=shift, matched=matched, residual_us=_residual(inst, shift))


def _residual(inst: dict[Instance, dict[int, SyncPoint]], shift: list[float | None]) -> float | None:
    spreads = []
    for members in inst.values():
        ends = [p.end_us + s for w, p in members.items() if (s := shift[w]) is not None]
        if len(ends) >= 2:
            spreads.append(max(ends) - min(ends))
    return float(np.median(spreads)) if spreads else None


def group_members(group: str) -> int | None:
    """Member count from a group key's ranks ("<name>[0, 2]"), None when it does not say."""
    m = re.search(r"\[([\d,\s]*)\]$", group)
    return len(re.findall(r"\d+", m.group(1))) if m else None


@dataclass
class Transfer:
    """Calls of one (kind, group, dtype) on one rank with every member's trace at hand."""

    count: int = 0
    transfer_us: float = 0.0  # end minus the last member's start, summed
    kernel_us: float = 0.0  # the rank's kernel time of the same calls
    bytes: float = 0.0  # summed over the calls whose size is known
    bytes_us: float = 0.0  # transfer time of those calls


@dataclass
class Arrivals:
    # per worker: time inside collectives waiting for a later member (the union of the waits, so
    # two collectives waiting at once on two streams count once)
    wait_us: list[float]
    complete: list[int]  # per worker: calls whose every member was found
    transfers: list[dict[tuple[str, str, str | None], Transfer]] = field(default_factory=list)


def arrivals(points: Sequence[Sequence[SyncPoint]], shift: Sequence[float | None]) -> Arrivals:
    """Who waited for whom, over the calls that every member of their group recorded."""
    k = len(points)
    out = Arrivals(wait_us=[0.0] * k, complete=[0] * k, transfers=[defaultdict(Transfer) for _ in range(k)])
    waits: list[list[tuple[float, float]]] = [[] for _ in range(k)]
    for (group, _, _), members in _instances(points).items():
        offset = {w: s for w in members if (s := shift[w]) is not None}
        need = group_members(group)
        if len(offset) < 2 or (need is not None and len(offset) < need):
            continue
        last = max(members[w].start_us + s for w, s in offset.items())
        for w, s in offset.items():
            p = members[w]
            waits[w].append((p.start_us + s, last))
            out.complete[w] += 1
            t = out.transfers[w][(p.kind, group, p.dtype)]
            took = max(0.0, p.end_us + s - last)
            t.count += 1
            t.transfer_us += took
            t.kernel_us += p.end_us - p.start_us
            if p.nbytes >= 0:
                t.bytes += p.nbytes
                t.bytes_us += took
    for w, spans in enumerate(waits):
        if spans:
            lo, hi = np.array(spans).T
            out.wait_us[w] = intervals.union_length(lo, hi)
    return out
