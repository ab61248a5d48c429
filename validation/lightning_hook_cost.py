"""What Lightning's module-name hooks cost the host, as a multiple of what the profiler costs an event (issue 33).

Lightning's ``PyTorchProfiler(record_module_names=True)``, its default, registers a forward pre-hook and a
forward hook on every named submodule (``RegisterRecordFunction``): a Python call that opens a
``record_function("[pl][module]…")`` and one that closes it. They stay registered from the profiler's first
``start`` to the end of the fit, and a run without the profiler has none. So each ``[pl][module]``
annotation in a Lightning trace stands for host time that the profiler's cost per event does not cover.

This times one training forward+backward of the recorded HF Llama's module tree (its depth and heads,
tiny widths, so host work dominates; on the GPU where there is one, else the CPU) four ways: bare; with
Lightning's own hooks; under torch.profiler (record_shapes=True, as Lightning records); both. It prints
the hooks' cost per hooked module call and the profiler's cost per recorded host event, their ratio, and
on a GPU both in launch calls (the trace's median ``cudaLaunchKernel``), the unit the product states host costs in.

    python validation/lightning_hook_cost.py [--lightning-src DIR] [--reps 200]

``--lightning-src``: a folder holding ``lightning/pytorch/profilers/pytorch.py`` (an unzipped wheel),
where ``lightning`` is not installed; the class is taken from Lightning's own source, not copied.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib.util
import json
import os
import statistics
import sys
import time

import torch
from torch.autograd.profiler import record_function


def lightning_register(src_dir: str | None):
    """Lightning's RegisterRecordFunction: imported, or compiled from its own source file."""
    if src_dir is None:
        from lightning.pytorch.profilers.pytorch import RegisterRecordFunction

        return RegisterRecordFunction
    path = os.path.join(src_dir, "lightning", "pytorch", "profilers", "pytorch.py")
    if not os.path.exists(path) and importlib.util.find_spec("lightning"):
        from lightning.pytorch.profilers.pytorch import RegisterRecordFunction

        return RegisterRecordFunction
    src = open(path).read()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == "RegisterRecordFunction")
    scope = {"record_function": record_function, "partial": functools.partial, "nn": torch.nn, "Tensor": torch.Tensor}
    scope.update({"Any": object, "RemovableHandle": object})
    exec(compile(ast.Module([node], []), path, "exec"), scope)
    return scope["RegisterRecordFunction"]


def model(dev: torch.device):
    from transformers import LlamaForCausalLM
    from truth_models import llama_config

    # the recorded run's depth and heads (validation/mfu_truth/lightning_ground_truth.json), narrow
    t = {"d": 64, "ffn": 128, "n_layers": 4, "heads": 16, "kv": 4, "vocab": 256, "seq": 64}
    cfg = llama_config(t, "sdpa")
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(dev).train()


def launch_call_us(prof) -> float | None:
    """The median launch call of a profiled step: the unit the product states host costs in."""
    calls = [
        e.cpu_time_total
        for e in prof.events()
        if e.name in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")
    ]
    return statistics.median(calls) if calls else None


def timed(step, reps: int, profile: dict | None = None) -> float:
    """The median step in µs; under the profiler, in sessions of 20 steps (a session's buffer grows with
    every event it keeps, and a user's schedule records a few steps at a time)."""
    out: list[float] = []
    while len(out) < reps:
        with torch.profiler.profile(**profile) if profile else contextlib.nullcontext():
            for i in range(25):
                t = time.perf_counter()
                step()
                if i >= 5:  # the session's first steps pay its start
                    out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lightning-src", default=None)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5, help="the four ways timed in turn, this many times")
    args = ap.parse_args()
    torch.set_num_threads(1)
    Register = lightning_register(args.lightning_src)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    m = model(dev)
    ids = torch.randint(0, 256, (1, 16), device=dev)
    calls = [0]

    def step():
        m(input_ids=ids, labels=ids).loss.backward()
        m.zero_grad(set_to_none=True)

    reg = Register(m)
    original = reg._start_recording_forward

    def counted(*a, **k):
        calls[0] += 1
        return original(*a, **k)

    reg._start_recording_forward = counted
    reg.__enter__()
    calls[0] = 0
    step()
    hooked_calls = calls[0]
    reg.__exit__(None, None, None)
    reg._start_recording_forward = original

    activities = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    prof_kw = {"activities": activities, "record_shapes": True}
    with torch.profiler.profile(**prof_kw) as p:
        step()
    # host events only: the product's cost per event counts ops, runtime and driver calls
    events = sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CPU)
    launch = launch_call_us(p)

    rows = []
    for _ in range(args.rounds):
        bare = timed(step, args.reps)
        reg.__enter__()
        hooks = timed(step, args.reps)
        reg.__exit__(None, None, None)
        profiled = timed(step, args.reps, prof_kw)
        reg.__enter__()
        both = timed(step, args.reps, prof_kw)
        reg.__exit__(None, None, None)
        rows.append((bare, hooks, profiled, both))
    bare, hooks, profiled, both = (statistics.median(c) for c in zip(*rows, strict=True))
    hook_us = (hooks - bare) / hooked_calls
    event_us = (profiled - bare) / events
    hook_profiled_us = (both - profiled) / hooked_calls
    out = {
        "torch": torch.__version__,
        "hooked_module_calls_per_step": hooked_calls,
        "profiler_events_per_step": events,
        "step_us": {"bare": bare, "hooks": hooks, "profiled": profiled, "hooks_profiled": both},
        "hook_us_per_module_call": hook_us,
        "hook_us_per_module_call_profiled": hook_profiled_us,
        "profiler_us_per_event": event_us,
        "hooks_in_events": hook_us / event_us,
        "hooks_profiled_in_events": hook_profiled_us / event_us,
        "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
        "launch_call_us": launch,
        "hook_in_launch_calls": hook_us / launch if launch else None,
        "hook_profiled_in_launch_calls": hook_profiled_us / launch if launch else None,
        "event_in_launch_calls": event_us / launch if launch else None,
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
