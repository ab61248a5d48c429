#!/usr/bin/env python3
"""Cost per step: ``tb-mfu analyze FILE --json --jobs 1`` on traces of many short steps, one core.

Builds two traces with benchmarks/many_steps.py (gzipped, kept under the system temp dir):

- 100,000 ProfilerSteps with one kernel each (a launch, its kernel, their ac2g flows);
- 300,000 ProfilerSteps with no GPU work (one kernel in the first step only);

and times each end to end in a child process pinned to one core (decode, metrics, FLOPs,
roofline, diagnosis, JSON on stdout), with benchmarks/bench_big_trace.py's ``measure``: wall
and CPU time, MB/s of uncompressed JSON by wall time, and peak RSS (the largest process, and
the process tree sampled every 20 ms). With TB_MFU_DECODE_PROCESSES=1 the gzip is inflated in
the same process: the CPU time is the analysis's alone. The bytecode is cached, as an installed
package's is (``bench_big_trace.child_env``).

What costs per step: each step brings a ``ProfilerStep#N`` name of its own (``trace.tables.Names``
knows them, so that name predicates are asked once for all of them), a ``Step`` struct in the report
(built from the per-step columns at once, ``analysis.time.step_structs``) and its share of the JSON.
The 300,000-step report is ~230 MB of JSON beside ~500 MB of Step structs: most of the peak RSS.

``--compare CHECKOUT`` measures that checkout too, run for run, and says whether the two JSON
outputs are identical.

usage: python benchmarks/bench_many_steps.py [--steps 100000] [--no-gpu-steps 300000] [--ops]
           [--rounds 1] [--compare CHECKOUT] [--limit-s 600]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_big_trace import Run, child_env, measure, warm  # noqa: E402
from many_steps import build  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _json_size(path: Path) -> int:
    n = 0
    with gzip.open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += len(chunk)
    return n


def _digest(path: Path) -> str:
    """The output's hash, ``tool_version`` aside (it names the code, not what the report says)."""
    body = path.read_bytes()
    return hashlib.sha256(re.sub(rb'"tool_version":"[^"]*",', b"", body[:200], count=1) + body[200:]).hexdigest()


def run(trace: Path, checkout: Path, label: str, limit_s: float, out: Path) -> Run:
    env = {**child_env(checkout), "TB_MFU_DECODE_PROCESSES": "1"}
    cmd = [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(trace), "--json", "--jobs", "1"]
    # stdout to a file (the shell execs the CLI: the same process): the report of 100,000 steps is
    # tens of MB, and its hash says whether two checkouts agree
    shell = ["sh", "-c", 'exec "$@" > "$0"', str(out), *cmd]
    return measure(label, shell, env, {0}, limit_s, cwd=checkout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100_000, help="steps of the trace with a kernel per step")
    ap.add_argument("--no-gpu-steps", type=int, default=300_000, help="steps of the trace with no GPU work")
    ap.add_argument("--ops", action="store_true", help="a cpu_op with shapes and a gpu_user_annotation per step too")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--compare", type=Path, help="also measure this checkout (e.g. the commit before)")
    ap.add_argument("--limit-s", type=float, default=600, help="stop a run after this long (0: never)")
    args = ap.parse_args()
    tmp = Path(tempfile.gettempdir())
    ops = "_ops" if args.ops else ""
    traces = [
        build(tmp / f"tb_mfu_bench_{n}_steps{kind}{ops}.pt.trace.json.gz", n, gpu, args.ops)
        for n, kind, gpu in ((args.steps, "", True), (args.no_gpu_steps, "_no_gpu", False))
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load {load:.1f}; one process pinned to one core")
    print(f"{'':<58} {'wall s':>7} {'CPU s':>7} {'MB/s':>7} {'peak RSS (tree)':>22}", flush=True)
    checkouts = [(args.compare, args.compare.name)] if args.compare else []
    checkouts.append((ROOT, "this checkout"))
    for checkout, _ in checkouts:
        warm(checkout)
    for trace in traces:
        size = _json_size(trace)
        print(f"{trace.name}: {trace.stat().st_size / 1e6:.1f} MB gzipped, {size / 1e6:.0f} MB of JSON", flush=True)
        for r in range(args.rounds):
            digests = []
            for checkout, name in checkouts:
                out = tmp / f"tb_mfu_bench_many_steps_{name.replace(' ', '_')}.json"
                label = f"  {name}{f', round {r + 1}' if args.rounds > 1 else ''}"
                got = run(trace, checkout, label, args.limit_s, out)
                print(got.line(size), flush=True)
                digests.append(_digest(out) if got.finished else None)
                out.unlink()
            if len(digests) == 2 and None not in digests:
                print(f"  JSON reports {'identical' if digests[0] == digests[1] else 'DIFFERENT'}", flush=True)


if __name__ == "__main__":
    main()
