"""Logdirs behind a plain HTTP file server on loopback (Python's own, which answers no
ranges): read as one stream per file, with the same numbers as the local run."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.locate.listing import discover

from .conftest import RUNS, HttpServer
from .test_s3 import by_run, local_reports


def test_http_logdir_equals_the_local_run(http_server: HttpServer, logdir: Path):
    url = http_server.url("logs/")
    remote = by_run(json.loads(to_json(analyze_path(url))), url)
    assert sorted(remote) == sorted(RUNS)
    assert all(not w["error"] for r in remote.values() for w in r["workers"])
    assert remote == local_reports(logdir)


def test_http_files_are_identified_and_read_once(http_server: HttpServer, logdir: Path):
    runs = discover(http_server.url("logs/"))
    files = [f for r in runs for f in r.files]
    assert len(files) == 4
    # Python's server sends no ETag: its Last-Modified (with the size) identifies the file
    assert all(f.ident.startswith("Last-Modified:") and f.size > 0 for f in files)
    assert not [g for g in http_server.gets if g.endswith(".gz")]  # listing downloads no trace
    analyze_path(http_server.url("logs/"))
    traces = [g for g in http_server.gets if g.endswith(".gz")]
    assert sorted(traces) == sorted(f"/logs/{r.name}/{f.path.rsplit('/', 1)[1]}" for r in runs for f in r.files)


def test_tab_reads_an_http_logdir(http_server: HttpServer, logdir: Path, serve):
    s = serve(http_server.url("logs"))
    s.settle()
    body = s.json("/runs")
    assert body["errors"] == [] and [r["name"] for r in body["runs"]] == sorted(RUNS)
    expected = local_reports(logdir)
    for run in RUNS:
        got = by_run({"runs": [s.json(f"/report?run={quote(run)}")]}, http_server.url("logs"))
        assert got == {run: expected[run]}
