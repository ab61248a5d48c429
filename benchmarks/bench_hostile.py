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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = next((ROOT / "sample_traces" / "tiny_mlp_launch_bound").glob("rank0.*.pt.trace.json.gz"))
MiB = 1 << 20


def _launched(name: str, ts: float, device: int = 0, corr: int = 1) -> list[dict[str, object]]:
    """A kernel and the runtime call that launched it (a trace with CPU events, as real ones are)."""
    return [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": ts - 1,
            "dur": 1.0,
            "args": {"correlation": corr},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": device,
            "tid": 7,
            "ts": ts,
            "dur": 5.0,
            "args": {"device": device, "stream": 7, "correlation": corr, "blocks per SM": 2.0},
        },
    ]


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
    names = [e for i in range(4) for e in _launched("k<" + "x" * (10 * MiB) + f">{i}", 10.0 * i + 5, corr=i)]
    write("names_4x10MB", json.dumps({"traceEvents": names}).encode())
    devices = [e for i in range(20000) for e in _launched("k", 10.0 * i + 5, i, corr=i)]
    write("devices_20000", json.dumps({"traceEvents": devices}).encode())
    bomb = out / "gzip_bomb_4GiB" / "rank0.1.pt.trace.json.gz"
    bomb.parent.mkdir()
    member = gzip.compress(b" " * (16 * MiB), mtime=0)
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [', mtime=0) + member * 256)
    cases["gzip_bomb_4GiB"] = bomb
    return cases


def run(path: Path, code: Path, timeout: float) -> tuple[str, float, float, str]:
    """(status, wall seconds, this child's peak RSS in MB, last stderr line)."""
    env = dict(os.environ, PYTHONPATH=str(code))
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=code,
        )  # -m: cwd first
        while True:  # wait4 gives this child's own rusage (RUSAGE_CHILDREN would mix the runs)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    state = f"killed after {timeout:.0f} s" if seconds > timeout else f"exit {proc.returncode}"
    return state, seconds, usage.ru_maxrss / 1024, (lines[-1] if lines else "")[:150]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose tb_mfu_plugin to measure")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--only", default=None)
    ap.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        build(args.build)
        return
    with tempfile.TemporaryDirectory(prefix="tb_mfu_hostile_") as tmp:
        # built in a child: a child forked from a big parent would start with the parent's RSS
        subprocess.run([sys.executable, __file__, "--build", tmp], check=True)
        cases = {p.parent.name: p for p in sorted(Path(tmp).glob("*/rank0.1.pt.trace.json*"))}
        print(f"code: {args.code}")
        print(f"{'case':18} {'status':>18} {'seconds':>8} {'peak RSS MB':>12}  stderr")
        for name, path in cases.items():
            if args.only and args.only != name:
                continue
            status, seconds, rss, err = run(path, args.code, args.timeout)
            print(f"{name:18} {status:>18} {seconds:8.1f} {rss:12.0f}  {err}", flush=True)


if __name__ == "__main__":
    main()
