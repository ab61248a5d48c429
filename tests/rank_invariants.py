"""What a distributed run's one MFU must hold (``RankSummary.job``, ``analysis.run.job_mfu``), checked
on every run report the tests build (``invariants.run_problems``): it is the ranks' FLOPs together
over the shortest of their steps without the profiler and their peaks together, every rank has an
estimate where it is a figure, it lies in (0, 1] and inside its likely range, the ranks' note names
the same figure, and only a rank other than the job's says it waited."""

from __future__ import annotations

import math
from typing import Any

from tb_mfu_plugin.analysis.fmt import pct


def job_problems(ranks: dict[str, Any], workers: list[dict[str, Any]]) -> list[str]:
    job = ranks.get("job")
    rows = ranks.get("ranks", [])
    if job is None:
        return ["a rank's waited note with no job's MFU" for r in rows if r.get("waited_note")]
    out: list[str] = [
        f"the job's rank {r['worker']} has a waited note"
        for r in rows
        if r["worker"] == job["worker"] and r.get("waited_note")
    ]
    summaries = [w["summary"] for w in workers]
    steps = [s.get("step_time_unprofiled_us") for s in summaries]
    status = [(s.get("mfu_status") or {}).get("basis") for s in summaries]
    if len(workers) != len(ranks.get("ranks", [])) or job.get("ranks") != len(workers):
        out.append(f"job MFU over {job.get('ranks')} ranks, the table has {len(ranks.get('ranks', []))}")
    if any(x is None for x in steps) or any(b != "without_profiler" for b in status):
        return [*out, "job MFU where a rank has no step without the profiler"]
    if job["step_time_unprofiled_us"] != min(steps):
        out.append(f"job step {job['step_time_unprofiled_us']} is not the shortest rank's, {min(steps)}")
    flops = sum(s.get("flops_per_step") or 0.0 for s in summaries)
    peak = sum((w.get("device") or {}).get("peak_flops") or 0.0 for w in workers)
    if not math.isclose(job["flops_per_step"], flops, rel_tol=1e-9) or not math.isclose(
        job["peak_flops"], peak, rel_tol=1e-9
    ):
        out.append("job FLOPs or peak are not the ranks' together")
    mfu = job["mfu"]
    if not math.isclose(mfu, flops / (job["step_time_unprofiled_us"] * 1e-6 * peak), rel_tol=1e-9):
        out.append(f"job MFU {mfu} is not its FLOPs over its step and peak")
    if not 0.0 < mfu <= 1.0:
        out.append(f"job MFU {mfu} outside (0, 1]")
    rng = job.get("mfu_range")
    if rng is not None and not rng["low"] - 1e-12 <= mfu <= rng["high"] + 1e-12:
        out.append(f"job MFU {mfu} outside its likely range {rng}")
    note = ranks.get("mfu_note")
    if note is not None and f"The job's MFU, {pct(mfu)}," not in note:
        out.append("the ranks' note names another job MFU")
    return out
