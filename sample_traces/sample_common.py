"""Shared helpers for the sample-trace recorders (record_samples.py, record_multi_gpu.py).

Everything here is plain PyTorch; it runs on CUDA (the real recordings) and on CPU
(`--device cpu --tiny` dry runs, no CUDA activity in the traces).
"""
from __future__ import annotations

import gc
import glob
import json
import math
import os
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torch.utils.flop_counter import FlopCounterMode

PEAK_BF16_FLOPS = 989.4e12  # H100/H200 SXM dense bf16 peak
TRACE_LIMIT_BYTES = 2 * 1024 * 1024  # per trace file, gzipped
WAIT, WARMUP = 1, 2


# --------------------------------------------------------------------------- model


@dataclass
class GPTConfig:
    n_layers: int = 4
    d_model: int = 1024
    n_heads: int = 16
    seq_len: int = 1024
    batch: int = 8
    vocab: int = 32768

    @classmethod
    def tiny(cls) -> "GPTConfig":
        return cls(n_layers=2, d_model=64, n_heads=4, seq_len=32, batch=2, vocab=256)


class Attention(nn.Module):
    """Separate q/k/v/out projections so tensor parallel can shard them column/row-wise.

    The number of heads is derived from the local width of q (``view(B, T, -1, head_dim)``),
    so the same module works when q/k/v are column-sharded over ranks.
    """

    def __init__(self, cfg: GPTConfig, naive: bool, dropout: float = 0.0):
        super().__init__()
        d = cfg.d_model
        self.head_dim = d // cfg.n_heads
        self.naive = naive
        self.dropout = dropout
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        if naive:
            T = cfg.seq_len
            # True where attention is NOT allowed (future positions)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1).view(1, 1, T, T)
            self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        hd = self.head_dim
        q = self.q(x).view(B, T, -1, hd).transpose(1, 2)  # (B, H, T, hd)
        k = self.k(x).view(B, T, -1, hd).transpose(1, 2)
        v = self.v(x).view(B, T, -1, hd).transpose(1, 2)
        if self.naive:
            att = q @ k.transpose(-2, -1)
            att = att * (1.0 / math.sqrt(hd))
            att = att.masked_fill(self.causal_mask[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            att = F.dropout(att, p=self.dropout, training=self.training)
            y = att @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, -1)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.fc2 = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, naive: bool):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg, naive)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, naive: bool = False):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList([Block(cfg, naive) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)  # untied

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def gpt_model_info(model: GPT) -> dict:
    cfg = model.cfg
    n_params = sum(p.numel() for p in model.parameters())
    n_emb = model.wte.weight.numel() + model.wpe.weight.numel()
    return {
        "n_layers": cfg.n_layers,
        "d_model": cfg.d_model,
        "n_heads": cfg.n_heads,
        "head_dim": cfg.d_model // cfg.n_heads,
        "seq_len": cfg.seq_len,
        "batch": cfg.batch,
        "vocab": cfg.vocab,
        "mlp_hidden": 4 * cfg.d_model,
        "n_params": n_params,
        "n_params_non_embedding": n_params - n_emb,
        "n_params_non_embedding_definition": (
            "all parameters except the token (wte) and position (wpe) embedding tables; "
            "the untied lm_head (d_model x vocab) IS included"),
        "architecture": "pre-LN GPT, separate q/k/v/out Linear(bias), MLP 4x GELU, untied lm_head (no bias)",
    }


def gpt_analytic_flops(info: dict, tokens: int) -> dict:
    N = info["n_params_non_embedding"]
    L, d, T = info["n_layers"], info["d_model"], info["seq_len"]
    total = (6 * N + 12 * L * d * T) * tokens
    return {
        "analytic_flops_per_step": float(total),
        "analytic_flops_formula": (
            "(6*N + 12*L*d_model*seq_len) * tokens_per_step (PaLM appendix B convention); "
            "N = n_params_non_embedding (lm_head included, wte/wpe excluded); attention term "
            "counts the full (non-causal) T x T score matrix, as FlopCounterMode does"),
    }


def gpt_batch_pool(cfg: GPTConfig, n: int, pin: bool, seed: int):
    """n (x, y) int64 CPU batches of shape (B, T); pinned if pin."""
    g = torch.Generator().manual_seed(seed)
    pool = []
    for _ in range(n):
        x = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len), generator=g, dtype=torch.int64)
        y = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len), generator=g, dtype=torch.int64)
        if pin:
            x, y = x.pin_memory(), y.pin_memory()
        pool.append((x, y))
    return pool


# --------------------------------------------------------------------------- measurement


