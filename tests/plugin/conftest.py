"""Helpers for the plugin's WSGI tests: a plugin over a tmp logdir, served through
TensorBoard's own WSGI app (routing, error handling, security checks)."""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_mfu_plugin.tensorboard.cache import AnalysisCache
from tb_mfu_plugin.tensorboard.plugin import MfuPlugin

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
PREFIX = "/data/plugin/mfu"
# Two small real H200 runs of one span each, committed with the repository: the
# plugin's tests never depend on ../shared.
RUN_A, RUN_B = "low_sm_efficiency", "pageable_copy_loop"


def sample_file(run: str = RUN_A) -> Path:
    """The trace file of a one-file run in ``sample_traces/``."""
    (path,) = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
    return path


def later_span_name(run: str = RUN_A) -> str:
    """A file name for a second span of ``run``'s worker (a later timestamp)."""
    worker, stamp, rest = sample_file(run).name.split(".", 2)
    return f"{worker}.{int(stamp) + 1}.{rest}"


class NoMultiplexer:
    """Stands for ``context.multiplexer``: any use of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the plugin touched context.multiplexer.{name}")


class Served:
    def __init__(self, plugin: MfuPlugin) -> None:
        self.plugin = plugin
        self.client = Client(application.TensorBoardWSGI([plugin]))

    def get(self, route: str, **kw: Any):  # type: ignore[no-untyped-def]
        return self.client.get(PREFIX + route, **kw)

    def json(self, route: str, status: int = 200) -> Any:
        r = self.get(route)
        assert r.status_code == status, (r.status_code, r.get_data(as_text=True)[:500])
        return json.loads(r.get_data())

    def settle(self, timeout: float = 120.0) -> None:
        """Wait for the first scan and every queued analysis."""
        assert self.plugin._index.wait_first_scan(timeout)
        assert wait_idle(self.plugin._cache, timeout)

    def wait_for(self, pred: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.05)
        raise AssertionError("condition not met in time")


def wait_idle(cache: AnalysisCache, timeout: float) -> bool:
    """True once nothing is queued or running in ``cache``, False after ``timeout`` seconds.

    The tests' own: the server never waits for its analyses (it answers 202 meanwhile), so the
    cache has no such call; this polls the count of files it still has to finish."""
    deadline = time.monotonic() + timeout
    while True:
        with cache._lock:
            if not cache._pending:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def make_context(  # type: ignore[no-untyped-def]
    logdir: str | None = None, logdir_spec: str | None = None, cache_dir: str | None = None, **mfu_flags: Any
):
    flags = argparse.Namespace(
        logdir=logdir or "",
        logdir_spec=logdir_spec or "",
        mfu_cache_dir=cache_dir if cache_dir is not None else "none",
        mfu_peak_tflops=None,
        mfu_show_full_paths=False,
        mfu_confine_to_logdir=False,
    )
    for name, value in mfu_flags.items():
        setattr(flags, f"mfu_{name}", value)
    return base_plugin.TBContext(flags=flags, logdir=logdir, multiplexer=NoMultiplexer())


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    def _serve(
        logdir: Path | str | None = None,
        logdir_spec: str | None = None,
        cache_dir: str | None = None,
        analyze: Callable[..., Any] | None = None,
        **mfu_flags: Any,
    ) -> Served:
        ctx = make_context(str(logdir) if logdir is not None else None, logdir_spec, cache_dir, **mfu_flags)
        cache = None
        if analyze is not None or cache_dir is not None:
            from tb_mfu_plugin.analysis.options import AnalysisOptions

            workers = int(mfu_flags["workers"]) if "workers" in mfu_flags else None
            cache = AnalysisCache(
                AnalysisOptions(), None if cache_dir in (None, "none") else cache_dir, workers, analyze=analyze
            )
        plugin = MfuPlugin(ctx, cache=cache, min_scan_interval_s=0.0)
        plugin.is_active()  # TensorBoard's first page asks it: the analysis processes may start
        return Served(plugin)

    yield _serve


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    """A logdir with two real runs of one span each (copies: tests never write into fixtures)."""
    logdir = tmp_path / "logs"
    for run in (RUN_A, RUN_B):
        src = sample_file(run)
        (logdir / run).mkdir(parents=True)
        shutil.copy(src, logdir / run / src.name)
    return logdir
