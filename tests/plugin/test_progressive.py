"""The tab's run state while its files are analysed: /report gives the ranks done so far
and the files pending (202), then the whole run (200, the CLI's JSON); the analyses run in
processes sized by --mfu_workers / $TB_MFU_WORKERS, and the server answers meanwhile."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from tensorboard.plugins import base_plugin

from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.executors import ProcessExecutor
from tb_mfu_plugin.running.flags import CACHE_MAX_BYTES_ENV, SCHEDULER_ENV, WORKERS_ENV
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.tensorboard.entry import MfuPluginLoader
from tb_mfu_plugin.tensorboard.executor_choice import StartingPool
from tb_mfu_plugin.tensorboard.settings import DEFAULT_CACHE_MAX_BYTES, settings_from_flags

from .conftest import ROOT
from .test_plugin import cli_runs

SAMPLES = ROOT / "sample_traces"
RUN = "ddp_4gpu"
# A rank's own figures, which the run-level view (diagnosis.distributed) leaves as they are.
OWN = ("name", "span", "file", "error", "device", "summary", "steps", "top_kernels", "copies", "syncs")
ROW_OWN = ("worker", "rank", "step_time_us", "gpu_busy_share", "idle_share", "mfu")


@pytest.fixture
def four_ranks(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / RUN, logdir / RUN)
    return logdir


def test_report_grows_rank_by_rank_then_is_the_cli_json(serve, four_ranks):
    gates = {f"rank{i}": threading.Event() for i in range(4)}

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        assert gates[worker].wait(60)
        return analyze_file(span, worker, options, progress)

    s = serve(four_ranks, analyze=analyze, workers="4")
    s.wait_for(lambda: s.plugin._index.scanned)
    first = s.json(f"/report?run={RUN}", status=202)
    assert first["workers"] == [] and first["ranks"] is None
    assert [p["worker"] for p in first["pending"]] == ["rank0", "rank1", "rank2", "rank3"]

    gates["rank2"].set()  # the ranks arrive out of order; the report keeps the run's order
    s.wait_for(lambda: len(s.json(f"/report?run={RUN}", status=202)["workers"]) == 1)
    gates["rank0"].set()
    s.wait_for(lambda: len(s.json(f"/report?run={RUN}", status=202)["workers"]) == 2)
    partial = s.json(f"/report?run={RUN}", status=202)
    expected = cli_runs(four_ranks)[RUN]
    assert [w["name"] for w in partial["workers"]] == ["rank0", "rank2"]
    # Each rank's own figures as they come; the run-level view (clocks aligned across ranks,
    # arrivals in collectives, the straggler) joins when every rank is in.
    for got, want in zip(partial["workers"], [expected["workers"][0], expected["workers"][2]], strict=True):
        assert {k: got[k] for k in OWN} == {k: want[k] for k in OWN}
    rows = partial["ranks"]["ranks"]
    assert [r["worker"] for r in rows] == ["rank0", "rank2"]
    assert partial["ranks"]["straggler"] is None
    want_rows = [r for r in expected["ranks"]["ranks"] if r["worker"] in ("rank0", "rank2")]
    assert [{k: r[k] for k in ROW_OWN} for r in rows] == [{k: r[k] for k in ROW_OWN} for r in want_rows]
    assert all(r["clock_shift_us"] is None for r in rows)
    assert [p["worker"] for p in partial["pending"]] == ["rank1", "rank3"]
    assert all(p["state"] in ("queued", "loading") for p in partial["pending"])
    assert partial["state"] == "loading" and 0 < partial["progress"] < 1

    gates["rank1"].set()
    gates["rank3"].set()
    s.settle()
    full = s.json(f"/report?run={RUN}")
    assert "pending" not in full
    assert full == expected and full["ranks"] is not None


def test_analyses_run_in_processes_sized_by_the_flag(serve, four_ranks):
    s = serve(four_ranks, workers="2")
    s.settle()
    executor = s.plugin._cache._executor
    # local processes (started in the background; small files are analysed here until they answer)
    assert isinstance(executor, StartingPool) and isinstance(executor.pool, ProcessExecutor)
    assert executor.slots == executor.pool.slots == 2
    assert s.json(f"/report?run={RUN}") == cli_runs(four_ranks)[RUN]


def test_the_server_answers_while_processes_analyse(serve, tmp_path):
    logdir = tmp_path / "logs"
    for i in range(6):
        shutil.copytree(SAMPLES / "tpdp_4gpu", logdir / f"run{i}")
    s = serve(logdir, workers="2")
    s.wait_for(lambda: s.plugin._index.scanned)
    slowest, while_loading = 0.0, 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        runs = s.json("/runs")["runs"]
        slowest = max(slowest, time.monotonic() - t0)
        if not any(r["state"] in ("queued", "loading") for r in runs):
            break
        while_loading += 1
        time.sleep(0.05)
    assert while_loading >= 5  # the analyses (24 files) were still running on those requests
    assert slowest < 2.0  # a request never waits for an analysis (generous: the machine is shared)
    s.settle()
    assert all(r["state"] == "ready" for r in s.json("/runs")["runs"])


def test_a_reopened_run_is_ready_at_once_from_the_disk_cache(serve, four_ranks, tmp_path):
    cache_dir = str(tmp_path / "cache")
    first = serve(four_ranks, cache_dir=cache_dir)
    first.settle()
    report = first.json(f"/report?run={RUN}")

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        raise AssertionError("a cached file was analysed again")

    second = serve(four_ranks, cache_dir=cache_dir, analyze=analyze)
    assert second.plugin._index.wait_first_scan(60)
    assert second.json(f"/report?run={RUN}") == report  # 200 on the first request: nothing queued
    assert second.plugin._cache._executor is None and not second.plugin._cache._threads


def test_workers_scheduler_and_cache_cap_from_flags_or_environment(monkeypatch):
    for env in (WORKERS_ENV, SCHEDULER_ENV, CACHE_MAX_BYTES_ENV):
        monkeypatch.delenv(env, raising=False)
    parser = __import__("argparse").ArgumentParser()
    MfuPluginLoader().define_flags(parser)
    default = settings_from_flags(parser.parse_args([]))
    assert (default.workers, default.scheduler, default.cache_max_bytes) == (None, None, DEFAULT_CACHE_MAX_BYTES)
    monkeypatch.setenv(WORKERS_ENV, "3")
    monkeypatch.setenv(SCHEDULER_ENV, "tcp://sched:8786")
    monkeypatch.setenv(CACHE_MAX_BYTES_ENV, "512M")
    env = settings_from_flags(parser.parse_args([]))
    assert (env.workers, env.scheduler, env.cache_max_bytes) == (3, "tcp://sched:8786", 512 << 20)
    flags = parser.parse_args(["--mfu_workers", "5", "--mfu_scheduler", "local", "--mfu_cache_max_bytes", "1G"])
    given = settings_from_flags(flags)
    assert (given.workers, given.scheduler, given.cache_max_bytes) == (5, "local", 1 << 30)  # flags win
    for bad in (["--mfu_workers", "0"], ["--mfu_workers", "two"], ["--mfu_cache_max_bytes", "lots"]):
        with pytest.raises(base_plugin.FlagsError, match="--mfu_"):
            MfuPluginLoader().fix_flags(parser.parse_args(bad))


def test_a_scheduler_that_cannot_be_had_is_each_files_error(serve, four_ranks, monkeypatch):
    monkeypatch.setattr("tb_mfu_plugin.running.dask_executor.CONNECT_TIMEOUT_S", 1)
    s = serve(four_ranks, scheduler="tcp://127.0.0.1:9")
    s.settle(timeout=120)
    report = s.json(f"/report?run={RUN}")
    errors = [w["error"] for w in report["workers"]]
    assert len(errors) == 4 and all("Dask scheduler 'tcp://127.0.0.1:9'" in (e or "") for e in errors)


def test_a_partial_report_keeps_a_failed_file_as_its_error(serve, four_ranks):
    hold = threading.Event()

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        if worker == "rank1":
            raise RuntimeError("rank1 broke")
        assert hold.wait(60)
        return [WorkerReport(name=worker, span=span.span, file=span.path.text)]

    s = serve(four_ranks, analyze=analyze, workers="2")
    s.wait_for(lambda: s.plugin._index.scanned)
    s.wait_for(lambda: any(w["name"] == "rank1" for w in s.json(f"/report?run={RUN}", status=202)["workers"]))
    body = s.json(f"/report?run={RUN}", status=202)
    (bad,) = [w for w in body["workers"] if w["name"] == "rank1"]
    assert "rank1 broke" in bad["error"]
    hold.set()
    s.settle()
