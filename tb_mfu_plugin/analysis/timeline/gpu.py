"""The device's lanes of one step: a lane per stream of kernels, one for copies and memsets, and one
for the GPU idle gaps, each interval clipped to the step's window ``[lo, hi)``.

Every GPU row that overlaps the window is drawn (as the step's busy, kernel and copy shares count
them), so the idle lane's gaps are exactly the step's idle time: ``1 - gpu_busy_share`` of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.distinct import distinct, match_rows
from ...trace.tables import KERNEL, MEMCPY, MEMSET, OP, GpuTable, TraceTables
from ..critical_path import classes as cp
from ..kernels.families import NameClasses
from ..time import idle_gaps, intervals, nesting
from ..time.op_attribution import outermost_op_at
from .pieces import CLASS, Labels, Lane, Pieces

# The critical path's kernel classes, as the timeline names them.
_KERNEL_CLASS = {
    cp.CODE[cp.MATMUL]: CLASS["matmul"],
    cp.CODE[cp.MATMUL_CUDA_CORE]: CLASS["matmul"],
    cp.CODE[cp.ATTENTION]: CLASS["attention"],
    cp.CODE[cp.ELEMENTWISE]: CLASS["elementwise"],
    cp.CODE[cp.OTHER_KERNEL]: CLASS["kernel"],
    cp.CODE[cp.COMMUNICATION]: CLASS["communication"],
}

# What the idle gap's time went to, in the words of the waterfall's idle bars.
_GAP_CAUSE = {
    idle_gaps.LAUNCH: "GPU idle: waiting for kernel launches",
    idle_gaps.HOST: "GPU idle: the host is busy (launches come late)",
    idle_gaps.OTHER: "GPU idle",
    idle_gaps.GRAPH: "GPU idle: inside a CUDA graph replay",
}
_GAP_SYNC = "GPU idle: after a host-device sync"
_GAP_LOADER = "GPU idle: the host is in a DataLoader call"


@dataclass(frozen=True)
class GpuLanes:
    lanes: list[Lane]
    pieces: Pieces
    rows: np.ndarray  # the view rows drawn (pieces' first len(rows) entries, in this order)
    row_lane: np.ndarray  # the lane of each view row of the device drawn, -1 for rows not drawn
    idle_lane: int


def gpu_lanes(
    tables: TraceTables,
    g: GpuTable,
    bps: np.ndarray,
    classes: NameClasses | None,
    op_class: np.ndarray | None,
    gaps: idle_gaps.Gaps | None,
    lo: float,
    hi: float,
    first_lane: int,
    labels: Labels,
) -> GpuLanes:
    """The stream, copy and idle lanes of the window ``[lo, hi)`` of the device's rows ``g``
    (``DeviceView.gpu``), numbered from ``first_lane``. ``op_class``: the critical-path class of
    each row the model holds (-1 for the others), which saves asking the kernel names again."""
    rows = np.flatnonzero((g.ts < hi) & (g.end > lo))
    kind = g.kind[rows]
    is_k = kind == KERNEL
    stream = g.stream[rows]
    code = g.name[rows]
    cls = np.full(len(rows), CLASS["kernel"], np.int64)
    cls[is_k] = _kernel_classes(tables, g, rows[is_k], classes, op_class)
    cls[kind == MEMCPY] = CLASS["copy"]
    cls[kind == MEMSET] = CLASS["memset"]
    lanes: list[Lane] = []
    lane_of = np.full(len(rows), -1, np.int64)
    device = int(g.device[rows[0]]) if len(rows) else None
    for s in distinct(stream[is_k]).tolist():
        mine = is_k & (stream == s)
        comm = float(g.dur[rows][mine & (cls == CLASS["communication"])].sum())
        is_comm = comm > 0.5 * float(g.dur[rows][mine].sum())
        lane_of[mine] = first_lane + len(lanes)
        lanes.append(
            Lane(
                f"stream {s}" + (" · collectives" if is_comm else ""),
                "communication" if is_comm else "stream",
                device,
                s,
            )
        )
    if (~is_k).any():
        lane_of[~is_k] = first_lane + len(lanes)
        lanes.append(Lane("copies and memsets", "copies"))
    start = np.maximum(g.ts[rows], lo)
    end = np.minimum(g.end[rows], hi)
    sm = np.where(is_k, np.minimum(bps[rows], 1.0), np.nan)
    work = Pieces.of(lane_of, start, end, cls, code, _launching_ops(tables, g, rows), sm)
    idle_lane = first_lane + len(lanes)
    lanes.append(Lane("GPU idle", "idle"))
    idle = _idle(start, end, lo, hi, gaps, idle_lane, labels)
    row_lane = np.full(len(g.ts), -1, np.int64)
    row_lane[rows] = lane_of
    return GpuLanes(lanes, Pieces.join([work, idle]), rows, row_lane, idle_lane)


def _kernel_classes(
    tables: TraceTables, g: GpuTable, rows: np.ndarray, classes: NameClasses | None, op_class: np.ndarray | None
) -> np.ndarray:
    """The timeline class of each kernel row: the critical-path model's class where it holds the
    row, else the class of its name (``critical_path.classes.name_lut``)."""
    found = op_class[rows] if op_class is not None else np.full(len(rows), -1, np.int64)
    ask = found < 0
    if ask.any() and classes is not None:
        lut = cp.name_lut(tables.names, classes, distinct(g.name[rows[ask]]))
        found[ask] = lut[g.name[rows[ask]]]
    table = np.full(len(cp.CLASSES), CLASS["kernel"], np.int64)
    for c, mine in _KERNEL_CLASS.items():
        table[c] = mine
    return np.where(found >= 0, table[np.maximum(found, 0)], CLASS["kernel"])


def _idle(
    start: np.ndarray,
    end: np.ndarray,
    lo: float,
    hi: float,
    gaps: idle_gaps.Gaps | None,
    lane: int,
    labels: Labels,
) -> Pieces:
    """The stretches of ``[lo, hi)`` with no GPU work, named by what the analysis found the host
    doing in each (``analysis.time.idle_gaps``: the largest part of its time)."""
    bs, be = intervals.merge(start, end)
    gs = np.concatenate(([lo], be))
    ge = np.concatenate((bs, [hi]))
    keep = ge > gs
    gs, ge = gs[keep], ge[keep]
    name = np.full(len(gs), labels.code(_GAP_CAUSE[idle_gaps.OTHER]), np.int64)
    if gaps is not None and len(gaps.start) and len(gs):
        k = intervals.window_of((gs + ge) / 2, gaps.start, gaps.end, closed=False)
        found = k >= 0
        name[found] = _gap_labels(gaps, k[found], labels)
    return Pieces.of(lane, gs, ge, CLASS["gpu_gap"], name)


def _gap_labels(gaps: idle_gaps.Gaps, k: np.ndarray, labels: Labels) -> np.ndarray:
    """The label of each gap ``k``: its largest part (the DataLoader's, the syncs', the rest's cause)."""
    parts = np.stack([gaps.dataloader_us[k], gaps.sync_us[k], gaps.rest_us[k]], axis=1)
    largest = np.argmax(parts, axis=1)
    rest = {c: labels.code(text) for c, text in _GAP_CAUSE.items()}
    out = np.array([rest.get(int(c), rest[idle_gaps.OTHER]) for c in gaps.cause[k].tolist()], np.int64)
    out[(largest == 0) & (parts[:, 0] > 0)] = labels.code(_GAP_LOADER)
    out[(largest == 1) & (parts[:, 1] > 0)] = labels.code(_GAP_SYNC)
    return out


def _launching_ops(tables: TraceTables, g: GpuTable, rows: np.ndarray) -> np.ndarray:
    """The name code of the op that launched each of the view's ``rows``: the op its external id
    names (the innermost: ``aten::addmm``), else the outermost op around its launch call; -1."""
    cpu = tables.cpu
    out = np.full(len(rows), -1, np.int64)
    if not len(rows) or not len(cpu):
        return out
    ops = np.flatnonzero((cpu.kind == OP) & (cpu.external_id >= 0))
    by_ext = match_rows(cpu.external_id[ops], ops, g.external_id[rows])
    out[by_ext >= 0] = cpu.name[by_ext[by_ext >= 0]]
    rest = np.flatnonzero(by_ext < 0)
    if len(rest):
        launcher = match_rows(cpu.correlation[tables.launch_rows], tables.launch_rows, g.correlation[rows[rest]])
        has = launcher >= 0
        if has.any():
            ax = nesting.thread_axis(tables)
            top = outermost_op_at(tables, ax, ax.g0[launcher[has]])
            found = rest[has][top >= 0]
            out[found] = cpu.name[top[top >= 0]]
    return out
