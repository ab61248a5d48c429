"""Untrusted strings in the CLI: file names that are not UTF-8, control characters,
rich markup in run, worker and kernel names.

(A FIFO named like a trace and deeply nested JSON are the decoder's cases, tested
with the fuzz corpus; here every file can be opened and decoded.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from tb_mfu_plugin.analysis.report import Report, RunReport, WorkerReport
from tb_mfu_plugin.core.escape import escape_surrogates, for_rich, json_bytes, one_line

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = next((ROOT / "sample_traces" / "low_sm_efficiency").glob("*.pt.trace.json.gz"))
KERNEL = "evil[/]kernel[/bold]\x1b[31mRED\x07"


def test_escape_surrogates_writes_the_bad_bytes():
    name = os.fsdecode(b"worker\xff\xc3(.json")
    assert escape_surrogates(name) == "worker\\xff\\xc3(.json"
    assert escape_surrogates("plain ü [x]") == "plain ü [x]"
    assert escape_surrogates("\ud800") == "\\ud800"  # a surrogate that is no byte


def test_one_line_leaves_no_control_character():
    text = "a\nb\r\x1b[2J\x07\x9b\u2028\u202e\t" + os.fsdecode(b"\xff")
    assert one_line(text) == "a\\nb\\r\\x1b[2J\\x07\\x9b\\u2028\\u202e\\t\\xff"
    assert one_line("µs · ✓ [bold]") == "µs · ✓ [bold]"


def test_json_bytes_encodes_any_string():
    w = WorkerReport(name=os.fsdecode(b"w\xff"), span="", file=os.fsdecode(b"/x/w\xff.json"), error="e")
    with pytest.raises(UnicodeEncodeError):
        msgspec.json.encode(w)
    data = json.loads(json_bytes(w))
    assert data["name"] == "w\\xff" and data["file"] == "/x/w\\xff.json"
    assert json_bytes({"a": "plain"}) == b'{"a":"plain"}'


def test_for_rich_escapes_every_string_of_a_report():
    w = WorkerReport(name="[/]", span="", file="f", error="[/bold]\n")
    safe = for_rich(Report(tool_version="0", runs=[RunReport(name="[red]x", workers=[w])]))
    from rich.markup import render

    assert render(safe.runs[0].name).plain == "[red]x"
    assert render(safe.runs[0].workers[0].error).plain == "[/bold]\\n"


def _logdir(root: Path) -> Path:
    sys.path.append(str(ROOT / "tests"))
    from tracegen import TraceBuilder

    logdir = root / "logs"
    TraceBuilder().kernel_steps(KERNEL).write(logdir / "[bold]run[red]" / "w[bold]0.1.pt.trace.json.gz")
    os.makedirs(os.path.join(os.fsencode(logdir), b"bad\xffdir"))
    shutil.copy(SAMPLE, os.path.join(os.fsencode(logdir), b"bad\xffdir", b"worker\xfe.1.pt.trace.json.gz"))
    (logdir / "esc\nsplit").mkdir()
    (logdir / "esc\nsplit" / "w\x1b[2J\r.1.pt.trace.json.gz").write_bytes(b"not gzip")
    return logdir


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "tb_mfu_plugin.cli", *args], capture_output=True, env=env, timeout=120)


def test_hostile_names_in_the_tables_and_on_stderr(tmp_path):
    logdir = _logdir(tmp_path)
    r = _cli("analyze", str(logdir))
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    err = r.stderr.decode()
    out = r.stdout.decode()
    assert "Traceback" not in err
    # One error, on one line, its file name escaped.
    assert err.count("\n") == 1 and err.startswith("tb-mfu: ")
    assert "esc\\nsplit/w\\x1b[2J\\r.1.pt.trace.json.gz: " in err
    assert "\x1b" not in err + out and "\x07" not in out
    assert "evil[/]kernel[/bold]\\x1b[31mRED" in out  # shown as written, never as markup
    assert "[bold]run[red]" in out and "bad\\xffdir" in out and "worker\\xfe" in out


def test_hostile_names_in_json_and_compare(tmp_path):
    logdir = _logdir(tmp_path)
    r = _cli("analyze", str(logdir), "--json")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    runs = {run["name"]: run for run in json.loads(r.stdout)["runs"]}  # valid UTF-8 JSON
    assert set(runs) == {"[bold]run[red]", "bad\\xffdir", "esc\nsplit"}
    assert runs["[bold]run[red]"]["workers"][0]["top_kernels"][0]["name"] == KERNEL  # JSON keeps it verbatim
    assert runs["bad\\xffdir"]["workers"][0]["name"] == "worker\\xfe"
    a, b = logdir / "[bold]run[red]", os.fsdecode(os.path.join(os.fsencode(logdir), b"bad\xffdir"))
    r = _cli("compare", str(a), b)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr.decode(errors="replace")
    assert "w[bold]0.1.pt.trace.json.gz" in r.stdout.decode()
    r = _cli("compare", str(a), b, "--json")
    (pair,) = json.loads(r.stdout)["ranks"]
    assert r.returncode == 0 and pair["other"]["file"].endswith("worker\\xfe.1.pt.trace.json.gz")
