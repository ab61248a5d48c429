"""Logdirs behind a plain HTTP file server on loopback (Python's own, which answers no
ranges): read as one stream per file, with the same numbers as the local run."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.locate.listing import discover
from tb_mfu_plugin.trace.locate.locations import Location

from .conftest import RUNS, HttpServer
from .test_s3 import by_run, local_reports


def test_http_logdir_equals_the_local_run(http_server: HttpServer, logdir: Path):
    url = http_server.url("logs/")
    remote = by_run(json.loads(to_json(analyze_path(url))), url)
    assert sorted(remote) == sorted(RUNS)
    assert all(not w["error"] for r in remote.values() for w in r["workers"])
    assert remote == local_reports(logdir)


def test_http_files_are_identified_and_read_once(http_server: HttpServer, logdir: Path):
    runs = discover(Location.parse(http_server.url("logs/")))
    files = [f for r in runs for f in r.files]
    assert len(files) == 4
    # Python's server sends no ETag: its Last-Modified (with the size) identifies the file
    assert all(f.ident.startswith("Last-Modified:") and f.size > 0 for f in files)
    assert not [g for g in http_server.gets if g.endswith(".gz")]  # listing downloads no trace
    analyze_path(http_server.url("logs/"))
    traces = [g for g in http_server.gets if g.endswith(".gz")]
    assert sorted(traces) == sorted(f"/logs/{r.name}/{f.path.basename}" for r in runs for f in r.files)


def test_tab_reads_an_http_logdir(http_server: HttpServer, logdir: Path, serve):
    s = serve(http_server.url("logs"))
    s.settle()
    body = s.json("/runs")
    assert body["errors"] == [] and [r["name"] for r in body["runs"]] == sorted(RUNS)
    expected = local_reports(logdir)
    for run in RUNS:
        got = by_run({"runs": [s.json(f"/report?run={quote(run)}")]}, http_server.url("logs"))
        assert got == {run: expected[run]}


def test_a_signed_url_is_read_with_its_signature_and_shown_without_it(http_server: HttpServer, logdir: Path):
    """A presigned URL's query reaches the server (the file is read with it), and no face shows its
    signature or credential: not the CLI's JSON, tables and errors, not the notebook's frames,
    ``to_json`` or ``repr`` (a notebook's outputs are saved and shared)."""
    import tb_mfu_plugin as tm

    from .scenarios import cli

    trace = sorted((logdir / RUNS[0]).glob("*.pt.trace.json*"))[0]
    secret_sig, secret_cred = "5f1e0c9a7b3d2e4f6a8b9c0d1e2f3a4b", "AKIAEXAMPLESECRET0"
    query = f"?X-Amz-Credential={secret_cred}%2F20301231%2Fus-east-1%2Fs3&X-Amz-Signature={secret_sig}"
    url = http_server.url(f"logs/{RUNS[0]}/{trace.name}") + query
    r = tm.analyze(url)
    workers = r.workers()
    assert len(workers) >= 1 and workers["error"].isna().all() and workers["mfu"].notna().any()
    # the signature travels to the server (the query signs this object only: not its sidecars)
    assert [g for g in http_server.gets if g.endswith(f"X-Amz-Signature={secret_sig}")], http_server.gets
    assert "***" in workers["file"].iloc[0]
    out = cli("analyze", url, "--json")
    table = cli("analyze", url)
    missing = cli("analyze", http_server.url(f"logs/{RUNS[0]}/none.pt.trace.json.gz") + query)
    assert out.returncode == 0 and table.returncode == 0 and missing.returncode != 0
    seen = [
        r.to_json().decode(),
        repr(r),
        workers.to_string(),
        r.steps().to_string(),
        r.findings().to_string(),
        out.stdout + out.stderr,
        table.stdout + table.stderr,
        missing.stdout + missing.stderr,
    ]
    for text in seen:
        assert secret_sig not in text and secret_cred not in text
    with pytest.raises(FileNotFoundError) as exc:
        tm.analyze(http_server.url("logs/nowhere/") + query)
    assert secret_sig not in str(exc.value)
