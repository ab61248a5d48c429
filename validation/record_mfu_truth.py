#!/usr/bin/env python3
"""Record the MFU ground truth of issue 33 (validation/truth_models.py) on one GPU.

    python3 validation/record_mfu_truth.py --out validation/mfu_truth                 # one H100
    python3 validation/record_mfu_truth.py --device cpu --tiny --compile-backend aot_eager --out /tmp/mt

Each run: warm-up, FlopCounterMode over one step (an eager twin where the real step cannot be counted),
>= 30 steps timed WITHOUT the profiler (CUDA events at the step boundaries, no host sync between steps),
then torch.profiler as a user runs it: schedule(wait=1, warmup=2, active=3), record_shapes=True,
tensorboard_trace_handler; no drain before the recorded steps, so the trace shows the profiler's own
drag on the first recorded step; then as many steps timed again without it (the truth is over both
timings). Ground truth: <out>/ground_truth.json (runs.<name>).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth_models as tm  # noqa: E402
from record_whatif_pairs import WORKER, percentiles  # noqa: E402
from whatif_common import sc  # noqa: E402


def record_run(name: str, args, dev) -> dict:
    t0 = time.time()
    run_dir = os.path.join(args.out, name)
    os.makedirs(run_dir, exist_ok=True)
    sc.remove_traces(run_dir, WORKER)
    v = tm.BUILDERS[name](args, dev)
    probe = v.extra.pop("_probe", None)
    try:
        for i in range(args.warmup):
            v.step(i)
        sc.sync(dev)
        warm_s = time.time() - t0
        flops = sc.count_flops(v.flop_step or v.step, dev)
        flops.pop("_flops_by_module", None)
        probed = probe() if probe is not None else {}
        for i in range(3):
            v.step(i)
        timing = sc.time_unprofiled(v.step, dev, args.timed_steps)
        steps = timing["step_time_us_unprofiled_steps"]
        prof = sc.profile_steps(v.step, dev, run_dir, WORKER, args.active, drain_before_active=False)
        # the same steps timed again after the profiler: a host whose speed drifts shows here, not in the truth
        again = sc.time_unprofiled(v.step, dev, args.timed_steps)["step_time_us_unprofiled_steps"]
    finally:
        if v.cleanup is not None:
            v.cleanup()
    # the truth is over the steps timed before and after the profiled ones: a host whose speed drifts
    # over the run weighs on the profiled window from both sides
    first = steps
    steps = first + again
    med = statistics.median(steps)
    out = {
        "description": v.description,
        "flops_per_step": flops["flops_per_step"],
        "flops_by_op": flops["flops_by_op"],
        "flops_source": "FlopCounterMode on an eager twin" if v.flop_step else "FlopCounterMode on the step itself",
        "step_time_unprofiled": percentiles(steps),
        "step_time_us_unprofiled_steps": steps,
        "unprofiled_timed_steps": len(steps),
        "step_time_unprofiled_median_before_and_after_profiling": [statistics.median(first), statistics.median(again)],
        "step_time_us_unprofiled_wall_mean": timing["step_time_us_unprofiled_wall_mean"],
        "mfu_unprofiled": sc.mfu(flops["flops_per_step"], med),
        "mfu_unprofiled_p10_p90": [
            sc.mfu(flops["flops_per_step"], percentiles(steps)["p90_us"]),
            sc.mfu(flops["flops_per_step"], percentiles(steps)["p10_us"]),
        ],
        "step_time_us_profiled_wall": prof["step_time_us_profiled_wall"],
        "step_time_us_profiled_steps": prof["step_time_us_profiled_steps"],
        "step_time_us_profiled_cpu_marks_mean": prof["step_time_us_profiled_cpu_marks_mean"],
        "mfu_profiled_mean_of_recorded_steps": sc.mfu(flops["flops_per_step"], prof["step_time_us_profiled_wall"]),
        "steps_profiled": prof["steps_profiled"],
        "model": v.model,
        "notes": v.notes,
        "trace_dir": name,
        "trace_files": prof["trace_files"],
        "trace_bytes": prof["trace_bytes"],
        "warmup_steps": args.warmup,
        "warmup_seconds": round(warm_s, 2),
        "recorded_at_unix": int(time.time()),
        **probed,
        **v.extra,
    }
    print(
        f"[{name}] median {med:.0f} us (p10 {out['step_time_unprofiled']['p10_us']:.0f}, p90 "
        f"{out['step_time_unprofiled']['p90_us']:.0f}), profiled {prof['step_time_us_profiled_steps']}, "
        f"{flops['flops_per_step']:.4e} FLOP, MFU {out['mfu_unprofiled']:.1%} unprof / "
        f"{out['mfu_profiled_mean_of_recorded_steps']:.1%} prof, trace {prof['trace_bytes']}, {time.time() - t0:.0f} s",
        flush=True,
    )
    del v
    sc.cleanup(dev)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "mfu_truth"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed-steps", type=int, default=40)
    ap.add_argument("--active", type=int, default=3)
    ap.add_argument("--compile-backend", default="inductor")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", dev.index or 0)
        torch.cuda.set_device(dev)
    gt_path = os.path.join(args.out, "ground_truth.json")
    os.makedirs(args.out, exist_ok=True)
    doc = json.load(open(gt_path)) if os.path.exists(gt_path) else {}
    doc.update({k: v for k, v in sc.env_info(dev).items() if k != "timing_definitions"})
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        doc["device_properties"] = {
            "name": p.name,
            "multi_processor_count": p.multi_processor_count,
            "total_memory": p.total_memory,
            "capability": [p.major, p.minor],
        }
        try:
            import transformers

            doc["transformers_version"] = transformers.__version__
        except ImportError:
            pass
    doc["mfu_definition"] = "flops_per_step / (step time) / 989.4e12 (dense bf16 peak, H100/H200 SXM), every run"
    doc["timing"] = (
        "step_time_unprofiled: median, p10 and p90 (statistics.quantiles, inclusive) over unprofiled_timed_steps "
        "steps after warm-up, half timed before the profiled steps and half after them (the median of each half "
        "in step_time_unprofiled_median_before_and_after_profiling), each the time between CUDA events "
        "recorded at step boundaries (no host sync between steps); step_time_us_profiled_steps: the same "
        "for each recorded profiler step"
    )
    doc["profiler_options"] = (
        f"activities=[CPU, CUDA], record_shapes=True, schedule(wait=1, warmup=2, active={args.active}), "
        "tensorboard_trace_handler(worker_name='rank0', use_gzip=True); no drain before the recorded steps"
    )
    runs = doc.setdefault("runs", {})
    failed = []
    for name in [n for n in args.only.split(",") if n] or list(tm.BUILDERS):
        try:
            runs[name] = record_run(name, args, dev)
        except Exception:
            traceback.print_exc()
            failed.append(name)
            sc.cleanup(dev)
            continue
        with open(gt_path, "w") as f:  # after each run: a later failure keeps what was measured
            json.dump(doc, f, indent=2)
    print("failed:", failed, flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
