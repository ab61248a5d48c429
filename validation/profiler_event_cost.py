#!/usr/bin/env python3
"""What torch.profiler costs the host per recorded event, measured directly, by kind of host work.

``analysis.critical_path.unprofiled`` takes the profiler's drag out of a trace at ``PROFILER_EVENT_LAUNCHES``
(half) of the trace's median launch call per host event, a share fitted on whole training steps
(validation/fit_profiler_drag.py). This script checks the assumption under that fit, one kind of
host work at a time: is the cost per event the same for an op that launches a kernel, one that
launches none, an autograd backward op, an op of many inputs, and the for-loop optimizer's ops?

For each workload (tiny tensors, so the host alone sets the pace): the loop is timed without the
profiler and inside ``torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True)`` (as
users and our recorders record), in turn, ``--repeat`` times each (ABAB, so a host whose speed drifts
weighs on both alike). The trace of the last profiled timing gives the events per iteration (ops,
runtime and driver calls) and the median launch call. Cost per event = (profiled − unprofiled time
per iteration) / events per iteration; printed in µs and as a share of the median launch call.

    python3 validation/profiler_event_cost.py [--out DIR] [--iters 300] [--repeat 3] [--models]

``--models`` measures, instead, the truth runs' own models at tiny widths (the same ops, the host
setting the pace): the GPT forward under fp16 and bf16 autocast and without it, HF ViT's forward, and
the GPT's whole step with GradScaler and the foreach AdamW (``fp16_gradscaler``) or bf16 and the fused
one. It asks whether a run's own ops cost the profiler more per event than the kinds above.

``--graphs`` measures a CUDA graph's replay instead: graphs of 16, 128 and 512 one-kernel nodes, each
replay timed alone (the GPU drained before it) on the host (the ``cudaGraphLaunch`` call) and on the
GPU (CUDA events around it), without and inside the profiler. It asks what the profiler costs a
replay per node, on the host and on the GPU, which no host event of the trace carries.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")


def workloads(dev: torch.device) -> dict[str, Callable[[], Callable[[], None]]]:
    """name -> a builder of one iteration's host work (built fresh, outside any timing)."""

    def view() -> Callable[[], None]:
        x = torch.randn(64, device=dev)

        def it() -> None:
            for _ in range(20):
                x.view(8, 8).view(-1)

        return it

    def add() -> Callable[[], None]:
        x = torch.randn(64, device=dev)

        def it() -> None:
            for _ in range(20):
                x.add_(1.0)

        return it

    def linear() -> Callable[[], None]:
        x, w, b = torch.randn(8, 64, device=dev), torch.randn(64, 64, device=dev), torch.randn(64, device=dev)

        def it() -> None:
            for _ in range(20):
                F.linear(x, w, b)

        return it

    def cat16() -> Callable[[], None]:
        xs = [torch.randn(64, device=dev) for _ in range(16)]

        def it() -> None:
            for _ in range(20):
                torch.cat(xs)

        return it

    def mlp_fwd_bwd() -> Callable[[], None]:
        layers = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(64, 64), torch.nn.GELU())]).to(dev)
        x = torch.randn(8, 64, device=dev)

        def it() -> None:
            layers(x).square().mean().backward()

        return it

    def compiled_pointwise() -> Callable[[], None]:
        # Inductor wraps each Triton launch in a record_function of its own while the profiler runs
        f = torch.compile(lambda x: ((x * 2 + 1).relu() * 3).sin(), dynamic=False)
        x = torch.randn(64, device=dev)

        def it() -> None:
            for _ in range(20):
                f(x)

        return it

    def compiled_mlp_fwd_bwd() -> Callable[[], None]:
        layers = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(64, 64), torch.nn.GELU())]).to(dev)
        f = torch.compile(layers, dynamic=False)
        x = torch.randn(8, 64, device=dev)

        def it() -> None:
            f(x).square().mean().backward()

        return it

    def adamw(foreach: bool) -> Callable[[], Callable[[], None]]:
        def build() -> Callable[[], None]:
            ps = [torch.nn.Parameter(torch.randn(64, device=dev)) for _ in range(32)]
            for p in ps:
                p.grad = torch.randn_like(p)
            opt = torch.optim.AdamW(ps, lr=1e-4, foreach=foreach)
            return opt.step

        return build

    return {
        "view (no launch)": view,
        "add_ (one launch)": add,
        "linear (addmm)": linear,
        "cat of 16": cat16,
        "MLP forward+backward": mlp_fwd_bwd,
        "compiled pointwise (Triton)": compiled_pointwise,
        "compiled MLP forward+backward": compiled_mlp_fwd_bwd,
        "AdamW for-loop": adamw(False),
        "AdamW foreach": adamw(True),
    }


