"""``tb-mfu annotate TRACE -o OUT`` (issue 36): the annotated trace loads with ``json`` and keeps
every original event as it was, adds counters per step, a finding instant per mark and the critical
path, writes OUT alone (plain, gzip or stdout), refuses a folder of several traces and the trace
itself, and opens in Perfetto's trace processor where one can run here."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SAMPLES
from tracegen import TraceBuilder

from tb_mfu_plugin.cli.annotate_events import MARKS_TID, PATH_TID

RUN = "gpt_naive_attention"


def _tb_mfu(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tb_mfu_plugin.cli", *args], capture_output=True, env=env, timeout=300)


def _sample(tmp_path: Path, run: str = RUN) -> Path:
    files = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
    if not files:
        pytest.skip(f"sample trace not recorded: {run}")
    logdir = tmp_path / "logs" / run
    logdir.mkdir(parents=True)
    return Path(shutil.copy(files[0], logdir))


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def _report(trace: Path) -> dict[str, Any]:
    out = _tb_mfu("analyze", str(trace), "--json")
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def _added(annotated: dict[str, Any], original: dict[str, Any]) -> list[dict[str, Any]]:
    """The events annotate added, after checking that the rest is the original, event for event."""
    events, kept = annotated["traceEvents"], original["traceEvents"]
    n = len(events) - len(kept)
    assert n > 0 and events[n:] == kept  # every original event, as it was, in its order
    assert {k: v for k, v in annotated.items() if k != "traceEvents"} == {
        k: v for k, v in original.items() if k != "traceEvents"
    }
    added: list[dict[str, Any]] = events[:n]
    return added


def test_the_annotated_trace_keeps_every_event_and_adds_the_diagnosis(tmp_path: Path) -> None:
    trace = _sample(tmp_path)
    before = sorted(p.name for p in trace.parent.iterdir())
    out = tmp_path / "out" / "annotated.json"
    out.parent.mkdir()
    done = _tb_mfu("annotate", str(trace), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in trace.parent.iterdir()) == before  # nothing written into the logdir
    assert sorted(p.name for p in out.parent.iterdir()) == ["annotated.json"]  # no temporary file left
    added = _added(_load(out), _load(trace))
    (w,) = _report(trace)["runs"][0]["workers"]
    t = w["timeline"]
    # a counter sample per analysed step and figure, at the step's start
    for name, key in (("MFU", "mfu"), ("SM efficiency", "sm_efficiency"), ("GPU busy", "gpu_busy_share")):
        samples = [e for e in added if e["ph"] == "C" and e["name"] == f"tb-mfu {name}"]
        assert [(e["ts"], e["args"]["%"]) for e in samples] == [
            (s["start_us"], pytest.approx(100 * s[key])) for s in w["steps"]
        ]
    # an instant per mark, on the lane of the mark, with the finding's words and gain
    instants = [e for e in added if e["ph"] == "i"]
    assert len(instants) == len(t["marks"])
    for e, m in zip(instants, sorted(t["marks"], key=lambda m: m["start_us"]), strict=True):
        f = next(f for f in w["findings"] if (f["id"], f["subject"]) == (m["id"], m["subject"]))
        assert e["args"]["finding"] == f["id"] and e["args"]["est_gain_us_per_step"] == f["est_gain_us_per_step"]
        assert e["args"]["recommendation"] == f["recommendation"] and e["ts"] == pytest.approx(
            t["start_us"] + m["start_us"]
        )
        lane = t["lanes"][m["lane"]] if m["lane"] is not None else None
        if lane is not None and lane["pid"] is not None:
            assert (e["s"], e["pid"], e["tid"]) == ("t", lane["pid"], lane["tid"])
    assert {e["args"]["finding"] for e in instants} == {f["id"] for f in w["findings"]}
    # the critical path on a track of its own, adding up to the step
    path = [e for e in added if e["ph"] == "X" and e["tid"] == PATH_TID]
    assert sum(e["dur"] for e in path) == pytest.approx(t["dur_us"], abs=1e-3 * len(path))
    # each finding's spans on tracks of their own that nest (Perfetto draws no overlapping slices)
    spans: dict[int, list[tuple[float, float]]] = {}
    for e in added:
        if e["ph"] == "X" and e["tid"] >= MARKS_TID:
            spans.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for track in spans.values():
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(sorted(track), sorted(track)[1:], strict=False))


def test_gzip_and_stdout_write_the_same_trace(tmp_path: Path) -> None:
    trace = _sample(tmp_path, "pageable_copy_loop")
    out = tmp_path / "annotated.json.gz"
    assert _tb_mfu("annotate", str(trace), "-o", str(out)).returncode == 0
    with gzip.open(out) as f:
        zipped = f.read()
    piped = _tb_mfu("annotate", str(trace), "-o", "-")
    assert piped.returncode == 0 and piped.stdout == zipped
    _added(json.loads(zipped), _load(trace))


def test_a_folder_of_several_traces_and_the_trace_itself_are_refused(tmp_path: Path) -> None:
    """(A folder of one trace is that trace.)"""
    files = sorted((SAMPLES / "ddp_2gpu").glob("*.pt.trace.json.gz"))
    if len(files) < 2:
        pytest.skip("sample trace not recorded: ddp_2gpu")
    run = tmp_path / "ddp"
    run.mkdir()
    for f in files:
        shutil.copy(f, run)
    done = _tb_mfu("annotate", str(run), "-o", str(tmp_path / "out.json"))
    assert done.returncode == 2 and b"name one trace file (2 found)" in done.stderr
    trace = run / files[0].name
    (run / files[1].name).unlink()  # a folder that holds one trace is that trace
    assert _tb_mfu("annotate", str(run), "-o", str(tmp_path / "one.json")).returncode == 0
    _added(_load(tmp_path / "one.json"), _load(trace))
    size = trace.stat().st_size
    done = _tb_mfu("annotate", str(trace), "-o", str(trace))
    assert done.returncode == 2 and b"is the trace itself" in done.stderr and trace.stat().st_size == size
    assert not (tmp_path / "out.json").exists()
    assert _tb_mfu("annotate", str(trace)).returncode == 2  # -o is required: nothing is written by default


def _bare(tmp_path: Path, layout: str) -> Path:
    """A small trace of two steps written as one line: a bare array, or an object whose events
    come after the other keys."""
    b = TraceBuilder()
    b.kernel_steps("void at::native::vectorized_elementwise_kernel<4>(int)", steps=2)
    doc = b.document()
    path = tmp_path / f"{layout}.pt.trace.json"
    if layout == "array":
        path.write_text(json.dumps(doc["traceEvents"]))
    else:
        events = doc.pop("traceEvents")
        path.write_text(json.dumps({**doc, "traceEvents": events}, separators=(",", ":")))
    return path


@pytest.mark.parametrize("layout", ["array", "keys_first"])
def test_other_layouts_of_the_events_array(tmp_path: Path, layout: str) -> None:
    trace = _bare(tmp_path, layout)
    out = tmp_path / "out.json"
    done = _tb_mfu("annotate", str(trace), "-o", str(out))
    assert done.returncode == 0, done.stderr
    annotated, original = _load(out), json.loads(trace.read_text())
    if layout == "array":
        assert annotated[-len(original) :] == original and len(annotated) > len(original)
    else:
        _added(annotated, original)


def test_the_annotated_trace_opens_in_perfettos_trace_processor(tmp_path: Path) -> None:
    """Perfetto's Python package runs the trace processor's binary, which it downloads on first use:
    where none can be had (no network), the test is skipped."""
    tp_mod = pytest.importorskip("perfetto.trace_processor")
    trace = _sample(tmp_path)
    out = tmp_path / "annotated.json"
    assert _tb_mfu("annotate", str(trace), "-o", str(out)).returncode == 0
    try:
        tp = tp_mod.TraceProcessor(trace=str(out))
    except Exception as exc:  # noqa: BLE001 - no binary to be had here
        pytest.skip(f"Perfetto's trace processor cannot start here ({type(exc).__name__})")
    try:
        names = {r.name for r in tp.query("select distinct name from counter_track")}
        assert {"tb-mfu MFU %", "tb-mfu GPU busy %"} <= names  # Perfetto names a counter "name arg"
        n = next(iter(tp.query("select count(*) as n from slice where category = 'tb-mfu'"))).n
        assert n > 0
        kernels = next(iter(tp.query("select count(*) as n from slice where category = 'kernel'"))).n
        original = sum(1 for e in _load(trace)["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X")
        assert kernels == original
    finally:
        tp.close()
