"""Bins: a step of many short events stays within the block's size by merging, lane by lane, the
runs of events too short to see at the step's scale into one interval each, which keeps their
count, their time and the class that has most of it.

The width under which an event is merged is the smallest of the step over 2, 4, 8, ... 2^20 that
fits the budget (the finest detail the block can hold, for zooming in); events as long as the width
or longer are never merged, so the long work the findings point at stays as it is.
"""

from __future__ import annotations

import numpy as np

from .pieces import Pieces
from .types import CLASSES

FINEST_DIVISIONS = 1 << 20  # the finest width tried: the step over this


def within(p: Pieces, dur: float, budget: int) -> tuple[Pieces, float | None]:
    """``p`` (sorted by lane and start) with at most ``budget`` intervals, and the width under which
    events were merged (None: none were)."""
    if len(p) <= budget:
        return p, None
    width = max(dur / FINEST_DIVISIONS, 1e-3)
    while True:
        out = merged(p, width)
        if len(out) <= budget or width >= dur:
            return out, width
        width *= 2


def merged(p: Pieces, width: float) -> Pieces:
    """Each run of consecutive events shorter than ``width`` on one lane, cut where the grid of
    ``width`` cuts it, as one interval."""
    n = len(p)
    if not n:
        return p
    small = (p.end - p.start) < width
    cell = np.floor(p.start / width).astype(np.int64)
    new = np.ones(n, bool)
    new[1:] = (p.lane[1:] != p.lane[:-1]) | ~small[1:] | ~small[:-1] | (cell[1:] != cell[:-1])
    heads = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    groups = len(heads)
    busy = np.add.reduceat(p.busy, heads)
    by_class = np.zeros((groups, len(CLASSES)))
    np.add.at(by_class, (group, p.cls), p.busy)
    known = ~np.isnan(p.sm)
    sm_time = np.zeros(groups)
    sm_sum = np.zeros(groups)
    np.add.at(sm_time, group[known], p.busy[known])
    np.add.at(sm_sum, group[known], (p.sm * p.busy)[known])
    order = np.lexsort((-(p.end - p.start), group))
    longest = order[np.r_[True, group[order][1:] != group[order][:-1]]]
    one_op = np.minimum.reduceat(p.op, heads) == np.maximum.reduceat(p.op, heads)
    single = np.diff(np.append(heads, n)) == 1  # an event left as it is keeps its own class and figure
    return Pieces(
        lane=p.lane[heads],
        start=p.start[heads],
        end=np.maximum.reduceat(p.end, heads),
        cls=np.where(single, p.cls[heads], np.argmax(by_class, axis=1)).astype(np.int64),
        name=p.name[longest],
        op=np.where(one_op, p.op[heads], -1),
        sm=np.where(single, p.sm[heads], np.divide(sm_sum, sm_time, out=np.full(groups, np.nan), where=sm_time > 0)),
        count=np.add.reduceat(p.count, heads),
        busy=busy,
    )
