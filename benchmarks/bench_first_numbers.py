#!/usr/bin/env python3
"""The first minute of the MFU tab beside torch-tb-profiler: a real ``tensorboard`` with both plugins.

Each run starts ``tensorboard --logdir LOGDIR`` with a fresh, empty ``--mfu_cache_dir`` (a cold
cache; torch-tb-profiler's own cache is a fresh temporary folder every start) and times:

- **launch → answers**: from starting the command to TensorBoard's first HTTP answer
  (``/data/plugins_listing``; TensorBoard listens only once every plugin is built);
- **answers → first numbers**: from that answer to the first figures of the run the tab opens on,
  fetched as the tab fetches them (``frontend/src/index.ts``, ``appstate.ts``): ``/runs`` until the
  scan is shown, the run ``pickDefaults`` picks (the first run ready, else the first listed; or
  ``--run NAME``, as a link or the tab's last choice names it), then its ``/report``, again
  whenever ``/runs`` shows one of its files changed, until a worker has its summary. ``--poll`` is
  the pause between polls: the tab's is 1 s, so the tab shows the figures up to that much later;
  0.1 s (the default) measures when the server has them;
- **all runs**: until every run is analysed (``--all``), with the MB/s of the trace files;
- **SIGTERM → exit**: SIGTERM sent to TensorBoard at once after the first numbers, while runs are
  loading (or, with ``--all``, once the tab's runs are in), or with ``--ctrl-c`` SIGINT to every
  process of its session as a terminal's Ctrl-C; the time until the process is gone; then whether
  any process it started (its descendants, recorded every poll) still runs 5 s later, ours (their
  command line names tb_mfu_plugin or multiprocessing's forkserver) and others.

``--variant NAME`` runs one of the ideas the tab does not ship (``first_numbers_variants.py``).

Prints ``uptime`` before and after each run and the server's peak RSS (VmHWM). The machine is
shared: repeat (``--repeat``) and read the figures with the load beside them.

usage: python benchmarks/bench_first_numbers.py [--logdir sample_traces] [--repeat 3] [--poll 0.1]
       [--all] [--run NAME] [--variant NAME] [--ctrl-c] [--verbose] [--env NAME=VALUE ...]
       [-- extra tensorboard arguments]
(TensorBoard runs the package that ``import tb_mfu_plugin`` finds: set PYTHONPATH to a checkout to
measure that one.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
MFU = "/data/plugin/mfu"
VERBOSE = False


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _get(url: str, timeout: float = 30) -> tuple[int, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (loopback only)
        return r.status, json.loads(r.read())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Result:
    answered_s: float = float("nan")  # launch -> first HTTP answer
    first_s: float = float("nan")  # answer -> first numbers of the opened run
    run: str = ""
    all_s: float = float("nan")  # answer -> every run analysed
    exit_s: float = float("nan")  # SIGTERM -> process gone
    left: list[str] = field(default_factory=list)  # descendants alive after the exit
    rss_mb: float = float("nan")
    pool: str = ""  # the tab's log line: its processes ready, and how long they took


class Server:
    def __init__(self, logdir: Path, cache: Path, env: dict[str, str], extra: list[str], variant: str | None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        exe = shutil.which("tensorboard")
        cmd = [exe] if exe else [sys.executable, "-m", "tensorboard.main"]
        if variant:  # an idea the tab does not ship (first_numbers_variants.py)
            cmd = [sys.executable, str(Path(__file__).with_name("first_numbers_variants.py")), variant]
        cmd += ["--logdir", str(logdir), "--port", str(self.port), "--host", "127.0.0.1"]
        cmd += ["--mfu_cache_dir", str(cache), *extra]
        self.log = open(cache.parent / "tensorboard.log", "w")  # noqa: SIM115 - closed in stop()
        self.t0 = time.perf_counter()
        self.epoch = time.time() - self.t0  # create_time() (epoch s) on perf_counter's scale
        self.workers: dict[int, float] = {}
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
        )
        self.seen: dict[int, str] = {}  # every descendant seen: pid -> command line

    def note_children(self) -> None:
        try:
            for c in psutil.Process(self.proc.pid).children(recursive=True):
                try:
                    if c.pid not in self.seen:
                        self.seen[c.pid] = " ".join(c.cmdline())[:160]
                    # the tab's analysis processes: forked by its fork server (a grandchild of ours)
                    if c.ppid() != self.proc.pid and "tb_mfu_plugin" in " ".join(c.cmdline()):
                        self.workers.setdefault(c.pid, c.create_time() - self.epoch)
                except psutil.Error:
                    self.seen.setdefault(c.pid, "?")
        except psutil.Error:
            pass

    def peak_rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def kill_all(self) -> None:
        """Whatever is left of what this run started (its session), so that runs do not pile up."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in self.seen:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.log.close()


