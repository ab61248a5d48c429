"""The job's MFU on the multi-GPU samples: the shortest of the ranks' steps without the profiler (what
the report shows, ``analysis.run.job_mfu``) against the ranks re-timed together, and both against
the step measured without the profiler (each sample's ``ground_truth.json``), and on the two
pipeline-parallel runs of ``../shared/fixtures/pipeline_parallel_h200``, recorded elsewhere and held
out (their ``ground_truth.json`` beside them), where that folder exists.

Re-timing together: each rank's critical-path model (``analysis.critical_path``) without the
profiler's cost, every collective kernel cut to the time it took on the member that joined it last
(the least any member's took: the rest of the others' was waiting), and held back until its last
member arrives, in a clock shared by the ranks (their traced collective ends, which are simultaneous,
align them). The ranks are re-timed in turn until no collective moves: the arrivals only grow, so
it settles. Each collective is matched across ranks by its process group, its step and its place
among the group's calls in that step. The job's step is then the slowest rank's re-timed step,
over the steps every rank modelled (the first left out: what came before it is not modelled).

The report does not do this: each trace is analysed alone, in its own process or on Dask, and the
run level holds the reports, not the graphs. This script is how the shortcut was checked.

    python validation/joint_ranks.py [--markdown] [SAMPLE ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_mfu_plugin.analysis.bytes.op_bytes import is_roofline_op  # noqa: E402
from tb_mfu_plugin.analysis.critical_path import classes as cls  # noqa: E402
from tb_mfu_plugin.analysis.critical_path.timing import Retimer, Timing  # noqa: E402
from tb_mfu_plugin.analysis.critical_path.unprofiled import PROFILER_EVENT_LAUNCHES, unprofiled  # noqa: E402
from tb_mfu_plugin.analysis.critical_path.whatif import Model  # noqa: E402
from tb_mfu_plugin.analysis.distributed import collectives as co  # noqa: E402
from tb_mfu_plugin.analysis.flops.shapes import is_flop_op  # noqa: E402
from tb_mfu_plugin.analysis.options import AnalysisOptions  # noqa: E402
from tb_mfu_plugin.analysis.per_device import analyze_device  # noqa: E402
from tb_mfu_plugin.analysis.run.job_mfu import job_mfu  # noqa: E402
from tb_mfu_plugin.trace.decode.decode import decode_trace  # noqa: E402

SAMPLES = ("ddp_2gpu", "ddp_4gpu", "fsdp2_2gpu", "fsdp2_4gpu", "tp_2gpu", "tp_4gpu", "tpdp_4gpu")
HELD_OUT = ROOT.parent / "shared" / "fixtures" / "pipeline_parallel_h200"
MAX_ROUNDS = 200
SETTLED_US = 0.5

Key = tuple[str | None, int, int]  # process group, step number, place among the group's calls in the step


@dataclasses.dataclass
class Rank:
    path: Path
    model: Model
    report: Any
    calls: dict[Key, int]  # collective -> op of the model's graph
    ready: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    timing: Timing | None = None


def load(folder: Path) -> list[Rank]:
    out = []
    for f in sorted(folder.glob("rank*.pt.trace.json.gz")):
        # the shapes the pipeline keeps (running.pipeline): the FLOP count needs them
        tables = decode_trace(str(f), keep_inputs=lambda n: is_flop_op(n) or is_roofline_op(n))
        a = analyze_device(tables, int(tables.gpu.device[0]), AnalysisOptions(), name=f.name.split(".")[0])
        assert a.view is not None and a.view.critical is not None, f
        m, gpu = a.view.critical, a.view.gpu
        g = m.g
        pos = np.flatnonzero(g.ops.cls == cls.CODE[cls.COMMUNICATION])
        pos = pos[np.argsort(g.ops.a[pos], kind="stable")]
        calls: dict[Key, int] = {}
        seen: dict[tuple[str | None, int], int] = defaultdict(int)
        for p in pos.tolist():
            ci = int(gpu.comm[int(g.ops.row[p])])
            group = co.group_key(tables.comm_args[ci] if ci >= 0 else None)
            step = int(g.step_number[g.ops.step[p]])
            calls[(group, step, seen[(group, step)])] = p
            seen[(group, step)] += 1
        out.append(Rank(f, m, a.report, calls))
    return out


def _steps(ranks: list[Rank]) -> list[int]:
    """The steps every rank modelled, the first left out where there are more."""
    common = sorted(set.intersection(*[set(r.model.g.step_number.tolist()) for r in ranks]))
    return common[1:] if len(common) > 1 else common


def mean_step(r: Rank, timing: Timing, steps: list[int]) -> float:
    idx = [int(np.flatnonzero(r.model.g.step_number == s)[0]) for s in steps]
    return float(np.mean(timing.step_dur[idx]))


def together(ranks: list[Rank]) -> tuple[list[float], int]:
    """Each rank's mean step over ``_steps`` with the ranks re-timed together, and the rounds taken."""
    members: dict[Key, list[int]] = defaultdict(list)
    for i, r in enumerate(ranks):
        for k in r.calls:
            members[k].append(i)
    shared = [k for k, v in members.items() if len(v) > 1 and k[0] is not None]
    if not shared:  # no call names its process group (a trace without collective args): no clock to share
        return [], 0
    g0 = ranks[0].model.g
    # when each rank's clock origin is on rank 0's: the traced ends of the shared calls coincide
    offset = []
    for r in ranks:
        g = r.model.g
        diffs = [
            (g0.ops.a[ranks[0].calls[k]] + g0.ops.d[ranks[0].calls[k]] - g0.host.t[0])
            - (g.ops.a[r.calls[k]] + g.ops.d[r.calls[k]] - g.host.t[0])
            for k in shared
            if k in ranks[0].calls and k in r.calls
        ]
        offset.append(float(np.median(diffs)) if diffs else 0.0)
    least = {k: min(float(ranks[i].model.g.ops.d[ranks[i].calls[k]]) for i in members[k]) for k in shared}
    weights = []
    for r in ranks:
        w = r.model.unprofiled_weights
        d = w.d.copy()
        for k in shared:
            if k in r.calls:
                d[r.calls[k]] = least[k]
        weights.append(dataclasses.replace(w, d=d))
        r.ready = np.full(len(r.model.g.ops), -np.inf)
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        arrival = []
        for i, (r, w) in enumerate(zip(ranks, weights, strict=True)):
            g = r.model.g
            held = dataclasses.replace(g, ops=dataclasses.replace(g.ops, origin_w=np.maximum(g.ops.origin_w, r.ready)))
            retimer = Retimer(held)
            retimer.__dict__["plan"] = r.model.retimer.plan  # the same pieces: only an edge's weight moved
            r.timing = retimer.run(w)
            arrival.append({k: float(r.timing.a[p] - r.timing.t[0]) + offset[i] for k, p in r.calls.items()})
        moved = 0.0
        for i, r in enumerate(ranks):
            for k in shared:
                if k not in r.calls:
                    continue
                last = max(arrival[q][k] for q in members[k]) - offset[i]
                p = r.calls[k]
                moved = max(moved, last - r.ready[p] if np.isfinite(r.ready[p]) else np.inf)
                r.ready[p] = max(r.ready[p], last)
        if moved < SETTLED_US:
            break
    steps = _steps(ranks)
    return [mean_step(r, r.timing, steps) for r in ranks if r.timing is not None], rounds


