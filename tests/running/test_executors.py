"""Files analysed in local processes: the same reports as one after another, one file's
failure (an exception, a killed process) stays that file's, and the progress covers all files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport, to_json
from tb_mfu_plugin.cli import main
from tb_mfu_plugin.running.executors import ProcessExecutor, SerialExecutor, open_executor
from tb_mfu_plugin.running.flags import MAX_DEFAULT_WORKERS, default_workers
from tb_mfu_plugin.running.jobs import FileJob, decode_reports, encode_reports, usable_cores
from tb_mfu_plugin.running.pipeline import analyze_file, analyze_path, analyze_paths
from tb_mfu_plugin.trace.locate.discover import discover_runs
from tb_mfu_plugin.trace.locate.files import uncompressed_size

MULTI = ["ddp_4gpu", "tpdp_4gpu"]


def _logdir(tmp_path: Path, runs: list[str]) -> Path:
    """A logdir of real sample runs (copied: a logdir of several runs)."""
    logdir = tmp_path / "logs"
    for r in runs:
        shutil.copytree(SAMPLES / r, logdir / r)
    return logdir


def _jobs(path: Path) -> list[FileJob]:
    return [FileJob(s, w.name) for r in discover_runs(str(path)) for w in r.workers for s in w.spans]


@pytest.mark.parametrize("run", MULTI)
def test_two_processes_give_the_serial_report(run: str) -> None:
    serial = analyze_path(str(SAMPLES / run), jobs=1)
    parallel = analyze_path(str(SAMPLES / run), jobs=2)
    assert [w.error for r in serial.runs for w in r.workers] == [None] * 4
    assert serial.runs[0].ranks is not None  # the ranks are compared, after all files are in
    assert to_json(parallel) == to_json(serial)


def test_a_logdir_of_runs_in_processes_keeps_the_discovery_order(tmp_path: Path) -> None:
    logdir = _logdir(tmp_path, [*MULTI, "gpt_sdpa_fused"])
    serial, parallel = analyze_path(str(logdir)), analyze_path(str(logdir), jobs=3)
    assert [r.name for r in parallel.runs] == [r.name for r in serial.runs] == sorted(r.name for r in serial.runs)
    assert to_json(parallel) == to_json(serial)


def test_compare_paths_share_one_executor_and_keep_their_reports_apart() -> None:
    a, b = SAMPLES / "gpt_naive_attention", SAMPLES / "gpt_sdpa_fused"
    both = analyze_paths([str(a), str(b)], jobs=2)
    assert [to_json(r) for r in both] == [to_json(analyze_path(str(a))), to_json(analyze_path(str(b)))]


def test_reports_cross_the_process_boundary_unchanged() -> None:
    reports = analyze_file(_jobs(SAMPLES / "tp_2gpu")[0].span, "rank0")
    data = encode_reports(reports)
    assert data[:1] == b"M"  # msgpack, not pickle
    assert len(data) < len(to_json(reports))  # compact: reports, never tables
    assert to_json(decode_reports(data)) == to_json(reports)
    odd = [WorkerReport(name="w\udcff", span="", file="/x/\udcffbad.pt.trace.json", error="e")]
    assert decode_reports(encode_reports(odd)) == odd  # a file name that is not UTF-8


def _die_on_rank1(span, worker, options, progress):  # type: ignore[no-untyped-def]
    """A stand-in whose process dies (as when the kernel kills it for memory) on one file."""
    if worker == "rank1":
        os._exit(9)
    return analyze_file(span, worker, options, progress)


def _raise_on_rank2(span, worker, options, progress):  # type: ignore[no-untyped-def]
    if worker == "rank2":
        raise MemoryError("no room for rank2")
    return analyze_file(span, worker, options, progress)


def test_a_killed_process_costs_only_its_file() -> None:
    jobs = _jobs(SAMPLES / "ddp_4gpu")
    with ProcessExecutor(_die_on_rank1, AnalysisOptions(), 2) as ex:
        out = [f.result(timeout=120) for f in [ex.submit(j) for j in jobs]]
    by_worker = {r[0].name: r for r in out}
    assert by_worker["rank1"][0].error is not None and "process died" in by_worker["rank1"][0].error
    assert by_worker["rank1"][0].file == next(j.span.path.text for j in jobs if j.worker == "rank1")
    for w in ("rank0", "rank2", "rank3"):
        assert [r.error for r in by_worker[w]] == [None]
        assert to_json(by_worker[w]) == to_json(analyze_file(next(j.span for j in jobs if j.worker == w), w))


def test_an_exception_in_a_process_is_its_files_error() -> None:
    jobs = _jobs(SAMPLES / "ddp_4gpu")
    with ProcessExecutor(_raise_on_rank2, AnalysisOptions(), 2) as ex:
        futures = [ex.submit(j) for j in jobs]
        out = {j.worker: f.result(timeout=120) for j, f in zip(jobs, futures, strict=True)}
    assert out["rank2"][0].error == "analysis failed: MemoryError: no room for rank2"
    assert all(out[w][0].error is None and out[w][0].summary is not None for w in ("rank0", "rank1", "rank3"))


def _untyped_device_on_rank3(span, worker, options, progress):  # type: ignore[no-untyped-def]
    """A stand-in whose report breaks the report's types (a ``float`` device name), as a
    hostile ``deviceProperties`` once did: it encodes, and fails the parent's typed decode."""
    reports = analyze_file(span, worker, options, progress)
    if worker == "rank3":
        for r in reports:
            if r.device is not None:
                r.device.name = 1.5  # type: ignore[assignment]
    return reports


