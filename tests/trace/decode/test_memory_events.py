"""The allocator's ``[memory]`` instant events in ``TraceTables.memory`` (trace/decode/memory_events.py):
on the real profile_memory=True samples the table holds the counters the ground truth measured, to the
byte; every way of decoding gives the same table; hostile values are made unknown with a note."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES
from tracegen import TraceBuilder

from tb_mfu_plugin.trace.decode import parallel, stream
from tb_mfu_plugin.trace.decode.decode import decode_bytes, decode_trace
from tb_mfu_plugin.trace.tables import MEMORY_COLUMNS, OOM, UNKNOWN_BYTES, MemoryTable

MEMORY_RUNS = ("gpt_memory", "gpt_memory_checkpointing", "gpt_memory_batch2x", "memory_leak")


def _trace(run: str) -> Path:
    (path,) = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
    return path


def _step_windows(path: Path) -> dict[str, tuple[float, float]]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    out = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("ProfilerStep#"):
            out[e["name"]] = (e["ts"], e["ts"] + e["dur"])
    return out


@pytest.mark.parametrize("run", MEMORY_RUNS)
def test_the_table_holds_the_counters_of_the_ground_truth(run: str) -> None:
    """Per step window: the events, the allocation before the first, the max allocated and reserved
    (``observed_in_trace.memory``, which the README checked against the allocator's counters)."""
    path = _trace(run)
    truth = json.loads((path.parent / "ground_truth.json").read_text())["observed_in_trace"]["per_rank"][0]["memory"]
    m = decode_trace(str(path)).memory
    assert len(m) > 0 and set(m.device.tolist()) == {0} and set(m.device_type.tolist()) == {1}
    assert (m.total_allocated >= 0).all() and (m.total_reserved >= m.total_allocated).all()
    assert (np.diff(m.ts) >= 0).all()
    for step, (lo, hi) in _step_windows(path).items():
        inside = np.flatnonzero((m.ts >= lo) & (m.ts <= hi))
        want = truth[step]
        assert len(inside) == want["events"]
        first = inside[0]
        assert m.total_allocated[first] - m.bytes[first] == want["allocated_before_first"]
        assert m.total_allocated[inside].max() == want["allocated_max"]
        assert m.total_reserved[inside].max() == want["reserved_max"]
        assert m.total_allocated[inside[-1]] == want["allocated_last"]


def test_a_trace_without_memory_events_has_an_empty_table() -> None:
    m = decode_trace(str(_trace("gpt_sdpa_fused"))).memory
    assert len(m) == 0 and all(getattr(m, k).dtype == dt for k, dt in MEMORY_COLUMNS.items())


def _same(a: MemoryTable, b: MemoryTable) -> None:
    for k in MEMORY_COLUMNS:
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)


def test_every_way_of_decoding_gives_the_same_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Streamed gzip, a one-line document (decoded whole), and a plain file in parallel ranges."""
    path = _trace("memory_leak")
    serial = decode_trace(str(path))
    raw = gzip.decompress(path.read_bytes())
    _same(serial.memory, decode_bytes(raw.replace(b"\n", b" ")).memory)
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    monkeypatch.setattr(parallel, "MIN_RANGE_BYTES", 1 << 20)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1 << 16)
    ranged = decode_trace(str(plain), processes=3)
    _same(serial.memory, ranged.memory)
    assert serial.meta.notes == ranged.meta.notes == []


def _hostile(untyped: bool) -> TraceBuilder:
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.memory(1, 512, 512, 2048, addr=10)  # a good one
    b.memory(2, 256, -5, 2048)  # negative total
    b.memory(3, 256, 2**70, 2**71)  # beyond int64
    b.memory(4, "12", "nan", None)  # strings and a null
    b.memory(5, 2**60, 1024, 2048)  # a change beyond any device
    b.memory(6, 1, 4096, 1024)  # reserved below allocated
    b.memory(7, 64, 64, 2048, device=2**64, addr=-3)  # ids that are not int64
    b.memory(8, 64, 64, 2048, device_type=0)  # host memory: left out
    b.memory(9, True, 1.5, 2048.0)  # a bool and floats
    b.memory(10, 8, 8, 2048, name="[OutOfMemory]")
    b.memory(11, 4, None, None, device=None, device_type=None)
    if untyped:  # (the untagged schema, which decodes a one-line document, refuses these: as for any phase)
        b.events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": "x", "args": {}})  # no time
        b.events.append({"ph": "i", "name": 5, "pid": 1, "tid": 1, "ts": 3})  # not a memory event
        b.events.append({"ph": "i", "name": "[memory]", "pid": [], "tid": {}, "ts": 12, "args": {"Bytes": 4}})
    b.launch_kernel("k", 20, 21, 5)
    return b


@pytest.mark.parametrize("layout", ["kineto", "one line"])
def test_hostile_values_are_unknown_and_noted(layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = _hostile(untyped=layout == "kineto")
    if layout == "kineto":  # chunks of a few events, decoded by the tagged schema (a small file's tail is not)
        monkeypatch.setattr(stream, "CHUNK_BYTES", 1500)
        tables = decode_trace(str(b.write(tmp_path / "t.json.gz")))
    else:
        tables = decode_bytes(b.text().replace("\n", " ").encode())
    m = tables.memory
    extra = layout == "kineto"
    assert m.ts.tolist() == [1, 2, 3, 4, 5, 6, 7, 9, 10, 11] + [12] * extra
    assert m.total_allocated.tolist() == [512, -1, -1, -1, 1024, 4096, 64, -1, 8, -1] + [-1] * extra
    assert m.total_reserved.tolist() == [2048, 2048, -1, -1, 2048, -1, 2048, -1, 2048, -1] + [-1] * extra
    unknown = UNKNOWN_BYTES
    assert m.bytes.tolist() == [512, 256, 256, unknown, unknown, 1, 64, unknown, 8, 4] + [4] * extra
    assert m.device.tolist() == [0, 0, 0, 0, 0, 0, -1, 0, 0, -1] + [-1] * extra
    assert m.device_type.tolist() == [1] * 9 + [-1] + [-1] * extra
    assert m.addr[0] == 10 and m.addr[6] == -1
    assert m.kind.tolist() == [0] * 8 + [OOM, 0] + [0] * extra
    notes = " ".join(tables.meta.notes)
    assert "6 memory events with a negative or absurd Total Allocated / Total Reserved" in notes
    assert "1 memory events with Total Reserved below Total Allocated" in notes
    assert "memory events with a non-integer or absurd Bytes" in notes
    assert "2 memory events with a device id or address that is not a 64-bit integer" in notes
    assert len(tables.gpu) == 1  # the kernel is untouched


def test_memory_events_count_under_the_event_cap() -> None:
    from tb_mfu_plugin.core.errors import TraceError
    from tb_mfu_plugin.trace.limits import Limits

    b = TraceBuilder()
    for i in range(20):
        b.memory(i, 8, 8 * (i + 1), 4096)
    with pytest.raises(TraceError, match="max_events"):
        decode_bytes(b.text().encode(), limits=Limits(max_events=10))
