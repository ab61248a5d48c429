#!/usr/bin/env python3
"""Instructions of ``tb-mfu analyze TRACE --json --jobs 1`` per checkout, counted by callgrind.

Seconds on a shared 2-core VM move by up to 2x between runs of the same code, which hides a
5-10 % change; the instruction count of the same command does not move. Each checkout runs with
its bytecode cached (``bench_big_trace.child_env``) and one decode process, under
``valgrind --tool=callgrind``, the checkouts in parallel, one per core: two checkouts of the
100,000-step trace of bench_many_steps.py took about 4 minutes side by side here.

usage: python benchmarks/count_instructions.py TRACE CHECKOUT [CHECKOUT ...]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_big_trace import child_env, warm  # noqa: E402


def count(trace: Path, checkout: Path, out: Path) -> int | str:
    """The instructions of one run, or why there is no count. ``out``: a path stem for valgrind's files."""
    warm(checkout)
    env = {**child_env(checkout), "TB_MFU_DECODE_PROCESSES": "1"}
    # valgrind's own lines go to a log of their own, so that stderr holds only the CLI's error
    log = out.with_suffix(".log")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", f"--log-file={log}", sys.executable]
    cmd += ["-m", "tb_mfu_plugin.cli", "analyze", str(trace), "--json", "--jobs", "1"]
    run = subprocess.run(cmd, env=env, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    got = re.findall(r"Collected : (\d+)", log.read_text() if log.exists() else "")
    if run.returncode not in (0, 3) or not got:  # 3: a --min-mfu miss, still a full run
        why = run.stderr.strip().splitlines()[-1:] or ["no message"]
        return f"failed (status {run.returncode}): {why[0]}"
    return int(got[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("checkouts", type=Path, nargs="+")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install -y valgrind)")
    for c in args.checkouts:
        if not (c / "tb_mfu_plugin").is_dir():
            sys.exit(f"{c}: not a checkout of tb_mfu_plugin")
    with tempfile.TemporaryDirectory(prefix="tb_mfu_callgrind_") as tmp, ThreadPoolExecutor(2) as pool:
        runs = [(c.resolve(), Path(tmp) / f"callgrind.{i}") for i, c in enumerate(args.checkouts)]
        counts = list(pool.map(lambda run: count(args.trace, *run), runs))
    first = counts[0]
    for checkout, n in zip(args.checkouts, counts, strict=True):
        if isinstance(n, str):
            print(f"{checkout}: {n}")
            continue
        vs = f" ({(n / first - 1) * 100:+.1f} % against the first)" if isinstance(first, int) and n != first else ""
        print(f"{checkout}: {n / 1e9:.2f} G instructions{vs}")


if __name__ == "__main__":
    main()