def model_workloads(dev: torch.device) -> dict[str, Callable[[], Callable[[], None]]]:
    """The truth runs' models (validation/truth_models.py) at tiny widths, their ops unchanged."""
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from whatif_common import sc

    cfg = sc.GPTConfig(n_layers=4, d_model=64, n_heads=4, seq_len=32, batch=2, vocab=256)

    def gpt_forward(dtype: torch.dtype | None) -> Callable[[], Callable[[], None]]:
        def build() -> Callable[[], None]:
            torch.manual_seed(0)
            model = sc.GPT(cfg).to(dev).train()
            x = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len), device=dev)

            def it() -> None:
                with torch.autocast(device_type=dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                    F.cross_entropy(model(x).view(-1, cfg.vocab), x.view(-1))

            return it

        return build

    def gpt_step(fp16_scaler: bool) -> Callable[[], Callable[[], None]]:
        def build() -> Callable[[], None]:
            torch.manual_seed(0)
            model = sc.GPT(cfg).to(dev).train()
            x = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len), device=dev)
            fused = {} if fp16_scaler or dev.type != "cuda" else {"fused": True}
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **fused)
            scaler = torch.amp.GradScaler(dev.type, enabled=fp16_scaler and dev.type == "cuda")
            dtype = torch.float16 if fp16_scaler else torch.bfloat16

            def it() -> None:
                with torch.autocast(device_type=dev.type, dtype=dtype):
                    loss = F.cross_entropy(model(x).view(-1, cfg.vocab), x.view(-1))
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)

            return it

        return build

    def vit_forward() -> Callable[[], None]:
        from transformers import ViTConfig, ViTForImageClassification

        vc = ViTConfig(
            num_hidden_layers=4,
            hidden_size=64,
            num_attention_heads=4,
            intermediate_size=256,
            image_size=32,
            patch_size=8,
            num_labels=10,
        )
        torch.manual_seed(0)
        model = ViTForImageClassification(vc).to(dev).train()
        x, y = torch.randn(2, 3, 32, 32, device=dev), torch.randint(0, 10, (2,), device=dev)

        def it() -> None:
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                model(pixel_values=x, labels=y)

        return it

    try:
        import transformers  # noqa: F401  (HF ViT where installed, as on the GPU machine)

        vit = {"HF ViT forward, bf16 autocast": vit_forward}
    except ImportError:
        vit = {}
    return {
        "GPT forward, fp16 autocast": gpt_forward(torch.float16),
        "GPT forward, bf16 autocast": gpt_forward(torch.bfloat16),
        "GPT forward, fp32": gpt_forward(None),
        **vit,
        "GPT step, fp16 GradScaler, foreach AdamW": gpt_step(True),
        "GPT step, bf16, fused AdamW": gpt_step(False),
    }


