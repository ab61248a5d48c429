#!/usr/bin/env python3
"""``tb-mfu annotate`` on one big trace, beside ``tb-mfu analyze --json`` on the same trace.

Builds a ~1 GB uncompressed trace by repeating a real one (../shared/tools/scale_trace.py, kept
under the system temp dir), then runs, each in its own child process pinned to one core, in turn:

- ``analyze --json``: the decode and the analysis, what annotate does first;
- ``annotate -o OUT.json``: that, then the trace's bytes copied to OUT with the events added;
- ``annotate -o OUT.json.gz``: the same, compressed (gzip level 1).

Figures: wall and CPU time, MB/s of the uncompressed input by wall time and by CPU time, peak RSS
(the largest process; in brackets the sampled process tree), and what the copy added to the analysis. The
machine's load (``uptime``) is printed before and after: other work moves these figures.

usage: python benchmarks/bench_annotate.py [SOURCE] [--target-mb 1090] [--trace FILE] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_big_trace import DEFAULT_SOURCE, ROOT, Run, build_trace, child_env, measure, warm  # noqa: E402


def _uptime() -> str:
    with open("/proc/loadavg") as f:
        return "load average " + " ".join(f.read().split()[:3])


def _run(label: str, args: list[str]) -> Run:
    env = {**child_env(ROOT), "TB_MFU_DECODE_PROCESSES": "1"}
    return measure(label, [sys.executable, "-m", "tb_mfu_plugin.cli", *args], env, {0}, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--target-mb", type=int, default=1090)
    ap.add_argument("--trace", type=Path, help="an existing trace to use instead of building one")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    tmp = Path(tempfile.gettempdir())
    trace = a.trace or build_trace(a.source, a.target_mb, tmp)
    size = trace.stat().st_size
    out = tmp / f"tb_mfu_bench_annotated_{os.getpid()}.json"
    warm(ROOT)
    print(f"{trace}: {size / 1e6:.0f} MB; {_uptime()}")
    print(f"{'':<52} {'wall s':>7} {'cpu s':>7} {'MB/s':>7} {'peak RSS (tree)':>16}")
    try:
        for _ in range(a.repeat):
            runs = [
                _run("analyze --json", ["analyze", str(trace), "--json"]),
                _run("annotate -o OUT.json", ["annotate", str(trace), "-o", str(out)]),
                _run("annotate -o OUT.json.gz", ["annotate", str(trace), "-o", f"{out}.gz"]),
            ]
            for r in runs:
                # wall time is what a user waits; on a shared machine CPU time is the steadier figure
                print(f"{r.line(size)}  {size / 1e6 / r.cpu_s:6.1f} MB/s by CPU time")
            base = runs[0].wall_s
            print(
                f"  the copy added {runs[1].wall_s - base:.1f} s (plain), {runs[2].wall_s - base:.1f} s (gzip); "
                f"OUT {out.stat().st_size / 1e6:.0f} MB, OUT.gz {Path(f'{out}.gz').stat().st_size / 1e6:.0f} MB; "
                f"{_uptime()}"
            )
    finally:
        for p in (out, Path(f"{out}.gz")):
            p.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