def needed_launches(m: Model, truth_us: float) -> float | None:
    """The profiler's cost an event, in launch calls, at which ``m``'s step without the profiler is
    ``truth_us`` (bisected; None where no cost from 0 to 3 launch calls meets it)."""

    def step(launches: float) -> float:
        return m._after(m.retimer.run(unprofiled(m.g, launches / PROFILER_EVENT_LAUNCHES)))

    lo, hi = 0.0, 3.0
    if not step(hi) <= truth_us <= step(lo):
        return None
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if step(mid) > truth_us else (lo, mid)
    return (lo + hi) / 2


def true_step_us(folder: Path) -> float:
    """The job's step without the profiler: the slowest rank's median (a sample's own truth, or the
    held-out fixture's, keyed by the run's folder)."""
    own = folder / "ground_truth.json"
    if own.is_file():
        return float(json.loads(own.read_text())["step_time_us_unprofiled_slowest_rank"])
    return 1e6 * float(
        json.loads((folder.parent / "ground_truth.json").read_text())[folder.name]["step_time_s_unprofiled"]
    )


def row(folder: Path) -> dict[str, Any]:
    ranks = load(folder)
    job = job_mfu([r.report for r in ranks])
    assert job is not None, folder
    steps = _steps(ranks)
    alone = [mean_step(r, r.model.retimer.run(r.model.unprofiled_weights), steps) for r in ranks]
    joint, rounds = together(ranks)
    true_step = true_step_us(folder)
    chosen = next(r for r in ranks if r.report.name == job.worker)
    return {
        "needed_launches": needed_launches(chosen.model, true_step),
        "sample": folder.name,
        "true_mfu": job.flops_per_step / (true_step * 1e-6 * job.peak_flops),
        "job_mfu": job.mfu,
        "job_rank": job.worker,
        "job_range": (job.mfu_range.low, job.mfu_range.high) if job.mfu_range else None,
        "rank_mfus": [r.report.summary.mfu for r in ranks],
        "shortest_alone_us": min(alone),
        "together_us": max(joint) if joint else None,
        "together_mfu": job.flops_per_step / (max(joint) * 1e-6 * job.peak_flops) if joint else None,
        "together_spread": max(joint) / min(joint) if joint else None,
        "rounds": rounds,
        "true_step_us": true_step,
    }


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| sample | MFU without the profiler (truth) | the job's: the shortest estimate | its likely range "
        "| the ranks' own | the ranks re-timed together | launch calls an event its rank needed |",
        "|---|---:|---:|---|---|---:|---:|",
    ]
    for r in rows:
        t = r["true_mfu"]
        rng = f"{100 * r['job_range'][0]:.1f}–{100 * r['job_range'][1]:.1f} %" if r["job_range"] else "–"
        inside = r["job_range"] is not None and r["job_range"][0] <= t <= r["job_range"][1]
        own = f"{100 * min(r['rank_mfus']):.1f}–{100 * max(r['rank_mfus']):.1f} %"
        out.append(
            f"| `{r['sample']}` | {100 * t:.1f} % | {r['job_rank']}: {100 * r['job_mfu']:.1f} % "
            f"({_signed(r['job_mfu'] / t - 1)}) | {rng}{' ✓' if inside else ''} | {own} "
            f"| {_together(r['together_mfu'], t)} "
            f"| {_launches(r['needed_launches'])} |"
        )
    return "\n".join(out)


