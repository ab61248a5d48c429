"""Each analysis process runs under a memory cap (issue 22, section 5): a file that needs more
gets one line saying so, the other files keep their exact figures, and the parent goes on."""

from __future__ import annotations

import os

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.executors import ProcessExecutor, open_executor
from tb_mfu_plugin.running.jobs import FileJob
from tb_mfu_plugin.running.memory_cap import MEMORY_ENV, MIN_DEFAULT_BYTES, MemoryCap, default_cap_bytes, memory_cap
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.tensorboard.cache import AnalysisCache
from tb_mfu_plugin.tensorboard.executor_choice import StartingPool
from tb_mfu_plugin.trace.limits import MiB
from tb_mfu_plugin.trace.locate.discover import discover_runs

CAP = MemoryCap(512 * MiB, "--mfu_worker_max_memory")  # a worker starts at about 100 MB of data here


def _hog_on_rank1(span, worker, options, progress):  # type: ignore[no-untyped-def]
    """A stand-in whose analysis of one file wants 2 GiB at once, as a hostile file can make it."""
    if worker == "rank1":
        hoard = bytearray(2 << 30)
        return [hoard]  # never reached under the cap
    return analyze_file(span, worker, options, progress)


def _jobs(run: str) -> list[FileJob]:
    return [FileJob(s, w.name) for r in discover_runs(str(SAMPLES / run)) for w in r.workers for s in w.spans]


def test_a_file_over_the_cap_gets_one_line_and_the_others_their_figures() -> None:
    jobs = _jobs("ddp_4gpu")
    opts = AnalysisOptions()
    with ProcessExecutor(_hog_on_rank1, opts, 2, CAP) as ex:
        got = [ex.submit(j).result() for j in jobs]
        again = ex.submit(jobs[0]).result()  # the pool still works after it
    (hog,) = got[1]
    assert hog.error == "analysis ran out of its memory cap (512 MiB, --mfu_worker_max_memory)"
    for job, reports in zip(jobs, got, strict=True):
        if job.worker != "rank1":
            assert to_json(reports) == to_json(analyze_file(job.span, job.worker, opts))
    assert to_json(again) == to_json(got[0])


def test_the_cap_is_the_flag_the_variable_or_a_share_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert memory_cap("3GiB", 4, "--mfu_worker_max_memory") == MemoryCap(3 << 30, "--mfu_worker_max_memory")
    assert memory_cap("none", 4) is None and memory_cap("0", 4) is None
    default = memory_cap(None, 4, "--mfu_worker_max_memory")
    assert default is not None and default.bytes == default_cap_bytes(4) >= MIN_DEFAULT_BYTES
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert default_cap_bytes(1) <= max(MIN_DEFAULT_BYTES, total)  # never more than the machine
    monkeypatch.setenv(MEMORY_ENV, "1GiB")
    assert memory_cap(None, 4, "--mfu_worker_max_memory") == MemoryCap(1 << 30, f"${MEMORY_ENV}")
    for bad in ("lots", "-1G"):
        with pytest.raises(ValueError, match="--mfu_worker_max_memory"):
            memory_cap(bad, 4, "--mfu_worker_max_memory")


def test_the_cli_and_the_tab_put_their_processes_under_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_ENV, "700MiB")
    with open_executor(analyze_file, AnalysisOptions(), jobs=2, files=2) as ex:
        assert isinstance(ex, ProcessExecutor) and ex.memory == MemoryCap(700 * MiB, f"${MEMORY_ENV}")
    cache = AnalysisCache(AnalysisOptions(), None, 2, worker_memory="600MiB")
    try:
        ex2 = cache._executor_now()
        assert isinstance(ex2, StartingPool) and isinstance(ex2.pool, ProcessExecutor)
        assert ex2.pool.memory == MemoryCap(600 * MiB, "--mfu_worker_max_memory")
    finally:
        cache.close()
