#!/usr/bin/env python3
"""Speed and memory on one big trace: ``tb-mfu analyze --json`` at 1 and 2 processes, and HTA.

Builds a ~1 GB uncompressed trace by repeating a real one with
../shared/tools/scale_trace.py (kept under the system temp dir unless --cleanup),
then measures, in one run and each in its own child process:

- ours, end to end (decode, metrics, FLOPs, roofline, diagnosis, JSON), with
  TB_MFU_DECODE_PROCESSES=1 pinned to one core, and =2 on two cores;
- optionally the same for another checkout (``--compare /work/main``: before/after);
- Holistic Trace Analysis (pip-installed into a temporary venv): load, temporal
  breakdown and GPU kernel breakdown. If it cannot be installed, that is printed
  and it is skipped.

Our runs have their bytecode cached, as an installed package has (``child_env``).

Figures: wall time, CPU time (user + system of the child and its children), MB/s
of uncompressed JSON by wall time, and peak RSS: the largest single process
(getrusage) and the whole process tree (sampled from /proc every 20 ms; forked
workers share pages with their parent, so the sum overstates a little).

usage: python benchmarks/bench_big_trace.py [SOURCE] [--target-mb 1090] [--trace FILE]
           [--processes 1,2] [--compare CHECKOUT] [--no-hta] [--cleanup]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT.parent / "shared" / "tools" / "scale_trace.py"
DEFAULT_SOURCE = ROOT / "sample_traces" / "gpt_naive_attention"
HTA_SCRIPT = """
import sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
analyzer.get_temporal_breakdown(visualize=False)
analyzer.get_gpu_kernel_breakdown(visualize=False)
"""


@dataclass
class Run:
    label: str
    wall_s: float
    cpu_s: float
    rss_max: int  # bytes, the largest single process
    rss_tree: int  # bytes, the sampled peak of the whole tree
    finished: bool = True  # False: stopped at the time limit

    def line(self, size: int) -> str:
        rss = f"{self.rss_max / 1e6:.0f} MB ({self.rss_tree / 1e6:.0f} MB)"
        mbs = f"{size / 1e6 / self.wall_s:7.1f}" if self.finished else f"<{size / 1e6 / self.wall_s:6.1f}"
        wall = f"{self.wall_s:7.1f}" if self.finished else f">{self.wall_s:6.0f}"
        return f"{self.label:<52} {wall} {self.cpu_s:7.1f} {mbs} {rss:>16} {self.rss_tree / size:4.2f}x"


def _tree_rss(pid: int) -> int:
    """RSS of ``pid`` and its descendants, from /proc (0 where a process is gone)."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(
    label: str, cmd: list[str], env: dict[str, str], cpus: set[int] | None, limit_s: float = 0, cwd: Path | None = None
) -> Run:
    """Run ``cmd`` in a child, pinned to ``cpus``; its wall and CPU time and peak RSS. Past
    ``limit_s`` (0: none) the child is killed and the run marked unfinished."""

    def pin() -> None:
        if cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)

    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, preexec_fn=pin, cwd=cwd)
        peak = [0]
        done = threading.Event()

        stopped = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss(proc.pid))
                if limit_s and time.perf_counter() - t0 > limit_s:
                    stopped.set()
                    proc.kill()
                    return
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # usage covers the child and its waited-for children
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if stopped.is_set():
            usage_s = usage.ru_utime + usage.ru_stime
            return Run(label, wall, usage_s, usage.ru_maxrss * 1024, max(peak[0], usage.ru_maxrss * 1024), False)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"{label} failed ({proc.returncode}): {err.read().decode(errors='replace')[-2000:]}")
    rss_max = usage.ru_maxrss * 1024  # Linux reports KiB
    return Run(label, wall, usage.ru_utime + usage.ru_stime, rss_max, max(peak[0], rss_max))


def build_trace(source: Path, target_mb: int, tmp: Path) -> Path:
    files = sorted(source.glob("*.pt.trace.json*")) if source.is_dir() else [source]
    if not files:
        sys.exit(f"no trace in {source}")
    big = tmp / f"tb_mfu_bench_{files[0].parent.name}_{target_mb}mb.pt.trace.json"
    if big.exists():
        return big
    free = shutil.disk_usage(tmp).free
    if free < target_mb * 1e6 * 1.2 + 2e9:
        sys.exit(f"not enough disk in {tmp} for a {target_mb} MB trace: {free / 1e9:.1f} GB free")
    print(f"building {big} from {files[0]} ...", file=sys.stderr)
    subprocess.run([sys.executable, str(SCALE), str(files[0]), str(big), "--target-mb", str(target_mb)], check=True)
    return big


