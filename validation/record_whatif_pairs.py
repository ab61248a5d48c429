#!/usr/bin/env python3
"""Record the what-if validation pairs of issue 26 (validation/whatif_workloads.py) on one GPU.

    python3 validation/record_whatif_pairs.py --out validation/whatif_pairs           # one H200
    python3 validation/record_whatif_pairs.py --device cpu --tiny --compile-backend aot_eager --out /tmp/wp

For each pair, the "before" and then the "after" variant: warm-up, FlopCounterMode over one step,
>= 30 unprofiled steps timed with CUDA events (median, p10, p90), then 3 profiled steps, then the
unprofiled steps timed again (a drift check); with --repeat N, each variant is built and timed N times,
before and after in turn, and the truth is over all of those steps. The 3 profiled steps are
(torch.profiler, record_shapes=True, the GPU drained before the recorded steps unless --no-drain) written
to <out>/<pair>/<variant>/rank0.<ns>.pt.trace.json.gz. All ground truth goes to <out>/ground_truth.json.

The drain keeps the warm-up's GPU work out of the first recorded step, but that step then starts with an
empty queue, which a user's trace never does: a sync at the step's start waits for nothing there, so a
fix that removes it gains nothing in that step (the Llama pair's mask sync: 0.01 ms in the first step,
0.7-2.7 ms in the later ones). --no-drain records as a user does (as record_mfu_truth.py does).
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
import whatif_workloads as ww  # noqa: E402
from whatif_workloads import sc  # noqa: E402

WORKER = "rank0"


def percentiles(d: list[float]) -> dict:
    q = statistics.quantiles(d, n=10, method="inclusive")
    return {
        "median_us": statistics.median(d),
        "p10_us": q[0],
        "p90_us": q[8],
        "mean_us": statistics.fmean(d),
        "min_us": min(d),
        "max_us": max(d),
    }


def time_again(pair: str, which: str, args, dev) -> list[float]:
    """The variant built afresh and its unprofiled steps timed once more (no FLOP count, no trace): the
    repeats of ``--repeat`` interleave before and after, so a host whose speed drifts over the minutes
    of a pair weighs on both sides alike."""
    v = ww.PAIRS[pair]["build"](args, dev, fixed=which == "after")
    try:
        for i in range(args.warmup + 3):
            v.step(i)
        steps = sc.time_unprofiled(v.step, dev, args.timed_steps)["step_time_us_unprofiled_steps"]
    finally:
        if v.cleanup is not None:
            v.cleanup()
    del v
    sc.cleanup(dev)
    return steps


def with_repeats(out: dict, repeats: list[list[float]]) -> dict:
    """The truth over every timing of the variant: the first (``out``'s) and the repeats."""
    if not repeats:
        return out
    first = out["step_time_us_unprofiled_steps"]
    every = first + [x for r in repeats for x in r]
    return {
        **out,
        "step_time_unprofiled": percentiles(every),
        "step_time_us_unprofiled_steps": every,
        "unprofiled_timed_steps": len(every),
        "step_time_unprofiled_median_per_repeat": [statistics.median(r) for r in [first, *repeats]],
        "mfu_unprofiled": sc.mfu(out["flops_per_step"], statistics.median(every)),
    }


def record_variant(pair: str, which: str, args, dev) -> dict:
    t0 = time.time()
    run_dir = os.path.join(args.out, pair, which)
    os.makedirs(run_dir, exist_ok=True)
    sc.remove_traces(run_dir, WORKER)
    v = ww.PAIRS[pair]["build"](args, dev, fixed=which == "after")
    try:
        for i in range(args.warmup):
            v.step(i)
        sc.sync(dev)
        warm_s = time.time() - t0
        flops = sc.count_flops(v.flop_step or v.step, dev)
        flops.pop("_flops_by_module", None)
        for i in range(3):
            v.step(i)
        timing = sc.time_unprofiled(v.step, dev, args.timed_steps)
        steps = timing["step_time_us_unprofiled_steps"]
        tried = []
        for active in (3, 2, 1):
            prof = sc.profile_steps(v.step, dev, run_dir, WORKER, active, drain_before_active=not args.no_drain)
            tried.append({"active": active, "trace_bytes": prof["trace_bytes"]})
            if max(prof["trace_bytes"] or [0]) <= args.trace_limit:
                break
            sc.remove_traces(run_dir, WORKER)
        # the same steps timed again after the profiler: a host whose speed drifts shows here, not in the truth
        again = sc.time_unprofiled(v.step, dev, args.timed_steps)["step_time_us_unprofiled_steps"]
    finally:
        if v.cleanup is not None:
            v.cleanup()
    out = {
        "description": v.description,
        "step_time_unprofiled": percentiles(steps),
        "step_time_us_unprofiled_steps": steps,
        "unprofiled_timed_steps": len(steps),
        "step_time_unprofiled_after_profiling": percentiles(again),
        "step_time_us_unprofiled_wall_mean": timing["step_time_us_unprofiled_wall_mean"],
        "step_time_us_profiled_wall": prof["step_time_us_profiled_wall"],
        "step_time_us_profiled_steps": prof["step_time_us_profiled_steps"],
        "steps_profiled": prof["steps_profiled"],
        "flops_per_step": flops["flops_per_step"],
        "flops_by_op": flops["flops_by_op"],
        "mfu_unprofiled": sc.mfu(flops["flops_per_step"], statistics.median(steps)),
        "expected": v.expected,
        "model": v.model,
        "notes": v.notes + ([f"trace size retries: {tried}"] if len(tried) > 1 else []),
        "trace_dir": f"{pair}/{which}",
        "trace_files": prof["trace_files"],
        "trace_bytes": prof["trace_bytes"],
        "warmup_steps": args.warmup,
        "warmup_seconds": round(warm_s, 2),
        **v.extra,
    }
    print(
        f"[{pair}/{which}] median {out['step_time_unprofiled']['median_us']:.0f} us (p10 "
        f"{out['step_time_unprofiled']['p10_us']:.0f}, p90 {out['step_time_unprofiled']['p90_us']:.0f}), prof "
        f"{prof['step_time_us_profiled_wall']:.0f} us, {flops['flops_per_step']:.3e} FLOP, trace "
        f"{prof['trace_bytes']}, {time.time() - t0:.0f} s",
        flush=True,
    )
    del v
    sc.cleanup(dev)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "whatif_pairs"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed-steps", type=int, default=40)
    ap.add_argument("--trace-limit", type=int, default=1024 * 1024)
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument(
        "--no-drain",
        action="store_true",
        help="no sync before the recorded steps: the first starts with the queue the warm-up left, as a user's",
    )
    ap.add_argument(
        "--repeat", type=int, default=1, help="time each variant this many times, before and after in turn (ABAB)"
    )
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", dev.index or 0)
        torch.cuda.set_device(dev)
    gt_path = os.path.join(args.out, "ground_truth.json")
    os.makedirs(args.out, exist_ok=True)
    doc = json.load(open(gt_path)) if os.path.exists(gt_path) else {}
    doc.update({k: v for k, v in sc.env_info(dev).items() if k != "timing_definitions"})
    doc["timing"] = (
        "step_time_unprofiled: median, p10 and p90 (statistics.quantiles, inclusive) over "
        "unprofiled_timed_steps consecutive steps after warm-up, each the time between CUDA events "
        "recorded at step boundaries (no host sync between steps); with --repeat N, over the steps of "
        "N timings of the variant, each built afresh, before and after in turn (ABAB), their medians in "
        "step_time_unprofiled_median_per_repeat; step_time_unprofiled_after_profiling: the first build's "
        "steps timed again after its profiled steps; step_time_us_profiled_wall: mean over the recorded "
        "profiler steps, same method"
    )
    doc["repeat"] = args.repeat
    doc["drained_before_recorded_steps"] = not args.no_drain
    doc["profiler_options"] = (
        "activities=[CPU, CUDA], record_shapes=True, schedule(wait=1, warmup=2, active=3), "
        "tensorboard_trace_handler(worker_name='rank0', use_gzip=True); "
        + (
            "no drain before the recorded steps"
            if args.no_drain
            else "torch.cuda.synchronize() at the end of the last warmup step (not recorded)"
        )
    )
    pairs = doc.setdefault("pairs", {})
    failed = []
    for pair in [p for p in args.only.split(",") if p] or list(ww.PAIRS):
        ww._CAL.clear()
        try:
            res = {w: record_variant(pair, w, args, dev) for w in ("before", "after")}
            again: dict[str, list[list[float]]] = {"before": [], "after": []}
            for _ in range(args.repeat - 1):
                for w in ("before", "after"):
                    again[w].append(time_again(pair, w, args, dev))
            res = {w: with_repeats(res[w], again[w]) for w in res}
        except Exception:
            traceback.print_exc()
            failed.append(pair)
            sc.cleanup(dev)
            continue
        b, a = res["before"]["step_time_unprofiled"]["median_us"], res["after"]["step_time_unprofiled"]["median_us"]
        pairs[pair] = {
            "fix": ww.PAIRS[pair]["fix"],
            **res,
            "measured_gain_us_per_step": b - a,
            "measured_gain_share_of_before": (b - a) / b,
            "speedup": b / a,
            "recorded_at_unix": int(time.time()),
        }
        with open(gt_path, "w") as f:  # after each pair: a later failure keeps what was measured
            json.dump(doc, f, indent=2)
        print(f"[{pair}] gain {b - a:.0f} us/step ({(b - a) / b:.1%} of before), speedup {b / a:.2f}x", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