def _alive(pid: int) -> str | None:
    """The command line of ``pid`` now, if it runs (one seen between its fork and its exec had the
    server's command line); None once it is gone."""
    try:
        p = psutil.Process(pid)
        return " ".join(p.cmdline())[:160] if p.status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:
        return None


def wait_answer(s: Server, limit: float) -> float:
    while time.perf_counter() - s.t0 < limit:
        if s.proc.poll() is not None:
            raise RuntimeError(f"tensorboard exited ({s.proc.returncode}); see {s.log.name}")
        s.note_children()
        try:
            _get(s.url + "/data/plugins_listing", timeout=5)
            return time.perf_counter()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.05)
    raise RuntimeError("tensorboard did not answer")


def opened_run(runs: dict[str, Any]) -> str | None:
    """The run the tab opens on with nothing stored: the first ready one, else the first listed."""
    names = [r["name"] for r in runs["runs"]]
    good = next((r["name"] for r in runs["runs"] if r["state"] in ("ready", "partial")), None)
    return good or (names[0] if names else None)


def _sig(runs: dict[str, Any], name: str) -> str:
    run = next((r for r in runs["runs"] if r["name"] == name), None)
    if run is None:
        return "none"
    spans = [f"{s['span']}:{s['state']}" for w in run["workers"] for s in w["spans"]]
    return f"{run['state']}|{','.join(spans)}"


def has_numbers(report: dict[str, Any]) -> bool:
    return any(w.get("summary") is not None and not w.get("error") for w in report.get("workers", []))


def wait_first_numbers(s: Server, poll: float, limit: float, wanted: str | None = None) -> tuple[float, str]:
    """Fetch as the tab fetches: /runs, the run it opens on (``wanted``: the one a link names or the
    tab kept from last time), its /report; /report again whenever /runs shows a file of the run
    changed, until a worker has its figures."""
    run: str | None = None
    last = ""
    t_end = time.perf_counter() + limit
    while time.perf_counter() < t_end:
        s.note_children()
        t_ask = time.perf_counter()
        _, runs = _get(s.url + MFU + "/runs")
        if run is None and runs["scanned"]:
            run = opened_run(runs) if wanted is None else wanted
        if VERBOSE:
            shown = next((r for r in runs["runs"] if r["name"] == run), None)
            spans = [(sp["state"], sp["seconds"]) for w in (shown or {}).get("workers", []) for sp in w["spans"]]
            print(f"    /runs {time.perf_counter() - t_ask:.2f} s: scanned {runs['scanned']}, {run}: {spans}")
        if run is not None:
            sig = _sig(runs, run)
            if sig != last:
                last = sig
                _, report = _get(s.url + MFU + "/report?run=" + urllib.request.quote(run))
                if has_numbers(report):
                    return time.perf_counter(), run
        time.sleep(poll)
    raise RuntimeError("no first numbers")


def wait_all(s: Server, poll: float, limit: float) -> float:
    t_end = time.perf_counter() + limit
    while time.perf_counter() < t_end:
        s.note_children()
        _, runs = _get(s.url + MFU + "/runs")
        if (
            runs["scanned"]
            and not runs["scanning"]
            and all(r["state"] not in ("queued", "loading") for r in runs["runs"])
        ):
            return time.perf_counter()
        time.sleep(max(poll, 0.5))
    raise RuntimeError("runs not all analysed")


