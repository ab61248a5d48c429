"""``timeline_block``: the report's timeline of one device (``WorkerReport.timeline``): its
representative step as lanes of intervals, with the critical path and the findings on it.

Pure, with explicit inputs: the tables, the device's rows and their facts (``DeviceView``), the
steps, the finished report (its findings, memory block and step times) and the time each finding's
cost covers (``FindingTimes``, from the diagnosis), so that it can run wherever the report is
finished.
"""

from __future__ import annotations

import msgspec
import numpy as np

from ...trace.tables import TraceTables
from .. import fmt
from ..critical_path.graph import Graph
from ..device_view import DeviceView
from ..report import WorkerReport
from ..time.steps import Steps
from . import bins
from .critical import PathLanes, path_within, step_path
from .gpu import gpu_lanes
from .host import host_lanes
from .marks import FindingTimes, Scene, finding_marks
from .pieces import Labels, Lane, Pieces, name_table
from .types import CLASSES, Timeline, TimelineIntervals, TimelineLane

MAX_BYTES = 1_000_000  # the block's JSON, per device (issue 36)
MAX_INTERVALS = 20_000  # at about 32 bytes each; halved while the block is still too large
MAX_PATH = 6_000  # critical-path stretches kept; more are merged (critical.merged)


def choose_step(steps: Steps, modelled: int) -> tuple[int, str]:
    """The step to draw, and why: of the steps the critical-path model holds (``modelled``, the first
    ones; 0: no model), the one whose time is closest to the median of all analysed steps."""
    dur = steps.dur
    n = len(dur)
    median = float(np.median(dur))
    pool = min(modelled, n) if modelled > 0 else n
    i = int(np.argmin(np.abs(dur[:pool] - median)))
    if steps.synthetic:
        return i, "the whole trace, analysed as one step (it has no ProfilerStep# markers)"
    why = (
        f"ProfilerStep#{int(steps.number[i])}: of the {fmt.counted(n, 'analysed step')}, the one whose time "
        f"({fmt.us(float(dur[i]))}) is closest to their median ({fmt.us(median)})"
    )
    if pool < n:
        why += f", among the first {pool}, which the critical-path model holds"
    return i, why + "."


def timeline_block(
    tables: TraceTables,
    view: DeviceView,
    steps: Steps,
    report: WorkerReport,
    times: FindingTimes | None,
) -> Timeline | None:
    """The device's timeline; None without an analysed step."""
    if len(steps) == 0 or report.error is not None:
        return None
    graph = view.critical.g if view.critical is not None else None
    i, why = choose_step(steps, graph.steps if graph is not None else 0)
    lo, hi = float(steps.start[i]), float(steps.end[i])
    labels = Labels()
    device = int(view.gpu.device[0]) if len(view.gpu) else -1
    launcher = tables.launcher[tables.gpu.device == device]
    sync_rows = view.syncs.rows if view.syncs is not None else np.empty(0, np.int64)
    cpu = tables.cpu
    # the step's syncs by the rule of its figures (the last step whose host window starts before each):
    # from its host start to the next step's, and drawn within its window
    nxt = float(steps.cpu_start[i + 1]) if i + 1 < len(steps) else np.inf
    at = cpu.ts[sync_rows]
    sync_rows = sync_rows[(at >= float(steps.cpu_start[i])) & (at < nxt) & (at >= lo) & (at < hi)]
    gpu_drawn = (view.gpu.ts < hi) & (view.gpu.end > lo) & (launcher >= 0)
    host = host_lanes(tables, launcher[gpu_drawn], sync_rows, lo, hi, 0)
    op_class = None
    if graph is not None:
        op_class = np.full(len(view.gpu), -1, np.int64)
        op_class[graph.ops.row] = graph.ops.cls
    gpu = gpu_lanes(tables, view.gpu, view.bps, view.classes, op_class, view.gaps, lo, hi, len(host.lanes), labels)
    lanes = host.lanes + gpu.lanes
    pieces = Pieces.join([host.pieces, gpu.pieces]).sorted()
    host_lane_of = {t: k for k, t in enumerate(host.threads)}
    scene = Scene(lo, hi, lanes, pieces, gpu.idle_lane, host_lane_of, gpu.row_lane)
    memory = (report.memory, int(steps.number[i]), float(steps.cpu_start[i])) if report.memory else None
    marks = finding_marks(report.findings, times, scene, tables, view.syncs, graph, memory)
    path = None
    if graph is not None and i < graph.steps:
        path = step_path(graph, i, _path_lanes(graph, tables, gpu.row_lane, host_lane_of), lo)
        path = path_within(path, hi - lo, MAX_PATH)
        if any(lane < 0 for lane in path.lane):  # host time on the path, and no launching thread drawn
            lanes.append(Lane("host (no launching thread found)", "host"))
            path.lane = [lane if lane >= 0 else len(lanes) - 1 for lane in path.lane]
    notes = []
    if host.left_out:
        notes.append(
            f"{fmt.counted(host.left_out, 'more host thread')} launched work or synced in this step: not drawn."
        )
    budget = MAX_INTERVALS
    while True:
        shown, width = bins.within(pieces, hi - lo, budget)
        block = _block(tables, steps, i, why, lanes, pieces, shown, width, labels, notes)
        block.marks, block.critical_path = marks, path
        if len(msgspec.json.encode(block)) <= MAX_BYTES or budget < 500:
            return block
        budget //= 2


