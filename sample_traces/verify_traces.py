#!/usr/bin/env python3
"""Sanity-check the recorded sample traces against their ground_truth.json.

    python3 sample_traces/verify_traces.py [sample_traces]

For every run directory: each trace must gunzip and parse as JSON, carry deviceProperties,
kernel events and ProfilerStep# annotations (plus distributedInfo and NCCL kernels for
multi-rank runs) and be <= 2 MiB gzipped.  It also prints a naive count of copies and host
syncs per profiled step next to the `expected` figures (a cross-check of this script, not
the analyzer's job; counts are over the whole trace window divided by steps_profiled).
Exit status 1 if a hard check fails.
"""
from __future__ import annotations

import collections
import glob
import gzip
import json
import os
import sys

LIMIT = 2 * 1024 * 1024
SYNC_APIS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def check_trace(path: str, gt: dict) -> tuple[list[str], dict]:
    problems = []
    size = os.path.getsize(path)
    if size > LIMIT:
        problems.append(f"size {size} > {LIMIT}")
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    ev = doc.get("traceEvents", [])
    cats = collections.Counter(e.get("cat") for e in ev)
    if not doc.get("deviceProperties"):
        problems.append("no deviceProperties")
    if cats.get("kernel", 0) == 0:
        problems.append("no kernel events")
    steps = [e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    if not steps:
        problems.append("no ProfilerStep# annotations")
    nccl = sum(1 for e in ev if e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower())
    if gt.get("world_size", 1) > 1:
        if "distributedInfo" not in doc:
            problems.append("no distributedInfo")
        if nccl == 0:
            problems.append("no nccl kernels")
    n = max(1, gt.get("steps_profiled", len(steps) or 1))
    h2d = [e for e in ev if e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")]
    d2h = [e for e in ev if e.get("cat") == "gpu_memcpy" and "DtoH" in e.get("name", "")]
    syncs = [e for e in ev if e.get("cat") == "cuda_runtime" and e.get("name") in SYNC_APIS]
    stats = {
        "bytes": size,
        "events": len(ev),
        "kernels": cats.get("kernel", 0),
        "nccl_kernels": nccl,
        "steps": len(steps),
        "h2d_bytes_per_step": sum(e.get("args", {}).get("bytes", 0) for e in h2d) / n,
        "d2h_bytes_per_step": sum(e.get("args", {}).get("bytes", 0) for e in d2h) / n,
        "sync_calls_per_step": len(syncs) / n,
        "device": (doc.get("deviceProperties") or [{}])[0].get("name"),
    }
    return problems, stats


def main(root: str) -> int:
    bad = 0
    total_single = 0
    for gt_path in sorted(glob.glob(os.path.join(root, "*", "ground_truth.json"))):
        run_dir = os.path.dirname(gt_path)
        gt = json.load(open(gt_path))
        exp = gt.get("expected", {})
        traces = sorted(glob.glob(os.path.join(run_dir, "*.pt.trace.json.gz")))
        if not traces:
            print(f"{os.path.basename(run_dir)}: NO TRACES")
            bad += 1
            continue
        for t in traces:
            problems, s = check_trace(t, gt)
            if gt.get("world_size", 1) == 1:
                total_single += s["bytes"]
            status = "OK " if not problems else "BAD"
            bad += bool(problems)
            print(f"{status} {os.path.basename(run_dir)}/{os.path.basename(t)[:18]}… {s['bytes'] / 1024:7.0f} KiB "
                  f"events {s['events']:6d} kernels {s['kernels']:5d} nccl {s['nccl_kernels']:4d} steps {s['steps']} | "
                  f"h2d/step {s['h2d_bytes_per_step']:.0f} (exp {exp.get('h2d_bytes_per_step')}) "
                  f"d2h/step {s['d2h_bytes_per_step']:.0f} (exp {exp.get('d2h_bytes_per_step')}) "
                  f"sync calls/step {s['sync_calls_per_step']:.1f} (exp {exp.get('sync_count_per_step')})"
                  + (f"  PROBLEMS: {problems}" if problems else ""))
    print(f"single-GPU traces total: {total_single / 1024 / 1024:.2f} MiB")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))))
