"""The findings pinned to their moments in the step.

Each rule says which stretches of the steps its cost covers (``diagnosis.cost_time``: the kernels
or copies it names, its part of the GPU's idle gaps); a finding's marks are those stretches inside
the step, joined where no other GPU work runs between them (one mark per chain of kernels, not per
kernel), on the lane where the work or the idle is. A sync also gets the call that blocked the host
and the GPU's drain it waited for; a risk with no time (the memory rules) is pinned to the step's
memory peak. A finding with no moment in this step gets one mark over the whole step that says so:
every finding has a mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...trace.tables import TraceTables
from .. import fmt
from ..critical_path.graph import Graph
from ..evidence.host import SyncPointEvidence
from ..memory.types import Memory
from ..report import Finding
from ..time import intervals
from ..time.syncs import SyncEvents
from .pieces import Lane, Pieces
from .types import TimelineMark

MAX_MARKS_PER_FINDING = 40  # the largest stretches; a finding's time in many more pieces is one story

# What a rule's time is, for the marks: its stretches on the device's clock (start, end), or None
# where the rule gives no time. Parallel to WorkerReport.findings.
FindingTimes = Sequence[tuple[np.ndarray, np.ndarray] | None]


@dataclass(frozen=True)
class Scene:
    """What the marks are placed on: the step's window and the lanes drawn over it."""

    lo: float
    hi: float
    lanes: list[Lane]
    pieces: Pieces  # every interval drawn, before any bin (on the trace's clock)
    idle_lane: int
    host_lane_of: dict[tuple[int, int], int]  # (pid, tid) -> lane
    row_lane: np.ndarray  # per view row: its lane, -1 not drawn


def finding_marks(
    findings: list[Finding],
    times: FindingTimes | None,
    scene: Scene,
    tables: TraceTables,
    syncs: SyncEvents | None,
    graph: Graph | None,
    memory: tuple[Memory, int, float] | None,
) -> list[TimelineMark]:
    """Every finding's marks. ``memory``: the report's memory block, the step's number and its host
    start, where the report has one."""
    out: list[TimelineMark] = []
    for i, f in enumerate(findings):
        span = times[i] if times is not None and i < len(times) else None
        mine = _claimed(f, i, span, scene)
        if isinstance(f.evidence, SyncPointEvidence) and syncs is not None:
            mine = _sync_marks(f, f.evidence, i, scene, tables, syncs, graph) + mine
        if not mine:
            mine = _elsewhere(f, i, span, scene, memory)
        out += mine
    return out


def _mark(f: Finding, i: int, lane: int | None, t0: float, t1: float, what: str, lo: float) -> TimelineMark:
    return TimelineMark(
        id=f.id,
        subject=f.subject,
        lane=lane,
        start_us=round(t0 - lo, 3),
        dur_us=round(max(0.0, t1 - t0), 3),
        what=what,
    )


def _claimed(f: Finding, i: int, span: tuple[np.ndarray, np.ndarray] | None, scene: Scene) -> list[TimelineMark]:
    """The finding's claimed stretches in the step, chains joined, each on its lane."""
    if span is None or not len(span[0]):
        return []
    s, e = intervals.clip(np.asarray(span[0], np.float64), np.asarray(span[1], np.float64), scene.lo, scene.hi)
    if not len(s):
        return []
    s, e = intervals.merge(s, e)
    p = scene.pieces
    work = np.array([ln.kind not in ("host", "idle") for ln in scene.lanes], bool)[p.lane]
    ws, we = intervals.merge(p.start[work], p.end[work])
    # two stretches join when no GPU work runs between them (other work splits a chain)
    between = intervals.covered_length(ws, we, e[:-1], s[1:])
    split = np.concatenate(([True], between > 0))
    group = np.cumsum(split) - 1
    g0, g1 = s[split], np.maximum.reduceat(e, np.flatnonzero(split))
    keep = np.argsort(-(g1 - g0), kind="stable")[:MAX_MARKS_PER_FINDING]
    merged = _lane_unions(scene)
    out = []
    for k in sorted(keep.tolist(), key=lambda k: g0[k]):
        mine = group == k
        lane = _lane_of(merged, s[mine], e[mine], scene.idle_lane)
        out.append(_mark(f, i, lane, float(g0[k]), float(g1[k]), _what(scene, lane, g0[k], g1[k]), scene.lo))
    return out


def _lane_unions(scene: Scene) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The union of each GPU lane's intervals (work lanes and the idle lane)."""
    p = scene.pieces
    out = {}
    for lane, ln in enumerate(scene.lanes):
        if ln.kind != "host":
            sel = p.lane == lane
            out[lane] = intervals.merge(p.start[sel], p.end[sel])
    return out


