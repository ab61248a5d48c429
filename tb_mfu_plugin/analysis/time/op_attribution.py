"""Which host op launched each GPU event.

Every GPU event (kernel, memcpy, memset) gets a *launch point* on the thread axis
(``analysis.time.nesting``): the start of the runtime or driver call that launched it (joined by
correlation id, ``TraceTables.launcher``), else the start of the op its external id names.
An op launched the event when the point lies inside it. The FLOP count (``flop_count``) and
the roofline (``roofline``) both map GPU work to ops this way.
"""

from __future__ import annotations

import numpy as np

from ...core.distinct import match_rows
from ...trace.tables import OP, TraceTables
from . import nesting
from .nesting import ThreadAxis


def ops_by_external_id(tables: TraceTables) -> np.ndarray:
    """Per GPU row, the cpu row of the op whose external id it carries (the innermost op that
    launched it), -1 when none."""
    c = tables.cpu
    op_rows = np.flatnonzero((c.kind == OP) & (c.external_id >= 0))
    return match_rows(c.external_id[op_rows], op_rows, tables.gpu.external_id)


def launch_points(tables: TraceTables, ax: ThreadAxis, ext_op: np.ndarray) -> np.ndarray:
    """Per GPU row, its launch point on the axis: its launch call's start, else the start of the
    op ``ext_op`` (``ops_by_external_id``) names; NaN when neither is known."""
    point = np.full(len(tables.gpu), np.nan)
    launcher = tables.launcher
    has_call = launcher >= 0
    point[has_call] = ax.g0[launcher[has_call]]
    no_point = np.isnan(point) & (ext_op >= 0)
    point[no_point] = ax.g0[ext_op[no_point]]
    return point


def outermost_op_at(tables: TraceTables, ax: ThreadAxis, points: np.ndarray) -> np.ndarray:
    """Per point on the axis, the cpu row of the outermost op around it, -1 when none."""
    top = nesting.outermost(ax, np.flatnonzero(tables.cpu.kind == OP))
    idx = nesting.containing_disjoint(points, ax.g0[top], ax.g1[top], ax.tol)
    return np.where(idx >= 0, top[np.maximum(idx, 0)], -1) if len(top) else idx


def attribute_kernels(
    tables: TraceTables, ax: ThreadAxis, c0: np.ndarray, c1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which GPU rows ran inside the counted ops ``[c0, c1]`` (sorted, disjoint, on the axis),
    and which op launched each GPU row.

    Returns, per GPU row, whether its launch point lies in a counted op, and the name code of
    the op that launched it (the external-id op, else the outermost op around its launch point,
    -1 unknown); and per counted op the device its GPU work ran on (-1 none).
    """
    c, g = tables.cpu, tables.gpu
    ng = len(g)
    counted = np.zeros(ng, bool)
    op_name = np.full(ng, -1, np.int32)
    op_device = np.full(len(c0), -1, np.int64)  # device ids are int64 (trace/tables.py)
    if not ng:
        return counted, op_name, op_device
    ext_op = ops_by_external_id(tables)
    point = launch_points(tables, ax, ext_op)
    has = ~np.isnan(point)
    if len(c0):
        idx = nesting.containing_disjoint(point[has], c0, c1, ax.tol)
        counted[np.nonzero(has)[0]] = idx >= 0
        hit = idx >= 0
        op_device[idx[hit]] = g.device[np.nonzero(has)[0][hit]]
    op_name[ext_op >= 0] = c.name[ext_op[ext_op >= 0]]
    rest = np.nonzero(has & (ext_op < 0))[0]
    if len(rest):
        top = outermost_op_at(tables, ax, point[rest])
        ok = top >= 0
        op_name[rest[ok]] = c.name[top[ok]]
    return counted, op_name, op_device
