#!/usr/bin/env python3
"""Overhead of ``MfuMonitor`` on real training loops: step time with and without it.

Two of our sample workloads (sample_traces/sample_common.py, record_samples.py):

- ``gpt_sdpa``: the 4-layer GPT (d_model 1024, seq 1024, batch 8), SDPA attention, bf16
  autocast, fused AdamW, pinned inputs copied with ``non_blocking=True``: GPU-bound, the
  host runs ahead of the GPU (the case where a per-step sync would hurt most);
- ``tiny_mlp``: 8 x Linear(256, 256), batch 32, per-parameter AdamW: launch-bound, so any
  host time the monitor adds per step shows up in the step time.

Runs alternate between the two modes in blocks of ``--block`` steps (order flipped each
round, so drift hits both alike); a block is timed with the wall clock between two
``cuda.synchronize()`` calls, nothing inside it. The monitor logs to a TensorBoard
directory every ``--log-every`` steps (10 by default: 10x more often than its default,
so its logging cost is counted generously). Prints the median step time of each mode over
the rounds and the overhead in percent, and the monitor's own step time and MFU.

    PYTHONPATH=. python3 benchmarks/bench_mfu_monitor.py            # one GPU, < 3 minutes on an H200
    PYTHONPATH=. python3 benchmarks/bench_mfu_monitor.py --device cpu --tiny --rounds 3   # a dry run
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sample_traces"))
import sample_common as sc  # noqa: E402

from tb_mfu_plugin.profiling import MfuMonitor, count_step_flops  # noqa: E402
from tb_mfu_plugin.scalars.tbevents import ScalarWriter  # noqa: E402

Step = Callable[[int], None]


def _autocast(dev: torch.device):  # type: ignore[no-untyped-def]
    return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)


def gpt_sdpa(dev: torch.device, tiny: bool, compiled: bool) -> Step:
    cfg = sc.GPTConfig.tiny() if tiny else sc.GPTConfig()
    torch.manual_seed(0)
    model = sc.GPT(cfg, naive=False).to(dev).train()
    run = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)

    def step(i: int) -> None:
        xb, yb = pool[i % len(pool)]
        x, y = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        with _autocast(dev):
            loss = F.cross_entropy(run(x).view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def tiny_mlp(dev: torch.device, tiny: bool, compiled: bool) -> Step:
    width, depth, batch = 256, 8, 32
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10)).to(dev).train()
    run = torch.compile(model) if compiled else model
    x = torch.randn(batch, width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=False)

    def step(i: int) -> None:
        with _autocast(dev):
            loss = F.cross_entropy(run(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


WORKLOADS: dict[str, Callable[[torch.device, bool, bool], Step]] = {"gpt_sdpa": gpt_sdpa, "tiny_mlp": tiny_mlp}


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _block(step: Step, dev: torch.device, first: int, n: int, monitor: MfuMonitor | None) -> float:
    """Mean wall-clock step time (µs) of n steps, synchronised only before and after."""
    _sync(dev)
    t0 = time.perf_counter()
    for i in range(first, first + n):
        step(i)
        if monitor is not None:
            monitor.step()
    _sync(dev)
    return (time.perf_counter() - t0) * 1e6 / n


def bench(name: str, args: argparse.Namespace, dev: torch.device, logdir: str) -> dict[str, float]:
    step = WORKLOADS[name](dev, args.tiny, args.compile)
    for i in range(args.warmup):
        step(i)
    flops = count_step_flops(lambda: step(0))
    writer = ScalarWriter(os.path.join(logdir, name))
    plain: list[float] = []
    monitored: list[float] = []
    mon_step_us: list[float] = []
    mfus: list[float] = []
    peak = MfuMonitor().peak_flops
    i = args.warmup
    for r in range(args.rounds):
        for with_monitor in (False, True) if r % 2 == 0 else (True, False):
            mon = MfuMonitor(writer, log_every=args.log_every, flops_per_step=flops) if with_monitor else None
            us = _block(step, dev, i, args.block, mon)
            i += args.block
            if mon is not None:
                mon.close()  # one sync for the last steps: after the timed block, as at the end of training
                monitored.append(us)
                mon_step_us += [log.step_time_us for log in mon.logs]
                mfus += [log.mfu for log in mon.logs if log.mfu is not None]
            else:
                plain.append(us)
    writer.close()
    without, with_ = statistics.median(plain), statistics.median(monitored)
    return {
        "without_us": without,
        "with_us": with_,
        "overhead_pct": 100.0 * (with_ - without) / without,
        "monitor_step_us": statistics.median(mon_step_us) if mon_step_us else float("nan"),
        "mfu": statistics.median(mfus) if mfus else float("nan"),
        "flops": float(flops),
        # the same FLOPs over the wall-clock step time: what the monitor's MFU should agree with
        "wall_mfu": flops / (with_ * 1e-6) / peak if peak else float("nan"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=[*WORKLOADS, "all"], default="all")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--rounds", type=int, default=25, help="with/without pairs (default 25)")
    p.add_argument("--block", type=int, default=20, help="steps per timed block (default 20)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--tiny", action="store_true", help="tiny GPT shapes (CPU dry runs)")
    p.add_argument("--compile", action="store_true", help="torch.compile the models (adds compile time)")
    args = p.parse_args()
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    print(
        f"torch {torch.__version__} on {name}; {args.rounds} rounds x {args.block} steps per mode, "
        f"monitor logging every {args.log_every} steps{' (torch.compile)' if args.compile else ''}"
    )
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    with tempfile.TemporaryDirectory(prefix="bench_mfu_monitor.") as logdir:
        for wl in names:
            t0 = time.perf_counter()
            res = bench(wl, args, dev, logdir)
            print(
                f"{wl:9s} step time without {res['without_us'] / 1e3:8.3f} ms, with monitor "
                f"{res['with_us'] / 1e3:8.3f} ms: overhead {res['overhead_pct']:+.2f} %  "
                f"(monitor's own step time {res['monitor_step_us'] / 1e3:.3f} ms, MFU {100 * res['mfu']:.2f} % "
                f"[wall clock: {100 * res['wall_mfu']:.2f} %] of {res['flops'] / 1e9:.1f} GFLOP/step; "
                f"{time.perf_counter() - t0:.0f} s)"
            )


if __name__ == "__main__":
    main()
