#!/usr/bin/env python3
"""Record pipeline-parallel sample traces (torch.distributed.pipelining) and their ground truth.

The GPT of sample_common.py (4 blocks, d 1024, seq 1024, bf16 autocast, SDPA, fused AdamW) split
into stages, one torchrun per schedule:

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    for s in gpipe 1f1b interleaved; do
      torchrun --standalone --nproc_per_node 2 sample_traces/record_pipeline.py --schedule $s --out sample_traces
    done
    # CPU dry run (gloo, tiny shapes, no CUDA activity in the traces):
    torchrun --standalone --nproc_per_node 2 sample_traces/record_pipeline.py --device cpu --tiny --schedule gpipe \
      --out /tmp/pp

Stages: ``gpipe`` and ``1f1b`` put one stage on each rank (rank 0: embeddings + blocks 0-1,
rank 1: blocks 2-3 + final LayerNorm + lm_head); ``interleaved`` (ScheduleInterleaved1F1B) puts
two on each (4 stages of one block each; rank r holds stages r and r + 2; the embeddings go with
stage 0, the head with stage 3). The global batch (8 sequences) is split into --microbatches
micro-batches (8: one sequence each). The lm_head (vocab 32768) makes the last stage the
heaviest, as in real models: the measured bubble exceeds the analytic (p-1)/(v*m+p-1).

Writes <out>/pp_<schedule>_<N>gpu/rank<r>.<ns>.pt.trace.json.gz for every rank and
<out>/pp_<schedule>_<N>gpu/ground_truth.json (rank 0), with per-rank FLOPs (FlopCounterMode over
this rank's stages, forward and backward of every micro-batch), the unprofiled step time (CUDA
events, no profiler), the micro-batches and the analytic bubble.

Written against the torch 2.11 API (PipelineStage with runtime shape inference; step(*args,
target=..., losses=...)); options newer versions add (return_outputs) are passed only where the
installed torch takes them.
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sample_common as sc  # noqa: E402

SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B", "interleaved": "ScheduleInterleaved1F1B"}


class Stage(nn.Module):
    """Blocks ``lo:hi`` of a GPT, with the embeddings on the first stage and the head on the last."""

    def __init__(self, gpt: sc.GPT, lo: int, hi: int, first: bool, last: bool):
        super().__init__()
        self.first, self.last = first, last
        if first:
            self.wte, self.wpe = gpt.wte, gpt.wpe
        self.blocks = nn.ModuleList(gpt.blocks[lo:hi])
        if last:
            self.ln_f, self.lm_head = gpt.ln_f, gpt.lm_head

    def forward(self, x):
        if self.first:
            pos = torch.arange(x.shape[1], device=x.device)
            x = self.wte(x) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        if self.last:
            x = self.lm_head(self.ln_f(x))
        return x


def stage_layout(n_layers: int, pp: int, per_rank: int) -> list[tuple[int, int]]:
    """Blocks of each of the pp * per_rank stages, as even as the layer count allows."""
    n = pp * per_rank
    assert n_layers >= n, f"{n} stages need at least {n} blocks (have {n_layers})"
    bounds = [round(i * n_layers / n) for i in range(n + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


def build_schedule(args, gpt: sc.GPT, dev, rank: int, ws: int, m: int):
    """The rank's stages and the schedule that runs them; torch's loop-around assignment for the
    interleaved schedule (rank r holds stages r, r + ws, ...)."""
    from torch.distributed import pipelining as pp

    per_rank = 2 if args.schedule == "interleaved" else 1
    layout = stage_layout(gpt.cfg.n_layers, ws, per_rank)
    n_stages = len(layout)
    mine = [rank + k * ws for k in range(per_rank)]
    stages, modules = [], []
    for s in mine:
        lo, hi = layout[s]
        mod = Stage(gpt, lo, hi, first=s == 0, last=s == n_stages - 1).to(dev)
        modules.append(mod)
        stages.append(pp.PipelineStage(mod, s, n_stages, dev))
    vocab = gpt.cfg.vocab

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, vocab).float(), target.reshape(-1))

    cls = getattr(pp, SCHEDULES[args.schedule])
    schedule = cls(stages if per_rank > 1 else stages[0], n_microbatches=m, loss_fn=loss_fn)
    return schedule, modules, mine, layout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schedule", required=True, choices=sorted(SCHEDULES))
    ap.add_argument("--microbatches", type=int, default=8)
    sc.add_run_args(ap, os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()

    rank, ws, _, dev = sc.init_distributed(args.device)
    m = args.microbatches
    run_name = f"pp_{args.schedule}_{ws}gpu"
    run_dir = os.path.join(args.out, run_name)
    worker = f"rank{rank}"
    if rank == 0:
        os.makedirs(run_dir, exist_ok=True)
    dist.barrier()
    sc.remove_traces(run_dir, worker)

    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig()
    cfg.n_layers = max(cfg.n_layers, 2 * ws if args.schedule == "interleaved" else ws)
    cfg.batch = max(cfg.batch, m)  # at least one sequence per micro-batch
    assert cfg.batch % m == 0, "the batch must split into equal micro-batches"
    torch.manual_seed(0)  # identical init on every rank: each keeps only its stages
    gpt = sc.GPT(cfg, naive=False)
    info = sc.gpt_model_info(gpt)
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)

    # Model FLOPs of the whole step without pipelining, on rank 0's device: the useful work the
    # pipeline shares (the head on the last stage, the rest spread over the stages)
    flops_model = None
    if rank == 0:
        plain = sc.GPT(cfg, naive=False).to(dev)

        def plain_step(i):
            xb, yb = pool[i % len(pool)]
            x, y = xb.to(dev), yb.to(dev)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(plain(x).reshape(-1, cfg.vocab), y.reshape(-1))
            loss.backward()

        flops_model = sc.count_flops(plain_step, dev)["flops_per_step"]
        del plain
        sc.cleanup(dev)

    schedule, modules, my_stages, layout = build_schedule(args, gpt, dev, rank, ws, m)
    n_stages = len(layout)
    first_rank = 0 in my_stages
    last_rank = (n_stages - 1) in my_stages
    params = [p for mod in modules for p in mod.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, fused=dev.type == "cuda")
    extra = {"return_outputs": False} if "return_outputs" in inspect.signature(schedule.step).parameters else {}

    def step(i):
        xb, yb = pool[i % len(pool)]
        feed = (xb.to(dev, non_blocking=True),) if first_rank else ()
        target = yb.to(dev, non_blocking=True) if last_rank else None
        losses = [] if last_rank else None
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            schedule.step(*feed, target=target, losses=losses, **extra)
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.time()
    for i in range(args.warmup):
        step(i)
    sc.sync(dev)
    warm_s = time.time() - t0
    # FLOPs this rank executes: its stages' forward and backward of every micro-batch
    fc = sc.count_flops(step, dev)
    timing = sc.time_unprofiled(step, dev, args.timed_steps)
    if rank == 0:
        print(f"[{run_name}] unprofiled median {timing['step_time_us_unprofiled']:.1f} us", flush=True)

    prof, tried = sc.profile_under_limit(step, dev, run_dir, worker, ws, args.trace_limit)

    per_rank_stages = len(my_stages)
    analytic = (ws - 1) / (per_rank_stages * m + ws - 1)
    mine = {
        "rank": rank,
        "stages": my_stages,
        "blocks": [list(range(*layout[s])) for s in my_stages],
        "embeddings": first_rank,
        "head": last_rank,
        "flops_per_step": fc["flops_per_step"],
        "flops_by_op": fc["flops_by_op"],
        "flops_source": "FlopCounterMode over one training step of this rank (its stages, every micro-batch)",
        **sc.rank_timing(fc["flops_per_step"], timing, prof),
    }
    per_rank = [None] * ws
    dist.all_gather_object(per_rank, mine)

    if rank == 0:
        slowest_unprof = max(r["step_time_us_unprofiled"] for r in per_rank)
        slowest_prof = max(r["step_time_us_profiled_wall"] for r in per_rank)
        tokens = cfg.batch * cfg.seq_len
        in_bytes = (cfg.batch // m) * cfg.seq_len * 8 * m  # the whole batch, copied once a step
        gt = {
            "workload": run_name,
            "description": (f"GPT ({cfg.n_layers} layers, d={cfg.d_model}) bf16 autocast, SDPA, fused AdamW, "
                            f"pipeline-parallel over {ws} GPUs with torch.distributed.pipelining."
                            f"{SCHEDULES[args.schedule]}, {m} micro-batches of {cfg.batch // m} sequence(s)"),
            "strategy": "pp",
            "world_size": ws,
            "schedule": SCHEDULES[args.schedule],
            "pipeline": {
                "stages": n_stages,
                "stages_per_rank": per_rank_stages,
                "pipeline_size": ws,
                "microbatches": m,
                "microbatch_sequences": cfg.batch // m,
                "layout": {str(s): {"blocks": list(range(*layout[s])), "rank": s % ws,
                                    "embeddings": s == 0, "head": s == n_stages - 1} for s in range(n_stages)},
                "analytic_bubble_share": analytic,
                "analytic_bubble_formula": "(p-1)/(v*m+p-1), p = pipeline ranks, v = stages per rank, m = micro-batches",
            },
            **sc.env_info(dev),
            "steps_profiled": prof["steps_profiled"],
            "flops_per_step": per_rank[0]["flops_per_step"],
            "flops_scope": "per rank (rank 0); per_rank lists every rank",
            "model_flops_per_step_global": flops_model,
            "model_flops_source": "FlopCounterMode over the same step of the unsplit model on one GPU",
            "step_time_us_unprofiled": per_rank[0]["step_time_us_unprofiled"],
            "step_time_us_unprofiled_slowest_rank": slowest_unprof,
            "step_time_us_profiled_wall": per_rank[0]["step_time_us_profiled_wall"],
            "step_time_us_profiled_wall_slowest_rank": slowest_prof,
            "unprofiled_timed_steps": args.timed_steps,
            "tokens_per_step_global": tokens,
            "tokens_per_s_unprofiled": tokens / (slowest_unprof * 1e-6),
            "tokens_per_s_profiled": tokens / (slowest_prof * 1e-6),
            "mfu_unprofiled": per_rank[0]["mfu"],
            "mfu_profiled": per_rank[0]["mfu_profiled"],
            "mfu_model_unprofiled": flops_model / (slowest_unprof * 1e-6) / (ws * sc.PEAK_BF16_FLOPS),
            "mfu_model_profiled": flops_model / (slowest_prof * 1e-6) / (ws * sc.PEAK_BF16_FLOPS),
            "mfu_definitions": {
                "mfu_unprofiled/mfu_profiled": "rank 0's executed FLOPs (flops_per_step) / its step time / peak",
                "mfu_model_*": "model_flops_per_step_global / slowest rank's step time / (world_size * peak)",
            },
            "model": {**info, "batch_global": cfg.batch},
            **sc.gpt_analytic_flops(info, tokens),
            "expected": {
                **sc.pinned_input_expected(cfg.batch * cfg.seq_len * 8, "from a pinned pool,"),
                "scope": "the first stage's rank copies x, the last stage's rank copies y (one copy each)",
                "collectives": {
                    "description": ("send/recv between neighbouring stages (batched P2P): per micro-batch one "
                                    "activation (micro-batch x seq x d_model, fp32 residual stream) forward and "
                                    "one gradient of the same size backward across every stage boundary"),
                    "activation_bytes": (cfg.batch // m) * cfg.seq_len * cfg.d_model * 4,
                },
                "input_bytes_per_step": in_bytes,
            },
        }
        sc.write_ground_truth(run_dir, gt, per_rank, [], tried, args.warmup, warm_s)
        print(f"[{run_name}] per-rank step us unprof {[round(r['step_time_us_unprofiled']) for r in per_rank]} "
              f"prof {[round(r['step_time_us_profiled_wall']) for r in per_rank]} "
              f"flops/rank {[round(r['flops_per_step'] / 1e12, 3) for r in per_rank]} TF "
              f"model-MFU {gt['mfu_model_unprofiled']:.3f}/{gt['mfu_model_profiled']:.3f} "
              f"analytic bubble {analytic:.3f} trace bytes {[r['trace_bytes'] for r in per_rank]}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
