"""The tab on a logdir of hostile and broken files beside one good run.

Every run is served (200, or a clean error in JSON), the good run's numbers are
the CLI's, no server path leaks, and 50 concurrent ``/report`` requests made
while the analyses run all succeed.

Cases whose *decoder* fix belongs to the trace layer (caps on size, ratio,
string length and events; FIFO opened without blocking; int64 and recursion
fixes) are added by the fuzz corpus (tests/fuzz) after merge; here a FIFO is
refused before any open by the plugin's own file gate, and deep nesting is
isolated as one file's error whatever the decoder raises.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from werkzeug.test import Client

from tb_mfu_plugin.analysis.report import WorkerReport, to_json
from tb_mfu_plugin.running.pipeline import analyze_file, analyze_path
from tb_mfu_plugin.tensorboard import stored_reports

from .conftest import RUN_A, sample_file

GOOD = "good"
GOOD_SAMPLE = "gpt_compile"  # a real H200 run with an MFU
KERNEL_MARKUP = "evil[/]kernel[/bold]<b>x</b>\x1b[31m"


def _bytes_path(*parts: str | bytes) -> bytes:
    return os.path.join(*(os.fsencode(p) for p in parts))


def build_hostile_logdir(root: Path) -> Path:
    """One good run plus face-level hostile cases; returns the logdir."""
    from tracegen import TraceBuilder

    logdir = root / "logs"
    (logdir / GOOD).mkdir(parents=True)
    shutil.copy(sample_file(GOOD_SAMPLE), logdir / GOOD)
    good_bytes = sample_file(RUN_A).read_bytes()
    # File and directory names that are not UTF-8 (valid content).
    os.makedirs(_bytes_path(logdir, b"bad\xffdir"))
    for name in (b"worker\xff.1.pt.trace.json.gz", b"w\xc3\x28.2.pt.trace.json.gz"):
        with open(_bytes_path(logdir, b"bad\xffdir", name), "wb") as f:
            f.write(good_bytes)
    # Markup and HTML in run, worker and kernel names.
    TraceBuilder().kernel_steps(KERNEL_MARKUP).write(logdir / "[bold]run[red]" / "w[bold]0.1.pt.trace.json.gz")
    # Control characters in names, with a corrupt file.
    (logdir / "esc\nsplit\x1b[2J").mkdir()
    (logdir / "esc\nsplit\x1b[2J" / "w\x1b]0;title\x07\r.1.pt.trace.json.gz").write_bytes(b"not gzip")
    broken = logdir / "broken"
    broken.mkdir()
    os.mkfifo(broken / "fifo.1.pt.trace.json")  # would block any reader forever
    (broken / "empty.1.pt.trace.json").write_bytes(b"")
    (broken / "corrupt.1.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-8] + b"garbage!")
    (logdir / "fifo_sidecar").mkdir()
    shutil.copy(sample_file(RUN_A), logdir / "fifo_sidecar")
    os.mkfifo(logdir / "fifo_sidecar" / "tb_mfu.json")  # the analysis reads the sidecar too
    (logdir / "dangling_sidecar").mkdir()
    shutil.copy(sample_file(RUN_A), logdir / "dangling_sidecar")
    (logdir / "dangling_sidecar" / "tb_mfu.json").symlink_to(root / "nowhere")
    depth = 100_000
    (broken / "deep.1.pt.trace.json").write_text('{"traceEvents": ' + "[" * depth + "]" * depth + "}")
    event = '{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "args": %s}'
    nested = '{"a": ' * 5000 + "1" + "}" * 5000
    (broken / "deep_args.1.pt.trace.json").write_text('{"traceEvents": [' + event % nested + "]}")
    return logdir


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (k, *_strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _assert_clean(body: Any, server_root: Path) -> None:
    """Valid JSON already; also: no absolute server path, every error one line."""
    for s in _strings(body):
        assert str(server_root) not in s, s


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return build_hostile_logdir(tmp_path)


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def test_every_run_is_served_and_the_good_run_is_right(serve, hostile, tmp_path):
    before = _listing(hostile)
    s = serve(hostile, cache_dir=str(tmp_path / "cache"))  # the disk cache on: its writes must not kill anything
    s.settle(timeout=120)
    assert all(t.is_alive() for t in s.plugin._cache._threads)
    r = s.get("/runs")
    assert r.status_code == 200
    body = json.loads(r.get_data())  # valid UTF-8 JSON
    _assert_clean(body, tmp_path)
    runs = {run["name"]: run for run in body["runs"]}
    assert set(runs) == {
        GOOD,
        "bad\\xffdir",
        "[bold]run[red]",
        "esc\nsplit\x1b[2J",
        "broken",
        "fifo_sidecar",
        "dangling_sidecar",
    }
    assert runs["fifo_sidecar"]["state"] == "error"
    assert "its sidecar tb_mfu.json is not a regular file (a FIFO)" in runs["fifo_sidecar"]["errors"][0]
    assert runs["dangling_sidecar"]["state"] == "ready"  # no sidecar is no error
    assert runs[GOOD]["state"] == "ready" and runs[GOOD]["path"] == GOOD
    assert runs["bad\\xffdir"]["state"] == "ready"
    assert {w["name"] for w in runs["bad\\xffdir"]["workers"]} == {"worker\\xff", "w\\xc3("}
    assert runs["esc\nsplit\x1b[2J"]["state"] == "error"
    broken = {sp["file"]: sp for w in runs["broken"]["workers"] for sp in w["spans"]}
    assert set(broken) == {
        "fifo.1.pt.trace.json",
        "empty.1.pt.trace.json",
        "corrupt.1.pt.trace.json.gz",
        "deep.1.pt.trace.json",
        "deep_args.1.pt.trace.json",
    }
    assert "not a regular file (a FIFO)" in broken["fifo.1.pt.trace.json"]["errors"][0]
    for sp in broken.values():  # each file: its own one-line error, whatever raised it
        assert sp["state"] in ("done", "error") and len(sp["errors"]) == 1 and sp["errors"][0]
        assert "\n" not in sp["errors"][0]

    for name in runs:
        r = s.get(f"/report?run={quote(name, safe='')}")
        assert r.status_code == 200, (name, r.status_code)
        report = json.loads(r.get_data())
        _assert_clean(report, tmp_path)
        assert report["name"] == name
    # The good run: exactly the CLI's JSON of the same file, paths relative to the logdir.
    cli = json.loads(to_json(analyze_path(str(hostile / GOOD))))["runs"][0]
    served = json.loads(s.get(f"/report?run={GOOD}").get_data())
    assert served["workers"][0]["file"] == f"{GOOD}/{sample_file(GOOD_SAMPLE).name}"
    cli["workers"][0]["file"] = served["workers"][0]["file"]
    cli["name"] = GOOD
    assert served == cli
    assert 0 < served["workers"][0]["summary"]["mfu"] < 1
    # The markup kernel name comes back verbatim; the page renders it as text.
    markup = json.loads(s.get(f"/report?run={quote('[bold]run[red]', safe='')}").get_data())
    assert markup["workers"][0]["top_kernels"][0]["name"] == KERNEL_MARKUP
    # The files that are not UTF-8 were analysed like the good one and cached.
    bad = json.loads(s.get("/report?run=bad%5Cxffdir").get_data())
    steps = json.loads(to_json(analyze_path(str(sample_file(RUN_A)))))["runs"][0]["workers"][0]["summary"]["steps"]
    assert [w["summary"]["steps"] for w in bad["workers"]] == [steps, steps]
    assert any(f.endswith(".json") for f in os.listdir(tmp_path / "cache"))
    assert _listing(hostile) == before  # nothing written into the logdir


def test_fifty_concurrent_reports_while_loading_all_succeed(serve, hostile):
    """Requests are answered (202 with progress, or 200) while the one analysis thread works."""
    release = threading.Event()
    real = analyze_file

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        assert release.wait(60)  # hold the analyses until the requests are in flight
        return real(span, worker, options, progress)

    s = serve(hostile, analyze=analyze)
    s.wait_for(lambda: s.plugin._index.scanned)
    names = [run["name"] for run in s.json("/runs")["runs"]]
    app = s.client.application

    def one(i: int) -> tuple[int, Any]:
        r = Client(app).get(f"/data/plugin/mfu/report?run={quote(names[i % len(names)], safe='')}")
        return r.status_code, json.loads(r.get_data())

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        during = list(pool.map(one, range(50)))
        release.set()
        after_release = list(pool.map(one, range(50)))
    assert time.monotonic() - t0 < 60
    assert all(code == 202 and body["state"] in ("queued", "loading") for code, body in during), during[:3]
    assert all(code in (200, 202) for code, _ in after_release)
    s.settle(timeout=120)
    final = [one(i) for i in range(len(names))]
    assert all(code == 200 for code, _ in final)


def test_an_exception_while_writing_the_cache_costs_nothing_but_the_entry(serve, two_runs, tmp_path, monkeypatch):
    def broken_encoder(obj: Any, fn: Any = None) -> bytes:
        raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(stored_reports, "json_bytes", broken_encoder)
    s = serve(two_runs, cache_dir=str(tmp_path / "cache"))
    s.settle()
    assert all(r["state"] == "ready" for r in s.json("/runs")["runs"])
    cache = tmp_path / "cache"
    assert not [f for f in (os.listdir(cache) if cache.exists() else []) if not f.startswith(".tmp")]


def test_a_dead_analysis_thread_is_replaced(serve, two_runs):
    """Even a BaseException in one file is that file's error; and a thread that dies anyway is replaced."""

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        if "pageable" in span.path.text:
            raise SystemExit("a library called sys.exit")
        return [WorkerReport(name=worker, span=span.span, file=span.path.text)]

    s = serve(two_runs, analyze=analyze)
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert runs["pageable_copy_loop"]["state"] == "error"
    assert "SystemExit: a library called sys.exit" in runs["pageable_copy_loop"]["errors"][0]
    assert runs[RUN_A]["state"] == "ready"
    cache = s.plugin._cache
    for t in cache._threads:  # simulate a thread lost to anything the loop cannot catch
        t.is_alive = lambda: False  # type: ignore[method-assign]
    (two_runs / "later").mkdir()
    shutil.copy(sample_file(RUN_A), two_runs / "later")
    s.wait_for(lambda: "later" in {r["name"] for r in s.json("/runs?refresh=1")["runs"]})
    s.settle()
    assert {r["name"]: r["state"] for r in s.json("/runs")["runs"]}["later"] == "ready"


