#!/usr/bin/env python3
"""Our comm/comp overlap against Holistic Trace Analysis's own, on the same traces.

HTA (``TraceAnalysis.get_comm_comp_overlap``) installs into a temporary virtual environment
(``python -m venv`` + ``pip install HolisticTraceAnalysis``) and runs there, in a child process;
this process computes ours. Both sides use HTA's window: the kernels whose launch call the
trace holds, launched before the last ``ProfilerStep`` began (HTA's
``align_and_filter_trace`` drops the last step), with HTA's rounding of ns-resolution
timestamps switched off (``HTA_DISABLE_NS_ROUNDING=1``; by default it rounds every start up and
every end down to the µs, which shortens a 3 µs kernel by up to a third). The table also gives
HTA with its default rounding, and our own figure: the overlap over every analysed step window
(``WorkerReport.communication.overlap_ratio``, docs/distributed.md).

usage: python benchmarks/bench_hta_overlap.py [RUN_DIR ...] [--venv DIR] [--tolerance 2]
exit status 1 when a rank differs by more than the tolerance (percentage points).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_mfu_plugin.analysis.distributed.communication import comm_rows, overlap_in  # noqa: E402
from tb_mfu_plugin.analysis.time.steps import find_steps  # noqa: E402
from tb_mfu_plugin.running.pipeline import analyze_path  # noqa: E402
from tb_mfu_plugin.trace.decode.decode import decode_trace  # noqa: E402
from tb_mfu_plugin.trace.tables import TraceTables  # noqa: E402

SAMPLES = ROOT / "sample_traces"
FIXTURES = ROOT.parent / "shared" / "fixtures" / "hta_test_data"
DEFAULT_RUNS = [
    *(SAMPLES / r for r in ("ddp_2gpu", "fsdp2_2gpu", "tp_2gpu", "ddp_4gpu", "fsdp2_4gpu", "tp_4gpu", "tpdp_4gpu")),
    FIXTURES / "nccl_parser_config",
]

# Runs in the venv: HTA's overlap per rank of each run directory given, as JSON on stdout.
CHILD = r"""
import glob, json, logging, os, shutil, sys, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
out = {}
for run in sys.argv[1:]:
    tmp = tempfile.mkdtemp()
    for f in glob.glob(os.path.join(run, "*.json.gz")) + glob.glob(os.path.join(run, "*.pt.trace.json")):
        shutil.copy(f, tmp)
    try:
        df = TraceAnalysis(trace_dir=tmp).get_comm_comp_overlap(visualize=False)
        out[run] = {str(int(r)): float(p) for r, p in zip(df["rank"], df["comp_comm_overlap_pctg"])}
    except Exception as e:
        out[run] = {"error": f"{type(e).__name__}: {e}"}
    shutil.rmtree(tmp)
print(json.dumps(out))
"""


def make_venv(where: Path) -> Path:
    """A virtual environment with HolisticTraceAnalysis; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "HolisticTraceAnalysis"], check=True)
    return python


def hta_overlap(python: Path, runs: list[Path], rounding: bool) -> dict[str, dict[str, float]]:
    env = dict(os.environ)
    if not rounding:
        env["HTA_DISABLE_NS_ROUNDING"] = "1"
    res = subprocess.run(
        [str(python), "-c", CHILD, *map(str, runs)], env=env, check=True, capture_output=True, text=True
    )
    out: dict[str, dict[str, float]] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def hta_window(tables: TraceTables, device: int) -> np.ndarray:
    """HTA's kernels: launched in the trace, before the last ProfilerStep began."""
    steps = find_steps(tables, device)
    launcher = tables.launcher
    keep = (tables.gpu.device == device) & (launcher >= 0)
    if len(steps) >= 2 and not steps.synthetic:
        keep[keep] &= tables.cpu.ts[launcher[keep]] < float(steps.cpu_start.max())
    return keep


def our_overlap(path: str, device: int) -> float | None:
    """Our overlap (percent) over HTA's window."""
    tables = decode_trace(path)
    gpu = tables.gpu.take(np.flatnonzero(hta_window(tables, device)))
    rows = comm_rows(tables, gpu)
    comm, overlapped = overlap_in(gpu.ts, gpu.end, rows.comm, rows.comp, -np.inf, np.inf)
    return 100.0 * overlapped / comm if comm > 0 else None


def ours_by_rank(run: Path) -> dict[str, tuple[float | None, float | None]]:
    """rank -> (ours over HTA's window, ours over the analysed steps), in percent."""
    out = {}
    files = sorted(run.glob("*.json.gz")) + sorted(run.glob("*.pt.trace.json"))  # HTA's glob, file by file
    for w in (w for f in files for r in analyze_path(str(f)).runs for w in r.workers):
        if w.error is not None or w.device is None or w.device.index is None:
            continue
        rank = str(w.distributed.rank if w.distributed is not None else None)
        steps = w.communication.overlap_ratio if w.communication else None
        out[rank] = (our_overlap(w.file, w.device.index), 100.0 * steps if steps is not None else None)
    return out


def compare(python: Path, runs: list[Path]) -> list[tuple[str, str, float | None, float | None, float, float | None]]:
    """Rows (run, rank, HTA, HTA rounded, ours in HTA's window, ours per step)."""
    exact = hta_overlap(python, runs, rounding=False)
    rounded = hta_overlap(python, runs, rounding=True)
    rows = []
    for run in runs:
        mine = ours_by_rank(run)
        for rank, pct in exact[str(run)].items():
            if rank == "error":
                print(f"{run}: HTA failed: {pct}", file=sys.stderr)
                continue
            window, steps = mine.get(rank, (None, None))
            rows.append((run.name, rank, window, steps, pct, rounded[str(run)].get(rank)))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path)
    p.add_argument("--venv", type=Path, help="a venv that has HolisticTraceAnalysis (else a temporary one)")
    p.add_argument("--tolerance", type=float, default=2.0, help="percentage points (default 2)")
    args = p.parse_args()
    runs = [r for r in (args.runs or DEFAULT_RUNS) if r.is_dir()]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        python = args.venv / "bin" / "python" if args.venv else make_venv(Path(tmp) / "hta")
        if not args.venv:
            print(f"installed HolisticTraceAnalysis into a temporary venv in {time.perf_counter() - t0:.0f} s")
        rows = compare(python, runs)
    head = ("run", "rank", "ours (HTA window)", "HTA", "diff", "HTA rounded", "ours/step")
    print(f"{head[0]:<22} {head[1]:>4} {head[2]:>18} {head[3]:>7} {head[4]:>6} {head[5]:>12} {head[6]:>10}")
    worst = 0.0
    for run, rank, window, steps, hta, rounded in rows:
        diff = abs(window - hta) if window is not None else float("inf")
        worst = max(worst, diff)
        print(f"{run:<22} {rank:>4} {_pct(window):>18} {hta:>7.2f} {diff:>6.2f} {_pct(rounded):>12} {_pct(steps):>10}")
    print(f"largest difference: {worst:.2f} points (tolerance {args.tolerance})")
    return 0 if worst <= args.tolerance else 1


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


if __name__ == "__main__":
    sys.exit(main())
