#!/usr/bin/env python3
"""Our critical path (analysis.critical_path) against Holistic Trace Analysis's
``critical_path_analysis`` on the same steps of the same traces.

HTA installs into a temporary virtual environment (``python -m venv`` + ``pip install
HolisticTraceAnalysis``, as benchmarks/bench_hta_overlap.py) and runs there in a child process, one
``ProfilerStep`` instance at a time (its first step is skipped: HTA's own advice, it misses events).
For each step both sides give the critical path's length and its split into HTA's five categories
(``CPGraph.get_critical_path_breakdown``'s ``bound_by``); ours are mapped onto them by
``analysis.critical_path.classes.HTA_CATEGORY``. docs/diagnosis.md explains the differences.

usage: python benchmarks/bench_hta_critical_path.py [RUN_DIR ...] [--venv DIR] [--steps 2]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_mfu_plugin.analysis.critical_path.classes import HTA_CATEGORY  # noqa: E402
from tb_mfu_plugin.running.pipeline import analyze_path  # noqa: E402

SAMPLES = ROOT / "sample_traces"
PAIRS = ROOT / "validation" / "whatif_pairs"
SAMPLE_RUNS = ("tiny_mlp_launch_bound", "gpt_naive_attention", "pageable_copy_loop", "ddp_2gpu")
PAIR_RUNS = ("item_sync", "fused_adamw", "cuda_graph", "dataloader_workers")


def default_runs() -> list[Path]:
    """The samples, and the pairs' befores from validation/traces.tar.xz (unpacked once, when the
    benchmark runs, not when it is imported)."""
    sys.path.insert(0, str(ROOT / "validation"))
    from packed import unpacked

    pairs = Path(unpacked(str(PAIRS)))
    return [*(SAMPLES / r for r in SAMPLE_RUNS), *(pairs / p / "before" for p in PAIR_RUNS)]


CATEGORIES = (
    "cpu_bound",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_launch_overhead",
    "gpu_kernel_kernel_overhead",
)
SHORT = {
    "cpu_bound": "cpu",
    "gpu_compute_bound": "compute",
    "gpu_communication_bound": "comm",
    "gpu_kernel_launch_overhead": "launch",
    "gpu_kernel_kernel_overhead": "k-k gap",
}

# Runs in the venv: per run, rank and ProfilerStep, HTA's critical path length (µs) and its µs by bound_by.
CHILD = r"""
import glob, json, logging, os, shutil, sys, tempfile, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
steps = int(sys.argv[1])
out = {}
for run in sys.argv[2:]:
    tmp = tempfile.mkdtemp()
    for f in glob.glob(os.path.join(run, "*.pt.trace.json*")):
        shutil.copy(f, tmp)
    res = out.setdefault(run, {})
    try:
        ta = TraceAnalysis(trace_dir=tmp)
        for rank, trace in ta.t.traces.items():
            names = ta.t.symbol_table.get_sym_table()
            step_names = sorted({n for n in names if n.startswith("ProfilerStep#")}, key=lambda n: int(n[13:]))
            for k in range(1, min(len(step_names), 1 + steps)):
                t0 = time.perf_counter()
                try:
                    cp, ok = ta.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=k)
                    edf = cp.get_critical_path_breakdown()
                    by = {str(b): float(v) for b, v in edf.groupby("bound_by").duration.sum().items()}
                    res.setdefault(str(rank), {})[step_names[k]] = {
                        "ok": bool(ok), "total": float(edf.duration.sum()), "by": by,
                        "seconds": time.perf_counter() - t0,
                    }
                except Exception as e:
                    res.setdefault(str(rank), {})[step_names[k]] = {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {e}"
    shutil.rmtree(tmp)
print(json.dumps(out))
"""


def make_venv(where: Path) -> Path:
    """A virtual environment with HolisticTraceAnalysis; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    # HTA 0.5.0's critical path calls DataFrame.drop(axis=1, columns=...), which pandas 3 refuses
    subprocess.run([str(python), "-m", "pip", "install", "-q", "HolisticTraceAnalysis", "pandas<2.3"], check=True)
    return python


def hta_paths(python: Path, runs: list[Path], steps: int) -> dict:
    res = subprocess.run(
        [str(python), "-c", CHILD, str(steps), *map(str, runs)], check=True, capture_output=True, text=True
    )
    out: dict = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def ours(run: Path) -> dict[int, dict[int, dict]]:
    """Per worker's device and step number: the step's duration and µs in each HTA category."""
    out: dict[int, dict[int, dict]] = {}
    for r in analyze_path(str(run)).runs:
        for w in r.workers:
            if w.critical_path is None or w.device is None:
                continue
            rank = w.distributed.rank if w.distributed is not None and w.distributed.rank is not None else 0
            for s in w.critical_path.steps:
                by = dict.fromkeys(CATEGORIES, 0.0)
                for c, v in s.us.items():
                    by[HTA_CATEGORY[c]] += v
                out.setdefault(int(rank), {})[s.step] = {"total": s.dur_us, "by": by}
    return out


def compare(python: Path, runs: list[Path], steps: int) -> list[tuple]:
    """(run, rank, step, ours, HTA's), each {"total", "by"}; HTA's may carry "error"."""
    theirs = hta_paths(python, runs, steps)
    rows: list[tuple] = []
    for run in runs:
        mine = ours(run)
        got = theirs.get(str(run), {})
        if "error" in got:
            rows.append((run, None, None, None, {"error": got["error"]}))
            continue
        for rank, by_step in got.items():
            for name, hta in by_step.items():
                step = int(re.sub(r"\D", "", name))
                rows.append((run, int(rank), step, mine.get(int(rank), {}).get(step), hta))
    return rows


def _name(run: Path) -> str:
    return str(run.relative_to(ROOT)) if run.is_relative_to(ROOT) else str(run)


def table(rows: list[tuple]) -> str:
    head = f"{'run':44} {'rank':>4} {'step':>5} {'ours ms':>8} {'HTA ms':>8}  " + "  ".join(
        f"{SHORT[c]:>15}" for c in CATEGORIES
    )
    lines = [head, " " * 73 + "  ".join(f"{'ours / HTA %':>15}" for _ in CATEGORIES)]
    for run, rank, step, mine, hta in rows:
        if "error" in hta or mine is None:
            why = hta.get("error", "step not modelled by ours")
            lines.append(f"{_name(run):44} {rank!s:>4} {step!s:>5} {why}")
            continue
        cells = []
        for c in CATEGORIES:
            a = 100 * mine["by"][c] / mine["total"] if mine["total"] else 0.0
            b = 100 * hta["by"].get(c, 0.0) / hta["total"] if hta["total"] else 0.0
            cells.append(f"{a:6.1f} / {b:6.1f}")
        lines.append(
            f"{_name(run):44} {rank:>4} {step:>5} {mine['total'] / 1e3:8.2f} {hta['total'] / 1e3:8.2f}  "
            + "  ".join(f"{c:>15}" for c in cells)
            + ("" if hta.get("ok", True) else "  (HTA: not ok)")
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--venv", type=Path, help="a venv with HolisticTraceAnalysis installed already")
    ap.add_argument("--steps", type=int, default=2, help="ProfilerStep instances per rank, after the first")
    args = ap.parse_args()
    runs = [r for r in (args.runs or default_runs()) if r.is_dir()]
    with tempfile.TemporaryDirectory() as tmp:
        python = args.venv / "bin" / "python" if args.venv else make_venv(Path(tmp) / "hta")
        print(table(compare(python, runs, args.steps)))


if __name__ == "__main__":
    main()