# -- paths --------------------------------------------------------------------------


def test_no_absolute_server_path_unless_asked(serve, two_runs, tmp_path):
    (two_runs / "broken").mkdir()
    (two_runs / "broken" / "w.1.pt.trace.json").write_text("{nope")
    s = serve(two_runs)
    s.settle()
    runs = s.json("/runs")
    _assert_clean(runs, tmp_path)
    assert runs["sources"] == [{"name": None, "path": "logs"}]
    assert {r["name"]: r["path"] for r in runs["runs"]} == {n: n for n in ("broken", RUN_A, "pageable_copy_loop")}
    for name in ("broken", RUN_A):
        report = s.json(f"/report?run={name}")
        _assert_clean(report, tmp_path)
        assert report["workers"][0]["file"].startswith(f"{name}/")
    _assert_clean(s.json(f"/compare?run={RUN_A}&run=broken"), tmp_path)

    full = serve(two_runs, show_full_paths=True)
    full.settle()
    assert full.json("/runs")["sources"][0]["path"] == os.path.realpath(two_runs)
    assert full.json(f"/report?run={RUN_A}")["workers"][0]["file"].startswith(os.path.realpath(two_runs))


def test_named_sources_show_their_names(serve, tmp_path):
    mine = tmp_path / "mine_logs"
    (mine / "r").mkdir(parents=True)
    shutil.copy(sample_file(RUN_A), mine / "r")
    s = serve(None, logdir_spec=f"mine:{mine}")
    s.settle()
    body = s.json("/runs")
    assert body["sources"] == [{"name": "mine", "path": "mine_logs"}]
    assert body["runs"][0]["path"] == "mine/r"
    assert s.json("/report?run=mine/r")["workers"][0]["file"] == f"mine/r/{sample_file(RUN_A).name}"


