#!/usr/bin/env python3
"""Speed and memory on a large ``profile_memory=True`` trace (issue 25), and the same size without
memory events beside it: does decoding the allocator's ``[memory]`` events cost what it should?

    python benchmarks/bench_memory.py [--target-mb 250] [--rounds 3] [--pin 0] [--trace F --plain F]
                                      [--compare CHECKOUT] [--cleanup]

Builds the two traces with ../shared/tools/scale_trace.py (kept under the system temp dir unless
``--cleanup``): ``sample_traces/gpt_memory`` (about a sixth of its events are ``[memory]``) and
``sample_traces/gpt_sdpa_fused`` (none), both plain JSON of about ``--target-mb``. Then, each in a
child process of its own, one decoding process (``TB_MFU_DECODE_PROCESSES=1``):

- ``decode``: ``decode_trace`` (the tables, memory table included);
- ``analyze``: ``decode_trace`` then ``trace_reports`` (metrics, FLOPs, roofline, memory block,
  diagnosis): the CLI's work short of printing.

Each line gives the phase's seconds (imports left out), MB/s of JSON, the child's peak RSS, and what
it produced (memory rows, the peak found). ``--compare /path/to/checkout`` runs the same phases with
another checkout's package (before/after: a checkout without issue 25 decodes no memory rows). The
rounds alternate the traces and checkouts, so a busy machine slows them alike; the median is printed
last.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_big_trace import child_env  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT.parent / "shared" / "tools" / "scale_trace.py"
MEMORY_SOURCE = ROOT / "sample_traces" / "gpt_memory"
PLAIN_SOURCE = ROOT / "sample_traces" / "gpt_sdpa_fused"
PHASES = ("decode", "analyze")


def load() -> tuple[Any, Any, Any]:
    """``decode_trace``, ``AnalysisOptions`` and ``trace_reports`` (``analyze_tables`` before issue
    32), imported before the clock starts: the modules where they are now, else where they were
    before issue 24's layout (a ``--compare`` checkout from before issue 25 has the old one)."""
    decode = _first("tb_mfu_plugin.trace.decode.decode", "tb_mfu_plugin.trace.decode")
    options = _first("tb_mfu_plugin.analysis.options", "tb_mfu_plugin.options")
    # trace_reports was running.pipeline's analyze_tables before issue 32 (and pipeline's before issue 24)
    try:
        return decode.decode_trace, options.AnalysisOptions, _first("tb_mfu_plugin.reporting.trace").trace_reports
    except ImportError:
        pipeline = _first("tb_mfu_plugin.running.pipeline", "tb_mfu_plugin.pipeline")
        return decode.decode_trace, options.AnalysisOptions, pipeline.analyze_tables


def run_phase(phase: str, path: str, fns: tuple[Any, Any, Any]) -> str:
    """The phase's work in this process (the package first on sys.path); what it produced."""
    decode_trace, analysis_options, trace_reports = fns
    tables = decode_trace(path, processes=1)
    rows = len(getattr(tables, "memory", ()))
    if phase == "decode":
        return f"{len(tables.cpu):,} cpu, {len(tables.gpu):,} gpu, {rows:,} memory rows"
    reports = trace_reports(tables, "rank0", "", analysis_options())
    m = getattr(reports[0], "memory", None)
    peak = m.peak_allocated_bytes if m is not None else None
    return f"{rows:,} memory rows, {len(reports[0].steps)} steps, peak allocated {peak}"


def _first(*names: str) -> Any:
    """The first of the modules ``names`` that imports."""
    import importlib

    for name in names[:-1]:
        try:
            return importlib.import_module(name)
        except ImportError:
            pass
    return importlib.import_module(names[-1])


def child(checkout: Path, phase: str, path: str, pin: int | None) -> tuple[float, int, str]:
    cmd = [sys.executable, __file__, path, "--phase", phase, "--root", str(checkout)]
    cmd += [] if pin is None else ["--pin", str(pin)]
    env = {**child_env(checkout), "TB_MFU_DECODE_PROCESSES": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        return 0.0, 0, "failed: " + (out.stderr.strip().splitlines() or ["?"])[-1]
    seconds, rss_kib, what = out.stdout.strip().split("\t", 2)
    return float(seconds), int(rss_kib) * 1024, what


def scaled(source: Path, target_mb: float, where: Path) -> Path:
    (trace,) = sorted(source.glob("*.pt.trace.json*"))
    out = where / f"{source.name}_{target_mb:g}mb.json"
    if not out.exists():
        subprocess.run([sys.executable, str(SCALE), str(trace), str(out), "--target-mb", str(target_mb)], check=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-mb", type=float, default=250)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pin", type=int, help="pin the children to this core")
    ap.add_argument("--trace", help="a profile_memory=True trace to use instead of scaling gpt_memory")
    ap.add_argument("--plain", help="a trace without memory events to use instead of scaling gpt_sdpa_fused")
    ap.add_argument("--compare", help="another checkout to run beside this one (before/after)")
    ap.add_argument("--cleanup", action="store_true", help="remove the scaled traces afterwards")
    ap.add_argument("--phase", help=argparse.SUPPRESS)  # internal: run one phase here
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        sys.path.insert(0, args.root)
        if args.pin is not None:
            os.sched_setaffinity(0, {args.pin})
        fns = load()
        t0 = time.perf_counter()
        what = run_phase(args.phase, args.path, fns)
        print(f"{time.perf_counter() - t0}\t{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\t{what}")
        return
    where = Path(tempfile.gettempdir()) / "tb_mfu_bench_memory"
    where.mkdir(exist_ok=True)
    traces = {
        "memory": Path(args.trace) if args.trace else scaled(MEMORY_SOURCE, args.target_mb, where),
        "plain": Path(args.plain) if args.plain else scaled(PLAIN_SOURCE, args.target_mb, where),
    }
    checkouts = {"this": ROOT, **({"other": Path(args.compare).resolve()} if args.compare else {})}
    for name, path in traces.items():
        print(f"{name}: {path} ({os.path.getsize(path) / 1e6:,.0f} MB of JSON)")
    print(f"{os.cpu_count()} cores, pinned to {args.pin}; one decoding process")
    print(f"{'checkout':<9}{'trace':<8}{'phase':<9}{'s':>7}{'MB/s':>8}{'peak RSS':>11}  what")
    times: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(args.rounds):
        for phase in PHASES:
            for tname, path in traces.items():
                for cname, checkout in checkouts.items():
                    secs, rss, what = child(checkout, phase, str(path), args.pin)
                    size = os.path.getsize(path) / 1e6
                    if what.startswith("failed"):  # no time to show, and none in the median
                        print(f"{cname:<9}{tname:<8}{phase:<9}{'—':>7}{'—':>8}{'—':>11}  {what}", flush=True)
                        continue
                    times.setdefault((cname, tname, phase), []).append(secs)
                    print(
                        f"{cname:<9}{tname:<8}{phase:<9}{secs:7.2f}{size / max(secs, 1e-9):8.1f}"
                        f"{rss / 1e6:9.0f} MB  {what}",
                        flush=True,
                    )
    print("median over the rounds:")
    for (cname, tname, phase), xs in times.items():
        secs = statistics.median(xs)
        size = os.path.getsize(traces[tname]) / 1e6
        print(f"{cname:<9}{tname:<8}{phase:<9}{secs:7.2f}{size / max(secs, 1e-9):8.1f} MB/s")
    if args.cleanup:
        for path in traces.values():
            if path.parent == where:
                path.unlink()


if __name__ == "__main__":
    main()