def pinned_input_expected(in_bytes: int, source: str = "from a pinned pool,") -> dict:
    """``expected`` of a step whose only transfers are the (x, y) int64 batch copied from
    pinned memory with ``non_blocking=True``: two H2D copies, no D2H, no sync."""
    return {
        "h2d_bytes_per_step": 2 * in_bytes,
        "d2h_bytes_per_step": 0,
        "h2d_copies_per_step": 2,
        "d2h_copies_per_step": 0,
        "sync_count_per_step": 0,
        "copies": [
            {"what": f"input ids x int64 (B,T) {source} .to(device, non_blocking=True)",
             "kind": "Memcpy HtoD (Pinned -> Device)", "bytes": in_bytes},
            {"what": f"targets y int64 (B,T) {source} .to(device, non_blocking=True)",
             "kind": "Memcpy HtoD (Pinned -> Device)", "bytes": in_bytes},
        ],
        "syncs": [],
    }


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class StepClock:
    """Marks step boundaries.  On CUDA it records a CUDA event at each boundary (no host
    sync), so the deltas are the GPU-timeline time per step, which in steady state is the
    wall-clock step time.  On CPU it uses perf_counter."""

    def __init__(self, dev, n_steps: int):
        self.dev = dev
        self.cpu_marks: list[float] = []
        self.events = ([torch.cuda.Event(enable_timing=True) for _ in range(n_steps + 1)]
                       if dev.type == "cuda" else None)
        self.i = 0

    def mark(self):
        self.cpu_marks.append(time.perf_counter())
        if self.events is not None:
            self.events[self.i].record()
        self.i += 1

    def deltas_us(self) -> list[float]:
        sync(self.dev)
        if self.events is not None:
            return [self.events[j].elapsed_time(self.events[j + 1]) * 1000.0 for j in range(self.i - 1)]
        return self.cpu_deltas_us()

    def cpu_deltas_us(self) -> list[float]:
        m = self.cpu_marks
        return [(m[j + 1] - m[j]) * 1e6 for j in range(len(m) - 1)]


def time_unprofiled(step, dev, n: int) -> dict:
    sync(dev)
    clock = StepClock(dev, n)
    t0 = time.perf_counter()
    for i in range(n):
        clock.mark()
        step(i)
    clock.mark()
    sync(dev)
    wall = time.perf_counter() - t0
    d = clock.deltas_us()
    return {
        "step_time_us_unprofiled": statistics.median(d),
        "step_time_us_unprofiled_mean": statistics.fmean(d),
        "step_time_us_unprofiled_min": min(d),
        "step_time_us_unprofiled_max": max(d),
        "step_time_us_unprofiled_steps": [round(v, 1) for v in d],
        "step_time_us_unprofiled_wall_mean": wall / n * 1e6,
        "unprofiled_timed_steps": n,
    }


def count_flops(step, dev) -> dict:
    fc = FlopCounterMode(display=False)
    with fc:
        step(-1)
    sync(dev)
    counts = fc.get_flop_counts()
    by_op = {str(k): int(v) for k, v in counts.get("Global", {}).items()}
    by_module = {str(m): int(sum(v.values())) for m, v in counts.items()}
    return {"flops_per_step": float(fc.get_total_flops()), "flops_by_op": by_op,
            "_flops_by_module": by_module}


def trace_files(run_dir: str, worker_name: str) -> list[str]:
    return sorted(glob.glob(os.path.join(run_dir, f"{worker_name}.*.pt.trace.json*")))


def profile_steps(step, dev, run_dir: str, worker_name: str, active: int,
                  drain_before_active: bool = False, profile_memory: bool = False) -> dict:
    """Runs wait+warmup+active steps under torch.profiler; returns timing of the active
    steps (CUDA events at step boundaries, recorded inside the trace as cudaEventRecord,
    which is not a host sync).

    drain_before_active: synchronize the device at the end of the last warmup step, before
    the recording starts (so the sync is not in the trace). Without it, a GPU-bound loop with
    no host syncs lets the host run several steps ahead, and the GPU work launched during the
    wait/warmup steps runs inside the first recorded step with its launch calls missing from
    the trace.

    profile_memory: also record the allocator's [memory] instant events (issue 25's samples)."""
    os.makedirs(run_dir, exist_ok=True)
    acts = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    total = WAIT + WARMUP + active
    first_active = WAIT + WARMUP
    clock = StepClock(dev, active)
    sync(dev)
    with profile(activities=acts,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=active, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(run_dir, worker_name=worker_name, use_gzip=True),
                 record_shapes=True, profile_memory=profile_memory) as prof:
        for i in range(total):
            if i >= first_active:
                clock.mark()
            step(i)
            if i == total - 1:
                clock.mark()
            if drain_before_active and i == first_active - 1:
                sync(dev)  # last warmup step: not recorded
            prof.step()
    d = clock.deltas_us()
    cpu = clock.cpu_deltas_us()
    files = trace_files(run_dir, worker_name)
    return {
        "steps_profiled": active,
        "step_time_us_profiled_wall": statistics.fmean(d),
        "step_time_us_profiled_steps": [round(v, 1) for v in d],
        "step_time_us_profiled_cpu_marks_mean": statistics.fmean(cpu),
        "trace_files": [os.path.basename(f) for f in files],
        "trace_bytes": [os.path.getsize(f) for f in files],
    }


