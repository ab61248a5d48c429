"""The run the tab opens on comes first, and while the worker processes start a small local file is
analysed in the server's own process at once (issue 34, part 1; executor_choice.StartingPool)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.executors import ProcessExecutor, SerialExecutor
from tb_mfu_plugin.running.jobs import FileJob, ProgressFn
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.tensorboard import executor_choice
from tb_mfu_plugin.tensorboard.cache import DONE
from tb_mfu_plugin.tensorboard.executor_choice import StartingPool
from tb_mfu_plugin.trace.locate.discover import SpanFile
from tb_mfu_plugin.trace.locate.listing import discover
from tb_mfu_plugin.trace.locate.locations import Location

from .conftest import SAMPLES, sample_file


def analyze_where(
    span: SpanFile, worker: str, options: AnalysisOptions, progress: ProgressFn | None = None
) -> list[WorkerReport]:
    """``analyze_file``, each report noting the process that ran it (module level: it is pickled)."""
    reports = analyze_file(span, worker, options, progress)
    for r in reports:
        r.notes.append(f"pid {os.getpid()}")
    return reports


def _job(run: str) -> FileJob:
    (r,) = discover(Location.local(str(SAMPLES / run)))
    (w,) = r.workers
    return FileJob(w.spans[0], w.name)


def _pid(reports: list[WorkerReport]) -> int:
    (note,) = [n for n in reports[0].notes if n.startswith("pid ")]
    return int(note.split()[1])


def test_a_small_file_is_analysed_here_until_the_processes_answer() -> None:
    options = AnalysisOptions()
    pool = StartingPool(ProcessExecutor(analyze_where, options, 2), SerialExecutor(analyze_where, options))
    try:
        first = pool.submit(_job("dataloader_stall")).result(120)
        assert first[0].summary is not None and first[0].error is None
        # the processes were still starting when it came (they start only now): here, at once
        assert _pid(first) == os.getpid()
        assert pool.ready.wait(120)  # ProcessExecutor.start: every process has answered
        later = pool.submit(_job("low_sm_efficiency")).result(120)
        assert later[0].summary is not None and _pid(later) != os.getpid()
    finally:
        pool.terminate()


def test_a_larger_or_remote_file_waits_for_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    options = AnalysisOptions()
    monkeypatch.setattr(executor_choice, "HERE_MAX_BYTES", 1000)  # every sample is larger
    pool = StartingPool(ProcessExecutor(analyze_where, options, 1), SerialExecutor(analyze_where, options))
    try:
        got = pool.submit(_job("dataloader_stall")).result(120)
        assert got[0].summary is not None and _pid(got) != os.getpid()
    finally:
        pool.terminate()


def test_the_run_the_tab_opens_on_is_analysed_first(serve, tmp_path: Path) -> None:
    """The first run listed is the one the tab opens on when the user has picked none: its file
    starts first, before the runs listed after it, with the real analysis (no stand-in)."""
    logdir = tmp_path / "logs"
    for run in ("pageable_copy_loop", "dataloader_stall", "low_sm_efficiency", "small_copies"):
        src = sample_file(run)
        (logdir / run).mkdir(parents=True)
        shutil.copy(src, logdir / run / src.name)
    s = serve(logdir, workers="1")
    s.settle()
    states = {st.key.run: st for st in s.plugin._cache._entries.values()}
    assert all(st.state == DONE and st.reports and st.reports[0].summary is not None for st in states.values())
    order = sorted(states, key=lambda run: states[run].started)
    assert order[0] == "dataloader_stall"  # listed first (runs are listed by name), analysed first
    assert isinstance(s.plugin._cache._executor, StartingPool)
