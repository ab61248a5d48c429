"""Caps (trace/limits.py) and safe opening (trace/files.py): each cap gives a one-line
error naming it; FIFOs and devices are refused at once; no input grows a buffer
without bound."""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.cli import main
from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.trace import limits
from tb_mfu_plugin.trace.decode import stream
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.limits import Limits, parse_size
from tb_mfu_plugin.trace.locate.discover import single_file_run
from tb_mfu_plugin.trace.locate.files import uncompressed_size
from tb_mfu_plugin.trace.locate.locations import Location
from tb_mfu_plugin.trace.locate.sidecar import load_sidecar


def _trace(n: int = 50) -> TraceBuilder:
    b = TraceBuilder()
    b.step(1, 0, 10 * n + 10)
    for i in range(n):
        b.launch_kernel(f"k{i % 3}", 10.0 * i, 10.0 * i + 2, 5.0)
    return b


def _cap_error(path: Path, cap: str, **kw: Any) -> TraceError:
    with pytest.raises(TraceError) as err:
        decode_trace(str(path), limits=Limits(**kw))
    msg = str(err.value)
    assert "\n" not in msg and cap in msg and f"--{cap.replace('_', '-')}" in msg, msg
    return err.value


def test_decompressed_size_cap(tmp_path: Path) -> None:
    p = _trace().write(tmp_path / "a.pt.trace.json.gz")
    _cap_error(p, "max_trace_bytes", max_trace_bytes=1000)
    assert len(decode_trace(str(p)).gpu) == 50  # the default never refuses it


def test_compression_ratio_cap_stops_a_bomb_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "RATIO_GRACE_BYTES", 1 << 20)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.pt.trace.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (64 << 20)))
    err = _cap_error(bomb, "max_compression_ratio")
    assert "gzip bomb" in err.reason


def test_line_cap_bounds_a_document_without_event_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "one.json"
    p.write_text(json.dumps(_trace(2000).document()))  # one line: decoded whole
    _cap_error(p, "max_line_bytes", max_line_bytes=10_000)
    assert len(decode_trace(str(p)).gpu) == 2000
    # Kineto layout: one huge event cannot grow the buffer past the cap either
    monkeypatch.setattr(stream, "CHUNK_BYTES", 4096)  # (the cap is checked between chunks)
    b = _trace(5)
    b.kernel("k" * 50_000, 1.0, 1.0, 1)
    _cap_error(b.write(tmp_path / "big_event.json", gz=False), "max_line_bytes", max_line_bytes=20_000)


def test_event_count_and_wall_time_caps(tmp_path: Path) -> None:
    p = _trace(100).write(tmp_path / "a.json", gz=False)
    _cap_error(p, "max_events", max_events=10)
    _cap_error(p, "max_seconds", max_seconds=1e-9)
    options = AnalysisOptions(limits=Limits(max_seconds=1e-9))
    (report,) = analyze_file(single_file_run(str(p)).files[0], "w", options)
    assert report.error is not None and "max_seconds" in report.error


def test_long_names_are_cut_with_a_note(tmp_path: Path) -> None:
    b = _trace(3)
    c = b.runtime("cudaLaunchKernel", 1.0, 1.0)
    b.kernel("void k<" + "x" * 5000 + ">()", 2.0, 1.0, c)
    t = decode_trace(str(b.write(tmp_path / "a.json")), limits=Limits(max_name_chars=100))
    longest = max(t.names, key=len)
    assert longest.startswith("void k<xxx") and "more characters cut" in longest and len(longest) < 200
    assert any("max_name_chars" in n for n in t.meta.notes)


def test_devices_beyond_the_cap_are_left_out_with_a_note(tmp_path: Path) -> None:
    b = _trace(3)
    for d in range(1, 12):
        for i in range(d):  # device d runs d kernels: the busiest are the highest ids
            b.launch_kernel("k", 100.0 + i, 101.0 + i, 1.0, device=d)
    p = b.write(tmp_path / "a.json")
    reports = analyze_file(single_file_run(str(p)).files[0], "w", AnalysisOptions(limits=Limits(max_devices=4)))
    assert [r.device.index for r in reports if r.device] == [8, 9, 10, 11]
    assert all(any("max_devices" in n for n in r.notes) for r in reports)


def _finishes(fn: Callable[[], object], seconds: float = 10.0) -> object:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it blocks."""
    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(_catch(fn)), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked"
    return box[0]


def _catch(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return exc


def test_a_fifo_named_like_a_trace_or_sidecar_fails_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "rank0.1.pt.trace.json"
    os.mkfifo(fifo)
    err = _finishes(lambda: decode_trace(str(fifo)))
    assert isinstance(err, TraceError) and "FIFO" in err.reason
    assert _finishes(lambda: uncompressed_size(str(fifo), 0)) == 0
    os.mkfifo(tmp_path / "tb_mfu.json")
    err = _finishes(lambda: load_sidecar(Location.parse(str(tmp_path))))
    assert isinstance(err, TraceError) and "FIFO" in err.reason
    # named on the command line, it is one run whose file gets the error (not "no traces found")
    assert _finishes(lambda: main(["analyze", str(fifo), "--json"])) == 1


def test_a_link_to_dev_zero_is_refused(tmp_path: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    link = tmp_path / "rank0.1.pt.trace.json.gz"
    link.symlink_to("/dev/zero")
    err = _finishes(lambda: decode_trace(str(link)))
    assert isinstance(err, TraceError) and "character device" in err.reason


def test_limits_refuse_negative_values_and_parse_sizes() -> None:
    with pytest.raises(ValueError, match="max_events"):
        Limits(max_events=-1)
    assert parse_size("8GiB") == 8 << 30 and parse_size("512M") == 512 << 20 and parse_size("1e9") == 10**9
    with pytest.raises(ValueError):
        parse_size("lots")
    # every cap has a flag, and every flag names a field
    assert {f for f, _ in limits.FLAGS.values()} == set(Limits.__dataclass_fields__) == set(limits.CAP_WORDS)


def test_default_caps_hold_every_sample_trace() -> None:
    """The defaults never refuse a real trace: measured on ours (ratio 11-19:1)."""
    samples = Path(__file__).resolve().parents[2] / "sample_traces"
    for p in sorted(samples.glob("*/rank0.*.pt.trace.json.gz")):
        t = decode_trace(str(p))
        assert t.meta.notes == [], (p, t.meta.notes)
        assert t.meta.size_bytes / p.stat().st_size < Limits().max_compression_ratio / 5
