"""Nesting on the thread axis: containment with its tolerance, outermost rows, threads kept apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.time import nesting
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.tables import OP, TraceTables


def _tables(b: TraceBuilder, tmp_path: Path) -> TraceTables:
    return decode_trace(str(b.write(tmp_path / "n.pt.trace.json.gz")))


def _op(b: TraceBuilder, name: str, ts: float, dur: float, tid: int = 100, cat: str = "cpu_op") -> None:
    b.events.append({"ph": "X", "cat": cat, "name": name, "pid": b.pid, "tid": tid, "ts": ts, "dur": dur, "args": {}})


def _row(t: TraceTables, name: str, tid: int | None = None) -> int:
    code = t.names.index(name)
    hit = t.cpu.name == code
    if tid is not None:
        hit &= t.cpu.tid == tid
    return int(np.flatnonzero(hit)[0])


def test_outermost_keeps_parents_per_thread(tmp_path: Path) -> None:
    b = TraceBuilder()
    _op(b, "aten::linear", 100, 50, tid=1)
    _op(b, "aten::addmm", 110, 30, tid=1)  # inside linear
    _op(b, "aten::mm", 120, 10, tid=2)  # same time, other thread: not nested
    _op(b, "aten::relu", 200, 10, tid=1)
    t = _tables(b, tmp_path)
    ax = nesting.thread_axis(t)
    rows = np.flatnonzero(t.cpu.kind == OP)
    kept = {t.names[t.cpu.name[r]] for r in nesting.outermost(ax, rows)}
    assert kept == {"aten::linear", "aten::mm", "aten::relu"}


def test_whole_microsecond_traces_tolerate_a_child_ending_one_us_late(tmp_path: Path) -> None:
    b = TraceBuilder()
    _op(b, "aten::linear", 100, 50)
    _op(b, "aten::addmm", 110, 41)  # ends at 151, 1 µs after its parent: legacy rounding
    t = _tables(b, tmp_path)
    ax = nesting.thread_axis(t)
    assert ax.tol == 1.0
    parent, child = _row(t, "aten::linear"), _row(t, "aten::addmm")
    r, s0, s1 = nesting.sorted_set(ax, np.array([child, parent]))
    assert r.tolist() == [parent, child]
    assert nesting.nested_in_self(s1, ax.tol).tolist() == [False, True]
    q0, q1 = ax.g0[[child]], ax.g1[[child]]
    assert nesting.inside_any(q0, q1, s0[:1], s1[:1], ax.tol).tolist() == [True]


def test_fractional_traces_use_a_tight_tolerance(tmp_path: Path) -> None:
    b = TraceBuilder()
    _op(b, "aten::linear", 100.5, 50)
    _op(b, "aten::addmm", 110.5, 41)  # ends 1 µs after its parent: not nested
    t = _tables(b, tmp_path)
    ax = nesting.thread_axis(t)
    assert ax.tol == 1e-3
    rows = np.array([_row(t, "aten::linear"), _row(t, "aten::addmm")])
    assert len(nesting.outermost(ax, rows)) == 2


def test_containing_disjoint_and_contains_point(tmp_path: Path) -> None:
    b = TraceBuilder()
    _op(b, "a", 100, 10)
    _op(b, "b", 200, 10)
    t = _tables(b, tmp_path)
    ax = nesting.thread_axis(t)
    rows, s0, s1 = nesting.sorted_set(ax, np.arange(len(t.cpu)))
    base = ax.g0[rows[0]] - 100.0  # the axis position of t = 0 on this thread
    pts = base + np.array([99.0, 100, 110, 111.5, 150, 205])
    # ends are closed and widened by the tolerance (1 µs): 99 and 111 count, 111.5 does not
    assert nesting.containing_disjoint(pts, s0, s1, ax.tol).tolist() == [0, 0, 0, -1, -1, 1]
    assert nesting.containing_disjoint(pts, s0[:0], s1[:0], ax.tol).tolist() == [-1] * 6
    assert nesting.contains_point(s0, s1, np.sort(pts), ax.tol).tolist() == [True, True]
    assert nesting.contains_point(s0, s1, np.empty(0), ax.tol).tolist() == [False, False]


def test_same_name_wrappers_flags_the_outer_of_two_equal_ops(tmp_path: Path) -> None:
    b = TraceBuilder()
    _op(b, "aten::mm", 100, 50)  # DTensor: global shapes
    _op(b, "aten::mm", 110, 20)  # the local shard inside it
    _op(b, "aten::mm", 300, 10)  # another, alone
    t = _tables(b, tmp_path)
    ax = nesting.thread_axis(t)
    rows = np.flatnonzero(t.cpu.name == t.names.index("aten::mm"))
    assert nesting.same_name_wrappers(t, ax, rows).tolist() == [True, False, False]


def test_outermost_per_thread_drops_mirrors_on_the_same_thread_only(tmp_path: Path) -> None:
    b = TraceBuilder()
    _op(b, "Optimizer.step#AdamW.step", 100, 50, tid=1, cat="user_annotation")
    _op(b, "Optimizer.step#AdamW.step", 100, 50, tid=1)  # the mirror cpu_op
    _op(b, "Optimizer.step#AdamW.step", 120, 5, tid=2)  # inside in time, but another thread
    t = _tables(b, tmp_path)
    rows = np.flatnonzero(t.cpu.name == t.names.index("Optimizer.step#AdamW.step"))
    kept = nesting.outermost_per_thread(t, rows)
    assert len(kept) == 2
    assert sorted(t.cpu.tid[kept].tolist()) == [1, 2]
    assert t.cpu.ts[kept].tolist() == sorted(t.cpu.ts[kept].tolist())
