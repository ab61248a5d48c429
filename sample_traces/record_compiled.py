#!/usr/bin/env python3
"""Record the compiled-model samples of issue 23 and their ground truth.

    python3 sample_traces/record_compiled.py --out sample_traces                 # one H200
    python3 sample_traces/record_compiled.py --device cpu --tiny --compile-backend aot_eager --out /tmp/st

Runs:
  gpt_compile_reduce_overhead  the gpt_compile model and step under torch.compile(mode="reduce-overhead"):
                               forward and backward replay as CUDA graphs, so no aten op of the step
                               carries shapes although the trace was recorded with record_shapes=True
  gpt_flex_attention           a torch.compile'd GPT whose attention is flex_attention with a causal
                               BlockMask (create_block_mask)
  gpt_flex_attention_full      the same with block_mask=None (full, non-causal attention)

FLOPs come from FlopCounterMode on the same module run eagerly; for the flex runs also analytically
(attention forward 4*B*H*S*S*D per layer, FlopCounterMode's backward convention 2.5x the forward).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_samples as rs  # noqa: E402
import sample_common as sc  # noqa: E402


class FlexAttention(sc.Attention):
    """sc.Attention with the score computation done by flex_attention (same parameters).

    ``sdpa_twin`` runs the same math through F.scaled_dot_product_attention instead: FlopCounterMode
    raises on eager flex_attention in the torch versions tried, and flex has no CPU backward (the dry run)."""

    block_mask = None  # set per model: a BlockMask (causal) or None (full attention)
    sdpa_twin = False

    def forward(self, x):
        from torch.nn.attention.flex_attention import flex_attention

        B, T, _ = x.shape
        hd = self.head_dim
        q = self.q(x).view(B, T, -1, hd).transpose(1, 2)
        k = self.k(x).view(B, T, -1, hd).transpose(1, 2)
        v = self.v(x).view(B, T, -1, hd).transpose(1, 2)
        if self.sdpa_twin:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.block_mask is not None)
        else:
            y = flex_attention(q, k, v, block_mask=self.block_mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _train_step(model_fn, opt, pool, cfg, dev):
    def step(i):
        xb, yb = pool[i % len(pool)]
        x = xb.to(dev, non_blocking=True)
        y = yb.to(dev, non_blocking=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            logits = model_fn(x)
            loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def build_reduce_overhead(args, dev):
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig()
    torch.manual_seed(0)
    model = sc.GPT(cfg, naive=False).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    mode = "reduce-overhead" if dev.type == "cuda" else None
    compiled = torch.compile(model, backend=args.compile_backend, mode=mode) if mode else torch.compile(
        model, backend=args.compile_backend)
    info = sc.gpt_model_info(model)
    info["cuda_graph"] = dev.type == "cuda"  # the compiled forward/backward replay as CUDA graphs
    tokens = cfg.batch * cfg.seq_len
    w = rs.Workload(
        "gpt_compile_reduce_overhead",
        "The gpt_compile GPT (SDPA causal attention, bf16 autocast, AdamW(fused=True) eager, pinned input copied "
        "non_blocking, no .item()) under torch.compile(model, mode=\"reduce-overhead\"): inductor with CUDA graphs "
        "(cudagraph trees); forward and backward each replay as a CUDA graph. Recorded WITH record_shapes=True.",
        _train_step(compiled, opt, pool, cfg, dev),
        {**sc.pinned_input_expected(tokens * 8),
         "attention": "F.scaled_dot_product_attention(is_causal=True) inside the compiled graph"},
        model_info=info, flop_step=_train_step(model, opt, pool, cfg, dev), tokens_per_step=tokens,
        notes=[rs.SDPA_FLOP_NOTE,
               "torch.compile(mode='reduce-overhead'): the forward and backward graphs are captured as CUDA graphs "
               "after the warm-up steps and replayed; the trace's step therefore holds cudaGraphLaunch calls whose "
               "kernels carry no aten op with Input Dims, although record_shapes=True. The optimizer step is eager "
               "(fused AdamW) and is the only place with shaped aten ops.",
               "cudagraph trees copy the (non-static) input ids into the graph's static input buffers: device-to-"
               "device copies, not host transfers.",
               "flops_per_step counted by FlopCounterMode on the same module run EAGERLY; the math is identical."],
        extra={**sc.gpt_analytic_flops(info, tokens), "compile_mode": mode, "compile_backend": args.compile_backend})
    w.flops_source = "FlopCounterMode (eager run of the same module)"
    return w


def flex_config(tiny: bool) -> sc.GPTConfig:
    # seq 2048 (batch 4, the gpt samples' 8192 tokens) so that attention is about 20 % of the FLOPs
    return sc.GPTConfig.tiny() if tiny else sc.GPTConfig(seq_len=2048, batch=4)


def attention_flops(cfg: sc.GPTConfig, causal_mask: bool) -> dict:
    B, H, S, D, L = cfg.batch, cfg.n_heads, cfg.seq_len, cfg.d_model // cfg.n_heads, cfg.n_layers
    fwd = 4 * B * H * S * S * D * L
    bwd = 2.5 * fwd  # FlopCounterMode's SDPA/flex backward: 5 matmuls (scores recomputed) against 2
    out = {
        "attention_flops_forward_dense_per_step": float(fwd),
        "attention_flops_backward_dense_per_step": float(bwd),
        "attention_flops_dense_per_step": float(fwd + bwd),
        "attention_flops_formula": ("forward 4*B*H*S*S*D per layer (QK^T and PV, the full S x S score matrix); "
                                    "backward 2.5x forward (recomputed QK^T, dV, dP, dQ, dK: FlopCounterMode's "
                                    "convention for SDPA and flex_attention); times n_layers"),
        "attention_mask": "causal BlockMask" if causal_mask else "none (block_mask=None: full attention)",
    }
    if causal_mask:
        out["attention_flops_causal_useful_per_step"] = float(fwd + bwd) / 2
        out["attention_flops_causal_useful_note"] = ("half the dense count: the score entries above the diagonal "
                                                     "are masked; flex_attention skips the fully masked blocks, "
                                                     "so the kernels execute about half (plus the diagonal blocks)")
    return out


def build_flex(args, dev, causal_mask: bool):
    from torch.nn.attention.flex_attention import create_block_mask

    cfg = flex_config(args.tiny)
    torch.manual_seed(0)
    model = sc.GPT(cfg, naive=False).to(dev).train()
    bm = create_block_mask(causal, B=None, H=None, Q_LEN=cfg.seq_len, KV_LEN=cfg.seq_len,
                           device=str(dev)) if causal_mask else None
    for blk in model.blocks:
        blk.attn.__class__ = FlexAttention
        blk.attn.block_mask = bm
        blk.attn.sdpa_twin = dev.type == "cpu"  # CPU dry run only: flex has no CPU backward
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    compiled = torch.compile(model, backend=args.compile_backend)
    info = sc.gpt_model_info(model)
    tokens = cfg.batch * cfg.seq_len
    att = attention_flops(cfg, causal_mask)
    eager = _train_step(model, opt, pool, cfg, dev)

    def with_attention(sdpa: bool, fn):
        def step(i):
            old = [b.attn.sdpa_twin for b in model.blocks]
            for b in model.blocks:
                b.attn.sdpa_twin = sdpa
            try:
                fn(i)
            finally:
                for b, o in zip(model.blocks, old):
                    b.attn.sdpa_twin = o
        return step

    def flex_flop_probe():
        """FlopCounterMode on the eager flex model itself: its count, or the error it raised."""
        try:
            fl = sc.count_flops(with_attention(False, eager), dev)
            return {"flop_counter_on_eager_flex": {"flops_per_step": fl["flops_per_step"],
                                                   "flops_by_op": fl["flops_by_op"]}}
        except Exception as e:  # recorded, not fatal: the SDPA twin gives the count
            return {"flop_counter_on_eager_flex": {"error": f"{type(e).__name__}: {str(e)[:400]}"}}

    name = "gpt_flex_attention" if causal_mask else "gpt_flex_attention_full"
    mask_txt = ("a causal BlockMask (create_block_mask(q_idx >= kv_idx, B=None, H=None))" if causal_mask
                else "block_mask=None (full, non-causal attention)")
    w = rs.Workload(
        name,
        f"GPT ({cfg.n_layers} layers, d {cfg.d_model}, {cfg.n_heads} heads, seq {cfg.seq_len}, batch {cfg.batch}, "
        f"vocab {cfg.vocab}) whose attention is torch.nn.attention.flex_attention.flex_attention with {mask_txt}, "
        "the whole model under torch.compile (default mode, inductor: flex_attention becomes a Triton template "
        "kernel), bf16 autocast, AdamW(fused=True) eager, pinned input copied non_blocking, no .item().",
        _train_step(compiled, opt, pool, cfg, dev),
        {**sc.pinned_input_expected(tokens * 8), "attention": f"flex_attention, {mask_txt}"},
        model_info=info, flop_step=with_attention(True, eager), tokens_per_step=tokens,
        notes=["flops_per_step counted by FlopCounterMode on the same module run EAGERLY with each flex_attention "
               "call replaced by F.scaled_dot_product_attention(is_causal=<mask is causal>): the same math and "
               "parameters; FlopCounterMode counts SDPA densely (forward 4*B*H*S*S*D, backward 2.5x), the mask "
               "is not looked at. flop_counter_on_eager_flex holds what FlopCounterMode did on the eager flex "
               "model itself (its count, or the error it raised).",
               "Analytic attention FLOPs (attention_flops_*) are given beside it, dense and, for the causal mask, "
               "the causal-useful half."],
        extra={**sc.gpt_analytic_flops(info, tokens), **att, "compile_backend": args.compile_backend})
    w.flops_source = "FlopCounterMode (eager run of the same module, flex_attention replaced by SDPA)"
    w.measure_extra = flex_flop_probe
    return w


BUILDERS = {
    "gpt_compile_reduce_overhead": build_reduce_overhead,
    "gpt_flex_attention": lambda a, d: build_flex(a, d, causal_mask=True),
    "gpt_flex_attention_full": lambda a, d: build_flex(a, d, causal_mask=False),
}


def add_flop_checks(gt: dict) -> None:
    """What FlopCounterMode made of the eager flex model, against the analytic attention count."""
    if "attention_flops_dense_per_step" not in gt:
        return
    probe = gt.get("flop_counter_on_eager_flex", {})
    flex = {k: v for k, v in probe.get("flops_by_op", {}).items() if "flex" in k.lower()}
    gt["flop_counter_counted_flex_attention"] = bool(flex) if "flops_by_op" in probe else None
    gt["flop_counter_flex_ops"] = flex
    dense = gt["attention_flops_dense_per_step"]
    gt["flops_per_step_minus_analytic_attention"] = gt["flops_per_step"] - dense
    if "attention_flops_causal_useful_per_step" in gt:
        useful = gt["flops_per_step"] - dense + gt["attention_flops_causal_useful_per_step"]
        gt["flops_per_step_causal_useful"] = useful
        gt["mfu_unprofiled_causal_useful"] = sc.mfu(useful, gt["step_time_us_unprofiled"])
        gt["mfu_profiled_causal_useful"] = sc.mfu(useful, gt["step_time_us_profiled_wall"])
    gt["attention_share_of_flops_dense"] = dense / gt["flops_per_step"] if gt["flops_per_step"] else None
    sdpa = sum(v for k, v in gt["flops_by_op"].items() if "attention" in k)
    gt["flop_counter_sdpa_twin_attention_flops"] = sdpa
    gt["flop_counter_sdpa_twin_vs_analytic_attention"] = sdpa / dense if dense else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--timed-steps", type=int, default=25)
    ap.add_argument("--trace-limit", type=int, default=sc.TRACE_LIMIT_BYTES)
    ap.add_argument("--compile-backend", default="inductor")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", dev.index or 0)
        torch.cuda.set_device(dev)
    failed = []
    for name in [n for n in args.only.split(",") if n] or list(BUILDERS):
        t0 = time.time()
        try:
            run_dir = os.path.join(args.out, name)
            os.makedirs(run_dir, exist_ok=True)
            sc.remove_traces(run_dir, rs.WORKER)
            w = BUILDERS[name](args, dev)
            w.drain_before_active = True
            w.notes.append(rs.DRAIN_NOTE)
            gt = rs._record(name, w, args, dev, run_dir, t0)
            gt.pop("_elapsed_s", None)
            add_flop_checks(gt)
            with open(os.path.join(run_dir, "ground_truth.json"), "w") as f:
                json.dump(gt, f, indent=2)
            print(f"[{name}] {gt['flops_per_step']:.4e} FLOP/step, {gt['step_time_us_unprofiled']:.0f} us unprof, "
                  f"{gt['step_time_us_profiled_wall']:.0f} us prof, trace {gt['trace_bytes']}, "
                  f"flex counted: {gt.get('flop_counter_flex_ops')}, {time.time() - t0:.0f} s", flush=True)
        except Exception:
            traceback.print_exc()
            failed.append(name)
        sc.cleanup(dev)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
