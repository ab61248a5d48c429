"""What every remote store must do, written once: S3, GCS and Azure tests call these with
their own bucket or container (anything with ``upload_dir``, ``url`` and ``downloads``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import pytest
from located import reports_at, runs_by_name

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path

ROOT = Path(__file__).resolve().parents[2]
# Two real one-file runs and a real 2-GPU run, committed with the repository.
RUNS = ("low_sm_efficiency", "pageable_copy_loop", "ddp_2gpu")


class Store(Protocol):
    def upload_dir(self, local: Path, prefix: str) -> None: ...
    def url(self, key: str = "") -> str: ...
    def downloads(self) -> list[str]: ...


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def all_files_text(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def check_tab_mixes_it_with_local(store: Store, logdir: Path, serve: Any) -> None:
    """``--logdir_spec mine:LOCAL,theirs:URL``: both listed, ready, and the remote reports
    equal the local ones field for field."""
    store.upload_dir(logdir, "logs")
    mine = logdir.parent / "mine"
    (mine / RUNS[0]).mkdir(parents=True)
    for f in (logdir / RUNS[0]).iterdir():
        (mine / RUNS[0] / f.name).write_bytes(f.read_bytes())
    s = serve(logdir_spec=f"mine:{mine},theirs:{store.url('logs')}")
    s.settle()
    body = s.json("/runs")
    assert body["errors"] == []
    names = [r["name"] for r in body["runs"]]
    assert names == [f"mine/{RUNS[0]}"] + [f"theirs/{r}" for r in sorted(RUNS)]
    assert all(r["state"] == "ready" for r in body["runs"])
    expected = reports_at(logdir)
    for run in sorted(RUNS):
        report = s.json(f"/report?run={quote(f'theirs/{run}')}")
        remote = runs_by_name({"runs": [report]}, store.url("logs"))
        assert remote[f"theirs/{run}"] == {**expected[run], "name": f"theirs/{run}"}


def open_twice_unchanged(store: Store, logdir: Path, serve: Any, cache: Path) -> int:
    """Two servers, one after the other, over the same unchanged store and cache: the first
    downloads every trace, the second serves all from the cache and downloads nothing.
    Returns the downloads of the first."""
    store.upload_dir(logdir, "logs")
    first = serve(store.url("logs"), cache_dir=str(cache))
    first.settle()
    assert all(r["state"] == "ready" for r in first.json("/runs")["runs"])
    got = len(store.downloads())
    assert got >= 4  # every trace was downloaded once (sidecar probes are HEADs)
    second = serve(store.url("logs"), cache_dir=str(cache))
    second.settle()
    runs = second.json("/runs")["runs"]
    assert all(r["state"] == "ready" for r in runs)
    assert all(s["cached"] for r in runs for w in r["workers"] for s in w["spans"])
    assert len(store.downloads()) == got
    return got


def texts_a_user_sees(
    store: Store, logdir: Path, serve: Any, cache: Path, caplog: pytest.LogCaptureFixture, *cli_args: str
) -> list[str]:
    """Everything a user or a log reader sees of one store's runs: the API's report, the
    notebook's, the CLI's output, the tab's routes, the logs and the cache files."""
    store.upload_dir(logdir, "logs")
    caplog.set_level("DEBUG", logger="tb_mfu_plugin")
    caplog.set_level("INFO")
    seen = [to_json(analyze_path(store.url("logs"))).decode()]
    import tb_mfu_plugin as tm  # the notebook face: its frames and JSON are saved with a notebook

    notebook = tm.analyze(store.url("logs"))
    seen += [notebook.to_json().decode(), notebook.workers().to_string(), notebook.findings().to_string()]
    out = cli("analyze", store.url("logs"), *cli_args)
    seen += [out.stdout, out.stderr]
    s = serve(store.url("logs"), cache_dir=str(cache))
    s.settle()
    seen.append(s.get("/runs").get_data(as_text=True))
    seen += [s.get(f"/report?run={quote(r)}").get_data(as_text=True) for r in RUNS]
    assert "ddp_2gpu" in seen[0] and all_files_text(cache)
    return [*seen, caplog.text, all_files_text(cache)]
