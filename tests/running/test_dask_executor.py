"""Files analysed on a real Dask LocalCluster of 2 worker processes: the reports equal the
serial run's, field for field; a failed task is its file's error; Dask missing is one line."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.cli import main
from tb_mfu_plugin.running.executors import open_executor
from tb_mfu_plugin.running.jobs import FileJob, SchedulerError
from tb_mfu_plugin.running.pipeline import analyze_file, analyze_path
from tb_mfu_plugin.trace.locate.discover import discover_runs

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A LocalCluster of 2 worker processes, one thread each, shared by the module's tests."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=50
    ) as c:
        yield c.scheduler_address


def _raise_on_rank3(span, worker, options, progress):  # type: ignore[no-untyped-def]
    """A stand-in whose task raises on one file (run on a Dask worker)."""
    if worker == "rank3":
        raise OSError("disk gone under rank3")
    return analyze_file(span, worker, options, progress)


@pytest.mark.parametrize("run", ["ddp_4gpu", "tpdp_4gpu"])
def test_a_local_cluster_gives_the_serial_report_field_for_field(cluster: str, run: str) -> None:
    serial = analyze_path(str(SAMPLES / run))
    on_dask = analyze_path(str(SAMPLES / run), scheduler=cluster)
    assert [w.error for r in on_dask.runs for w in r.workers] == [None] * 4
    assert on_dask == serial  # the structs, every field
    assert to_json(on_dask) == to_json(serial)


def test_a_failed_task_is_its_files_error_and_the_rest_complete(cluster: str) -> None:
    runs = discover_runs(str(SAMPLES / "ddp_4gpu"))
    jobs = [FileJob(s, w.name) for r in runs for w in r.workers for s in w.spans]
    with open_executor(_raise_on_rank3, AnalysisOptions(), scheduler=cluster) as ex:
        assert ex.slots == 2
        out = {j.worker: f.result(timeout=300) for j, f in zip(jobs, [ex.submit(j) for j in jobs], strict=True)}
    (bad,) = out["rank3"]
    assert bad.error == "Dask task failed: OSError: disk gone under rank3"
    assert bad.file == next(j.span.path.text for j in jobs if j.worker == "rank3")
    for w in ("rank0", "rank1", "rank2"):
        assert to_json(out[w]) == to_json(analyze_file(next(j.span for j in jobs if j.worker == w), w))


def test_cli_scheduler_local_equals_jobs_1(capsys: pytest.CaptureFixture[str]) -> None:
    run = str(SAMPLES / "tp_2gpu")
    assert main(["analyze", run, "--json", "--jobs", "1"]) == 0
    serial = capsys.readouterr().out
    assert main(["analyze", run, "--json", "--scheduler", "local", "--jobs", "2"]) == 0
    assert capsys.readouterr().out == serial


def test_an_unreachable_scheduler_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("tb_mfu_plugin.running.dask_executor.CONNECT_TIMEOUT_S", 1)
    assert main(["analyze", str(SAMPLES / "tp_2gpu"), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tb-mfu: cannot use the Dask scheduler 'tcp://127.0.0.1:9'") and "\n" not in err


def test_dask_missing_says_how_to_install(capsys: pytest.CaptureFixture[str], monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    real_import = builtins.__import__

    def no_distributed(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(SchedulerError, match=r"pip install 'tb_mfu_plugin\[dask\]'"):
        open_executor(analyze_file, AnalysisOptions(), scheduler="local")
    assert main(["analyze", str(SAMPLES / "tp_2gpu"), "--scheduler", "local"]) == 2
    assert capsys.readouterr().err == "tb-mfu: --scheduler needs dask.distributed: pip install 'tb_mfu_plugin[dask]'\n"
