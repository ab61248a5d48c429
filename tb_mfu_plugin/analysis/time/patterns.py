"""Evidence extraction: the patterns in the trace tables that the diagnosis rules point at.

Pure functions from ``TraceTables`` (and the per-device GPU rows) to small results:

- host windows on a thread (``Windows``) and "which GPU work was launched inside them",
  by the host time of the launching runtime/driver call on the same thread;
- the optimizer step, ``zero_grad`` and DataLoader windows (``record_function`` annotations
  in torch 2.x, ``cpu_op`` events in 2021 traces);
- runs of consecutive non-matmul kernels on one stream (unfused elementwise chains);
- what the host was doing during a GPU idle gap.

Name classes are ``name_patterns``; hand-written attention is ``attention_chains``. Nothing
here decides whether something is a problem: that is ``diagnosis``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ...core.distinct import distinct
from ...trace.tables import ANNOTATION, OP, STEP_PREFIX, GpuTable, TraceTables
from ..kernels.name_patterns import DATALOADER, OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD, name_mask
from . import intervals
from .nesting import outermost_per_thread

# ---------------------------------------------------------------------------- host windows


@dataclass(frozen=True)
class Windows:
    """Host time windows, each on one thread (pid, tid)."""

    pid: np.ndarray  # int64
    tid: np.ndarray  # int64
    lo: np.ndarray  # float64 µs
    hi: np.ndarray

    def __len__(self) -> int:
        return len(self.lo)

    @staticmethod
    def of_rows(tables: TraceTables, rows: np.ndarray) -> Windows:
        cpu = tables.cpu
        rows = np.asarray(rows, dtype=np.int64)
        return Windows(cpu.pid[rows], cpu.tid[rows], cpu.ts[rows], cpu.end[rows])


def in_windows(pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, w: Windows) -> np.ndarray:
    """Which points (pid, tid, ts) lie inside a window ``[lo, hi]`` of their own thread."""
    out = np.zeros(len(ts), bool)
    if len(w) == 0 or len(ts) == 0:
        return out
    for p, t in set(zip(w.pid.tolist(), w.tid.tolist(), strict=True)):
        mine = (w.pid == p) & (w.tid == t)
        lo, hi = intervals.merge(w.lo[mine], w.hi[mine])
        sel = np.flatnonzero((pid == p) & (tid == t))
        if not len(sel):
            continue
        out[sel] = intervals.window_of(ts[sel], lo, hi, closed=True) >= 0
    return out


def launched_in(tables: TraceTables, launcher: np.ndarray, w: Windows) -> np.ndarray:
    """For GPU rows whose launching cpu rows are ``launcher`` (-1 unknown): was the launch call
    made inside one of the windows, on the window's thread?"""
    out = np.zeros(len(launcher), bool)
    known = np.flatnonzero(launcher >= 0)
    if not len(known) or not len(w):
        return out
    cpu = tables.cpu
    rows = launcher[known]
    out[known] = in_windows(cpu.pid[rows], cpu.tid[rows], cpu.ts[rows], w)
    return out


# A literal that every match of the pattern contains, so that names without it need no regex test:
# a trace of many steps holds one "ProfilerStep#N" annotation name per step (tests/analysis/time/test_patterns.py
# checks each literal against its pattern).
NEEDLES: dict[re.Pattern[str], str] = {
    OPTIMIZER_STEP: "Optimizer.step#",
    OPTIMIZER_ZERO_GRAD: "Optimizer.zero_grad#",
    DATALOADER: "DataLoader",
}


def rows_named(tables: TraceTables, pattern: re.Pattern[str], kinds: tuple[int, ...] = (OP, ANNOTATION)) -> np.ndarray:
    """CPU rows of the given kinds whose name matches ``pattern``, in time order."""
    cpu, names = tables.cpu, tables.names
    codes = tables.cpu_name_codes(kinds)
    needle = NEEDLES.get(pattern)
    if needle is None:
        hit = name_mask(names, pattern, codes=codes)
    else:
        hit = tables.name_codes(lambda n: needle in n and pattern.search(n), codes)
    kind_ok = np.isin(cpu.kind, np.array(kinds, dtype=cpu.kind.dtype))
    return np.flatnonzero(kind_ok & hit[cpu.name])


def optimizer_step_rows(tables: TraceTables) -> np.ndarray:
    return outermost_per_thread(tables, rows_named(tables, OPTIMIZER_STEP))


def zero_grad_rows(tables: TraceTables) -> np.ndarray:
    return outermost_per_thread(tables, rows_named(tables, OPTIMIZER_ZERO_GRAD))


def dataloader_rows(tables: TraceTables) -> np.ndarray:
    return outermost_per_thread(tables, rows_named(tables, DATALOADER))


def ops_named_in(tables: TraceTables, w: Windows, prefixes: tuple[str, ...]) -> dict[str, int]:
    """Count of ops whose name starts with one of ``prefixes``, started inside the windows."""
    cpu = tables.cpu
    hit = tables.name_codes(lambda n: n.startswith(prefixes))
    rows = np.flatnonzero((cpu.kind == OP) & hit[cpu.name])
    rows = rows[in_windows(cpu.pid[rows], cpu.tid[rows], cpu.ts[rows], w)]
    out: dict[str, int] = defaultdict(int)
    for r in rows:
        out[tables.names[cpu.name[r]]] += 1
    return dict(out)


# ---------------------------------------------------------------------------- GPU-side patterns


def elementwise_runs(gpu: GpuTable, is_elementwise: np.ndarray, eligible: np.ndarray, min_len: int) -> list[np.ndarray]:
    """Runs of at least ``min_len`` consecutive elementwise kernels on one stream.

    ``gpu`` holds kernel rows; ``is_elementwise`` is the lookup table over name codes;
    ``eligible`` (per row) excludes kernels claimed by other patterns, which end a run.
    Returns row indexes into ``gpu`` for each run.
    """
    runs: list[np.ndarray] = []
    ew = is_elementwise[gpu.name] & eligible
    for s in distinct(gpu.stream):
        rows = np.flatnonzero(gpu.stream == s)
        rows = rows[np.argsort(gpu.ts[rows], kind="stable")]
        flag = ew[rows]
        if not flag.any():
            continue
        edges = np.diff(np.concatenate(([0], flag.astype(np.int8), [0])))
        starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
            if b - a >= min_len:
                runs.append(rows[a:b])
    return runs


def host_activity(tables: TraceTables, lo: float, hi: float, limit: int = 5) -> list[dict[str, object]]:
    """The outermost host ops and annotations overlapping [lo, hi) (step markers left out),
    with the overlapped µs per name: what the CPU did while the GPU waited."""
    cpu, names = tables.cpu, tables.names
    end_idx = int(np.searchsorted(cpu.ts, hi, side="left"))
    cand = np.arange(end_idx)
    cand = cand[((cpu.kind[cand] == OP) | (cpu.kind[cand] == ANNOTATION)) & (cpu.end[cand] > lo)]
    cand = cand[~tables.name_codes(lambda n: n.startswith(STEP_PREFIX))[cpu.name[cand]]]
    if not len(cand):
        return []
    cand = outermost_per_thread(tables, cand)
    overlap: dict[str, float] = defaultdict(float)
    for r in cand.tolist():
        overlap[names[cpu.name[r]]] += float(min(cpu.end[r], hi) - max(cpu.ts[r], lo))
    top = sorted(overlap.items(), key=lambda kv: -kv[1])[:limit]
    return [{"name": n, "us": round(v, 1)} for n, v in top]
