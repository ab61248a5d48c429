#!/usr/bin/env python3
"""What torch.profiler costs the host in each phase of a real training step, measured directly.

``analysis.critical_path.unprofiled`` takes the profiler's drag out at one cost per host event
(``PROFILER_EVENT_LAUNCHES`` of the trace's median launch call) wherever the event is. The
``.item()`` pair (``item_sync``) reads low on 11 of its 13 recordings, and what decides its gain is
the host's time after the sync: the optimizer's launches while the GPU idles. This script asks
whether the profiler costs that phase what it costs the rest of the step.

The pair's before (the GPT of the pairs, batch 24, bf16 autocast, a ``loss.item()`` between backward
and the optimizer) is timed phase by phase on the host (``time.perf_counter`` around the forward,
``loss.backward()``, the ``.item()``, ``opt.step()`` and ``zero_grad``), without the profiler and
inside ``torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True)``, in turn, ``--repeat``
times each (ABAB). Each phase runs inside a ``record_function`` (in both timings alike), so the
trace of the last profiled timing gives the host events in each phase (ops, runtime and driver
calls, on any thread) and the median launch call. Cost per event = (profiled − unprofiled host time
of the phase) / its events; printed in µs and as a share of the median launch call.

With the sync, the host waits for the GPU only inside the ``.item()``: every other phase is the
host's own work, so its time is what the profiler stretches. Variants: the pair's for-loop AdamW
(``foreach=False``), and the foreach one.

    python3 validation/profiler_phase_cost.py [--out DIR] [--steps 30] [--repeat 3] [--tiny]
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_traces"))
import sample_common as sc  # noqa: E402

PHASES = ("forward", "backward", "item", "optimizer", "zero_grad")
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")
EVENTS = ("cpu_op", "cuda_runtime", "cuda_driver")


def build(dev: torch.device, foreach: bool, tiny: bool) -> Callable[[int], list[float]]:
    """One training step of the ``item_sync`` before, returning each phase's host time in µs."""
    cfg = sc.GPTConfig.tiny() if tiny else sc.GPTConfig(batch=24)
    torch.manual_seed(0)
    model = sc.GPT(cfg).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach, fused=False)
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    dtype = torch.bfloat16

    def step(i: int) -> list[float]:
        marks = [time.perf_counter()]
        with record_function("phase:forward"):
            xb, yb = pool[i % len(pool)]
            x, y = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
            with torch.autocast(device_type=dev.type, dtype=dtype):
                loss = F.cross_entropy(model(x).view(-1, cfg.vocab), y.view(-1))
        marks.append(time.perf_counter())
        with record_function("phase:backward"):
            loss.backward()
        marks.append(time.perf_counter())
        with record_function("phase:item"):
            loss.item()
        marks.append(time.perf_counter())
        with record_function("phase:optimizer"):
            opt.step()
        marks.append(time.perf_counter())
        with record_function("phase:zero_grad"):
            opt.zero_grad(set_to_none=True)
        marks.append(time.perf_counter())
        return [1e6 * (b - a) for a, b in zip(marks, marks[1:], strict=False)]

    return step


def timed(step: Callable[[int], list[float]], steps: int, dev: torch.device, profiled: bool, trace: str | None):
    """Each phase's host µs over ``steps`` steps (a list per phase)."""
    out: list[list[float]] = [[] for _ in PHASES]

    def run() -> None:
        for i in range(steps):
            for k, v in enumerate(step(i)):
                out[k].append(v)
        if dev.type == "cuda":
            torch.cuda.synchronize()

    if not profiled:
        run()
        return out
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts, record_shapes=True) as p:
        run()
    if trace:
        p.export_chrome_trace(trace)
    return out


def events_per_phase(trace: str, steps: int) -> tuple[dict[str, float], float]:
    """Host events per step in each phase's windows, and the median launch call (µs)."""
    opener = gzip.open if trace.endswith(".gz") else open
    with opener(trace, "rt") as f:
        ev = json.load(f)["traceEvents"]
    windows: dict[str, list[tuple[float, float]]] = {p: [] for p in PHASES}
    for e in ev:
        name = str(e.get("name", ""))
        if e.get("cat") == "user_annotation" and name.startswith("phase:"):
            windows[name.split(":", 1)[1]].append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    host = sorted(float(e["ts"]) for e in ev if e.get("ph") == "X" and e.get("cat") in EVENTS)
    launches = [float(e["dur"]) for e in ev if e.get("cat") == "cuda_runtime" and e.get("name") in LAUNCHES]
    counts = {}
    for p, ws in windows.items():
        n = sum(bisect.bisect_left(host, b) - bisect.bisect_left(host, a) for a, b in ws)
        counts[p] = n / max(steps, 1)
    return counts, statistics.median(launches) if launches else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=".")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="a tiny GPT, to check the script on a CPU")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    result: dict = {
        "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
        "gpu_uuid": str(torch.cuda.get_device_properties(0).uuid) if dev.type == "cuda" else None,
        "torch": torch.__version__,
        "steps": args.steps,
        "repeat": args.repeat,
        "variants": [],
    }
    tmp = tempfile.mkdtemp()
    for foreach in (False, True):
        name = f"item_sync before, AdamW {'foreach' if foreach else 'for-loop'}"
        step = build(dev, foreach, args.tiny)
        for i in range(args.warmup):
            step(i)
        bare: list[list[float]] = [[] for _ in PHASES]
        prof: list[list[float]] = [[] for _ in PHASES]
        trace = os.path.join(tmp, f"phases_{int(foreach)}.json")
        for r in range(args.repeat):
            for k, v in enumerate(timed(step, args.steps, dev, False, None)):
                bare[k] += v
            last = r == args.repeat - 1
            for k, v in enumerate(timed(step, args.steps, dev, True, trace if last else None)):
                prof[k] += v
        events, launch = events_per_phase(trace, args.steps)
        rows = []
        for k, p in enumerate(PHASES):
            b, q = statistics.median(bare[k]), statistics.median(prof[k])
            per = (q - b) / events[p] if events[p] else float("nan")
            rows.append(
                {
                    "phase": p,
                    "unprofiled_us": b,
                    "profiled_us": q,
                    "events_per_step": events[p],
                    "cost_per_event_us": per,
                    "cost_per_event_launch_share": per / launch if launch == launch and launch > 0 else None,
                }
            )
        result["variants"].append({"variant": name, "launch_call_us": launch, "phases": rows})
        print(f"{name}: median launch call {launch:.2f} µs", flush=True)
        for row in rows:
            share = row["cost_per_event_launch_share"]
            print(
                f"  {row['phase']:>10}: {row['unprofiled_us'] / 1e3:8.2f} ms -> {row['profiled_us'] / 1e3:8.2f} ms, "
                f"{row['events_per_step']:7.0f} events, {row['cost_per_event_us']:6.2f} µs an event"
                + (f" ({share:.2f} of a launch call)" if share is not None else ""),
                flush=True,
            )
        del step
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "profiler_phase_cost.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
