"""Activation checkpointing's trade: the time its recompute takes, and the memory it saves.

A recompute region is an outermost autograd node (``autograd::engine::evaluate_function:
AddmmBackward0``) that runs forward composite ops inside (``aten::linear``, ``aten::layer_norm`` is
not one, ``aten::scaled_dot_product_attention``...: ``analysis.recompute``'s rule, which the FLOP
count uses to tell recompute FLOPs apart). Non-reentrant checkpointing re-runs a block's forward
when its first saved tensor is unpacked, at the start of that node, so the region runs from the
node's start to the end of its last forward composite op; the node's own backward math comes after.

- Host time: the regions' length. The unpack hooks checkpointing adds to every other node are not
  in it, so the whole step-time cost is larger (Compare two runs for it).
- GPU time: the kernels launched inside the regions.
- Memory saved: what the regions allocate and still hold at their end, the activations the re-run
  rebuilds. Without checkpointing each block would hold them from its forward to its backward, so
  their sum over a step bounds what checkpointing saves at the start of the backward. It also counts
  what the re-run keeps that a plain forward would not (a block's output), so it is an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.tables import KERNEL, TraceTables
from ..flops.recompute import FORWARD_COMPOSITES, is_backward_node
from ..kernels.name_patterns import op_rows_named
from ..time import intervals, nesting
from ..time.op_attribution import launch_points, ops_by_external_id
from ..time.steps import Steps
from .live import free_index
from .timeline import Timeline
from .types import Recompute


@dataclass(frozen=True)
class Regions:
    node: np.ndarray  # cpu row of each region's autograd node
    lo: np.ndarray  # host start (the node's)
    hi: np.ndarray  # host end (its last forward composite's)
    step: np.ndarray  # index of the step whose host window holds it


def regions(tables: TraceTables, steps: Steps) -> Regions:
    """The recompute regions inside the steps, in time order."""
    cpu = tables.cpu
    empty = np.empty(0, np.int64)
    nodes = np.flatnonzero(op_rows_named(tables, is_backward_node))
    comp = np.flatnonzero(op_rows_named(tables, FORWARD_COMPOSITES.__contains__))
    if not len(nodes) or not len(comp) or not len(steps):
        return Regions(empty, np.empty(0), np.empty(0), empty)
    ax = nesting.thread_axis(tables)
    top = nesting.outermost(ax, nodes)
    k = nesting.containing_disjoint(ax.g0[comp], ax.g0[top], ax.g1[top], ax.tol)
    inside = k >= 0
    if not inside.any():
        return Regions(empty, np.empty(0), np.empty(0), empty)
    end = np.full(len(top), -np.inf)
    np.maximum.at(end, k[inside], cpu.end[comp[inside]])
    has = np.flatnonzero(end > -np.inf)
    node = top[has]
    order = np.argsort(cpu.ts[node], kind="stable")
    node, hi = node[order], end[has][order]
    lo = cpu.ts[node]
    step = intervals.window_of(lo, steps.cpu_start, steps.cpu_end, closed=True)
    ok = step >= 0
    return Regions(node[ok], lo[ok], np.maximum(hi[ok], lo[ok]), step[ok])


def _gpu_us(tables: TraceTables, reg: Regions, device: int) -> float:
    """GPU time of the kernels of ``device`` launched inside the regions (their union)."""
    g = tables.gpu
    if not len(g) or not len(reg.node):
        return 0.0
    ax = nesting.thread_axis(tables)
    point = launch_points(tables, ax, ops_by_external_id(tables))
    mine = np.flatnonzero((g.device == device) & (g.kind == KERNEL) & ~np.isnan(point))
    # the regions on the axis: each lies on its node's thread
    off = ax.g0[reg.node] - tables.cpu.ts[reg.node]
    r0, r1 = reg.lo + off, reg.hi + off
    order = np.argsort(r0)
    hit = nesting.containing_disjoint(point[mine], r0[order], r1[order], ax.tol) >= 0
    rows = mine[hit]
    return intervals.union_length(g.ts[rows], g.end[rows]) if len(rows) else 0.0


def _saved_bytes(tl: Timeline, reg: Regions, tables: TraceTables) -> int | None:
    """Per step, the bytes the regions allocate and still hold at their ends (see the module doc)."""
    mem = tl.mem
    if not len(mem):
        return None
    freed = free_index(mem)
    cpu = tables.cpu
    total = 0
    for node, lo, hi in zip(reg.node.tolist(), reg.lo.tolist(), reg.hi.tolist(), strict=True):
        a, b = np.searchsorted(mem.ts, lo, side="left"), np.searchsorted(mem.ts, hi, side="right")
        idx = np.arange(a, b)
        idx = idx[(mem.pid[idx] == cpu.pid[node]) & (mem.tid[idx] == cpu.tid[node])]
        if len(idx):
            keep = (mem.bytes[idx] > 0) & (freed[idx] > idx[-1])
            total += int(mem.bytes[idx[keep]].sum())
    return total


def recompute(tables: TraceTables, tl: Timeline, steps: Steps, device: int) -> Recompute | None:
    """The checkpointing trade of the analysed steps, None when nothing is recomputed."""
    reg = regions(tables, steps)
    if not len(reg.node):
        return None
    n = len(steps)
    host = intervals.union_length(reg.lo, reg.hi) / n
    gpu = _gpu_us(tables, reg, device) / n
    saved = _saved_bytes(tl, reg, tables) if len(tl.mem) else None
    return Recompute(
        regions_per_step=len(reg.node) / n,
        host_us_per_step=host,
        gpu_us_per_step=gpu,
        us_per_step=max(host, gpu),
        saved_bytes=round(saved / n) if saved is not None else None,
    )
