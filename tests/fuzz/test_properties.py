"""Property-based decoding (Hypothesis): for any events, in either layout, the decoder
either refuses the file with a one-line ``TraceError`` or returns tables that keep
their invariants, and the analysis of those tables keeps the report's contract.

``TB_MFU_FUZZ_LONG=1`` runs 20 times more examples.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.reporting.trace import trace_reports
from tb_mfu_plugin.trace.decode.columns import MAX_ABS_TS, MAX_COPY_BYTES, MAX_DUR
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.limits import Limits

LONG = os.environ.get("TB_MFU_FUZZ_LONG") == "1"
SETTINGS = settings(
    max_examples=2000 if LONG else 100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=not LONG,  # CI runs the same examples every time
    database=None,  # writes nothing into the checkout
)
LIMITS = Limits(max_name_chars=64)

# Numbers as real traces write them, and the ones no real trace holds.
hostile_ints = st.sampled_from([0, 1, 7, -1, -7, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 + 1, -(2**63) - 1, 10**30])
numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    hostile_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(0, 1e4),
)
scalars = st.one_of(
    numbers, st.text(max_size=5), st.sampled_from(["²", "١٢", "12", "", "stream 7"]), st.none(), st.booleans()
)
values = st.one_of(scalars, st.lists(numbers, max_size=4), st.lists(st.lists(numbers, max_size=3), max_size=3))
# Mostly values of the type the schema expects (so that files decode and the analysis
# runs on hostile *numbers*), sometimes anything at all (so that refusals are tested too).
ids = st.one_of(hostile_ints, st.integers(0, 3), st.sampled_from(["²", "١٢", "12", "", "stream 7"]), st.none())
measures = st.one_of(numbers, st.none())
dims = st.lists(st.one_of(hostile_ints, st.integers(-2, 64)), max_size=3)
TYPED: dict[str, Any] = {
    "device": ids,
    "stream": ids,
    "correlation": ids,
    "External id": ids,
    "bytes": ids,
    "est. achieved occupancy %": measures,
    "blocks per SM": measures,
    "warps per SM": measures,
    "flops": measures,
    "grid": dims,
    "block": dims,
    "Input Dims": st.lists(dims, max_size=3),
}
ARG_KEYS = list(TYPED)
names = st.one_of(
    st.sampled_from(
        [
            "aten::mm",
            "ProfilerStep#1",
            "ProfilerStep#99999999999999999999",
            "ProfilerStep#²",
            "cudaLaunchKernel",
            "Memcpy HtoD (Pageable -> Device)",
            "k" * 100,
        ]
    ),
    st.text(max_size=8),
)
cats = st.sampled_from(
    ["kernel", "kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "user_annotation", "cuda_runtime", "Kernel", "", "weird"]
)


def _value(draw: st.DrawFn, typed: st.SearchStrategy[Any]) -> Any:
    return draw(values) if draw(st.integers(0, 49)) == 0 else draw(typed)


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    e: dict[str, Any] = {
        "ph": draw(st.sampled_from(["X", "X", "X", "X", "i", "M", "B"])),
        "cat": draw(cats),
        "name": draw(names),
        "pid": _value(draw, ids),
        "tid": _value(draw, ids),
        "ts": _value(draw, st.one_of(numbers, st.floats(0, 1e6))),
        "dur": _value(draw, measures),
    }
    if draw(st.booleans()):
        e["args"] = {k: _value(draw, TYPED[k]) for k in draw(st.lists(st.sampled_from(ARG_KEYS), max_size=5))}
    for k in draw(st.lists(st.sampled_from(list(e)), max_size=2)):
        e.pop(k, None)
    return e


def _write(path: Path, doc: dict[str, Any], kineto: bool) -> None:
    if not kineto:
        path.write_text(json.dumps(doc))
        return
    head = json.dumps({k: v for k, v in doc.items() if k != "traceEvents"})[1:-1]
    body = ",\n".join("  " + json.dumps(e) for e in doc["traceEvents"])
    path.write_text("{\n  " + head + (",\n  " if head else "") + '"traceEvents": [\n' + body + "\n  ]\n}\n")


def _check_tables(t: Any) -> None:
    for table in (t.cpu, t.gpu):
        assert np.isfinite(table.ts).all() and (np.abs(table.ts) <= MAX_ABS_TS).all()
        assert ((table.dur >= 0) & (table.dur <= MAX_DUR)).all()
        assert np.isfinite(table.end).all()
        assert (table.name >= 0).all() and (table.name < len(t.names)).all()
    g = t.gpu
    assert ((g.bytes >= -1) & (g.bytes <= MAX_COPY_BYTES)).all()
    occ = g.occupancy_pct[~np.isnan(g.occupancy_pct)]
    assert ((occ >= 0) & (occ <= 100)).all()
    for col in (g.blocks_per_sm,):
        assert (col[~np.isnan(col)] >= 0).all() and np.isfinite(col[~np.isnan(col)]).all()
    assert (g.grid_blocks >= -1).all() and (g.block_threads >= -1).all()
    assert g.device.dtype == np.int64
    assert all(len(n) <= LIMITS.max_name_chars + 40 for n in t.names)


def _check_reports(t: Any) -> None:
    for r in trace_reports(t, "w", "", AnalysisOptions(limits=LIMITS)):
        if r.error is not None:
            assert "\n" not in r.error
            continue
        s = r.summary
        assert s is not None
        shares = ("gpu_busy_share", "kernel_time_share", "memcpy_time_share", "idle_share", "host_sync_blocked_share")
        for k in (*shares, "gpu_idle_after_sync_share"):
            v = getattr(s, k)
            assert v is None or (math.isfinite(v) and 0 <= v <= 1), (k, v)
        for k in ("h2d_bytes_per_step", "d2h_bytes_per_step", "d2d_bytes_per_step", "p2p_bytes_per_step"):
            assert getattr(s, k) >= 0
        assert all(0 <= x <= 1 for x in s.breakdown.values())


@SETTINGS
@given(
    evs=st.lists(events(), max_size=25),
    kineto=st.booleans(),
    gz=st.booleans(),
    header=st.dictionaries(
        st.sampled_from(["deviceProperties", "distributedInfo", "schemaVersion", "baseTimeNanoseconds", "traceName"]),
        values,
        max_size=3,
    ),
)
def test_any_events_decode_to_valid_tables_or_a_one_line_error(
    tmp_path_factory: Any, evs: list[dict[str, Any]], kineto: bool, gz: bool, header: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("h") / "rank0.1.pt.trace.json"
    _write(path, {**header, "traceEvents": evs}, kineto)
    if gz:
        import gzip

        gz_path = path.with_suffix(".json.gz")
        gz_path.write_bytes(gzip.compress(path.read_bytes()))
        path = gz_path
    try:
        t = decode_trace(str(path), keep_inputs=lambda n: n == "aten::mm", limits=LIMITS)
    except TraceError as exc:
        assert "\n" not in str(exc)
        event(f"refused: {exc.reason[:50]}")
        return
    event(f"decoded, {'with' if len(t.gpu) else 'without'} GPU events")
    _check_tables(t)
    _check_reports(t)


@SETTINGS
@given(data=st.binary(max_size=300), prefix=st.sampled_from([b"", b'{"traceEvents": [\n  ', b"[", b"\x1f\x8b"]))
def test_any_bytes_decode_or_give_a_one_line_error(tmp_path_factory: Any, data: bytes, prefix: bytes) -> None:
    path = tmp_path_factory.mktemp("b") / "rank0.1.pt.trace.json"
    path.write_bytes(prefix + data)
    try:
        t = decode_trace(str(path), limits=LIMITS)
    except TraceError as exc:
        assert "\n" not in str(exc)
        return
    _check_tables(t)


# ---- the allocator's [memory] events (issue 25): any values, on steps that have GPU work
memory_values = st.one_of(hostile_ints, st.integers(-(2**40), 2**40), st.integers(0, 2**34), numbers, scalars)


@st.composite
def memory_event(draw: st.DrawFn) -> dict[str, Any]:
    keys = {
        "Total Allocated": memory_values,
        "Total Reserved": memory_values,
        "Bytes": memory_values,
        "Addr": st.one_of(st.integers(0, 8), memory_values),
        "Device Id": st.one_of(st.just(0), ids),
        "Device Type": st.one_of(st.just(1), memory_values),
    }
    args = {k: draw(v) for k, v in keys.items() if draw(st.integers(0, 9))}
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": draw(st.sampled_from(["[memory]", "[OutOfMemory]"])),
        "pid": 1,
        "tid": draw(st.sampled_from([1, 2])),
        "ts": _value(draw, st.floats(-50, 400)),
        "args": args,
    }


def _steps_with_kernels() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(3):
        t = 100.0 * i
        out.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": t, "dur": 90.0}
        )
        out.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": 1.0,
                "args": {"correlation": 10 + i},
            }
        )
        out.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": t + 2,
                "dur": 50.0,
                "args": {"device": 0, "stream": 7, "correlation": 10 + i},
            }
        )
    return out


@SETTINGS
@given(
    mem=st.lists(memory_event(), max_size=40),
    kineto=st.booleans(),
    total=st.sampled_from([None, 0, -1, 2**20, 2**34, 2**80, "x"]),
)
def test_any_memory_events_give_a_memory_block_without_impossible_figures(
    tmp_path_factory: Any, mem: list[dict[str, Any]], kineto: bool, total: Any
) -> None:
    import invariants

    from tb_mfu_plugin.analysis.report import to_json
    from tb_mfu_plugin.trace.tables import UNKNOWN_BYTES

    props = [{"id": 0, "name": "NVIDIA H200", **({} if total is None else {"totalGlobalMem": total})}]
    path = tmp_path_factory.mktemp("m") / "rank0.1.pt.trace.json"
    _write(path, {"deviceProperties": props, "traceEvents": _steps_with_kernels() + mem}, kineto)
    try:
        t = decode_trace(str(path), limits=LIMITS)
    except TraceError as exc:
        assert "\n" not in str(exc)
        event(f"refused: {exc.reason[:50]}")
        return
    m = t.memory
    assert (m.total_allocated >= -1).all() and (m.total_reserved >= -1).all() and (m.addr >= -1).all()
    both = (m.total_allocated >= 0) & (m.total_reserved >= 0)
    assert (m.total_reserved[both] >= m.total_allocated[both]).all()
    known = m.bytes != UNKNOWN_BYTES
    assert (np.abs(m.bytes[known]) <= 2**50).all() and np.isfinite(m.ts).all()
    event(f"{len(m)} memory rows")
    for r in trace_reports(t, "w", "", AnalysisOptions(limits=LIMITS)):
        if r.error is None:
            problems = invariants.memory_problems(json.loads(to_json(r)))
            assert not problems, problems
