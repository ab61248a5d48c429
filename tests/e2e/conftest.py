"""End-to-end fixtures: a real ``tensorboard`` process and a real headless Chromium.

Needs Debian's ``chromium`` at /usr/bin/chromium (``apt-get install -y chromium``)
and Python Playwright; every test here is skipped cleanly when either is missing.
Screenshots go to ``test-output/`` at the repository root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "test-output"
CHROMIUM = os.environ.get("TB_MFU_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
_URL = re.compile(r"TensorBoard [^ ]+ at (http://[^ ]+?)/? ")


def _skip_without_browser() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("playwright is not installed")
    if shutil.which("tensorboard") is None and not _tensorboard_cmd():
        pytest.skip("tensorboard is not installed")


def _tensorboard_cmd() -> list[str]:
    exe = shutil.which("tensorboard")
    return [exe] if exe else [sys.executable, "-m", "tensorboard.main"]


class TensorBoard:
    """``tensorboard --logdir LOGDIR --port 0``; the URL is read from its stderr."""

    def __init__(
        self,
        logdir: Path | str,
        cache_dir: Path,
        *extra: str,
        env: dict[str, str | None] | None = None,
        command: list[str] | None = None,
    ) -> None:
        """``logdir`` is a folder, or ``name:location,...`` given as ``--logdir_spec`` when a str;
        ``env`` adds to this process's environment, and a None value removes that variable;
        ``command`` runs instead of ``tensorboard`` (a test-side launcher, with its arguments)."""
        self.logdir = logdir
        merged = {**os.environ, **(env or {}), "TB_MFU_CACHE_DIR": str(cache_dir), "PYTHONUNBUFFERED": "1"}
        env = {k: v for k, v in merged.items() if v is not None}
        where = ["--logdir_spec", logdir] if isinstance(logdir, str) else ["--logdir", str(logdir)]
        cmd = [*(command or _tensorboard_cmd()), *where, "--port", "0", "--host", "127.0.0.1", *extra]
        # Run from an empty folder of its own: with --logdir_spec, torch-tb-profiler's plugin takes
        # the working directory as its logdir and reads every trace under it before TensorBoard
        # prints its URL, which from the checkout was all of sample_traces/ (~300 s on a busy
        # machine). Not the cache folder: the tab refuses uploads into a folder it reads.
        self.cwd = tempfile.mkdtemp(prefix="tb_mfu_tensorboard_cwd_")
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
            start_new_session=True,
            cwd=self.cwd,
        )
        self.log: list[str] = []
        self.url: str | None = None
        found = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line)
                m = _URL.search(line)
                if m and self.url is None:
                    self.url = m.group(1).rstrip("/")
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        # torch-tb-profiler reads every sample run before TensorBoard prints its URL: on a busy
        # 2-core machine that alone has taken over 120 s
        if not found.wait(300):
            self.stop()
            raise RuntimeError("tensorboard did not start:\n" + "".join(self.log[-40:]))

    def get_json(self, route: str) -> Any:
        import urllib.request

        with urllib.request.urlopen(self.url + route, timeout=30) as r:  # noqa: S310 (loopback only)
            return json.loads(r.read())

    def wait_analysed(self, timeout: float = 420) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.get_json("/data/plugin/mfu/runs")
            # "scanned" comes once the local sources are listed; a remote one may still be listing
            done = body["scanned"] and not body["scanning"]
            if done and all(r["state"] not in ("queued", "loading") for r in body["runs"]):
                return body
            time.sleep(0.5)
        raise AssertionError("analyses did not finish")

    def stop(self) -> None:
        shutil.rmtree(self.cwd, ignore_errors=True)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: only what we started
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@pytest.fixture(scope="module")
def samples_tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    """One TensorBoard over every sample run, all analysed, shared by the tests of the module that
    asks for it (the layout and the numbers-are-fields tests)."""
    _skip_without_browser()
    samples = ROOT / "sample_traces"
    if not any(samples.glob("*/*.pt.trace.json*")):
        pytest.skip("no sample traces")
    tb = TensorBoard(samples, tmp_path_factory.mktemp("mfu-cache"))
    try:
        tb.wait_analysed(timeout=900)
        yield tb
    finally:
        tb.stop()


@pytest.fixture
def start_tensorboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _skip_without_browser()
    started: list[TensorBoard] = []

    def start(
        logdir: Path | str, *extra: str, env: dict[str, str | None] | None = None, command: list[str] | None = None
    ) -> TensorBoard:
        tb = TensorBoard(logdir, tmp_path_factory.mktemp("mfu-cache"), *extra, env=env, command=command)
        started.append(tb)
        return tb

    yield start
    for tb in started:
        tb.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    _skip_without_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000}, device_scale_factor=1)
    pg = ctx.new_page()
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))  # type: ignore[attr-defined]
    yield pg
    ctx.close()


@pytest.fixture(scope="session")
def output_dir() -> Path:
    OUT.mkdir(exist_ok=True)
    return OUT