def test_a_report_that_does_not_decode_is_its_files_error_not_a_hang() -> None:
    # This hung `tb-mfu analyze --jobs 2` on the hostile corpus: the decode raised inside the
    # pool's done-callback, and the file's future never completed.
    jobs = _jobs(SAMPLES / "ddp_4gpu")
    with ProcessExecutor(_untyped_device_on_rank3, AnalysisOptions(), 2) as ex:
        futures = [ex.submit(j) for j in jobs]
        out = {j.worker: f.result(timeout=120) for j, f in zip(jobs, futures, strict=True)}
    error = out["rank3"][0].error
    assert error is not None and error.startswith("the analysis returned a report that does not decode")
    assert "device.name" in error
    assert all(out[w][0].error is None for w in ("rank0", "rank1", "rank2"))


def _report_the_mark(span, worker, options, progress):  # type: ignore[no-untyped-def]
    return [WorkerReport(name=worker, span=span.span, file=span.path.text, error=os.environ.get("TB_MFU_TEST_MARK"))]


def test_children_see_the_environment_of_their_pool_not_of_the_fork_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A live thread makes the pool use forkserver, as in TensorBoard. Its server keeps the
    # environment it started with; credentials or storage options set later (a plugin's
    # --mfu_storage_options) must still reach the children.
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        job = _jobs(SAMPLES / "ddp_4gpu")[0]
        for mark in ("first", "second"):
            monkeypatch.setenv("TB_MFU_TEST_MARK", mark)
            with ProcessExecutor(_report_the_mark, AnalysisOptions(), 2) as ex:
                assert ex.submit(job).result(timeout=120)[0].error == mark
    finally:
        stop.set()


def test_progress_over_all_files_from_processes_never_goes_back() -> None:
    run = SAMPLES / "tpdp_4gpu"
    calls: list[tuple[str, str, int, int]] = []
    report = analyze_path(str(run), progress=lambda *a: calls.append(a), jobs=2)
    files = sorted(run.glob("*.pt.trace.json.gz"))
    total = sum(uncompressed_size(str(f), f.stat().st_size) for f in files)
    done = [c[2] for c in calls]
    assert {c[3] for c in calls} == {total}
    assert done[0] == 0 and done[-1] == total and done == sorted(done)
    assert {(c[0], c[1]) for c in calls} == {(r.name, w.name) for r in report.runs for w in r.workers}


def test_the_executor_fits_the_work() -> None:
    opts = AnalysisOptions()
    with open_executor(analyze_file, opts, jobs=4, files=1) as one_file:
        assert isinstance(one_file, SerialExecutor)  # no process for a single file
    with open_executor(analyze_file, opts, jobs=1, files=10) as serial:
        assert isinstance(serial, SerialExecutor)
    with open_executor(analyze_file, opts, jobs=3, files=2) as two:
        assert isinstance(two, ProcessExecutor) and two.slots == 2
    with open_executor(analyze_file, opts, jobs=None, files=1000) as default:
        # one default on every face: the usable cores, at most 8 (running/flags.py)
        assert default.slots == default_workers() or (default_workers() == 1 and isinstance(default, SerialExecutor))
    assert usable_cores() == len(os.sched_getaffinity(0))
    assert default_workers() == min(usable_cores(), MAX_DEFAULT_WORKERS)


def test_cli_jobs_gives_the_same_json(capsys: pytest.CaptureFixture[str]) -> None:
    run = str(SAMPLES / "tp_4gpu")
    assert main(["analyze", run, "--json", "--jobs", "1"]) == 0
    serial = capsys.readouterr().out
    assert main(["analyze", run, "--json", "--jobs", "2"]) == 0
    assert capsys.readouterr().out == serial
    assert json.loads(serial)["runs"][0]["ranks"] is not None


@pytest.mark.parametrize("kind", ["zip", "gztar"])
def test_forked_processes_read_one_archive_without_mixing_their_reads(tmp_path: Path, kind: str) -> None:
    # The CLI forks its workers after listing the archive: they shared the parent's open
    # archive, and its read offset, and read each other's members ("Bad magic number").
    src = tmp_path / "src" / "team"
    shutil.copytree(SAMPLES / "ddp_4gpu", src / "ddp_4gpu", ignore=shutil.ignore_patterns("*.json"))
    archive = shutil.make_archive(str(tmp_path / "team traces"), kind, tmp_path / "src")
    outs = []
    for jobs in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", archive, "--json", "--jobs", jobs],
            capture_output=True,
            env={**os.environ, "TB_MFU_CACHE_DIR": ""},
            timeout=300,
        )
        assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
        outs.append(out.stdout)
    assert outs[0] == outs[1]
    (run,) = json.loads(outs[0])["runs"]
    assert [w["error"] for w in run["workers"]] == [None] * 4


def test_cli_refuses_a_bad_jobs_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["analyze", str(SAMPLES / "tp_2gpu"), "--jobs", "0"])
    assert "expected a positive integer" in capsys.readouterr().err


def test_msgpack_decoder_rejects_a_foreign_payload() -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_reports(b"M" + b"\xc1")