def _signed(x: float) -> str:
    """ "+3 %", "−12 %" (a minus sign, as the docs' tables write it)."""
    return f"{100 * x:+.0f} %".replace("-", "−")


def _together(mfu: float | None, truth: float) -> str:
    return f"{100 * mfu:.1f} % ({_signed(mfu / truth - 1)})" if mfu is not None else "– (no call names its group)"


def _launches(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("samples", nargs="*", default=list(SAMPLES))
    ap.add_argument("--markdown", action="store_true", help="the table only, as docs/mfu.md has it")
    args = ap.parse_args()
    rows = []
    folders = [ROOT / "sample_traces" / name for name in args.samples]
    if not args.samples or args.samples == list(SAMPLES):
        folders += sorted(d for d in HELD_OUT.glob("gpt_pp2_*") if d.is_dir())
    for folder in folders:
        name = folder.name
        if not folder.is_dir():
            print(f"{folder}: not found", file=sys.stderr)
            continue
        rows.append(row(folder))
        if not args.markdown:
            r = rows[-1]
            joint = (
                f"re-timed together {r['together_us'] / 1e3:.2f} ms (ranks within {r['together_spread']:.3f}x, "
                f"{r['rounds']} rounds)"
                if r["together_us"] is not None
                else "not re-timed together: no call names its process group"
            )
            print(
                f"{name}: truth step {r['true_step_us'] / 1e3:.2f} ms; the shortest estimate over the same steps "
                f"{r['shortest_alone_us'] / 1e3:.2f} ms; {joint}",
                flush=True,
            )
    print(table(rows))


if __name__ == "__main__":
    main()
