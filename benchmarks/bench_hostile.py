#!/usr/bin/env python3
"""Time and peak memory of ``tb-mfu analyze --json`` on the hostile inputs of issue 15.

Each input runs in a child process (wall time, peak RSS, first line of stderr), with
a timeout. ``--code DIR`` measures another checkout (e.g. the commit before the
caps) for before/after figures.

usage: python benchmarks/bench_hostile.py [--code DIR] [--timeout 300] [--only NAME]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = next((ROOT / "sample_traces" / "tiny_mlp_launch_bound").glob("rank0.*.pt.trace.json.gz"))
MiB = 1 << 20


def _kernel(name: str, ts: float, device: int = 0) -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": 7, "ts": ts, "dur": 5.0,
            "args": {"device": device, "stream": 7, "correlation": 1, "blocks per SM": 2.0}}


def build(out: Path) -> dict[str, Path]:
    doc = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    cases: dict[str, Path] = {}

    def write(name: str, data: bytes) -> None:
        p = out / name / "rank0.1.pt.trace.json"
        p.parent.mkdir(parents=True)
        p.write_bytes(data)
        cases[name] = p

    # ~200 MB on one line: the old decoder copied its growing buffer every 8 MiB
    events = doc["traceEvents"] * max(1, (200 * MiB) // len(json.dumps(doc)))
    write("one_line_200MB", json.dumps({"traceEvents": events}).encode())
    write("names_4x10MB", json.dumps({"traceEvents": [_kernel("k<" + "x" * (10 * MiB) + f">{i}", 10.0 * i)
                                                      for i in range(4)]}).encode())
    write("devices_20000", json.dumps({"traceEvents": [_kernel("k", float(i), i) for i in range(20000)]}).encode())
    bomb = out / "gzip_bomb_4GiB" / "rank0.1.pt.trace.json.gz"
    bomb.parent.mkdir()
    member = gzip.compress(b" " * (16 * MiB), mtime=0)
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [', mtime=0) + member * 256)
    cases["gzip_bomb_4GiB"] = bomb
    return cases


def run(path: Path, code: Path, timeout: float) -> tuple[str, float, float, str]:
    env = dict(os.environ, PYTHONPATH=str(code))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json"],
                             capture_output=True, env=env, timeout=timeout)
        status, err = f"exit {out.returncode}", out.stderr.decode(errors="replace").strip().splitlines()
    except subprocess.TimeoutExpired:
        status, err = f"killed after {timeout:.0f} s", []
    seconds = time.perf_counter() - t0
    # ru_maxrss of children is the max over all of them: meaningful when it grows
    rss = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return status, seconds, rss, (err[-1] if err else "")[:150]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose tb_mfu_plugin to measure")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tb_mfu_hostile_") as tmp:
        cases = build(Path(tmp))
        print(f"code: {args.code}")
        print(f"{'case':18} {'status':>18} {'seconds':>8} {'peak RSS MB':>12}  stderr")
        for name, path in cases.items():
            if args.only and args.only != name:
                continue
            status, seconds, rss, err = run(path, args.code, args.timeout)
            print(f"{name:18} {status:>18} {seconds:8.1f} {rss:12.0f}  {err}", flush=True)


if __name__ == "__main__":
    main()
