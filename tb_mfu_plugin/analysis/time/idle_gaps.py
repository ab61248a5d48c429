"""GPU idle gaps over the analysed steps, and what the host was doing during each.

A gap is a stretch of the steps' time in which the device runs nothing (no kernel, copy or
memset). Each gap's time inside the steps splits into the part the host spent in a
DataLoader call, the part that syncs returning in the gap explain, and the rest, whose cause
is read from the host's launch calls and from CUDA/HIP graph replays. The diagnosis rules
and the waterfall both read it (``diagnosis.context.Context.gaps``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...trace.tables import GpuTable, TraceTables
from ..kernels.name_patterns import launch_call_rows
from . import intervals, windows
from .patterns import dataloader_rows
from .steps import Steps

# Causes of the part of a GPU idle gap that is not data loading. GRAPH: between two pieces of
# work of the same graph replay (one launch call ran both: the host did not cause the gap).
SYNC, LAUNCH, HOST, OTHER, GRAPH = 0, 1, 2, 3, 4

# The attribution's two thresholds, with their defaults (``diagnosis.Thresholds`` takes them from
# here and ``--threshold NAME=VALUE`` overrides both): a sync "causes" the gap it returns in, or
# one it returned up to this long before (host and device clocks differ by a few µs)...
SYNC_GAP_TOLERANCE_US = 5.0
# ...and gaps the host caused by launching count as launch gaps up to this length.
LAUNCH_GAP_MAX_US = 100.0


@dataclass(frozen=True)
class GapThresholds:
    sync_gap_tolerance_us: float = SYNC_GAP_TOLERANCE_US
    launch_gap_max_us: float = LAUNCH_GAP_MAX_US

    @classmethod
    def of(cls, overrides: tuple[tuple[str, float], ...]) -> GapThresholds:
        """With the overrides of ``AnalysisOptions.thresholds`` (the diagnosis thresholds' names)."""
        mine = {k: float(v) for k, v in overrides if k in cls.__dataclass_fields__}
        return cls(**mine)


@dataclass(frozen=True)
class Gaps:
    """GPU idle gaps of the device over the analysed steps (only their part inside steps counts).

    Each gap's time inside the steps (``weight``) splits into: ``dataloader_us`` (the host was
    inside a DataLoader call), ``sync_us`` (host time blocked in syncs that returned in the gap:
    what removing them gives back, at most the gap) and ``rest_us``, whose ``cause`` is LAUNCH
    (a short gap), HOST (a longer gap during which the host launched work: the GPU waited for
    the host), OTHER, or GRAPH (inside a graph replay: the work before and after the gap came
    from the same graph launch call, so no host launch stood between them).
    """

    start: np.ndarray
    end: np.ndarray
    weight: np.ndarray
    dataloader_us: np.ndarray
    sync_us: np.ndarray
    rest_us: np.ndarray
    cause: np.ndarray  # LAUNCH, HOST or OTHER, for rest_us
    sync_us_by_row: dict[int, float]  # sync call row -> its share of sync_us
    # each sync's share of each gap, in the order they returned: (gap index, sync call row, µs)
    sync_parts: list[tuple[int, int, float]] = field(default_factory=list)

    def total(self, cause: int) -> float:
        if cause == SYNC:
            return float(self.sync_us.sum())
        return float(self.rest_us[self.cause == cause].sum())


@dataclass(frozen=True)
class HostActivity:
    """What the host did during the steps, as the gap attribution needs it."""

    dataloader_rows: np.ndarray  # cpu rows of the DataLoader calls
    sync_rows: np.ndarray  # cpu rows of the sync calls
    launcher: np.ndarray  # per GPU row of the device: the cpu row of its launch call, -1 unknown
    graph_launched: np.ndarray  # per GPU row of the device: a graph replay ran it


def idle_gaps(
    tables: TraceTables,
    steps: Steps,
    gpu: GpuTable,
    host: HostActivity,
    sync_gap_tolerance_us: float,
    launch_gap_max_us: float,
) -> Gaps:
    """GPU idle gaps of the device's rows ``gpu`` over the analysed steps and their causes.

    A sync that returns in a gap (or up to ``sync_gap_tolerance_us`` before it) drained the GPU
    queue; removing it gives back at most the host time blocked in it (a host-bound loop then
    launches that much earlier) and at most the gap (a GPU-bound loop keeps the GPU fed):
    ``min(gap, blocked time)``. A gap of at most ``launch_gap_max_us`` is LAUNCH.
    """
    empty = np.empty(0)
    if len(steps) == 0:
        return Gaps(empty, empty, empty, empty, empty, empty, np.empty(0, np.int8), {})
    gs, ge, weight = _gaps_in_steps(steps, gpu)
    cpu = tables.cpu
    dl = host.dataloader_rows
    if len(dl):
        wl, wh = intervals.merge(cpu.ts[dl], cpu.end[dl])
        dl_us = np.minimum(intervals.covered_length(wl, wh, gs, ge), weight)
    else:
        dl_us = np.zeros(len(gs))
    left = weight - dl_us
    sync_us, by_row, parts = _sync_time(tables, host.sync_rows, gs, ge, left, sync_gap_tolerance_us)
    lts = np.sort(cpu.ts[launch_call_rows(tables)])
    n_launch = intervals.points_between(lts, gs, ge, closed=True)
    cause = np.full(len(gs), OTHER, np.int8)
    cause[n_launch > 0] = HOST
    cause[ge - gs <= launch_gap_max_us] = LAUNCH
    cause[_inside_graph_replay(gpu, host, gs, ge)] = GRAPH
    return Gaps(gs, ge, weight, dl_us, sync_us, left - sync_us, cause, by_row, parts)


def _gaps_in_steps(steps: Steps, gpu: GpuTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps ``[start, end)`` between busy stretches from the first step's start to the last
    step's end, and each one's time inside the steps (gaps with none are left out)."""
    lo, hi = float(steps.start[0]), float(steps.end[-1])
    sel = (gpu.ts < hi) & (gpu.end > lo)
    bs, be = intervals.merge(*intervals.clip(gpu.ts[sel], gpu.end[sel], lo, hi))
    gs = np.concatenate(([lo], be))
    ge = np.concatenate((bs, [hi]))
    keep = ge > gs
    gs, ge = gs[keep], ge[keep]
    weight = intervals.covered_length(steps.start, steps.end, gs, ge)
    keep = weight > 0
    return gs[keep], ge[keep], weight[keep]


def _sync_time(
    tables: TraceTables, srows: np.ndarray, gs: np.ndarray, ge: np.ndarray, left: np.ndarray, tolerance_us: float
) -> tuple[np.ndarray, dict[int, float], list[tuple[int, int, float]]]:
    """Per gap, the host time blocked in syncs that returned in it (in the order they returned,
    each taking at most what is ``left`` of the gap), each sync call's share, and each share of
    each gap."""
    cpu = tables.cpu
    sync_us = np.zeros(len(gs))
    by_row: dict[int, float] = {}
    parts: list[tuple[int, int, float]] = []
    if not len(srows) or not len(gs):
        return sync_us, by_row, parts
    ends = cpu.end[srows]
    k = intervals.window_of(ends, gs, ge, closed=True, early=tolerance_us)
    for r, kk, _ in sorted(zip(srows.tolist(), k.tolist(), ends.tolist(), strict=True), key=lambda x: x[2]):
        if kk < 0:
            continue
        take = min(float(cpu.dur[r]), float(left[kk] - sync_us[kk]))
        if take > 0:
            sync_us[kk] += take
            by_row[int(r)] = by_row.get(int(r), 0.0) + take
            parts.append((int(kk), int(r), take))
    return sync_us, by_row, parts


def _inside_graph_replay(gpu: GpuTable, host: HostActivity, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
    """Gaps whose work before (ending at the gap's start) and after (starting at its end) one
    graph launch call ran."""
    out = np.zeros(len(gs), bool)
    graph = host.graph_launched
    if not graph.any() or not len(gs):
        return out
    # the row ending a busy stretch is the one holding the running maximum of the end times
    end = gpu.end
    running = np.maximum.accumulate(end)
    last_max = np.maximum.accumulate(np.where(end >= running, np.arange(len(end)), -1))
    # the last row starting before the gap, and the first starting at or after its end
    before_pos = np.searchsorted(gpu.ts, gs, side="left") - 1
    after = np.searchsorted(gpu.ts, ge, side="left")
    ok = (before_pos >= 0) & (after < len(gpu.ts))
    before = last_max[np.maximum(before_pos, 0)]
    after = np.minimum(after, len(gpu.ts) - 1)
    ok &= (before >= 0) & graph[np.maximum(before, 0)] & graph[after]
    out[ok] = host.launcher[before[ok]] == host.launcher[after[ok]]
    return out


def device_gaps(
    tables: TraceTables,
    steps: Steps,
    gpu: GpuTable,
    sync_rows: np.ndarray,
    launcher: np.ndarray,
    graph_launched: np.ndarray,
    th: GapThresholds,
) -> Gaps:
    """``idle_gaps`` of one device, with the DataLoader calls inside the steps' host windows: what
    the analysis fills the report's ``gpu_idle_after_sync_share`` from and the diagnosis (the idle
    rules, the waterfall) reads, computed once (``DeviceView.gaps``)."""
    dl = dataloader_rows(tables)
    dl = dl[intervals.window_of(tables.cpu.ts[dl], steps.cpu_start, steps.cpu_end, closed=True) >= 0]
    host = HostActivity(dl, sync_rows, launcher, graph_launched)
    return idle_gaps(tables, steps, gpu, host, th.sync_gap_tolerance_us, th.launch_gap_max_us)


def sync_us_by_step(gaps: Gaps, steps: Steps) -> np.ndarray:
    """Per step, the GPU idle time syncs explain (``gaps.sync_us``): each gap's part laid over the
    steps from the gap's start, where the sync returned, so a step never gets more than its own
    idle time and the steps add up to the gaps' total.

    Each gap fills the steps it overlaps in order, each up to its overlap, until its part is
    spent; a step adds what the gaps give it in gap order. Done for all gaps at once, with the
    same subtractions and additions in the same order as a loop over the gaps and steps."""
    n = len(steps)
    k = np.flatnonzero(gaps.sync_us > 0)
    lo, hi = gaps.start[k], gaps.end[k]
    j0 = np.searchsorted(steps.end, lo, side="right")
    j1 = np.maximum(np.searchsorted(steps.start, hi, side="left"), j0)
    gap = np.repeat(np.arange(len(k)), j1 - j0)
    j = np.repeat(j0, j1 - j0) + (np.arange(len(gap)) - np.repeat(windows.offsets(j1 - j0), j1 - j0))
    overlap = np.minimum(steps.end[j], hi[gap]) - np.maximum(steps.start[j], lo[gap])
    pos = overlap > 0  # the steps a gap takes from, in order
    gap, j, overlap = gap[pos], j[pos], overlap[pos]
    take = np.zeros(len(gap))
    for which, idx in windows.blocks(np.bincount(gap, minlength=len(k))):
        # what is left of the gap's part before each step: its part less the whole overlaps before
        left = np.subtract.accumulate(np.concatenate((gaps.sync_us[k][which][:, None], overlap[idx]), axis=1), axis=1)
        before = left[:, :-1]
        take[idx] = np.where(before > 0, np.minimum(before, overlap[idx]), 0.0)
    by_step = np.argsort(j, kind="stable")  # by step, in gap order
    return windows.running_sums(take[by_step][take[by_step] > 0], np.bincount(j[take > 0], minlength=n))
