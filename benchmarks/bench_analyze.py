#!/usr/bin/env python3
"""Speed and memory of ``tb-mfu analyze --json`` on a large real trace.

Builds a ~250 MB trace by repeating a real one with ../shared/tools/scale_trace.py
(cached under the system temp dir), then runs the CLI in a child process, pinned to
one core where the OS allows, and prints MB/s of uncompressed JSON and peak RSS.

usage: python benchmarks/bench_analyze.py [SOURCE_TRACE] [--target-mb 250] [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT.parent / "shared" / "tools" / "scale_trace.py"
DEFAULT_SOURCES = [
    ROOT / "sample_traces" / "gpt_naive_attention",
    ROOT.parent / "shared" / "fixtures" / "torch_tb_profiler_samples" / "resnet50_num_workers_0",
]


def _source(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    for d in DEFAULT_SOURCES:
        files = sorted(d.glob("*.pt.trace.json*")) if d.is_dir() else []
        if files:
            return files[0]
    sys.exit("no source trace found: pass one")


def _uncompressed_size(path: Path) -> int:
    if path.suffix != ".gz":
        return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += len(chunk)
    return n


def big_trace(src: Path, target_mb: int, gzipped: bool) -> Path:
    """A trace of about ``target_mb`` MB made by repeating ``src`` (built once, kept in the temp dir)."""
    suffix = ".pt.trace.json.gz" if gzipped else ".pt.trace.json"
    big = Path(tempfile.gettempdir()) / f"tb_mfu_bench_{src.parent.name}_{target_mb}mb{suffix}"
    if not big.exists():
        print(f"building {big} from {src} ...", file=sys.stderr)
        subprocess.run([sys.executable, str(SCALE), str(src), str(big), "--target-mb", str(target_mb)], check=True)
    return big


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", nargs="?")
    ap.add_argument("--target-mb", type=int, default=250)
    ap.add_argument("--gzip", action="store_true", help="benchmark a gzipped copy (as traces are usually stored)")
    args = ap.parse_args()
    big = big_trace(_source(args.source), args.target_mb, args.gzip)
    size = _uncompressed_size(big)
    cmd = [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(big), "--json"]
    if hasattr(os, "sched_setaffinity"):
        cmd = ["taskset", "-c", "0", *cmd]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"analyze failed ({proc.returncode}): {proc.stderr[-2000:]}")
    peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux reports KiB
    print(f"trace: {big.name} ({size / 1e6:.1f} MB uncompressed JSON, {big.stat().st_size / 1e6:.1f} MB on disk)")
    print(f"tb-mfu analyze --json: {wall:.2f} s wall on one core")
    print(f"throughput: {size / 1e6 / wall:.1f} MB/s of uncompressed JSON")
    print(f"peak RSS: {peak_rss / 1e6:.0f} MB ({peak_rss / size:.2f}x the trace size)")


if __name__ == "__main__":
    main()