def _lane_of(merged: dict[int, tuple[np.ndarray, np.ndarray]], s: np.ndarray, e: np.ndarray, idle: int) -> int:
    """The GPU lane whose work covers most of the stretches ``[s, e)``; the idle lane where no work
    runs in them (a finding's share of the idle gaps)."""
    best, most = idle, 0.0
    for lane, (ws, we) in merged.items():
        covered = float(intervals.covered_length(ws, we, s, e).sum())
        if lane != idle and covered > most:
            best, most = lane, covered
    return best


def _what(scene: Scene, lane: int, t0: float, t1: float) -> str:
    """The mark in words: its span, the GPU work in it and the GPU idle."""
    p = scene.pieces
    gpu = np.array([ln.kind not in ("host", "idle") for ln in scene.lanes])[p.lane]
    idle = (p.lane == scene.idle_lane) & (p.start < t1) & (p.end > t0)
    idle_us = float((np.minimum(p.end[idle], t1) - np.maximum(p.start[idle], t0)).sum())
    sel = gpu & (p.start < t1) & (p.end > t0)
    n = int(p.count[sel].sum())
    if not n:
        return f"GPU idle {fmt.us(t1 - t0)}"
    busy = float((np.minimum(p.end[sel], t1) - np.maximum(p.start[sel], t0)).sum())
    where = scene.lanes[lane].name if scene.lanes[lane].kind not in ("host", "idle") else "the GPU"
    text = f"{fmt.us(t1 - t0)}: {fmt.counted(n, 'GPU op')} on {where}, {fmt.us(busy)} of work"
    return text + (f", GPU idle {fmt.us(idle_us)}" if idle_us >= 0.05 * (t1 - t0) else "")


def _sync_marks(
    f: Finding,
    ev: SyncPointEvidence,
    i: int,
    scene: Scene,
    tables: TraceTables,
    syncs: SyncEvents,
    graph: Graph | None,
) -> list[TimelineMark]:
    """The calls of this finding's cause that blocked the host in the step, and the GPU work each
    waited for (the drain: from the call to the end of the last op it waited for)."""
    cpu, names = tables.cpu, tables.names
    want = (ev.api, ev.op, ev.root_op)
    out = []
    bound = dict(zip(graph.syncs.row.tolist(), graph.syncs.bound.tolist(), strict=True)) if graph is not None else {}
    for r, op, root in zip(syncs.rows.tolist(), syncs.op, syncs.root, strict=True):
        t0, t1 = float(cpu.ts[r]), float(cpu.end[r])
        if not scene.lo <= t0 < scene.hi:
            continue
        got = (names[cpu.name[r]], *(names[cpu.name[x]] if x is not None else None for x in (op, root)))
        if got != want:
            continue
        lane = scene.host_lane_of.get((int(cpu.pid[r]), int(cpu.tid[r])))
        caller = f" ({got[2] or got[1]})" if (got[2] or got[1]) else ""
        out.append(
            _mark(f, i, lane, t0, min(t1, scene.hi), f"host blocked {fmt.us(t1 - t0)} in {got[0]}{caller}", scene.lo)
        )
        waited = bound.get(r, -1)
        if graph is not None and waited >= 0:
            row = int(graph.ops.row[waited])
            end = float(graph.ops.a[waited] + graph.ops.d[waited])
            if end > t0 and scene.row_lane[row] >= 0:
                what = f"the GPU drains the work queued before the sync: {fmt.us(end - t0)}"
                out.append(_mark(f, i, int(scene.row_lane[row]), t0, min(end, scene.hi), what, scene.lo))
    return out[: 2 * MAX_MARKS_PER_FINDING]


def _elsewhere(
    f: Finding,
    i: int,
    span: tuple[np.ndarray, np.ndarray] | None,
    scene: Scene,
    memory: tuple[Memory, int, float] | None,
) -> list[TimelineMark]:
    """The one mark of a finding with no stretch in this step: the step's memory peak for a risk
    with no time (the memory rules), else the whole step, saying why."""
    if span is not None and not len(span[0]) and memory is not None:
        m, number, host_start = memory
        step = next((s for s in m.steps if s.step == number), None)
        if step is not None and step.peak_at_us is not None:
            t = host_start + step.peak_at_us
            if scene.lo <= t <= scene.hi:
                where = f" in {step.peak_op}" if step.peak_op else ""
                lane = min(scene.host_lane_of.values()) if scene.host_lane_of else None
                what = f"memory peak of the step: {fmt.nbytes(step.peak_allocated_bytes)} allocated{where}"
                return [_mark(f, i, lane, t, t, what, scene.lo)]
    if span is None:
        what = "the whole step: the rule names no moment"
    elif len(span[0]):
        total = float((np.asarray(span[1]) - np.asarray(span[0])).sum())
        what = f"the whole step: this finding's time ({fmt.us(total)} in all) lies in other steps"
    else:
        what = "the whole step: a risk, not a time"
    return [_mark(f, i, None, scene.lo, scene.hi, what, scene.lo)]