def hta_python(tmp: Path) -> str | None:
    """A venv's python with HolisticTraceAnalysis installed (made once, under ``tmp``); None if it fails."""
    venv = tmp / "tb_mfu_bench_hta_venv"
    py = venv / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import hta"], capture_output=True).returncode == 0:
        return str(py)
    print("installing HolisticTraceAnalysis into a temporary venv ...", file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "HolisticTraceAnalysis"], check=True, capture_output=True
        )
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"HTA: cannot be installed here, skipped ({exc}; {detail.decode(errors='replace')[-300:]})")
        return None
    return str(py)


def child_env(checkout: Path) -> dict[str, str]:
    """The CLI's environment: ``checkout`` first on the path (a PYTHONPATH already set stays behind
    it, where dependencies were put), and the bytecode cached as an installed package has it (pip
    compiles at install). A sandbox that sets PYTHONDONTWRITEBYTECODE would otherwise compile ~160
    modules from source in every run (~0.35 s), which no user pays. The cache goes under the temp
    dir, never into the checkout; ``warm`` fills it before any run is timed."""
    path = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH", "")) if p)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    prefix = Path(tempfile.gettempdir()) / "tb_mfu_bench_pycache" / hashlib.sha256(bytes(checkout)).hexdigest()[:12]
    return {**env, "PYTHONPATH": path, "PYTHONPYCACHEPREFIX": str(prefix)}


def warm(checkout: Path) -> None:
    """Fill ``checkout``'s bytecode cache (``child_env``)."""
    subprocess.run([sys.executable, "-c", "import tb_mfu_plugin.cli.main"], env=child_env(checkout), check=True)


def ours(trace: Path, processes: int, checkout: Path, label: str) -> Run:
    env = {**child_env(checkout), "TB_MFU_DECODE_PROCESSES": str(processes)}
    cmd = [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(trace), "--json"]
    # run from the checkout: ``python -m`` puts the working directory before PYTHONPATH
    return measure(label, cmd, env, set(range(processes)), cwd=checkout)


def hta(trace: Path, py: str, tmp: Path, limit_s: float) -> Run:
    d = Path(tempfile.mkdtemp(dir=tmp, prefix="tb_mfu_bench_hta_"))
    try:
        (d / "rank0.pt.trace.json").symlink_to(trace)
        script = d / "run_hta.py"
        script.write_text(HTA_SCRIPT)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return measure("HTA load + temporal + kernel breakdown", [py, str(script), str(d)], env, {0}, limit_s)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE)
    # scale_trace.py counts the source as written; re-serialised it is ~8 % smaller: 1090 gives ~1.0 GB
    ap.add_argument("--target-mb", type=int, default=1090)
    ap.add_argument("--trace", type=Path, help="benchmark this trace instead of building one")
    ap.add_argument("--processes", default="1,2", help="decode processes to measure (comma-separated)")
    ap.add_argument("--compare", type=Path, help="also measure this checkout (e.g. /work/main)")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--hta-limit-s", type=float, default=600, help="stop HTA after this long (0: never)")
    ap.add_argument("--cleanup", action="store_true", help="delete the built trace and the venv afterwards")
    args = ap.parse_args()
    tmp = Path(tempfile.gettempdir())
    trace = args.trace or build_trace(args.source, args.target_mb, tmp)
    size = trace.stat().st_size
    if trace.suffix == ".gz":
        sys.exit("give an uncompressed trace: the figures are per MB of JSON")
    print(f"trace: {trace} ({size / 1e6:.0f} MB of JSON), {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    print(f"{'':<52} {'wall s':>7} {'CPU s':>7} {'MB/s':>7} {'peak RSS (tree)':>22}", flush=True)
    runs: list[Run] = []
    for checkout in (args.compare, ROOT) if args.compare else (ROOT,):
        warm(checkout)
    for n in (int(x) for x in args.processes.split(",")):
        if args.compare:
            runs.append(ours(trace, n, args.compare, f"{args.compare.name}, {n} process(es), {n} core(s)"))
            print(runs[-1].line(size), flush=True)
        runs.append(ours(trace, n, ROOT, f"this checkout, {n} process(es), {n} core(s)"))
        print(runs[-1].line(size), flush=True)
    py = None if args.no_hta else hta_python(tmp)
    if py is not None:
        base = hta(trace, py, tmp, args.hta_limit_s)
        print(base.line(size))
        at_least = "" if base.finished else "at least "
        for r in runs:
            print(
                f"{r.label}: {at_least}{base.wall_s / r.wall_s:.1f}x HTA's speed, {r.rss_tree / base.rss_tree:.2f}x "
                f"its peak RSS{'' if base.finished else ' (when stopped)'}"
            )
    if args.cleanup:
        if args.trace is None:
            trace.unlink()
        shutil.rmtree(tmp / "tb_mfu_bench_hta_venv", ignore_errors=True)


if __name__ == "__main__":
    main()