def remove_traces(run_dir: str, worker_name: str):
    for f in trace_files(run_dir, worker_name):
        os.remove(f)


def mfu(flops: float, step_us: float) -> float:
    return flops / (step_us * 1e-6) / PEAK_BF16_FLOPS


def env_info(dev) -> dict:
    return {
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if dev.type == "cuda" else None,
        "dtype": "bf16",
        "peak_flops_bf16_used_for_mfu": PEAK_BF16_FLOPS,
        "profiler_schedule": {"wait": WAIT, "warmup": WARMUP, "repeat": 1},
        "profiler_options": "activities=[CPU, CUDA], record_shapes=True, tensorboard_trace_handler(use_gzip=True)",
        "timing_definitions": {
            "step_time_us_unprofiled": ("median over unprofiled_timed_steps consecutive steps of the time "
                                        "between CUDA events recorded at step boundaries (no host sync between "
                                        "steps; the whole loop is synchronized at the end)"),
            "step_time_us_profiled_wall": ("mean over the active (recorded) profiler steps, same CUDA-event "
                                           "method, profiler running"),
        },
    }


# --------------------------------------------------------------------------- torchrun recorders


def add_run_args(ap, out_default: str) -> None:
    """The arguments every torchrun recorder (record_multi_gpu.py, record_pipeline.py) takes."""
    ap.add_argument("--out", default=out_default)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed-steps", type=int, default=20)
    ap.add_argument("--trace-limit", type=int, default=TRACE_LIMIT_BYTES)
    ap.add_argument("--compile-backend", default="inductor", help="unused (accepted for a shared arg list)")


def init_distributed(device: str):
    """(rank, world size, local rank, device) of this torchrun process, its process group
    initialised: NCCL on CUDA, gloo on CPU (the dry run)."""
    import datetime

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    ws = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if device == "cuda":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        dev = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=180),
                            **({"device_id": dev} if dev.type == "cuda" else {}))
    return rank, ws, local_rank, dev


def profile_under_limit(step, dev, run_dir: str, worker: str, ws: int, limit: int):
    """profile_steps with 3, then 2, then 1 active steps until every rank's trace fits ``limit``
    bytes; returns the last profile and the sizes tried."""
    import torch.distributed as dist

    prof, tried = None, []
    for active in (3, 2, 1):
        prof = profile_steps(step, dev, run_dir, worker, active)
        biggest = max(prof["trace_bytes"]) if prof["trace_bytes"] else 0
        sizes = [None] * ws
        dist.all_gather_object(sizes, biggest)
        tried.append({"active": active, "max_trace_bytes_per_rank": sizes})
        if max(sizes) <= limit:
            break
        remove_traces(run_dir, worker)
        dist.barrier()
    return prof, tried


def rank_timing(flops: float, timing: dict, prof: dict) -> dict:
    """A rank's step times (unprofiled and profiled), MFU and trace files, for ground_truth.json's per_rank."""
    t_unprof, t_prof = timing["step_time_us_unprofiled"], prof["step_time_us_profiled_wall"]
    return {
        "step_time_us_unprofiled": t_unprof,
        "step_time_us_unprofiled_steps": timing["step_time_us_unprofiled_steps"],
        "step_time_us_profiled_wall": t_prof,
        "step_time_us_profiled_steps": prof["step_time_us_profiled_steps"],
        "mfu": mfu(flops, t_unprof),
        "mfu_profiled": mfu(flops, t_prof),
        "trace_files": prof["trace_files"],
        "trace_bytes": prof["trace_bytes"],
    }


def write_ground_truth(run_dir: str, gt: dict, per_rank: list, notes: list, tried: list, warmup: int,
                       warm_s: float) -> None:
    """ground_truth.json: ``gt`` and what every recorder adds (per_rank, notes, warm-up, time)."""
    gt.update({
        "per_rank": per_rank,
        "notes": notes + ([f"trace size retries: {tried}"] if len(tried) > 1 else []),
        "warmup_steps": warmup,
        "warmup_seconds_rank0": round(warm_s, 2),
        "recorded_at_unix": int(time.time()),
    })
    with open(os.path.join(run_dir, "ground_truth.json"), "w") as f:
        json.dump(gt, f, indent=2)


def cleanup(dev):
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
