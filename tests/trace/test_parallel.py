"""Parallel decoding of one plain file (trace/parallel.py): the tables, and so the reports, equal
those of a serial decode; caps and bad input give the same one-line errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import msgspec
import numpy as np
import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.reporting.trace import trace_reports
from tb_mfu_plugin.running.pipeline import _keep_inputs
from tb_mfu_plugin.trace.decode import decode, parallel, stream
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.limits import Limits
from tb_mfu_plugin.trace.tables import TraceTables

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of a few KiB and chunks smaller still, so that small files split into many ranges."""
    monkeypatch.setattr(parallel, "MIN_RANGE_BYTES", 2048)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1500)


def _assert_same(a: TraceTables, b: TraceTables) -> None:
    assert a.names == b.names
    for ta, tb in ((a.cpu, b.cpu), (a.gpu, b.gpu)):
        for k in ta.__dataclass_fields__:
            if k == "input_records":
                assert a.cpu.input_records == b.cpu.input_records  # the same records, in the same order
            else:
                np.testing.assert_array_equal(getattr(ta, k), getattr(tb, k), err_msg=k)
    assert a.comm_args == b.comm_args  # the NCCL kernels' records, in the order the gpu "comm" column indexes
    assert a.meta == b.meta


def _labelled_trace(n: int) -> TraceBuilder:
    """Kernels, copies and ops with shapes; 2021-style string thread ids on some rows."""
    b = TraceBuilder()
    b.step(1, 0, 20.0 * n + 10)
    for i in range(n):
        ext = b.op(f"aten::mm#{i % 11}", 20.0 * i, 5, **{"Input Dims": [[4, i % 5 + 1], [i % 5 + 1, 8]]})
        b.launch_kernel(f"k{i % 13}", 20.0 * i + 1, 20.0 * i + 3, 5.0, grid=[i % 4 + 1, 2, 1], ext=ext)
        if i % 17 == 0:
            b.events[-2]["tid"] = f"thread {i % 3}"  # a label: renumbered across ranges
    return b


def _count_ranges(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counts: list[int] = []
    split = parallel.split_points

    def spy(*args: object) -> list[int]:
        bounds = split(*args)  # type: ignore[arg-type]
        counts.append(len(bounds) - 1)
        return bounds

    monkeypatch.setattr(parallel, "split_points", spy)
    return counts


def test_parallel_tables_equal_serial(tmp_path: Path, small_ranges: None, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(_labelled_trace(400).write(tmp_path / "a.pt.trace.json", gz=False))
    keep = lambda name: name.startswith("aten::mm")  # noqa: E731 - a lambda: fork needs no pickling
    serial = decode_trace(path, keep_inputs=keep, processes=1)
    ranges = _count_ranges(monkeypatch)
    for n in (2, 3, 7):
        _assert_same(decode_trace(path, keep_inputs=keep, processes=n), serial)
    assert ranges == [2, 3, 7]
    assert len(serial.cpu.input_rows) == 400
    assert len(serial.cpu.input_records) == 5  # one record per distinct shape
    assert (serial.cpu.tid < -1).sum() > 0  # the labels were exercised


def test_parallel_reports_equal_serial_on_a_real_trace(
    tmp_path: Path, small_ranges: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    (src,) = (ROOT / "sample_traces" / "tp_2gpu").glob("rank0.*.pt.trace.json.gz")
    plain = tmp_path / "rank0.pt.trace.json"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    monkeypatch.setattr(parallel, "MIN_RANGE_BYTES", 1 << 20)  # a 7.8 MB trace: up to 7 ranges
    serial = decode_trace(str(plain), keep_inputs=_keep_inputs, processes=1)
    split = decode_trace(str(plain), keep_inputs=_keep_inputs, processes=4)
    _assert_same(split, serial)
    assert len(serial.comm_args) == 2 and (serial.gpu.comm >= 0).sum() == 72  # records from several ranges
    options = AnalysisOptions()
    a = [msgspec.json.encode(r) for r in trace_reports(serial, "w", "", options)]
    b = [msgspec.json.encode(r) for r in trace_reports(split, "w", "", options)]
    assert a == b and len(a) == 1


def test_a_range_that_does_not_decode_falls_back_to_the_whole_file(tmp_path: Path, small_ranges: None) -> None:
    text = _labelled_trace(200).text()
    bad = text[: len(text) * 3 // 4] + text[len(text) * 3 // 4 :].replace('"dur": 5.0', '"dur": 5.0.0', 1)
    path = tmp_path / "bad.pt.trace.json"
    path.write_text(bad)
    with pytest.raises(TraceError) as err:
        decode_trace(str(path), processes=3)
    assert "not valid JSON" in err.value.reason and err.value.path == str(path)


def test_caps_hold_across_processes(tmp_path: Path, small_ranges: None) -> None:
    path = str(_labelled_trace(300).write(tmp_path / "a.pt.trace.json", gz=False))
    for kw, cap in (({"max_events": 100}, "max_events"), ({"max_trace_bytes": 10_000}, "max_trace_bytes")):
        with pytest.raises(TraceError) as err:
            decode_trace(path, limits=Limits(**kw), processes=3)
        assert cap in err.value.reason and "\n" not in str(err.value) and err.value.path == path


def test_gzip_inflated_by_a_child_equals_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "MIN_APART_GZIP_BYTES", 0)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1500)
    gz = str(_labelled_trace(300).write(tmp_path / "a.pt.trace.json.gz"))
    inflaters = []
    real = stream.Inflater

    def spy(*args: object) -> stream.Inflater:
        inflaters.append(real(*args))  # type: ignore[arg-type]
        return inflaters[-1]

    monkeypatch.setattr(stream, "Inflater", spy)
    _assert_same(decode_trace(gz, processes=2), decode_trace(gz, processes=1))
    assert len(inflaters) == 1


def test_errors_of_the_inflating_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "MIN_APART_GZIP_BYTES", 0)
    monkeypatch.setattr(stream, "RATIO_GRACE_BYTES", 1 << 20)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.pt.trace.json.gz"
    # past the default 64 MiB grace too: a child started by forkserver (when this process already
    # runs threads, as after the remote tests) has the default constants, not the patched ones
    bomb.write_bytes(gzip.compress(b" " * (65 << 20), compresslevel=1))
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(_labelled_trace(300).write(tmp_path / "x.gz").read_bytes()[:-100])
    for path, reason in ((bomb, "max_compression_ratio"), (cut, "corrupt or truncated gzip data")):
        with pytest.raises(TraceError) as err:
            decode_trace(str(path), processes=2)
        assert reason in err.value.reason and err.value.path == str(path), err.value


def test_small_files_decode_serially(tmp_path: Path) -> None:
    plain = str(_labelled_trace(50).write(tmp_path / "b.pt.trace.json", gz=False))
    assert len(decode_trace(plain, processes=4).gpu) == 50  # below MIN_RANGE_BYTES: one range


def test_processes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for text, want in (("3", 3), ("", 1), ("0", 1), ("-2", 1), ("two", 1)):
        monkeypatch.setenv(decode.PROCESSES_ENV, text)
        assert decode.decode_processes() == want
