"""Impossible values are clamped at the trace layer with a note (issue 15, classes 2, 4, 6),
and no exception from one file reaches another file's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.flops import shapes as flops
from tb_mfu_plugin.cli import main
from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.running import pipeline
from tb_mfu_plugin.running.pipeline import analyze_file, analyze_path
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.locate.discover import single_file_run
from tb_mfu_plugin.trace.locate.sidecar import parse_sidecar
from tb_mfu_plugin.trace.tables import CpuTable, OpInputs

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _kernel(name: str = "k", ts: float = 1.0, dur: float = 5.0, cat: str = "kernel", **args: Any) -> dict[str, Any]:
    a = {"device": 0, "stream": 7, "correlation": 1, "blocks per SM": 2.0, "est. achieved occupancy %": 50, **args}
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": a}


def _write(tmp_path: Path, events: list[dict[str, Any]], **header: Any) -> Path:
    b = TraceBuilder()
    b.events = events
    b.extra = header
    return b.write(tmp_path / "rank0.1.pt.trace.json", gz=False)


def _raw(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "rank0.1.pt.trace.json"
    p.write_text(text)
    return p


def _note(notes: list[str], word: str) -> None:
    assert any(word in n for n in notes), notes


def test_integers_beyond_int64_become_unknown_ids(tmp_path: Path) -> None:
    big = 2**64 + 5
    t = decode_trace(
        str(
            _write(
                tmp_path,
                [
                    _kernel(device=big, stream=2**70, correlation=-(2**65)),
                    {**_kernel(ts=9.0), "pid": big, "tid": 2**63},
                ],
            )
        )
    )
    assert t.gpu.stream.tolist() == [-1, 7] and t.gpu.correlation.tolist() == [-1, 1]
    assert t.gpu.device.tolist() == [0, 0]  # unknown device -> Kineto's pid; the huge pid -> unknown
    _note(t.meta.notes, "beyond 64 bits")


def test_unicode_digits_are_labels_not_numbers(tmp_path: Path) -> None:
    """ "²".isdigit() is True but int("²") raises: such ids are labels."""
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": "²", "tid": "١٢", "ts": 1.0, "dur": 1.0},
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": "12", "tid": "²", "ts": 2.0, "dur": 1.0},
    ]
    t = decode_trace(str(_write(tmp_path, [*ev, _kernel()])))
    assert t.cpu.pid.tolist() == [t.cpu.pid[0], 12] and t.cpu.pid[0] < -1
    assert t.cpu.tid[0] != t.cpu.tid[1] and t.cpu.tid[1] == t.cpu.pid[0]  # one label, one id


def test_device_ids_do_not_wrap_to_int32(tmp_path: Path) -> None:
    t = decode_trace(str(_write(tmp_path, [_kernel(device=2**32), _kernel(device=0, ts=2.0)])))
    assert sorted(t.gpu.device.tolist()) == [0, 2**32]


def test_impossible_measures_are_clamped_with_notes(tmp_path: Path) -> None:
    events = [
        _kernel("Memcpy HtoD (Pageable -> Device)", cat="gpu_memcpy", bytes=-(2**40)),
        _kernel("Memcpy HtoD (Pageable -> Device)", ts=2.0, cat="gpu_memcpy", bytes=2**62),
        _kernel("Memcpy HtoD (Pageable -> Device)", ts=3.0, cat="gpu_memcpy", bytes=4096),
        _kernel(ts=4.0, **{"est. achieved occupancy %": -10}),
        _kernel(ts=5.0, **{"est. achieved occupancy %": 1.18e19, "blocks per SM": -3}),
        _kernel(ts=6.0, dur=-50.0, grid=[2**40, 2**40, 2**40], block=[128, 1, 1]),
        _kernel(ts=1e308, dur=1e308),
        _kernel(ts=7.0, dur=1e300),
    ]
    t = decode_trace(str(_write(tmp_path, events)))
    g = t.gpu
    assert g.bytes.tolist()[:3] == [-1, -1, 4096]
    assert np.isnan(g.occupancy_pct[3:5]).all() and np.isnan(g.blocks_per_sm[4])
    assert len(g) == 7  # the event at ts=1e308 is dropped
    assert g.dur[5] == 0.0 and g.dur[6] == 0.0 and (g.dur >= 0).all() and np.isfinite(g.end).all()
    assert g.grid_blocks[5] == -1 and g.block_threads[5] == 128
    for word in ("byte count", "occupancy", "timestamp", "duration", "grid/block", "per SM"):
        _note(t.meta.notes, word)


def test_byte_sums_cannot_overflow(tmp_path: Path) -> None:
    """Eight 16 TiB copies: an int64 sum would be fine, but the cap keeps any count safe."""
    events = [_kernel("Memcpy HtoD (Pageable -> Device)", ts=10.0 * i, cat="gpu_memcpy", bytes=2**44) for i in range(8)]
    (r,) = analyze_file(single_file_run(str(_write(tmp_path, events))).files[0], "w")
    assert r.error is None and r.summary is not None
    assert r.summary.h2d_bytes_per_step == 8 * 2**44


def test_header_values_that_are_not_plain_are_dropped(tmp_path: Path) -> None:
    nested = "[" * 100 + "]" * 100
    text = (
        '{"deviceProperties": [{"id": 0, "name": {"a": 1}, "numSms": 132}],'
        f' "distributedInfo": {{"rank": "x", "world_size": 2, "pg_config": {nested}}},'
        f' "traceEvents": [{json.dumps(_kernel())}]}}'
    )
    t = decode_trace(str(_raw(tmp_path, text)))
    assert t.meta.device_properties == [{"id": 0, "numSms": 132}]
    assert t.meta.distributed_info is None
    _note(t.meta.notes, "distributedInfo")
    text = text.replace(nested, "[]")
    t = decode_trace(str(_raw(tmp_path, text)))
    assert t.meta.distributed_info == {"world_size": 2, "pg_config": []}
    _note(t.meta.notes, "distributedInfo.rank")


@pytest.mark.parametrize("where", ["events", "args", "header", "deviceProperties", "distributedInfo"])
def test_json_nested_1000_deep_is_a_one_line_error(tmp_path: Path, where: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    kernel = json.dumps(_kernel())
    body = {
        "events": f'{{"traceEvents": [{deep}]}}',
        "args": f'{{"traceEvents": [{kernel[:-2]}, "x": {deep}}}}}]}}',
        "header": f'{{"x": {deep}, "traceEvents": [{kernel}]}}',
        "deviceProperties": f'{{"deviceProperties": [{{"id": {deep}}}], "traceEvents": [{kernel}]}}',
        "distributedInfo": f'{{"distributedInfo": {{"a": {deep}}}, "traceEvents": [{kernel}]}}',
    }[where]
    with pytest.raises(TraceError) as err:
        decode_trace(str(_raw(tmp_path, body)))
    assert "\n" not in str(err.value)
    with pytest.raises(TraceError, match="nested too deeply"):  # an unknown key, skipped by msgspec, still recurses
        parse_sidecar(b'{"x": ' + deep.encode() + b', "flops_per_step": 1e12}')


def test_step_numbers_too_large_are_not_markers(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#99999999999999999999999",
            "pid": 100,
            "tid": 100,
            "ts": 0.0,
            "dur": 100.0,
        }
    )
    b.launch_kernel("k", 1.0, 2.0, 5.0)
    (r,) = analyze_file(single_file_run(str(b.write(tmp_path / "a.json"))).files[0], "w")
    assert r.error is None and "no_step_markers" in r.flags
    _note(r.notes, "fits 64 bits")


def test_gpu_only_trace_is_one_flagged_step(tmp_path: Path) -> None:
    (r,) = analyze_file(single_file_run(str(_write(tmp_path, [_kernel(), _kernel(ts=10.0)]))).files[0], "w")
    assert r.error is None and r.summary is not None and r.summary.steps == 1
    assert "gpu_only_trace" in r.flags and "no_step_markers" in r.flags
    assert r.summary.kernel_time_share == pytest.approx(10 / 14)


def test_hostile_input_dims_give_unknown_flops() -> None:
    raw = json.dumps([[10**9, 10**9], [10**9, 10**9]]).encode()
    assert flops.op_flops("aten::mm", OpInputs(raw, None, None)) is None
    neg = json.dumps([[-4, 8], [8, 16]]).encode()
    assert flops.op_flops("aten::mm", OpInputs(neg, None, None)) is None
    ok = json.dumps([[4, 8], [8, 16]]).encode()
    assert flops.op_flops("aten::mm", OpInputs(ok, None, None)) == 2 * 4 * 8 * 16
    # four ops, the first record twice: each op counts, each distinct record is judged once
    records = [OpInputs(raw, None, None), OpInputs(neg, None, None), OpInputs(ok, None, None)]
    n = 4
    zeros = np.zeros(n)
    cpu = CpuTable(
        kind=np.zeros(n, np.int8),
        name=np.zeros(n, np.int32),
        ts=zeros,
        dur=zeros,
        pid=np.zeros(n, np.int64),
        tid=np.zeros(n, np.int64),
        external_id=np.full(n, -1),
        correlation=np.full(n, -1),
        flops=np.full(n, np.nan),
        input_id=np.array([0, 1, 2, 0], np.int32),
        input_records=records,
    )
    assert flops.implausible_input_ops(["aten::mm"], cpu) == 3
    deep = b"[" * 5000 + b"]" * 5000
    assert flops.op_flops("aten::mm", OpInputs(deep, None, None)) is None


def test_absurd_shapes_on_a_real_trace_leave_mfu_unknown_with_a_note(tmp_path: Path) -> None:
    import gzip

    (src,) = (SAMPLES / "pageable_copy_loop").glob("*.pt.trace.json.gz")
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::mm":
            e["args"]["Input Dims"] = [[10**9, 10**9], [10**9, 10**9]]
    p = tmp_path / "rank0.1.pt.trace.json"
    p.write_text(json.dumps(doc))
    (r,) = analyze_file(single_file_run(str(p)).files[0], "rank0")
    assert r.error is None and r.summary is not None
    assert r.summary.mfu is None or r.summary.mfu < 1
    _note(r.notes, "impossible recorded shapes")


def test_any_exception_in_one_file_stays_in_that_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for run in ("a_bad", "b_good"):
        b = TraceBuilder()
        b.step(1, 0, 100)
        b.launch_kernel("boom" if run == "a_bad" else "k", 1.0, 2.0, 5.0)
        b.write(tmp_path / run / "rank0.1.pt.trace.json.gz")
    from tb_mfu_plugin.reporting import trace as reporting_trace

    real = reporting_trace.device_report

    def flaky(tables: Any, *args: Any, **kwargs: Any) -> Any:
        if "boom" in tables.names:
            raise RecursionError("deep\nmessage")
        return real(tables, *args, **kwargs)

    monkeypatch.setattr(reporting_trace, "device_report", flaky)
    report = analyze_path(str(tmp_path))
    bad, good = (r.workers[0] for r in report.runs)
    assert bad.error == "analysis failed: RecursionError: deep message"
    assert good.error is None and good.summary is not None
    monkeypatch.setattr(pipeline, "decode_trace", lambda *a, **k: (_ for _ in ()).throw(OverflowError("x")))
    (r,) = analyze_file(single_file_run(str(tmp_path / "b_good" / "rank0.1.pt.trace.json.gz")).files[0], "w")
    assert r.error == "decoding failed: OverflowError: x"


def test_cli_reports_the_good_runs_of_a_logdir_with_bad_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.launch_kernel("k", 1.0, 2.0, 5.0)
    b.write(tmp_path / "good" / "rank0.1.pt.trace.json.gz")
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "rank0.1.pt.trace.json").write_text('{"traceEvents": [' + "[" * 3000 + "]" * 3000 + "]}")
    (tmp_path / "gpu_only").mkdir()
    (tmp_path / "gpu_only" / "rank0.1.pt.trace.json").write_text(json.dumps({"traceEvents": [_kernel()]}))
    assert main(["analyze", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_run = {r["name"]: r["workers"][0] for r in out["runs"]}
    assert by_run["good"]["error"] is None and by_run["gpu_only"]["error"] is None
    assert by_run["deep"]["error"] and "\n" not in by_run["deep"]["error"]
