#!/usr/bin/env python3
"""Record the single-GPU sample traces and their ground truth.

    # the real recording (one H200):
    python3 sample_traces/record_samples.py --out sample_traces
    # CPU dry run (no CUDA activity in the traces, tiny shapes):
    python3 sample_traces/record_samples.py --device cpu --tiny --out /tmp/st

Each workload writes <out>/<run_name>/<worker>.<ns>.pt.trace.json.gz and
<out>/<run_name>/ground_truth.json.  One failing workload does not stop the others.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sample_common as sc  # noqa: E402

WORKER = "rank0"
DRAIN_NOTE = ("torch.cuda.synchronize() at the end of the last warmup profiler step (not recorded): the GPU starts "
              "the first recorded step idle, so every GPU event in the trace was launched inside a recorded step. "
              "Without it this GPU-bound, sync-free loop lets the host run steps ahead and the wait/warmup steps' "
              "GPU work would spill into ProfilerStep#3 with its launch calls missing from the trace.")
SDPA_FLOP_NOTE = "FlopCounterMode counts the fused SDPA backward as 2.5x its forward (5 matmuls, recomputing the scores), while the hand-written attention's backward counts as 2x (4 bmm); the same math therefore counts 0.5 x forward-attention FLOPs more with SDPA (68.7 GFLOP/step at these shapes). The analytic PaLM formula uses 2x."


class Workload:
    """What a workload builder returns."""

    def __init__(self, name, description, step, expected, model_info=None, flop_step=None,
                 tokens_per_step=None, notes=(), extra=None, cleanup=None):
        self.name = name
        self.description = description
        self.step = step
        self.flop_step = flop_step or step
        self.expected = expected
        self.model_info = model_info
        self.tokens_per_step = tokens_per_step
        self.notes = list(notes)
        self.extra = extra or {}
        self.cleanup = cleanup  # called after the run (restores global flags)
        self.drain_before_active = False  # sync at the end of the last warmup step (see sc.profile_steps)
        self.measure_extra = None  # called after the unprofiled timing, before profiling; returns a dict


def autocast(dev):
    return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)


# --------------------------------------------------------------------------- GPT variants


def _gpt_common(args, dev, naive: bool):
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig()
    torch.manual_seed(0)
    model = sc.GPT(cfg, naive=naive).to(dev)
    model.train()
    return cfg, model


def build_gpt_naive(args, dev):
    cfg, model = _gpt_common(args, dev, naive=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False, fused=False)
    pool = sc.gpt_batch_pool(cfg, 4, pin=False, seed=1)  # pageable CPU memory
    state = {}

    def step(i):
        xb, yb = pool[i % len(pool)]
        x = xb.to(dev)  # blocking pageable H2D: cudaMemcpyAsync + cudaStreamSynchronize
        y = yb.to(dev)
        with autocast(dev):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        state["loss"] = loss.item()  # D2H of the scalar + stream sync
        state["loss_nbytes"] = loss.element_size()
        state["loss_dtype"] = str(loss.dtype)

    # probe the loss dtype once so the expected D2H size is exact
    step(0)
    info = sc.gpt_model_info(model)
    tokens = cfg.batch * cfg.seq_len
    in_bytes = cfg.batch * cfg.seq_len * 8
    loss_bytes = state["loss_nbytes"]
    expected = {
        "h2d_bytes_per_step": 2 * in_bytes,
        "d2h_bytes_per_step": loss_bytes,
        "h2d_copies_per_step": 2,
        "d2h_copies_per_step": 1,
        "sync_count_per_step": 3,
        "copies": [
            {"what": "input ids x int64 (B,T) .to(device) pageable->device, non_blocking=False",
             "kind": "Memcpy HtoD (Pageable -> Device)", "bytes": in_bytes},
            {"what": "targets y int64 (B,T) .to(device) pageable->device, non_blocking=False",
             "kind": "Memcpy HtoD (Pageable -> Device)", "bytes": in_bytes},
            {"what": f"loss.item() (loss is a 0-d {state['loss_dtype']} tensor)",
             "kind": "Memcpy DtoH (Device -> Pageable)", "bytes": loss_bytes},
        ],
        "syncs": [
            "aten::copy_ of x (blocking H2D: at::cuda::memcpy_and_sync -> cudaStreamSynchronize)",
            "aten::copy_ of y (blocking H2D: cudaStreamSynchronize)",
            "aten::item / aten::_local_scalar_dense of loss (cudaMemcpyAsync DtoH + cudaStreamSynchronize)",
        ],
        "non_syncs_that_look_like_syncs": (
            "AdamW(foreach=False, fused=False, capturable=False) keeps each param's `step` on the CPU and "
            "calls aten::item on it (and add_ on CPU) once per parameter per step: these are CPU-only, "
            f"not GPU syncs ({len(list(model.parameters()))} parameters)"),
        "attention": "hand-written: matmul(q, k^T) -> mul(scale) -> masked_fill(causal) -> softmax (fp32 under autocast) -> dropout(p=0.0) -> matmul(att, v)",
    }
    return Workload(
        "gpt_naive_attention",
        "GPT-style transformer, eager, bf16 autocast, hand-written attention materialising the (B,H,T,T) "
        "scores, non-fused non-foreach AdamW, pageable input copied with blocking .to(device) each step, "
        "loss.item() every step (3 host syncs per step).",
        step, expected, model_info=info, tokens_per_step=tokens,
        extra=sc.gpt_analytic_flops(info, tokens))


def _build_gpt_sdpa(args, dev, compiled: bool):
    cfg, model = _gpt_common(args, dev, naive=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    pin = dev.type == "cuda"
    pool = sc.gpt_batch_pool(cfg, 4, pin=pin, seed=1)
    run_model = torch.compile(model, backend=args.compile_backend) if compiled else model

    def make_step(m):
        def step(i):
            xb, yb = pool[i % len(pool)]
            x = xb.to(dev, non_blocking=True)
            y = yb.to(dev, non_blocking=True)
            with autocast(dev):
                logits = m(x)
                loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    step = make_step(run_model)
    flop_step = make_step(model)  # eager module: FlopCounterMode counts aten ops, same math
    info = sc.gpt_model_info(model)
    tokens = cfg.batch * cfg.seq_len
    in_bytes = cfg.batch * cfg.seq_len * 8
    expected = {
        **sc.pinned_input_expected(in_bytes),
        "attention": "F.scaled_dot_product_attention(is_causal=True) (backend chosen by PyTorch: flash / cuDNN / efficient)",
    }
    notes = ["No .item()/print of the loss inside the loop: no host syncs are intended per step.",
             SDPA_FLOP_NOTE,
             "AdamW(fused=True): one fused multi-tensor kernel launch set per step; step counters live on the GPU."]
    if compiled:
        notes.append("torch.compile(model) (default mode, inductor, no CUDA graphs); compiled and warmed up "
                     "before the profiler starts, so no compile events are in the recorded steps. The optimizer "
                     "step is eager (fused AdamW). Triton kernels are launched through cuLaunchKernel "
                     "(cuda_driver events).")
        notes.append("flops_per_step counted by FlopCounterMode on the same module run EAGERLY (FlopCounterMode "
                     "does not see inside inductor-generated code); the math is identical.")
    name = "gpt_compile" if compiled else "gpt_sdpa_fused"
    desc = ("Same GPT under torch.compile (SDPA attention, fused AdamW, pinned non_blocking input, no syncs)."
            if compiled else
            "Same GPT as gpt_naive_attention but with F.scaled_dot_product_attention(is_causal=True), "
            "AdamW(fused=True), pinned input copied non_blocking, no .item() (0 host syncs per step).")
    w = Workload(name, desc, step, expected, model_info=info, flop_step=flop_step,
                 tokens_per_step=tokens, notes=notes, extra=sc.gpt_analytic_flops(info, tokens))
    if compiled:
        w.flops_source = "FlopCounterMode (eager run of the same module)"
        w.extra["compile_backend"] = args.compile_backend
    return w


def build_gpt_sdpa(args, dev):
    return _build_gpt_sdpa(args, dev, compiled=False)


def build_gpt_compile(args, dev):
    return _build_gpt_sdpa(args, dev, compiled=True)


def build_gpt_checkpointing(args, dev):
    """gpt_sdpa_fused with every block under non-reentrant activation checkpointing."""
    from torch.utils.checkpoint import checkpoint

    cfg, model = _gpt_common(args, dev, naive=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    pin = dev.type == "cuda"
    pool = sc.gpt_batch_pool(cfg, 4, pin=pin, seed=1)
    mode = {"checkpoint": True}  # False only while measuring the same step without checkpointing

    def forward(idx):  # sc.GPT.forward with each block wrapped in checkpoint()
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = model.wte(idx) + model.wpe(pos)
        for blk in model.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if mode["checkpoint"] else blk(x)
        return model.lm_head(model.ln_f(x))

    def step(i):
        xb, yb = pool[i % len(pool)]
        x = xb.to(dev, non_blocking=True)
        y = yb.to(dev, non_blocking=True)
        with autocast(dev):
            logits = forward(x)
            loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def peak_mem_us(n):
        """Unprofiled timing of n steps, with the peak of allocated memory over them (CUDA only)."""
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        t = sc.time_unprofiled(step, dev, n)
        peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
        return t, peak

    def measure_extra():
        # the same step without checkpointing: model FLOPs (nothing re-run) and its own timing
        out = {}
        mode["checkpoint"] = False
        try:
            for i in range(2):
                step(i)
            fl = sc.count_flops(step, dev)
            for i in range(2):
                step(i)
            t_plain, peak_plain = peak_mem_us(args.timed_steps)
        finally:
            mode["checkpoint"] = True
        for i in range(2):  # back to the checkpointed step before profiling
            step(i)
        t_ckpt, peak_ckpt = peak_mem_us(args.timed_steps)
        out["model_flops_per_step"] = fl["flops_per_step"]
        out["model_flops_by_op"] = fl["flops_by_op"]
        out["model_flops_source"] = ("FlopCounterMode over the same step with checkpointing switched off "
                                     "(the blocks called directly): what the model needs, nothing re-run")
        out["no_checkpointing"] = {
            "what": "the same model, optimizer, inputs and step with each block called directly (no checkpoint)",
            "step_time_us_unprofiled": t_plain["step_time_us_unprofiled"],
            "step_time_us_unprofiled_mean": t_plain["step_time_us_unprofiled_mean"],
            "step_time_us_unprofiled_min": t_plain["step_time_us_unprofiled_min"],
            "step_time_us_unprofiled_max": t_plain["step_time_us_unprofiled_max"],
            "step_time_us_unprofiled_steps": t_plain["step_time_us_unprofiled_steps"],
            "unprofiled_timed_steps": t_plain["unprofiled_timed_steps"],
            "peak_memory_allocated_bytes": peak_plain,
            "mfu_unprofiled": sc.mfu(fl["flops_per_step"], t_plain["step_time_us_unprofiled"]),
        }
        print(f"[gpt_checkpointing] no checkpointing: {fl['flops_per_step']:.4e} FLOP/step, unprofiled median "
              f"{t_plain['step_time_us_unprofiled']:.1f} us, peak {peak_plain}; checkpointed again "
              f"{t_ckpt['step_time_us_unprofiled']:.1f} us, peak {peak_ckpt}", flush=True)
        out["checkpointing_peak_memory_allocated_bytes"] = peak_ckpt
        out["checkpointing_step_time_us_unprofiled_second_timing"] = t_ckpt["step_time_us_unprofiled"]
        return out

    info = sc.gpt_model_info(model)
    tokens = cfg.batch * cfg.seq_len
    in_bytes = cfg.batch * cfg.seq_len * 8
    expected = {
        **sc.pinned_input_expected(in_bytes),
        "attention": ("F.scaled_dot_product_attention(is_causal=True) (backend chosen by PyTorch: "
                      "flash / cuDNN / efficient)"),
        "activation_checkpointing": ("torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) around each "
                                     "of the n_layers blocks (default preserve_rng_state=True, early stop on)"),
    }
    notes = ["No .item()/print of the loss inside the loop: no host syncs are intended per step.",
             SDPA_FLOP_NOTE,
             "AdamW(fused=True): one fused multi-tensor kernel launch set per step; step counters live on the GPU.",
             "Activation checkpointing (non-reentrant): each block keeps only its input; in backward the block's "
             "forward is re-run inside the first autograd node that unpacks one of its saved tensors. "
             "flops_per_step counts that recompute (hardware FLOPs, the HFU numerator); model_flops_per_step is "
             "FlopCounterMode over the same step without checkpointing (the MFU numerator).",
             "hfu_* = flops_per_step / step time / peak; mfu_* = model_flops_per_step / step time / peak. "
             "For this run mfu_unprofiled and mfu_profiled use model_flops_per_step (unlike the other runs, where "
             "both FLOP figures are the same)."]
    w = Workload(
        "gpt_checkpointing",
        "Same GPT as gpt_sdpa_fused (F.scaled_dot_product_attention(is_causal=True), AdamW(fused=True), pinned "
        "input copied non_blocking, no .item(), 0 host syncs per step), with each transformer block wrapped in "
        "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False): activation checkpointing, the block "
        "forwards are recomputed during backward.",
        step, expected, model_info=info, tokens_per_step=tokens, notes=notes,
        extra=sc.gpt_analytic_flops(info, tokens))
    w.measure_extra = measure_extra
    return w


# --------------------------------------------------------------------------- ResNet-50


def build_resnet50(args, dev):
    try:
        import torchvision
        model = torchvision.models.resnet50(weights=None)
        arch = f"torchvision {torchvision.__version__} resnet50(weights=None), NCHW (default memory format)"
    except ImportError:
        if not args.tiny:
            raise
        # CPU dry-run stand-in when torchvision is not installed locally
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1000))
        arch = "tiny conv stand-in (torchvision missing)"
    model = model.to(dev).train()
    B, HW = (4, 32) if args.tiny else (64, 224)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(B, 3, HW, HW, device=dev, generator=g)  # synthetic data created on the GPU
    y = torch.randint(0, 1000, (B,), device=dev, generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # foreach (default on CUDA)

    def step(i):
        with autocast(dev):
            out = model(x)
            loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    expected = {
        "h2d_bytes_per_step": 0, "d2h_bytes_per_step": 0,
        "h2d_copies_per_step": 0, "d2h_copies_per_step": 0,
        "sync_count_per_step": 0, "copies": [], "syncs": [],
    }
    return Workload(
        "resnet50_bf16",
        "torchvision ResNet-50 training step, bf16 autocast, synthetic batch created once on the GPU "
        f"(B={B}, 3x{HW}x{HW}), SGD(momentum=0.9, foreach default), no copies, no syncs.",
        step, expected,
        model_info={"arch": arch, "batch": B, "image_hw": HW, "n_params": n_params,
                    "cudnn_benchmark": torch.backends.cudnn.benchmark},
        notes=["Synthetic data is reused every step: no input pipeline. BatchNorm runs in train mode "
               "(running stats updates are GPU kernels, no copies)."])


# --------------------------------------------------------------------------- tiny MLP


def _tiny_mlp(dev, width: int, depth: int):
    """8 x Linear(256,256)+ReLU and a 10-way head: the launch-bound model (and its CUDA-graph twin)."""
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers += [nn.Linear(width, 10)]
    return nn.Sequential(*layers).to(dev).train()


def build_tiny_mlp(args, dev):
    width, depth, B = 256, 8, 32
    model = _tiny_mlp(dev, width, depth)
    x = torch.randn(B, width, device=dev)
    y = torch.randint(0, 10, (B,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=False)

    def step(i):
        with autocast(dev):
            out = model(x)
            loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    expected = {
        "h2d_bytes_per_step": 0, "d2h_bytes_per_step": 0,
        "h2d_copies_per_step": 0, "d2h_copies_per_step": 0,
        "sync_count_per_step": 0, "copies": [], "syncs": [],
        "launch_bound": True,
        "non_syncs_that_look_like_syncs": (
            "AdamW(foreach=False) calls aten::item on CPU step counters, once per parameter "
            f"({len(list(model.parameters()))} parameters): CPU-only, not GPU syncs"),
    }
    return Workload(
        "tiny_mlp_launch_bound",
        f"Tiny MLP ({depth} x Linear({width},{width})+ReLU, head Linear({width},10)), batch {B}, bf16 autocast, "
        "per-parameter (foreach=False) AdamW: hundreds of microsecond-scale kernels per step; the GPU idles "
        "between launches (CPU/launch bound). Data resident on the GPU; no copies, no syncs.",
        step, expected,
        model_info={"depth": depth, "width": width, "batch": B, "n_params": n_params})


# --------------------------------------------------------------------------- pageable copies


def build_pageable_copy(args, dev):
    MiB = 1024 * 1024
    if args.tiny:
        big_rows, cols, out_rows = 64, 64, 16
        small_numels = (16, 32, 64, 128)
    else:
        big_rows, cols, out_rows = 4096, 4096, 1024  # 64 MiB fp32 in, 16 MiB fp32 out
        small_numels = (256, 1024, 4096, 15360)  # fp32: 1 KiB, 4 KiB, 16 KiB, 60 KiB (< 64 KiB)
    g = torch.Generator().manual_seed(0)
    x_cpu = torch.randn(big_rows, cols, generator=g)  # pageable
    smalls = [torch.randn(n, generator=g) for n in small_numels]  # pageable
    out_cpu = torch.empty(out_rows, cols)  # pageable destination
    w = torch.randn(cols, cols, device=dev, dtype=torch.bfloat16) / cols ** 0.5

    def step(i):
        x = x_cpu.to(dev)  # blocking H2D (sync)
        s = [t.to(dev) for t in smalls]  # 4 small blocking H2D (4 syncs)
        bias = s[0].sum() + s[1].sum() + s[2].sum() + s[3].sum()  # stays on GPU
        z = x.to(torch.bfloat16) @ w
        r = z[:out_rows].float() + bias
        out_cpu.copy_(r)  # blocking D2H into pageable memory (sync)

    big_bytes = x_cpu.numel() * 4
    small_bytes = [t.numel() * 4 for t in smalls]
    out_bytes = out_cpu.numel() * 4
    expected = {
        "h2d_bytes_per_step": big_bytes + sum(small_bytes),
        "d2h_bytes_per_step": out_bytes,
        "h2d_copies_per_step": 1 + len(smalls),
        "d2h_copies_per_step": 1,
        "sync_count_per_step": 1 + len(smalls) + 1,
        "copies": (
            [{"what": f"x fp32 {tuple(x_cpu.shape)} pageable .to(device)", "kind": "Memcpy HtoD (Pageable -> Device)",
              "bytes": big_bytes}]
            + [{"what": f"small fp32 ({n},) pageable .to(device)", "kind": "Memcpy HtoD (Pageable -> Device)",
                "bytes": b} for n, b in zip(small_numels, small_bytes)]
            + [{"what": f"result fp32 {tuple(out_cpu.shape)} out_cpu.copy_(r) into pageable memory",
                "kind": "Memcpy DtoH (Device -> Pageable)", "bytes": out_bytes}]),
        "syncs": ["each of the 5 blocking H2D aten::copy_ (cudaStreamSynchronize)",
                  "the blocking D2H aten::copy_ (cudaStreamSynchronize)"],
        "big_h2d_bytes": big_bytes, "small_h2d_bytes": small_bytes,
    }
    return Workload(
        "pageable_copy_loop",
        f"Copy-bound loop: per step a {big_bytes // MiB} MiB pageable H2D, 4 small (<64 KiB) pageable H2D, one "
        f"bf16 matmul ({big_rows}x{cols} @ {cols}x{cols}), and a {out_bytes // MiB} MiB D2H into pageable memory; "
        "every copy is blocking (6 host syncs per step). No autograd, no optimizer.",
        step, expected,
        model_info={"big_in_shape": list(x_cpu.shape), "weight_shape": [cols, cols], "out_shape": list(out_cpu.shape)},
        notes=["Small compute on purpose: the step is dominated by pageable copies (staged through a driver "
               "bounce buffer, so bandwidth is well below the pinned rate)."])


# --------------------------------------------------------------------------- rule showcases
# Four small workloads, each built to show one problem the diagnosis rules look for
# (dataloader_stall, no_tensor_cores, low_sm_efficiency, small_copies) and as little else as
# possible: GPU-bound where the problem is not idle time, no host syncs, fused AdamW.

_NO_COPIES = {"h2d_bytes_per_step": 0, "d2h_bytes_per_step": 0, "h2d_copies_per_step": 0,
              "d2h_copies_per_step": 0, "sync_count_per_step": 0, "copies": [], "syncs": []}


class AugmentedVectors(torch.utils.data.Dataset):
    """Per-sample numpy augmentation on the CPU: what a num_workers=0 DataLoader stalls on.

    Each sample: a fixed base vector, rolled by a random shift, scaled by a random gain, plus
    uniform noise, smoothed with a 5-tap filter and clipped. The randomness is seeded by the
    sample index, so every epoch sees the same data."""

    def __init__(self, n_samples: int, dim: int, n_classes: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.base = rng.standard_normal((256, dim), dtype=np.float32)
        self.labels = rng.integers(0, n_classes, size=256)
        self.n, self.dim = n_samples, dim
        self.taps = np.array([0.05, 0.2, 0.5, 0.2, 0.05], np.float32)

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        rng = np.random.default_rng(idx)
        x = np.roll(self.base[idx % len(self.base)], int(rng.integers(self.dim)))
        noise = rng.random(self.dim, dtype=np.float32)
        x = x * np.float32(rng.uniform(0.8, 1.2)) + np.float32(0.2) * (noise - np.float32(0.5))
        x = np.convolve(x, self.taps, mode="same")
        x = np.clip(x, -3.0, 3.0).astype(np.float32)
        return torch.from_numpy(x), int(self.labels[idx % len(self.labels)])


def build_dataloader_stall(args, dev):
    if args.tiny:
        B, dim, hidden, n_classes = 8, 64, 128, 10
    else:
        B, dim, hidden, n_classes = 256, 4096, 8192, 1000
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                          nn.Linear(hidden, n_classes)).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    pin = dev.type == "cuda"
    ds = AugmentedVectors(n_samples=B * 100_000, dim=dim, n_classes=n_classes)
    loader = torch.utils.data.DataLoader(ds, batch_size=B, shuffle=False, num_workers=0, pin_memory=pin,
                                         drop_last=True)

    def forever():
        while True:  # a new epoch is a new _SingleProcessDataLoaderIter (not reached in practice)
            yield from loader

    batches = forever()

    def step(i):
        xb, yb = next(batches)  # enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__
        x = xb.to(dev, non_blocking=True)
        y = yb.to(dev, non_blocking=True)
        with autocast(dev):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    x_bytes, y_bytes = B * dim * 4, B * 8
    n_params = sum(p.numel() for p in model.parameters())
    expected = {
        "h2d_bytes_per_step": x_bytes + y_bytes,
        "d2h_bytes_per_step": 0,
        "h2d_copies_per_step": 2,
        "d2h_copies_per_step": 0,
        "sync_count_per_step": 0,
        "copies": [
            {"what": f"batch x fp32 ({B},{dim}) pinned by the DataLoader, .to(device, non_blocking=True)",
             "kind": "Memcpy HtoD (Pinned -> Device)", "bytes": x_bytes},
            {"what": f"labels y int64 ({B},) pinned by the DataLoader, .to(device, non_blocking=True)",
             "kind": "Memcpy HtoD (Pinned -> Device)", "bytes": y_bytes},
        ],
        "syncs": [],
        "dataloader_stall": True,
    }
    return Workload(
        "dataloader_stall",
        f"MLP ({dim}->{hidden}->{hidden}->{n_classes}, GELU), bf16 autocast, AdamW(fused=True), batch {B}, fed by "
        "DataLoader(num_workers=0, pin_memory=True) over a Dataset whose __getitem__ does per-sample numpy "
        "augmentation (roll, gain, noise, 5-tap filter, clip): the host builds every batch in the training "
        "process while the GPU idles at each step start. Pinned non_blocking copies, no syncs.",
        step, expected,
        model_info={"layers": [dim, hidden, hidden, n_classes], "batch": B, "n_params": n_params,
                    "dataloader": {"num_workers": 0, "pin_memory": pin, "batch_size": B, "shuffle": False,
                                   "per_sample_work": "numpy: default_rng(idx), roll, gain, uniform noise, "
                                                      "convolve 5 taps, clip (float32, dim "
                                                      f"{dim})"}},
        notes=["The DataLoader pins each batch in the main thread (pin_memory with num_workers=0); that is "
               "inside the enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ annotation too.",
               "The default collate stacks the per-sample tensors with torch.stack (one aten::stack / "
               "aten::cat on the CPU per step) and builds the int64 label tensor."])


def build_fp32_no_tensor_cores(args, dev):
    if args.tiny:
        width, depth, B, n_classes = 64, 2, 16, 10
    else:
        width, depth, B, n_classes = 4096, 4, 8192, 1000
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 GEMMs on CUDA cores (SIMT FFMA)
    torch.backends.cudnn.allow_tf32 = False

    def restore():
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved

    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers += [nn.Linear(width, n_classes)]
    model = nn.Sequential(*layers).to(dev).train()
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(B, width, device=dev, generator=g)  # resident on the GPU
    y = torch.randint(0, n_classes, (B,), device=dev, generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(i):
        loss = F.cross_entropy(model(x), y)  # plain fp32: no autocast
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    return Workload(
        "fp32_no_tensor_cores",
        f"MLP ({depth} x Linear({width},{width})+ReLU, head Linear({width},{n_classes})), batch {B}, plain fp32 "
        "with torch.backends.cuda.matmul.allow_tf32 = False and torch.backends.cudnn.allow_tf32 = False: the "
        "GEMMs run on CUDA cores (no TF32, no bf16). Data resident on the GPU, AdamW(fused=True), no copies, "
        "no syncs.",
        step, dict(_NO_COPIES),
        model_info={"depth": depth, "width": width, "batch": B, "n_classes": n_classes, "n_params": n_params,
                    "matmul_allow_tf32": False, "cudnn_allow_tf32": False},
        notes=["MFU here uses the dense bf16 peak like every run; the H200's fp32 (non-tensor-core) peak is "
               "about 67 TFLOP/s."],
        extra={"dtype": "fp32"}, cleanup=restore)


def build_low_sm_efficiency(args, dev):
    rows, cols = (2, 4096) if args.tiny else (8, 2 ** 22)
    torch.manual_seed(0)
    logits = nn.Parameter(torch.randn(rows, cols, device=dev))
    g = torch.Generator(device=dev).manual_seed(1)
    upstream = torch.randn(rows, cols, device=dev, generator=g) * 1e-3  # fixed dL/dp
    opt = torch.optim.AdamW([logits], lr=1e-3, fused=True)

    def step(i):
        p = torch.softmax(logits, dim=-1)  # one block per row: `rows` blocks for 132 SMs
        p.backward(upstream)  # softmax backward: again one block per row
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Workload(
        "low_sm_efficiency",
        f"Training-like loop on a ({rows}, {cols}) fp32 logit table: torch.softmax over the last dim, backward "
        "with a fixed upstream gradient, AdamW(fused=True). PyTorch's softmax forward and backward kernels launch "
        f"one block per row, so {rows} blocks run on the 132 SMs for most of the step. No copies, no syncs.",
        step, dict(_NO_COPIES),
        model_info={"shape": [rows, cols], "op": "torch.softmax(x, dim=-1), p.backward(upstream)",
                    "n_params": rows * cols},
        notes=["FlopCounterMode counts no FLOPs here (softmax and AdamW are not matmuls): flops_per_step is 0.",
               "The loss is implicit: p.backward(upstream) back-propagates a fixed dL/dp, which avoids loss "
               "kernels (an elementwise chain) around the softmax."],
        extra={"dtype": "fp32"})


def build_small_copies(args, dev):
    if args.tiny:
        n_small, numel, width, depth, B, n_classes = 48, 16, 64, 2, 16, 10
    else:
        n_small, numel, width, depth, B, n_classes = 192, 256, 4096, 6, 16384, 256  # 192 x 1 KiB fp32
    pin = dev.type == "cuda"
    g_cpu = torch.Generator().manual_seed(0)
    smalls = [torch.randn(numel, generator=g_cpu) for _ in range(n_small)]
    if pin:
        smalls = [t.pin_memory() for t in smalls]
    torch.manual_seed(0)
    first = nn.Linear(width, width, bias=False).to(dev)
    layers = [nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width, bias=False), nn.ReLU()]
    layers += [nn.Linear(width, n_classes, bias=False)]
    rest = nn.Sequential(*layers).to(dev)
    params = list(first.parameters()) + list(rest.parameters())
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(B, width, device=dev, generator=g).to(torch.bfloat16)  # resident on the GPU, bf16
    y = torch.randint(0, n_classes, (B,), device=dev, generator=g)
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    assert (n_small * numel) % width == 0

    def step(i):
        parts = [t.to(dev, non_blocking=True) for t in smalls]  # n_small tiny pinned H2D copies
        acc = parts[0]
        for t in parts[1:]:  # grows a tensor with torch.cat in a Python loop
            acc = torch.cat([acc, t])
        offset = acc.view(-1, width).mean(0).to(torch.bfloat16)  # a per-feature offset
        with autocast(dev):
            h = first(x) + offset
            loss = F.cross_entropy(rest(h), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    nbytes = numel * 4
    n_params = sum(p.numel() for p in params)
    return Workload(
        "small_copies",
        f"Per step {n_small} small pinned H2D copies ({nbytes} B each, .to(device, non_blocking=True)) and a "
        f"torch.cat loop growing a tensor ({n_small - 1} aten::cat), reduced to a per-feature offset added after "
        f"the first layer of an MLP ({depth} x Linear({width},{width}, bias=False)+ReLU, head {n_classes}), "
        f"batch {B}, bf16 autocast, AdamW(fused=True). GPU-bound: the host queues the copies and cats while the "
        "GPU runs the previous step. No syncs.",
        step,
        {"h2d_bytes_per_step": n_small * nbytes, "d2h_bytes_per_step": 0,
         "h2d_copies_per_step": n_small, "d2h_copies_per_step": 0, "sync_count_per_step": 0,
         "copies": [{"what": f"{n_small} x fp32 ({numel},) pinned tensors, .to(device, non_blocking=True)",
                     "kind": "Memcpy HtoD (Pinned -> Device)", "bytes": nbytes, "count": n_small}],
         "syncs": [], "cat_ops_per_step": n_small - 1},
        model_info={"n_small_copies": n_small, "small_copy_bytes": nbytes, "cat_ops_per_step": n_small - 1,
                    "depth": depth, "width": width, "batch": B, "n_classes": n_classes, "n_params": n_params,
                    "bias": False, "input_dtype": "bf16"},
        notes=["Linear layers without bias, a bf16 input and a small head, so that the MLP itself has no "
               "chains of elementwise kernels worth fusing (no bias-gradient reductions, no input cast, tiny "
               "loss kernels); the only unfused chain is the cat loop itself.",
               "The cat kernels and the copies are queued behind the previous step's GEMMs; the GPU does not "
               "wait for the host."])


# --------------------------------------------------------------------------- CUDA graphs


def build_tiny_mlp_cuda_graph(args, dev):
    """The tiny_mlp_launch_bound model with its whole training step (forward, backward,
    per-parameter AdamW) captured once in a torch.cuda.CUDAGraph and replayed every step:
    the same hundreds of tiny kernels, but one host launch (cudaGraphLaunch) a step."""
    width, depth, B = 256, 8, 32
    model = _tiny_mlp(dev, width, depth)
    flop_model = copy.deepcopy(model)  # FLOPs are counted on an eager copy: a replay has no aten ops
    x = torch.randn(B, width, device=dev)
    y = torch.randint(0, 10, (B,), device=dev)
    # capturable: the step counters live on the GPU, so the optimizer step can be captured
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=False,
                            capturable=dev.type == "cuda")

    def eager_step():
        # autocast's weight cache must be off inside a graph capture
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, cache_enabled=False):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    graph = None
    if dev.type == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on a side stream, as the CUDA-graph recipe asks
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                eager_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            eager_step()

    def step(i):
        if graph is not None:
            graph.replay()
        else:  # CPU dry run
            opt.zero_grad(set_to_none=True)
            eager_step()

    def flop_step(i):
        with autocast(dev):
            loss = F.cross_entropy(flop_model(x), y)
        loss.backward()

    n_params = sum(p.numel() for p in model.parameters())
    expected = {
        **_NO_COPIES,
        "graph_launches_per_step": 1 if graph is not None else 0,
        "launch_bound": False,
        "note": ("Every kernel of a step runs inside one CUDA graph replay: the gaps between them are not host "
                 "launch overhead, and 'use CUDA Graphs' must not be advised. The lever left is fusion "
                 "(torch.compile) or more work per kernel."),
    }
    return Workload(
        "tiny_mlp_cuda_graph",
        f"Tiny MLP ({depth} x Linear({width},{width})+ReLU, head Linear({width},10)), batch {B}, bf16 autocast "
        "(cache off), per-parameter AdamW(capturable=True); the whole training step is captured once in a "
        "torch.cuda.CUDAGraph and replayed each step (one cudaGraphLaunch a step). Data resident on the GPU; "
        "no copies, no syncs.",
        step, expected, flop_step=flop_step,
        model_info={"depth": depth, "width": width, "batch": B, "n_params": n_params, "cuda_graph": True})


# --------------------------------------------------------------------------- roofline microbenchmark


def build_roofline_microbench(args, dev):
    """Two ops at opposite ends of the roofline, timed apart with CUDA events for ground truth:
    a pure streaming elementwise kernel (read x, write y: memory-bound) and a large bf16 GEMM
    (compute-bound)."""
    n_elems = (1 << 12) if args.tiny else (1 << 28)  # 512 MiB of bf16 read + 512 MiB written
    m = 64 if args.tiny else 8192
    x = torch.randn(n_elems, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    a = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    b = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    c = torch.empty(m, m, device=dev, dtype=torch.bfloat16)

    def stream_op():
        torch.mul(x, 2.0, out=out)

    def gemm_op():
        torch.mm(a, b, out=c)

    def step(i):
        stream_op()
        gemm_op()

    def measure():
        res = {}
        for name, fn, nbytes, flops in (("streaming_mul", stream_op, 2 * x.numel() * x.element_size(), 0.0),
                                        ("gemm_bf16", gemm_op, 3 * m * m * 2, 2.0 * m ** 3)):
            for _ in range(3):
                fn()
            sc.sync(dev)
            t = sc.StepClock(dev, 20)
            for _ in range(20):
                t.mark()
                fn()
            t.mark()
            d = sorted(t.deltas_us())
            us = d[len(d) // 2]
            res[name] = {"median_us": us, "min_bytes": nbytes, "flops": flops,
                         "achieved_gbps": nbytes / (us * 1e-6) / 1e9,
                         "achieved_tflops": flops / (us * 1e-6) / 1e12}
        return {"roofline_ops_measured": res,
                "roofline_note": ("Each op timed alone with CUDA events (median of 20). min_bytes is the minimum "
                                  "HBM traffic (inputs read + outputs written once). H200 HBM3e datasheet "
                                  "bandwidth 4.8 TB/s, dense bf16 peak 989.4 TFLOP/s.")}

    w = Workload(
        "roofline_microbench",
        f"Per step: torch.mul(x, 2.0, out=y) over {n_elems} bf16 elements (read {n_elems * 2 >> 20} MiB, write "
        f"the same: memory-bound) and one bf16 {m}x{m}x{m} torch.mm (compute-bound). Data on the GPU; no copies, "
        "no syncs.",
        step, dict(_NO_COPIES), model_info={"n_elems": n_elems, "gemm_m": m})
    w.measure_extra = measure
    return w


WORKLOADS = {
    "gpt_naive_attention": build_gpt_naive,
    "gpt_sdpa_fused": build_gpt_sdpa,
    "resnet50_bf16": build_resnet50,
    "tiny_mlp_launch_bound": build_tiny_mlp,
    "pageable_copy_loop": build_pageable_copy,
    "gpt_compile": build_gpt_compile,
    "gpt_checkpointing": build_gpt_checkpointing,
    "dataloader_stall": build_dataloader_stall,
    "fp32_no_tensor_cores": build_fp32_no_tensor_cores,
    "low_sm_efficiency": build_low_sm_efficiency,
    "small_copies": build_small_copies,
    "tiny_mlp_cuda_graph": build_tiny_mlp_cuda_graph,
    "roofline_microbench": build_roofline_microbench,
}
# The rule showcases are GPU-bound with no host syncs (except dataloader_stall): drain the GPU at the
# end of the last warmup step so that no GPU work launched before the recording runs inside it.
SHOWCASES = ("dataloader_stall", "fp32_no_tensor_cores", "low_sm_efficiency", "small_copies")
# Later GPU-bound, sync-free runs get the same drain.
DRAINED = SHOWCASES + ("gpt_checkpointing", "tiny_mlp_cuda_graph", "roofline_microbench")


# --------------------------------------------------------------------------- driver


def run_one(name, builder, args, dev) -> dict:
    t_start = time.time()
    run_dir = os.path.join(args.out, name)
    os.makedirs(run_dir, exist_ok=True)
    sc.remove_traces(run_dir, WORKER)
    w = builder(args, dev)
    if name in DRAINED:
        w.drain_before_active = True
        w.notes.append(DRAIN_NOTE)
    try:
        return _record(name, w, args, dev, run_dir, t_start)
    finally:
        if w.cleanup is not None:
            w.cleanup()


def _record(name, w, args, dev, run_dir, t_start) -> dict:
    print(f"[{name}] built, warming up", flush=True)
    t0 = time.time()
    for i in range(args.warmup):
        w.step(i)
    sc.sync(dev)
    warm_s = time.time() - t0
    flops = sc.count_flops(w.flop_step, dev)
    flops.pop("_flops_by_module", None)
    for i in range(2):  # re-settle after the FlopCounterMode step
        w.step(i)
    timing = sc.time_unprofiled(w.step, dev, args.timed_steps)
    print(f"[{name}] unprofiled median {timing['step_time_us_unprofiled']:.1f} us, profiling", flush=True)
    measured = w.measure_extra() if w.measure_extra is not None else {}
    prof = None
    tried = []
    for active in (3, 2, 1):
        prof = sc.profile_steps(w.step, dev, run_dir, WORKER, active, drain_before_active=w.drain_before_active)
        biggest = max(prof["trace_bytes"]) if prof["trace_bytes"] else 0
        tried.append({"active": active, "trace_bytes": prof["trace_bytes"]})
        if biggest <= args.trace_limit:
            break
        print(f"[{name}] trace {biggest} B > limit with active={active}; retrying with fewer steps", flush=True)
        sc.remove_traces(run_dir, WORKER)
    gt = {
        "workload": w.name,
        "description": w.description,
        **sc.env_info(dev),
        "steps_profiled": prof["steps_profiled"],
        "flops_per_step": flops["flops_per_step"],
        "flops_by_op": flops["flops_by_op"],
        "flops_source": getattr(w, "flops_source", "FlopCounterMode"),
        "flops_note": ("FlopCounterMode over one full training step (fwd+bwd+optimizer) with the same shapes; "
                       "it counts matmul/conv/attention ops only (elementwise and optimizer math count 0)"),
        **{k: v for k, v in timing.items()},
        **{k: v for k, v in prof.items() if k != "steps_profiled"},
        "tokens_per_step": w.tokens_per_step,
        "model": w.model_info,
        "expected": w.expected,
        "mfu_unprofiled": sc.mfu(flops["flops_per_step"], timing["step_time_us_unprofiled"]),
        "mfu_profiled": sc.mfu(flops["flops_per_step"], prof["step_time_us_profiled_wall"]),
        "notes": w.notes + ([f"trace size retries: {tried}"] if len(tried) > 1 else []),
        "drained_before_active": w.drain_before_active,
        "warmup_steps": args.warmup,
        "warmup_seconds": round(warm_s, 2),
        "recorded_at_unix": int(time.time()),
    }
    gt.update(w.extra)
    gt.update(measured)
    if "model_flops_per_step" in measured:
        # hardware FLOPs (recompute included) vs model FLOPs (nothing re-run), over the same step times
        for when, us in (("unprofiled", timing["step_time_us_unprofiled"]),
                         ("profiled", prof["step_time_us_profiled_wall"])):
            gt[f"hfu_{when}"] = sc.mfu(flops["flops_per_step"], us)
            gt[f"mfu_{when}"] = sc.mfu(measured["model_flops_per_step"], us)
        gt["recompute_flops_per_step"] = flops["flops_per_step"] - measured["model_flops_per_step"]
        plain = measured["no_checkpointing"]["step_time_us_unprofiled"]
        gt["checkpointing_step_time_ratio_unprofiled"] = timing["step_time_us_unprofiled"] / plain
    if w.tokens_per_step:
        gt["tokens_per_s_unprofiled"] = w.tokens_per_step / (timing["step_time_us_unprofiled"] * 1e-6)
    if "analytic_flops_per_step" in gt:
        gt["mfu_unprofiled_analytic"] = sc.mfu(gt["analytic_flops_per_step"], timing["step_time_us_unprofiled"])
    with open(os.path.join(run_dir, "ground_truth.json"), "w") as f:
        json.dump(gt, f, indent=2)
    gt["_elapsed_s"] = time.time() - t_start
    return gt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes for a CPU dry run")
    ap.add_argument("--only", default="", help="comma-separated workload names (default: all)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed-steps", type=int, default=25)
    ap.add_argument("--trace-limit", type=int, default=sc.TRACE_LIMIT_BYTES)
    ap.add_argument("--compile-backend", default="inductor")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        if dev.index is None:
            dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
    names = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    results = {}
    for name in names:
        try:
            results[name] = run_one(name, WORKLOADS[name], args, dev)
        except Exception as e:  # keep going: one failure must not lose the others
            traceback.print_exc()
            results[name] = {"error": f"{type(e).__name__}: {e}"}
        sc.cleanup(dev)
    print("\n=== summary ===")
    print(f"{'run':24s} {'unprof_us':>10s} {'prof_us':>10s} {'TFLOP/step':>10s} {'MFU':>6s} {'MFUprof':>7s} "
          f"{'act':>3s} {'trace_KB':>9s} {'secs':>5s}")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:24s} FAILED {r['error'][:200]}")
            continue
        print(f"{name:24s} {r['step_time_us_unprofiled']:10.1f} {r['step_time_us_profiled_wall']:10.1f} "
              f"{r['flops_per_step'] / 1e12:10.4f} {r['mfu_unprofiled']:6.3f} {r['mfu_profiled']:7.3f} "
              f"{r['steps_profiled']:3d} {sum(r['trace_bytes']) / 1024:9.0f} {r['_elapsed_s']:5.0f}")
    sys.exit(0 if all("error" not in r for r in results.values()) else 1)


if __name__ == "__main__":
    main()
