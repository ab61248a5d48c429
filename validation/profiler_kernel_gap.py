#!/usr/bin/env python3
"""What torch.profiler costs the GPU per kernel, measured directly: the gap between two kernels queued
back to back, with and without the profiler.

``analysis.critical_path.unprofiled`` takes the profiler's cost out of the host's work only, so a GPU-bound
step keeps the trace's gaps between its kernels. Those gaps are measured under CUPTI's kernel tracing;
if tracing widens them, every GPU-bound step's estimate without the profiler reads long by the kernels
it runs times the widening. This script measures the widening: a stream of ``--kernels`` equal
elementwise kernels (each long enough that the host, profiled too, stays ahead and the queue stays
full), timed with CUDA events without the profiler and inside ``torch.profiler.profile(activities=[CPU,
CUDA], record_shapes=True)``, in turn (ABAB), ``--repeat`` times, for a few kernel lengths. The trace of
the last profiled timing gives the gaps between consecutive kernels as the profiler records them.

Short kernels cannot be queued that way (the profiled host launches more slowly than they run), so
``--behind`` does it as a real step does: a long ``torch.cuda._sleep`` kernel first, during which the
host queues ``--short`` short kernels, which then run back to back. CUDA events after the long kernel
and after the last short one time the short ones alone; the trace gives their durations and gaps.

    python3 validation/profiler_kernel_gap.py [--out DIR] [--kernels 2000] [--repeat 4] [--behind]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import tempfile

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

# float32 elements of the tensor each kernel adds 1 to in place; about 10, 25 and 60 µs on an H100
SIZES = (2**21 + 2**20, 2**23, 2**24 + 2**23)


def timed(x: torch.Tensor, kernels: int, behind_cycles: int = 0) -> float:
    """µs per kernel of ``kernels`` in-place adds queued back to back, by CUDA events; with
    ``behind_cycles``, queued behind a ``torch.cuda._sleep`` kernel that long and timed from its end."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if behind_cycles:
        torch.cuda._sleep(behind_cycles)
    start.record()
    for _ in range(kernels):
        x.add_(1.0)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / kernels


def trace_gaps(path: str, last: int = 0) -> tuple[float, float]:
    """The median kernel and the median gap between consecutive kernels (µs) of a chrome trace, over
    its ``last`` kernels where given (the long kernel before them left out)."""
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        events = json.load(f)["traceEvents"]
    ks = sorted((e["ts"], e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")[-last:]
    ts = np.array([k[0] for k in ks])
    dur = np.array([k[1] for k in ks])
    gaps = ts[1:] - (ts[:-1] + dur[:-1])
    return float(np.median(dur)), float(np.median(gaps))


# float32 elements of the short kernels queued behind a long one: about 2, 3 and 6 µs on an H100
SHORT_SIZES = (2**12, 2**20, 2**22)


def _cycles_per_us() -> float:
    """The GPU's clock as ``torch.cuda._sleep`` counts it, in cycles a µs (timed by CUDA events)."""
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    return 10_000_000 / (start.elapsed_time(end) * 1e3)


def measure(n: int, kernels: int, behind_cycles: int, args: argparse.Namespace, tmp: str) -> dict:
    """``kernels`` adds of ``n`` elements timed without and with the profiler, in turn; with
    ``behind_cycles``, queued behind a sleep kernel that long (``timed``)."""
    x = torch.zeros(n, device="cuda")
    for _ in range(3):
        timed(x, kernels, behind_cycles)
    plain: list[float] = []
    profiled: list[float] = []
    path = os.path.join(tmp, "trace.json")
    for _ in range(args.repeat):
        plain.append(timed(x, kernels, behind_cycles))
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            if not behind_cycles:
                timed(x, 50)  # the profiler's own start-up (a sleep kernel in front covers it)
            profiled.append(timed(x, kernels, behind_cycles))
        plain.append(timed(x, kernels, behind_cycles))
    prof.export_chrome_trace(path)
    kernel_us, gap_us = trace_gaps(path, kernels if behind_cycles else 0)
    return {
        "elements": n,
        "queued_behind_sleep_cycles": behind_cycles,
        "kernel_us_in_trace": kernel_us,
        "gap_us_in_trace": gap_us,
        "unprofiled_us_per_kernel": plain,
        "profiled_us_per_kernel": profiled,
        "widening_us_per_kernel": [p - statistics.median(plain) for p in profiled],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="write profiler_kernel_gap.json here")
    parser.add_argument("--kernels", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--behind", action="store_true", help="short kernels queued behind a long one instead")
    parser.add_argument("--short", type=int, default=500, help="short kernels a timing, with --behind")
    args = parser.parse_args()
    rows = []
    sizes, name = (SHORT_SIZES, "behind") if args.behind else (SIZES, "sizes")
    kernels = args.short if args.behind else args.kernels
    # long enough for the profiled host to queue every short kernel before it ends (40 µs a launch)
    cycles = int(_cycles_per_us() * 40 * kernels) if args.behind else 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            rows.append(measure(n, kernels, cycles, args, tmp))
            print(json.dumps(rows[-1]), flush=True)
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "kernels": kernels}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        out = "profiler_kernel_gap_behind.json" if args.behind else "profiler_kernel_gap.json"
        with open(os.path.join(args.out, out), "w") as f:
            json.dump({**meta, name: rows}, f, indent=1)
    print(f"\n{meta['device']}, torch {meta['torch']}, {kernels} kernels a timing{' behind a long one' * args.behind}")
    print("| kernel µs (trace) | gap µs (trace) | µs a kernel without | with the profiler | widening µs a kernel |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        w = r["widening_us_per_kernel"]
        plain = statistics.median(r["unprofiled_us_per_kernel"])
        profiled = statistics.median(r["profiled_us_per_kernel"])
        print(
            f"| {r['kernel_us_in_trace']:.2f} | {r['gap_us_in_trace']:.2f} | {plain:.2f} | {profiled:.2f} | "
            f"{statistics.median(w):.2f} ({min(w):.2f}–{max(w):.2f}) |"
        )


if __name__ == "__main__":
    main()
