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


# A server as torch-tb-profiler makes it, in small: a loader thread (not a daemon) that has started a
# process, starts another once the server is told to stop (a start under way as the children are
# ended finishes after), then waits for ever for results; and an exit handler that waits for ever.
# multiprocessing's own exit handler joins every child with no time limit: the process a loader
# started after the children were ended (on the loaded 2-core machine a spawn takes seconds), or the
# feeder thread of a queue whose lock a killed process held. The tab's end used to run the exit
# handlers itself and wait for them: "still running 20.0 s after Ctrl-C".
STUCK_SERVER = """
import atexit, multiprocessing as mp, signal, sys, threading, time
from tb_mfu_plugin.tensorboard import shutdown

def tensorboards_handler(signum, frame):  # TensorBoard's own, chained after the tab's
    sys.exit(0)

signal.signal(signal.SIGTERM, tensorboards_handler)
assert shutdown.install()
ctx = mp.get_context("spawn")
told = threading.Event()

class Cache:  # a cache of the tab's: told to stop at once
    def close(self):
        told.set()

cache = Cache()
shutdown.on_stop(cache, Cache.close)

def start():
    p = ctx.Process(target=time.sleep, args=(600,))
    p.start()
    with open(sys.argv[1], "a") as f:
        print(p.pid, file=f)

def loader():
    told.wait()
    start()
    threading.Event().wait()

start()
threading.Thread(target=loader).start()
atexit.register(threading.Event().wait)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_nothing_the_exit_waits_for_keeps_the_server(signum: int, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    started = tmp_path / "pids"  # the processes' ids, as they start (they share no pipe of ours)
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_SERVER, str(started)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the loader's process gets it too
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {EXIT_BOUND_S} s after {signal.Signals(signum).name}")
        assert code == (130 if signum == signal.SIGINT else 0)
        pids = [int(x) for x in started.read_text().split()]
        assert len(pids) == 2, pids  # the late process was started before the end
        gone_by = time.monotonic() + 10  # a killed process is gone once the kernel has run it
        while (alive := [p for p in pids if _running(p)]) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not alive, alive
    finally:
        for pid in [proc.pid, *pids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
