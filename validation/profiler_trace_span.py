#!/usr/bin/env python3
"""Does a trace's time agree with CUDA events'? ``--kernels`` in-place adds of 69 µs (on an H100),
queued back to back, timed by CUDA events and by the host's clock without the profiler, then inside
``torch.profiler.profile(activities=[CPU, CUDA])``, where the trace's span of the same kernels (the
first one's start to the last one's end) is set against the events' time.

The truth runs are timed by CUDA events and the analyzer reads the trace's timestamps: a trace whose
time ran a fraction fast or slow would read every GPU-bound step that fraction off.

    python3 validation/profiler_trace_span.py [--kernels 4000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile


def timed(x: torch.Tensor, kernels: int) -> tuple[float, float]:
    """(CUDA events µs, host clock µs) of ``kernels`` adds queued back to back."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(kernels):
        x.add_(1.0)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3, (time.perf_counter() - t0) * 1e6


def span_us(path: str, kernels: int) -> tuple[float, float]:
    """The trace's span of its last ``kernels`` kernels, and the sum of their durations (µs)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ks = sorted((e["ts"], e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")[-kernels:]
    return ks[-1][0] + ks[-1][1] - ks[0][0], sum(k[1] for k in ks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    x = torch.zeros(2**24 + 2**23, device="cuda")
    for _ in range(3):
        timed(x, 200)
    print(torch.cuda.get_device_name(0), torch.__version__)
    for _ in range(args.repeat):
        ev, wall = timed(x, args.kernels)
        print(f"without the profiler: events {ev:.0f} µs, host clock {wall:.0f} µs ({wall / ev:.5f})")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        for _ in range(args.repeat):
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                timed(x, 50)  # the profiler's own start-up
                ev, wall = timed(x, args.kernels)
            prof.export_chrome_trace(path)
            span, busy = span_us(path, args.kernels)
            print(
                f"with the profiler: events {ev:.0f} µs, host clock {wall:.0f} µs, the trace's span of the "
                f"kernels {span:.0f} µs ({span / ev:.5f} of the events'), their durations {busy:.0f} µs"
            )


if __name__ == "__main__":
    main()
