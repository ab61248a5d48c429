"""The run the tab opens on comes first, and while the worker processes start a small local file is
analysed in the server's own process at once (issue 34, part 1; executor_choice.StartingPool)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import psutil
import pytest

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.executors import ProcessExecutor, SerialExecutor
from tb_mfu_plugin.running.jobs import FileJob, ProgressFn
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.tensorboard import executor_choice
from tb_mfu_plugin.tensorboard.cache import DONE
from tb_mfu_plugin.tensorboard.executor_choice import StartingPool
from tb_mfu_plugin.tensorboard.file_queue import BACKGROUND, OPENED, VIEWED, FileQueue
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
        r.notes.append(f"sid {os.getsid(0)}")
    return reports


def _job(run: str) -> FileJob:
    (r,) = discover(Location.local(str(SAMPLES / run)))
    (w,) = r.workers
    return FileJob(w.spans[0], w.name)


def _pid(reports: list[WorkerReport], what: str = "pid") -> int:
    (note,) = [n for n in reports[0].notes if n.startswith(f"{what} ")]
    return int(note.split()[1])


def test_a_small_file_looked_at_is_analysed_here_until_the_processes_answer() -> None:
    options = AnalysisOptions()
    pool = StartingPool(ProcessExecutor(analyze_where, options, 2), SerialExecutor(analyze_where, options))
    try:
        first = pool.submit_first(_job("dataloader_stall")).result(120)
        assert first[0].summary is not None and first[0].error is None
        # the processes were still starting when it came (they start only now): here, at once
        assert _pid(first) == os.getpid()
        other = pool.submit(_job("pageable_copy_loop")).result(120)  # a file nobody looks at: processes
        assert other[0].summary is not None and _pid(other) != os.getpid()
        assert pool.ready.wait(120)  # ProcessExecutor.start: every process has answered
        later = pool.submit_first(_job("low_sm_efficiency")).result(120)
        assert later[0].summary is not None and _pid(later) != os.getpid()
        # in a session apart from the server's (own_session), which autogroup scheduling shares
        # the CPU with as a whole; one session for all the processes, the fork server's
        fork_server = psutil.Process(_pid(later)).ppid()
        assert _pid(later, "sid") == fork_server != os.getsid(0)
    finally:
        pool.terminate()


def test_a_larger_file_waits_for_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    options = AnalysisOptions()
    monkeypatch.setattr(executor_choice, "HERE_MAX_BYTES", 1000)  # every sample is larger
    pool = StartingPool(ProcessExecutor(analyze_where, options, 1), SerialExecutor(analyze_where, options))
    try:
        got = pool.submit_first(_job("dataloader_stall")).result(120)
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


def test_the_first_look_thread_takes_only_the_runs_looked_at() -> None:
    """The thread that never waits for the processes: it leaves the other files to the others, and
    takes a run looked at the moment it is asked for, even with every other thread busy."""
    q: FileQueue[str] = FileQueue(lambda k: k.startswith("http"), slots=1)
    for key in ("b1", "b2"):
        q.put(BACKGROUND, key)
    got: list[str] = []
    first_look = threading.Thread(target=lambda: got.append(q.get(OPENED)))
    first_look.start()
    first_look.join(0.2)
    assert first_look.is_alive() and not got  # background files are not its
    q.put(BACKGROUND, "b3")
    first_look.join(0.2)
    assert first_look.is_alive() and not got  # woken, and still not its
    q.put(VIEWED, "viewed")
    first_look.join(5)
    assert got == ["viewed"]
    assert [q.get() for _ in range(3)] == ["b1", "b2", "b3"]  # the others' threads take the rest in order