def _path_lanes(
    g: Graph, tables: TraceTables, row_lane: np.ndarray, host_lane_of: dict[tuple[int, int], int]
) -> PathLanes:
    """Where the graph's ops, launch calls and syncs are drawn."""
    cpu = tables.cpu

    def thread_lanes(rows: np.ndarray) -> np.ndarray:
        out = np.full(len(rows), -1, np.int64)
        for (pid, tid), lane in host_lane_of.items():  # a few threads: one pass each
            out[(cpu.pid[rows] == pid) & (cpu.tid[rows] == tid)] = lane
        return out

    main = min(host_lane_of.values()) if host_lane_of else -1
    return PathLanes(row_lane[g.ops.row], thread_lanes(g.calls.row), thread_lanes(g.syncs.row), main)


def _block(
    tables: TraceTables,
    steps: Steps,
    i: int,
    why: str,
    lanes: list[Lane],
    every: Pieces,
    shown: Pieces,
    width: float | None,
    labels: Labels,
    notes: list[str],
) -> Timeline:
    lo, hi = float(steps.start[i]), float(steps.end[i])
    names, index = name_table(np.concatenate([shown.name, shown.op]), list(tables.names), labels)
    k = len(shown)
    bins_at = np.flatnonzero(shown.count > 1)
    events = np.bincount(every.lane, weights=every.count, minlength=len(lanes))
    busy = np.bincount(every.lane, weights=every.busy, minlength=len(lanes))
    return Timeline(
        step=int(steps.number[i]),
        why=why,
        start_us=lo,
        dur_us=hi - lo,
        classes=list(CLASSES),
        names=names,
        lanes=[
            TimelineLane(name=ln.name, kind=ln.kind, pid=ln.pid, tid=ln.tid, events=int(events[j]), busy_us=_r(busy[j]))
            for j, ln in enumerate(lanes)
        ],
        intervals=TimelineIntervals(
            lane=shown.lane.tolist(),
            start_us=np.round(shown.start - lo, 3).tolist(),
            dur_us=np.round(shown.end - shown.start, 3).tolist(),
            cls=shown.cls.tolist(),
            name=index[:k].tolist(),
            op=index[k:].tolist(),
            sm_efficiency=_or_none(shown.sm),
            bins=bins_at.tolist(),
            bin_count=shown.count[bins_at].tolist(),
            bin_busy_us=np.round(shown.busy[bins_at], 3).tolist(),
        ),
        bin_us=_r(width) if width is not None else None,
        events=int(every.count.sum()),
        notes=notes,
    )


def _r(x: float) -> float:
    return round(float(x), 3)


def _or_none(x: np.ndarray) -> list[float | None]:
    """The values rounded to 3 decimals, None for NaN."""
    out = np.round(x, 3).astype(object)
    out[np.isnan(x)] = None
    values: list[float | None] = out.tolist()
    return values