def _replays(graph: torch.cuda.CUDAGraph, dev: torch.device, iters: int) -> tuple[float, float]:
    """The median replay's host call and GPU span (µs), each replay alone on a drained GPU."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    host, gpu = [], []
    for _ in range(iters):
        torch.cuda.synchronize(dev)
        start.record()
        t0 = time.perf_counter()
        graph.replay()
        host.append((time.perf_counter() - t0) * 1e6)
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) * 1e3)
    return statistics.median(host), statistics.median(gpu)


def graph_replays(dev: torch.device, iters: int, repeat: int) -> list[dict]:
    """Per graph size: the replay's host call and GPU span (µs, medians), without and inside the
    profiler, in turn ``repeat`` times, and the profiler's cost per node."""
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    rows = []
    for nodes in (16, 128, 512):
        x = torch.zeros(64, device=dev)
        s = torch.cuda.Stream(dev)
        s.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(s):
            for _ in range(3):
                x.add_(1.0)
        torch.cuda.current_stream(dev).wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(nodes):
                x.add_(1.0)

        for _ in range(10):
            graph.replay()
        plain, profiled = [], []
        for _ in range(repeat):
            plain.append(_replays(graph, dev, iters))
            with profile(activities=acts, record_shapes=True):
                _replays(graph, dev, iters)  # the profiler's first replays pay its own start-up
                profiled.append(_replays(graph, dev, iters))
            plain.append(_replays(graph, dev, iters))
        host_u = statistics.median(h for h, _ in plain)
        gpu_u = statistics.median(g for _, g in plain)
        host_p = statistics.median(h for h, _ in profiled)
        gpu_p = statistics.median(g for _, g in profiled)
        rows.append(
            {
                "nodes": nodes,
                "replay_call_us": {"unprofiled": host_u, "profiled": host_p},
                "replay_gpu_us": {"unprofiled": gpu_u, "profiled": gpu_p},
                "profiler_us_per_node": {"call": (host_p - host_u) / nodes, "gpu": (gpu_p - gpu_u) / nodes},
                "timings": {"unprofiled": plain, "profiled": profiled},
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed(it: Callable[[], None], iters: int, dev: torch.device) -> float:
    """µs per iteration of ``iters`` iterations, the GPU drained at both ends."""
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        it()
    sync(dev)
    return (time.perf_counter() - t0) / iters * 1e6


def count(trace_path: str, iters: int) -> dict[str, float]:
    """Events per iteration by category, and the median launch call (µs), from a chrome trace."""
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        events = json.load(f)["traceEvents"]
    n = {"cpu_op": 0, "cuda_runtime": 0, "cuda_driver": 0, "kernel": 0}
    launches: list[float] = []
    for e in events:
        cat = e.get("cat")
        if e.get("ph") != "X" or cat not in n:
            continue
        n[cat] += 1
        if cat in ("cuda_runtime", "cuda_driver") and e.get("name") in LAUNCHES:
            launches.append(float(e["dur"]))
    out = {k: v / iters for k, v in n.items()}
    out["launch_call_us"] = statistics.median(launches) if launches else float("nan")
    return out


def measure(name: str, build: Callable[[], Callable[[], None]], args, dev: torch.device, tmp: str) -> dict:
    it = build()
    for _ in range(args.warmup):
        it()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    plain: list[float] = []
    profiled: list[float] = []
    path = os.path.join(tmp, "trace.json")
    for _ in range(args.repeat):
        plain.append(timed(it, args.iters, dev))
        with profile(activities=acts, record_shapes=True) as prof:
            it()  # the profiler's first iteration pays its own start-up
            profiled.append(timed(it, args.iters, dev))
        plain.append(timed(it, args.iters, dev))
    prof.export_chrome_trace(path)
    c = count(path, args.iters + 1)
    events = c["cpu_op"] + c["cuda_runtime"] + c["cuda_driver"]
    per_event = [(p - u) / events for p, u in zip(profiled, plain[::2], strict=True)]
    return {
        "workload": name,
        "unprofiled_us_per_iter": plain,
        "profiled_us_per_iter": profiled,
        "events_per_iter": c,
        "cost_per_event_us": per_event,
        "cost_per_event_launch_share": [x / c["launch_call_us"] for x in per_event],
    }


def _launch_call_us(dev: torch.device) -> float:
    """The median launch call under the profiler, as the traces measure the host (the add_ workload)."""
    with tempfile.TemporaryDirectory() as tmp:
        it = workloads(dev)["add_ (one launch)"]()
        path = os.path.join(tmp, "trace.json")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for _ in range(50):
                it()
        prof.export_chrome_trace(path)
        return count(path, 50)["launch_call_us"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="write profiler_event_cost.json here")
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", action="store_true", help="the truth runs' models instead (see above)")
    parser.add_argument("--graphs", action="store_true", help="CUDA graph replays instead (see above)")
    args = parser.parse_args()
    dev = torch.device(args.device)
    if args.graphs:
        graphs = graph_replays(dev, args.iters, args.repeat)
        launch = _launch_call_us(dev)
        meta = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "launch_call_us": launch}
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "profiler_graph_cost.json"), "w") as f:
                json.dump({**meta, "graphs": graphs}, f, indent=1)
        print(f"\n{meta['device']}, torch {meta['torch']}, a launch call (profiled) {launch:.2f} µs")
        print("| nodes | replay call µs, without / with the profiler | GPU µs, without / with | ", end="")
        print("profiler µs a node, call / GPU |")
        print("|---:|---:|---:|---:|")
        for r in graphs:
            c, g, k = r["replay_call_us"], r["replay_gpu_us"], r["profiler_us_per_node"]
            print(
                f"| {r['nodes']} | {c['unprofiled']:.1f} / {c['profiled']:.1f} | {g['unprofiled']:.1f} / "
                f"{g['profiled']:.1f} | {k['call']:.2f} / {k['gpu']:.2f} |"
            )
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in (model_workloads(dev) if args.models else workloads(dev)).items():
            rows.append(measure(name, build, args, dev, tmp))
            r = rows[-1]
            print(json.dumps(r), flush=True)
    # a workload that launches nothing (the views) is set against the host's launch call elsewhere
    ref = next((r["events_per_iter"]["launch_call_us"] for r in rows if r["workload"].startswith("add_")), float("nan"))
    for r in rows:
        if r["events_per_iter"]["launch_call_us"] != r["events_per_iter"]["launch_call_us"]:
            r["cost_per_event_launch_share"] = [x / ref for x in r["cost_per_event_us"]]
    meta = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "settings": "profile(activities=[CPU, CUDA], record_shapes=True), timed inside the context",
        "iters": args.iters,
        "repeat": args.repeat,
    }
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        name = "profiler_event_cost_models.json" if args.models else "profiler_event_cost.json"
        with open(os.path.join(args.out, name), "w") as f:
            json.dump({**meta, "workloads": rows}, f, indent=1)
    print(f"\n{meta['device']}, torch {meta['torch']}")
    print("| workload | ops | runtime | driver | launch call µs | cost per event µs | share of a launch call |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        c = r["events_per_iter"]
        cost, share = r["cost_per_event_us"], r["cost_per_event_launch_share"]
        print(
            f"| {r['workload']} | {c['cpu_op']:.0f} | {c['cuda_runtime']:.0f} | {c['cuda_driver']:.0f} | "
            f"{c['launch_call_us']:.2f} | {statistics.median(cost):.2f} ({min(cost):.2f}–{max(cost):.2f}) | "
            f"{statistics.median(share):.2f} ({min(share):.2f}–{max(share):.2f}) |"
        )


if __name__ == "__main__":
    main()