def _logdir_with_links(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "secret_run").mkdir(parents=True)
    shutil.copy(sample_file(RUN_A), outside / "secret_run")
    logdir = tmp_path / "logs"
    (logdir / "own").mkdir(parents=True)
    shutil.copy(sample_file(RUN_A), logdir / "own")
    (logdir / "linked_dir").symlink_to(outside / "secret_run", target_is_directory=True)
    (logdir / "linked_file").mkdir()
    (logdir / "linked_file" / "w.1.pt.trace.json.gz").symlink_to(outside / "secret_run" / sample_file(RUN_A).name)
    (logdir / "inner_link").mkdir()
    (logdir / "inner_link" / "w.1.pt.trace.json.gz").symlink_to(logdir / "own" / sample_file(RUN_A).name)
    (logdir / "linked_sidecar").mkdir()
    shutil.copy(sample_file(RUN_A), logdir / "linked_sidecar")
    (outside / "tb_mfu.json").write_text('{"version": 1, "flops_per_step": 1e12}')
    (logdir / "linked_sidecar" / "tb_mfu.json").symlink_to(outside / "tb_mfu.json")
    return logdir


def test_symlinks_out_of_the_logdir_are_followed_by_default(serve, tmp_path):
    s = serve(_logdir_with_links(tmp_path))
    s.settle()
    assert {r["name"]: r["state"] for r in s.json("/runs")["runs"]} == {
        "inner_link": "ready",
        "linked_dir": "ready",
        "linked_file": "ready",
        "linked_sidecar": "ready",
        "own": "ready",
    }


def test_confine_to_logdir_refuses_links_that_leave_it(serve, tmp_path):
    s = serve(_logdir_with_links(tmp_path), confine_to_logdir=True)
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert {n: r["state"] for n, r in runs.items()} == {
        "inner_link": "ready",
        "linked_dir": "error",
        "linked_file": "error",
        "linked_sidecar": "error",
        "own": "ready",
    }
    refused = "refused: a symbolic link leads outside the logdir (--mfu_confine_to_logdir)"
    assert refused in runs["linked_file"]["errors"][0]
    assert "its sidecar tb_mfu.json refused" in runs["linked_sidecar"]["errors"][0]
    report = s.json("/report?run=linked_dir")
    assert "outside the logdir" in report["workers"][0]["error"]
    _assert_clean(report, tmp_path)