def stop(s: Server, ctrl_c: bool = False, limit: float = 60) -> tuple[float, list[str]]:
    """SIGTERM to TensorBoard alone (as ``kill PID`` or a service manager), or with ``ctrl_c`` SIGINT
    to every process of its session (as a terminal's Ctrl-C); the seconds until it is gone, and its
    descendants still alive."""
    s.note_children()
    t = time.perf_counter()
    if ctrl_c:
        os.killpg(s.proc.pid, signal.SIGINT)
    else:
        s.proc.send_signal(signal.SIGTERM)
    try:
        s.proc.wait(limit)
        took = time.perf_counter() - t
    except subprocess.TimeoutExpired:
        took = float("inf")
    # A child that ends on its own at its parent's end (the fork server, the resource tracker: on
    # the end of a pipe) gets the time to, up to 5 s; what runs after that is left behind.
    gone_by = time.perf_counter() + 5
    while time.perf_counter() < gone_by and any(_alive(pid) for pid in s.seen):
        time.sleep(0.1)
    left = [f"{pid} {cmd}" for pid in s.seen if (cmd := _alive(pid))]
    return took, left


def ours(cmd: str) -> bool:
    return "tb_mfu_plugin" in cmd or "forkserver" in cmd


def one(args: argparse.Namespace, env: dict[str, str]) -> Result:
    work = Path(tempfile.mkdtemp(prefix="tb_mfu_first_"))
    cache = work / "cache"  # fresh and empty: a cold cache
    s = Server(args.logdir, cache, env, args.extra, args.variant)
    r = Result()
    try:
        answered = wait_answer(s, args.limit_s)
        r.answered_s = answered - s.t0
        first, r.run = wait_first_numbers(s, args.poll, args.limit_s, args.run)
        r.first_s = first - answered
        if args.all:
            r.all_s = wait_all(s, args.poll, args.limit_s * 4) - answered
        r.rss_mb = s.peak_rss_mb()
        r.exit_s, r.left = stop(s, args.ctrl_c)
        workers = sorted(t for pid, t in s.workers.items())
        r.pool = (
            f"the tab's processes forked at {', '.join(f'{t - answered:+.1f}' for t in workers)} s from the answer"
            if workers
            else "no process of the tab's forked"
        )
    finally:
        s.kill_all()
        shutil.rmtree(work, ignore_errors=True)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logdir", type=Path, default=ROOT / "sample_traces")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--poll", type=float, default=0.1, help="seconds between polls (the tab's: 1)")
    ap.add_argument("--all", action="store_true", help="also wait for every run; SIGTERM once idle")
    ap.add_argument("--variant", help="an idea the tab does not ship, from first_numbers_variants.py")
    ap.add_argument("--run", help="the run the tab opens on, as a link or the tab's last choice names it")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="for tensorboard's environment")
    ap.add_argument("--limit-s", type=float, default=180)
    ap.add_argument("--ctrl-c", action="store_true", help="stop with a terminal's Ctrl-C, not SIGTERM")
    ap.add_argument("--verbose", action="store_true", help="print each /runs poll until the first numbers")
    ap.add_argument("extra", nargs="*", help="more tensorboard arguments (after --)")
    args = ap.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    env = dict(e.split("=", 1) for e in args.env)
    size = sum(p.stat().st_size for p in args.logdir.rglob("*.pt.trace.json*"))
    import tb_mfu_plugin

    print(f"tb_mfu_plugin from {Path(tb_mfu_plugin.__file__).parent}; logdir {args.logdir} ({size / 1e6:.1f} MB)")
    print(f"variant {args.variant or 'shipped'}; env {env or '-'}; extra {args.extra or '-'}; poll {args.poll} s")
    for i in range(args.repeat):
        print(f"[{i + 1}] before: {uptime()}", flush=True)
        r = one(args, env)
        mine = [x for x in r.left if ours(x)]
        others = [x for x in r.left if not ours(x)]
        all_txt = f"  all runs {r.all_s:6.2f} s ({size / 1e6 / r.all_s:.2f} MB/s of .gz)" if args.all else ""
        how = "Ctrl-C" if args.ctrl_c else "SIGTERM"
        print(
            f"[{i + 1}] launch->answers {r.answered_s:6.2f} s  answers->first numbers {r.first_s:6.2f} s "
            f"({r.run})  launch->first numbers {r.answered_s + r.first_s:6.2f} s{all_txt}  "
            f"{how}->exit {r.exit_s:5.2f} s  left alive: ours {len(mine)}, others {len(others)}  "
            f"peak RSS {r.rss_mb:.0f} MB",
            flush=True,
        )
        print(f"      {r.pool}")
        for x in r.left:
            print(f"      alive: {x}")
        print(f"[{i + 1}] after:  {uptime()}", flush=True)


if __name__ == "__main__":
    main()
