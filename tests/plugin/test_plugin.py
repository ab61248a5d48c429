"""The plugin's routes through TensorBoard's WSGI app, with werkzeug's test Client."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import msgspec
import pytest
from tensorboard.plugins import base_plugin

from tb_mfu_plugin.analysis.report import Finding, WorkerReport, to_json
from tb_mfu_plugin.analysis.run.findings_compare import compare_findings
from tb_mfu_plugin.running.flags import CACHE_DIR_ENV
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.tensorboard import runs as runs_mod
from tb_mfu_plugin.tensorboard import stored_reports
from tb_mfu_plugin.tensorboard.entry import MfuPluginLoader
from tb_mfu_plugin.tensorboard.plugin import MfuPlugin, options_from_flags
from tb_mfu_plugin.tensorboard.runs import Source, parse_logdir_spec
from tb_mfu_plugin.trace.limits import DEFAULT_LIMITS
from tb_mfu_plugin.trace.locate.files import uncompressed_size

from .conftest import ROOT, RUN_A, RUN_B, later_span_name, make_context, sample_file


def cli_runs(path: Path) -> dict[str, dict]:
    """The CLI's ``--json`` object per run (the same code path as ``tb-mfu analyze --json``),
    with its paths as the tab shows them: relative to the logdir."""
    text = to_json(analyze_path(str(path))).decode()
    text = text.replace(json.dumps(os.path.abspath(path) + "/")[1:-1], "")
    return {r["name"]: r for r in json.loads(text)["runs"]}


# -- the happy path ---------------------------------------------------------------


def test_runs_lists_runs_workers_and_spans_with_load_state(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    body = s.json("/runs")
    assert body["scanned"] is True
    assert [r["name"] for r in body["runs"]] == [RUN_A, RUN_B]
    run = body["runs"][0]
    assert run["state"] == "ready" and run["progress"] == 1.0 and run["errors"] == []
    assert [w["name"] for w in run["workers"]] == ["rank0"]
    span = run["workers"][0]["spans"][0]
    assert span["state"] == "done" and span["progress"] == 1.0
    assert span["file"].endswith(".pt.trace.json.gz") and "/" not in span["file"]
    assert span["bytes_read"] == span["bytes_total"] > span["size"] > 0  # progress counts uncompressed bytes
    assert span["devices"] == [0]


def test_report_is_the_cli_json_object_of_that_run(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    expected = cli_runs(two_runs)
    for name in expected:
        r = s.get(f"/report?run={quote(name)}")
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("application/json")
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert json.loads(r.get_data()) == expected[name]


def test_compare_returns_each_runs_report(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    expected = cli_runs(two_runs)
    body = s.json(f"/compare?run={RUN_B}&run={RUN_A}")
    assert [e["name"] for e in body["runs"]] == [RUN_B, RUN_A]
    for e in body["runs"]:
        assert e["state"] == "ready"
        assert e["report"] == expected[e["name"]]
    # the Strategies view's table: one row per run, in the order asked, as `tb-mfu compare` computes it
    rows = body["strategies"]
    assert [r["run"] for r in rows] == [RUN_B, RUN_A]
    for r in rows:
        w = expected[r["run"]]["workers"][0]
        summary = w["summary"]
        assert r["ranks"] == 1 and r["strategy"] == [] and r["exposed_communication_us_per_step"] is None
        assert r["step_time_us"] == summary["step_time_us"]
        # each rank's headline MFU, the Overview's (analysis/run/strategies.py): one figure on every face
        assert r["mfu_mean"] == summary["mfu"] and r["mfu_min"] == r["mfu_max"] == summary["mfu"]
    # the findings fixed / new against the first run: analysis.run.findings_compare's, which the tab only looks up
    (pair,) = body["findings"]
    assert (pair["run"], pair["worker"], pair["baseline_worker"]) == (RUN_A, 0, 0)
    base, other = (msgspec.convert(expected[n]["workers"][0]["findings"], list[Finding]) for n in (RUN_B, RUN_A))
    assert pair["changes"] == json.loads(msgspec.json.encode(compare_findings(base, other)))


def test_static_bundle_is_served_with_its_type(serve, two_runs):
    s = serve(two_runs)
    r = s.get("/index.js")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/javascript")
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    text = r.get_data(as_text=True)
    assert "render" in text and len(text) > 10_000
    # Only allow-listed files: no directory listing, no sources, no traversal.
    for route in ("/static/index.js", "/plugin.py", "/index.css", "/../plugin.py", "/%2e%2e/plugin.py", "/"):
        assert s.get(route).status_code == 404, route


def test_frontend_metadata_and_entry_point(monkeypatch):
    from importlib import metadata

    # load() puts the tab's SIGTERM/SIGINT handler first (shutdown.py): not in the test process
    monkeypatch.setattr("tb_mfu_plugin.tensorboard.shutdown.install", lambda: True)

    eps = [ep for ep in metadata.entry_points(group="tensorboard_plugins") if ep.name == "mfu"]
    assert eps and eps[0].value == "tb_mfu_plugin.tensorboard.entry:MfuPluginLoader"
    plugin = MfuPluginLoader().load(make_context(None))
    assert isinstance(plugin, MfuPlugin) and plugin.plugin_name == "mfu"
    meta = plugin.frontend_metadata()
    assert meta.es_module_path == "/index.js" and meta.tab_name == "MFU"


def test_entry_module_imports_almost_nothing():
    code = (
        "import sys\n"
        "import tb_mfu_plugin.tensorboard.entry\n"
        "heavy = [m for m in ('numpy', 'pandas', 'msgspec', 'tb_mfu_plugin.tensorboard.plugin',"
        " 'tb_mfu_plugin.running.pipeline', 'tb_mfu_plugin.analysis', 'werkzeug') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_loader_defines_and_checks_its_flags():
    import argparse

    parser = argparse.ArgumentParser()
    loader = MfuPluginLoader()
    loader.define_flags(parser)
    flags = parser.parse_args(["--mfu_cache_dir", "/tmp/x", "--mfu_peak_tflops", "989.4"])
    assert flags.mfu_cache_dir == "/tmp/x" and options_from_flags(flags).peak_tflops == 989.4
    loader.fix_flags(flags)
    with pytest.raises(base_plugin.FlagsError):
        loader.fix_flags(parser.parse_args(["--mfu_peak_tflops", "-1"]))
    # the trace caps of docs/limits.md, as --mfu_max_* flags
    flags = parser.parse_args(["--mfu_max_trace_bytes", "512M", "--mfu_max_devices", "4"])
    loader.fix_flags(flags)
    limits = options_from_flags(flags).limits
    assert (limits.max_trace_bytes, limits.max_devices) == (512 << 20, 4)
    assert limits.max_events == DEFAULT_LIMITS.max_events
    with pytest.raises(base_plugin.FlagsError, match="mfu_max_events"):
        loader.fix_flags(parser.parse_args(["--mfu_max_events", "lots"]))


def test_a_trace_over_a_cap_is_its_runs_error_and_names_the_flag(serve, two_runs):
    s = serve(two_runs, max_trace_bytes="1K")
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert runs[RUN_A]["state"] == "error"
    (error,) = runs[RUN_A]["errors"]
    assert "max_trace_bytes" in error and "--mfu_max_trace_bytes" in error


# -- bad requests -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "nope",
        f"../{RUN_A}",
        "..",
        "../../etc/passwd",
        "/etc/passwd",
        f"{RUN_A}/../{RUN_B}",
        f"{RUN_A}/",
        f"./{RUN_A}",
        str(ROOT / "sample_traces" / RUN_A),
    ],
)
def test_unknown_or_traversal_names_are_404(serve, two_runs, name):
    s = serve(two_runs)
    s.settle()
    for route in (
        f"/report?run={quote(name, safe='')}",
        f"/compare?run={RUN_A}&run={quote(name, safe='')}",
    ):
        r = s.get(route)
        assert r.status_code == 404, (route, r.status_code)
        assert "Not found" in r.get_data(as_text=True)


@pytest.mark.parametrize(
    "route",
    ["/report", "/report?run=", "/report?run=a%00b", "/compare", "/compare?" + "&".join(["run=x"] * 9)],
)
def test_malformed_requests_are_400(serve, two_runs, route):
    s = serve(two_runs)
    s.settle()
    r = s.get(route)
    assert r.status_code == 400, (route, r.status_code, r.get_data(as_text=True))
    assert "Invalid argument" in r.get_data(as_text=True)


# -- empty, corrupt and changing logdirs ----------------------------------------------


def test_empty_logdir(serve, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    s = serve(empty)
    s.settle()
    assert s.plugin.is_active() is False
    body = s.json("/runs")
    assert body["runs"] == [] and body["scanned"] is True and body["errors"] == []
    assert s.get("/report?run=anything").status_code == 404
    assert s.get("/index.js").status_code == 200


def test_missing_logdir_is_reported_not_raised(serve, tmp_path):
    s = serve(tmp_path / "does-not-exist")
    s.settle()
    body = s.json("/runs")
    assert body["runs"] == []
    assert len(body["errors"]) == 1 and "no such file or directory" in body["errors"][0]


def test_no_logdir_at_all(serve):
    s = serve(None)
    s.settle()
    assert s.json("/runs")["runs"] == []


def test_a_run_whose_only_file_is_corrupt_shows_its_error_while_others_work(serve, two_runs):
    bad = two_runs / "broken"
    bad.mkdir()
    (bad / "worker0.1700000000000.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-8] + b"garbage!")
    s = serve(two_runs)
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert runs["broken"]["state"] == "error"
    assert runs["broken"]["errors"] and all("\n" not in e for e in runs["broken"]["errors"])
    assert runs[RUN_A]["state"] == "ready"
    report = s.json("/report?run=broken")
    assert report["name"] == "broken"
    assert len(report["workers"]) == 1 and report["workers"][0]["error"]
    assert report == cli_runs(two_runs)["broken"]
    good = s.json(f"/report?run={RUN_B}")
    assert good["workers"][0]["error"] is None and good["workers"][0]["summary"]["step_time_us"] > 0
    both = s.json(f"/compare?run={RUN_A}&run=broken")
    assert both["runs"][1]["state"] == "error" and both["runs"][1]["report"]["workers"][0]["error"]


def test_an_exception_in_the_analysis_is_one_runs_error(serve, two_runs):
    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        if RUN_B in span.path.text:
            raise RuntimeError("boom\nwith a second line")
        return [WorkerReport(name=worker, span=span.span, file=span.path.text)]

    s = serve(two_runs, analyze=analyze)
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert runs[RUN_B]["state"] == "error"
    assert runs[RUN_B]["errors"][0].endswith("boom with a second line")
    assert runs[RUN_A]["state"] == "ready"
    w = s.json(f"/report?run={RUN_B}")["workers"]
    assert len(w) == 1 and "boom" in w[0]["error"]


def test_new_runs_and_spans_appear_on_reload(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    assert len(s.json("/runs")["runs"]) == 2
    new = two_runs / "new_run"
    new.mkdir()
    shutil.copy(sample_file(RUN_A), new)
    shutil.copy(sample_file(RUN_B), two_runs / RUN_B / later_span_name(RUN_B))

    def seen() -> bool:
        runs = {r["name"]: r for r in s.json("/runs?refresh=1")["runs"]}
        return "new_run" in runs and len(runs[RUN_B]["workers"][0]["spans"]) == 2

    s.wait_for(seen)
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert runs["new_run"]["state"] == "ready"
    assert len(s.json(f"/report?run={RUN_B}")["workers"]) == 2


def test_report_is_202_with_progress_while_analysing(serve, two_runs):
    release = threading.Event()
    started = threading.Event()

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        progress(10_000_000)
        started.set()
        assert release.wait(30)
        return [WorkerReport(name=worker, span=span.span, file=span.path.text)]

    s = serve(two_runs, analyze=analyze)
    assert started.wait(30)
    t0 = time.monotonic()
    r = s.get(f"/report?run={RUN_A}")
    assert time.monotonic() - t0 < 1.0  # the request thread never waits for the analysis
    assert r.status_code == 202
    body = json.loads(r.get_data())
    assert body["name"] == RUN_A
    assert body["state"] in ("loading", "queued")
    runs = s.json("/runs")["runs"]
    assert {r["state"] for r in runs} <= {"queued", "loading"}
    loading = [sp for r in runs for w in r["workers"] for sp in w["spans"] if sp["state"] == "loading"]
    assert loading and 0 < loading[0]["progress"] < 1 and loading[0]["bytes_read"] == 10_000_000
    cmp = s.json(f"/compare?run={RUN_A}&run={RUN_B}")
    assert all(e["report"] is None for e in cmp["runs"])
    release.set()
    s.settle()
    assert s.get(f"/report?run={RUN_A}").status_code == 200


def test_the_requested_run_jumps_the_queue(serve, tmp_path):
    logdir = tmp_path / "logs"
    for i in range(4):
        (logdir / f"run{i}").mkdir(parents=True)
        (logdir / f"run{i}" / "w.1.pt.trace.json").write_text("{}")
    order: list[str] = []
    gate = threading.Event()

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        gate.wait(30)
        order.append(Path(span.path.text).parent.name)
        return [WorkerReport(name=worker, span=span.span, file=span.path.text)]

    s = serve(logdir, analyze=analyze)
    s.wait_for(lambda: s.plugin._index.scanned)
    s.wait_for(
        lambda: any(
            sp["state"] == "loading" for r in s.json("/runs")["runs"] for w in r["workers"] for sp in w["spans"]
        )
    )
    assert s.get("/report?run=run3").status_code == 202
    gate.set()
    s.settle()
    assert order[1] == "run3"  # right after the one already running


def test_is_active_never_blocks(serve, two_runs, monkeypatch):
    real = runs_mod.scan_sources

    def slow(*args):  # type: ignore[no-untyped-def]
        time.sleep(1.5)
        return real(*args)

    monkeypatch.setattr(runs_mod, "scan_sources", slow)
    s = serve(two_runs)
    t0 = time.monotonic()
    assert s.plugin.is_active() is False
    assert time.monotonic() - t0 < 0.2
    r = s.client.get("/data/plugins_listing")
    assert time.monotonic() - t0 < 0.5
    assert json.loads(r.get_data())["mfu"]["enabled"] is False
    s.wait_for(lambda: s.plugin.is_active())
    assert json.loads(s.client.get("/data/plugins_listing").get_data())["mfu"]["enabled"] is True


# -- sources ------------------------------------------------------------------------


def test_parse_logdir_spec():
    assert parse_logdir_spec("mine:/a/b,theirs:/c") == [Source("mine", "/a/b"), Source("theirs", "/c")]
    assert parse_logdir_spec("/a:b/c") == [Source(None, "/a:b/c")]
    assert parse_logdir_spec("s3://bucket/x") == [Source(None, "s3://bucket/x")]
    assert parse_logdir_spec("n:s3://bucket/x") == [Source("n", "s3://bucket/x")]


def test_logdir_spec_puts_a_teammates_folder_beside_mine(serve, tmp_path):
    mine, theirs = tmp_path / "mine_logs", tmp_path / "their_logs"
    for d, run in ((mine, RUN_A), (theirs, RUN_B)):
        d.mkdir()
        shutil.copy(sample_file(run), d)
    # a remote source that cannot be listed (nothing listens on loopback's port 9) is one error line
    s = serve(None, logdir_spec=f"mine:{mine},theirs:{theirs},far:http://127.0.0.1:9/logs/")
    s.settle()
    body = s.json("/runs")
    assert [r["name"] for r in body["runs"]] == ["mine", "theirs"]
    (error,) = body["errors"]
    assert error.startswith("http://127.0.0.1:9/logs/: ") and "\n" not in error
    assert s.json("/report?run=theirs")["workers"][0]["summary"]["steps"] > 0


# -- reads only, caches ----------------------------------------------------------------


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_disk_cache_is_atomic_outside_the_logdir_and_reused(serve, two_runs, tmp_path):
    before = _listing(two_runs)
    cache_dir = tmp_path / "user-cache"
    first = serve(two_runs, cache_dir=str(cache_dir))
    first.settle()
    report = first.json(f"/report?run={RUN_A}")
    entries = sorted(os.listdir(cache_dir))
    assert len(entries) == 2 and all(e.endswith(".json") and not e.startswith(".tmp") for e in entries)
    assert _listing(two_runs) == before  # nothing written into the logdir

    calls: list[str] = []

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        calls.append(span.path.text)
        raise AssertionError("should have come from the disk cache")

    second = serve(two_runs, cache_dir=str(cache_dir), analyze=analyze)
    second.settle()
    assert calls == []
    assert second.json(f"/report?run={RUN_A}") == report
    spans = [sp for r in second.json("/runs")["runs"] for w in r["workers"] for sp in w["spans"]]
    assert all(sp["cached"] for sp in spans)


def test_a_changed_file_is_analysed_again(serve, two_runs, tmp_path):
    cache_dir = tmp_path / "user-cache"
    s = serve(two_runs, cache_dir=str(cache_dir))
    s.settle()
    f = next((two_runs / RUN_A).glob("*.gz"))
    os.utime(f, (time.time() + 10, time.time() + 10))
    s.wait_for(lambda: s.json("/runs?refresh=1")["runs"][0]["workers"][0]["spans"][0]["mtime"] > time.time())
    s.settle()
    assert len(os.listdir(cache_dir)) == 3


def test_cache_dir_settings(monkeypatch, tmp_path):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert stored_reports.default_cache_dir() == str(tmp_path / "xdg" / "tb_mfu_plugin")
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env"))
    assert stored_reports.default_cache_dir() == str(tmp_path / "env")
    assert stored_reports.default_cache_dir("none") is None
    assert stored_reports.default_cache_dir(str(tmp_path / "flag")) == str(tmp_path / "flag")


def test_uncompressed_size_reads_the_gzip_trailer(tmp_path):
    data = b"x" * 100_000
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(data))
    assert uncompressed_size(str(p), p.stat().st_size) == len(data)
    q = tmp_path / "t.json"
    q.write_bytes(data)
    assert uncompressed_size(str(q), len(data)) == len(data)


# -- untrusted strings ------------------------------------------------------------------


def test_frontend_sources_never_parse_html():
    """Trace strings reach the page only as text: the sources never build HTML from strings."""
    src = ROOT / "frontend" / "src"
    bad = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser", "createContextualFragment")
    for p in src.rglob("*.ts"):
        text = p.read_text()
        for b in bad:
            assert b not in text, f"{p.name} uses {b}"


def test_a_planted_kernel_name_comes_back_verbatim_in_json(serve, tmp_path):
    from tracegen import TraceBuilder

    payload = '<img src=x onerror="window.__xss=1">'
    logdir = tmp_path / "logs"
    TraceBuilder().kernel_steps(payload).write(logdir / f"{payload.replace('/', '_')}" / "worker0.1.pt.trace.json.gz")
    s = serve(logdir)
    s.settle()
    runs = s.json("/runs")["runs"]
    assert [r["name"] for r in runs] == [payload]
    r = s.get(f"/report?run={quote(payload, safe='')}")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    kernels = json.loads(r.get_data())["workers"][0]["top_kernels"]
    assert kernels[0]["name"] == payload


def test_committed_bundle_matches_the_frontend_sources(tmp_path):
    """``npm ci && npm run build`` reproduces the committed static/index.js byte for byte."""
    frontend = ROOT / "frontend"
    if shutil.which("node") is None or not (frontend / "node_modules" / "esbuild").is_dir():
        pytest.skip("frontend dependencies not installed (cd frontend && npm ci)")
    out = tmp_path / "index.js"
    subprocess.run(
        ["node", "build.mjs"],
        cwd=frontend,
        check=True,
        capture_output=True,
        env={**os.environ, "MFU_OUTFILE": str(out)},
    )
    committed = ROOT / "tb_mfu_plugin" / "tensorboard" / "static" / "index.js"
    assert out.read_bytes() == committed.read_bytes(), "stale bundle: run 'cd frontend && npm run build'"


def test_a_new_or_changed_sidecar_reanalyses_the_run(serve, tmp_path):
    logdir = tmp_path / "logs"
    (logdir / "run").mkdir(parents=True)
    (logdir / "run" / "w.1.pt.trace.json").write_text("{}")
    calls: list[str] = []

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        calls.append(span.path.text)
        return [WorkerReport(name=worker, span=span.span, file=span.path.text)]

    s = serve(logdir, analyze=analyze)
    s.settle()
    assert len(calls) == 1
    (logdir / "run" / "tb_mfu.json").write_text('{"version": 1, "flops_per_step": 1e12}')
    s.wait_for(lambda: (s.json("/runs?refresh=1"), len(calls) == 2)[1])
    s.settle()
    s.json("/runs")
    assert len(calls) == 2  # and only once
