"""The real ``tensorboard``, with torch-tb-profiler beside the tab, ends soon after SIGTERM or Ctrl-C
while its runs load, and leaves no process of the tab's behind (issue 34, part 2; shutdown.py).

The bound here is generous (the machine may be shared and loaded); the figure on a quiet machine
is ``benchmarks/bench_first_numbers.py``'s and is in docs/scaling.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ROOT, SAMPLES

psutil = pytest.importorskip("psutil")

RUNS = ("dataloader_stall", "ddp_4gpu", "tpdp_4gpu")  # 9 files: 9 loader processes of torch-tb-profiler
EXIT_BOUND_S = 20.0  # generous: 2 s is the figure on a quiet machine
START_S = 300.0  # torch-tb-profiler's loaders make TensorBoard slow to answer on a loaded 2-core machine


class Server:
    """``tensorboard --logdir LOGDIR`` in a session of its own, its URL read from its output, and
    every process it starts noted while it runs."""

    def __init__(self, logdir: Path, cache: Path) -> None:
        exe = shutil.which("tensorboard")
        cmd = [exe] if exe else [sys.executable, "-m", "tensorboard.main"]
        cmd += ["--logdir", str(logdir), "--port", "0", "--host", "127.0.0.1", "--mfu_cache_dir", str(cache)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, start_new_session=True
        )
        self.log: list[str] = []
        self.url: str | None = None
        self.seen: dict[int, str] = {}
        found = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line)
                if self.url is None and " at http://" in line and line.startswith("TensorBoard "):
                    self.url = line.split(" at ", 1)[1].split()[0].rstrip("/")
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(START_S):
            self.kill()
            pytest.fail("tensorboard did not start:\n" + "".join(self.log[-30:]))

    def runs(self) -> dict[str, object]:
        assert self.url is not None
        with urllib.request.urlopen(self.url + "/data/plugin/mfu/runs", timeout=30) as r:  # noqa: S310
            body: dict[str, object] = json.loads(r.read())
        return body

    def note(self) -> None:
        try:
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                try:
                    self.seen.setdefault(p.pid, " ".join(p.cmdline()))
                except psutil.Error:
                    pass
        except psutil.Error:
            pass

    def alive(self) -> dict[int, str]:
        """The processes seen that still run, with their command line now (one seen between its
        fork and its exec had the server's)."""
        out = {}
        for pid in self.seen:
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    out[pid] = " ".join(p.cmdline())
            except psutil.Error:
                pass
        return out

    def kill(self) -> None:
        """What is left of what the test started: the session, and every process noted."""
        for pid in [self.proc.pid, *self.seen]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    if shutil.which("tensorboard") is None:
        pytest.skip("tensorboard is not installed")
    logdir = tmp_path / "logs"
    for run in RUNS:
        shutil.copytree(SAMPLES / run, logdir / run)
    s = Server(logdir, tmp_path / "cache")
    yield s
    s.kill()


def _ours(cmd: str) -> bool:
    """The tab's processes: its fork server and the analysis processes forked from it."""
    return "tb_mfu_plugin" in cmd


def _mid_load(s: Server) -> bool:
    """Runs load: torch-tb-profiler's loader processes run or the tab's files wait, and the tab's
    processes have started."""
    s.note()
    body = s.runs()
    ours_loading = any(r["state"] in ("queued", "loading") for r in body["runs"])  # type: ignore[union-attr]
    theirs_loading = any("multiprocessing.spawn" in cmd for cmd in s.alive().values())
    return any(_ours(cmd) for cmd in s.alive().values()) and (ours_loading or theirs_loading)


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_the_server_ends_soon_while_runs_load_and_leaves_none_of_ours(server: Server, how: str) -> None:
    deadline = time.monotonic() + START_S
    while not _mid_load(server):
        assert time.monotonic() < deadline, "no moment with runs loading and the tab's processes up"
        time.sleep(0.05)
    t0 = time.monotonic()
    if how == "SIGTERM":
        server.proc.send_signal(signal.SIGTERM)  # the server alone, as `kill PID` or a service manager
    else:
        os.killpg(server.proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: every process of the job
    try:
        code = server.proc.wait(EXIT_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {EXIT_BOUND_S} s after {how}:\n" + "".join(server.log[-30:]))
    took = time.monotonic() - t0
    # SIGTERM: 0, as TensorBoard's handler; Ctrl-C: 130 when shutdown.py ended it, else Python's own
    assert code == 0 if how == "SIGTERM" else code in (0, 130, -signal.SIGINT), code
    # A process told to end may take a moment to be gone: the kernel reaps it as it is scheduled.
    gone_by = time.monotonic() + 10
    while any(_ours(cmd) for cmd in server.alive().values()) and time.monotonic() < gone_by:
        time.sleep(0.1)
    left = server.alive()
    assert not {pid: cmd for pid, cmd in left.items() if _ours(cmd)}, left
    print(f"{how}: ended in {took:.2f} s; processes seen {len(server.seen)}, left {len(left)}")
