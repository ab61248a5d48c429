#!/usr/bin/env python3
"""Record issue 33's before/after pairs (validation/gain_pairs): each pair differs by exactly one fix; the
unprofiled step times are the truth for the gain a user measures. The recorder is record_whatif_pairs.py's
(same timing, FLOP count and profiled steps); the registry is this file's: the issue-26 builders re-run on
this machine, plus pairs on third-party model code (Hugging Face transformers built from configs).

    python3 validation/record_gain_pairs.py --out validation/gain_pairs --trace-limit 700000     # one H100
    python3 validation/record_gain_pairs.py --device cpu --tiny --compile-backend aot_eager --out /tmp/gp
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_whatif_pairs as rwp  # noqa: E402
import truth_models as tm  # noqa: E402
import whatif_workloads as ww  # noqa: E402
from whatif_common import Variant  # noqa: E402


def hf_llama_eager_sdpa(args, dev, fixed: bool) -> Variant:
    """HF Llama, attn_implementation 'eager' -> 'sdpa' (GQA 4:1; transformers passes enable_gqa=True)."""
    from transformers import LlamaForCausalLM

    cfg, t = tm._llama_cfg(args, "sdpa" if fixed else "eager")
    if not args.tiny:  # a shape of its own (the MFU run is seq 2048 batch 4)
        t.update(seq=1024, batch=8)
        cfg.max_position_embeddings = 1024
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(dev).train()
    opt = tm._opt(model, dev)
    pool = tm._tokens(t["vocab"], t["batch"], t["seq"], dev)
    flop_step = tm.eager_twin_step(model, pool, dev) if fixed else None
    impl = "sdpa" if fixed else "eager"
    return Variant(
        tm._hf_step(model, opt, pool, dev),
        f"Hugging Face LlamaForCausalLM ({t['n_layers']} layers, hidden {t['d']}, intermediate {t['ffn']}, "
        f"{t['heads']} heads, {t['kv']} KV heads), seq {t['seq']} batch {t['batch']}, bf16 autocast, "
        f"AdamW(fused=True), pinned non_blocking input; attn_implementation='{impl}'",
        {},
        flop_step=flop_step,
        model=tm._info(model, attn_implementation=impl, **t),
        notes=["the after's FLOPs are FlopCounterMode's on an eager-attention twin (it rejects SDPA with GQA)"]
        if fixed
        else [],
    )


def hf_gpt2_fused_adamw(args, dev, fixed: bool) -> Variant:
    """HF GPT-2, AdamW(foreach=False, fused=False) -> AdamW(fused=True)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    t = tm.TINY if args.tiny else {"n_layers": 6, "d": 768, "heads": 12, "seq": 512, "batch": 8, "vocab": 50257}
    cfg = GPT2Config(
        n_layer=t["n_layers"], n_embd=t["d"], n_head=t["heads"], n_positions=t["seq"], vocab_size=t["vocab"]
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).to(dev).train()
    kw = {"fused": True} if fixed and dev.type == "cuda" else {"foreach": False, "fused": False}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)
    pool = tm._tokens(t["vocab"], t["batch"], t["seq"], dev)
    n = len(list(model.parameters()))
    return Variant(
        tm._hf_step(model, opt, pool, dev),
        f"Hugging Face GPT2LMHeadModel ({t['n_layers']} layers, d {t['d']}, {n} parameter tensors), attention "
        f"'{model.config._attn_implementation}', seq {t['seq']} batch {t['batch']}, bf16 autocast, pinned "
        f"non_blocking input; optimizer AdamW({', '.join(f'{k}={v}' for k, v in kw.items())})",
        {"optimizer": f"AdamW({kw})"},
        model=tm._info(model, n_param_tensors=n, **t),
    )


def hf_bert_eager_sdpa(args, dev, fixed: bool) -> Variant:
    """HF BERT, attn_implementation 'eager' -> 'sdpa': attention without a causal mask (every token sees
    every other), dropout 0.1, seq 512."""
    impl = "sdpa" if fixed else "eager"
    model, t = tm.bert(args, dev, impl)
    pool = tm._tokens(t["vocab"], t["batch"], t["seq"], dev)
    return Variant(
        tm._hf_step(model, tm._opt(model, dev), pool, dev),
        f"Hugging Face BertForMaskedLM ({t['n_layers']} layers, hidden {t['d']}, {t['heads']} heads), seq "
        f"{t['seq']} batch {t['batch']}, bf16 autocast, AdamW(fused=True); attn_implementation='{impl}'",
        {},
        flop_step=tm.eager_twin_step(model, pool, dev) if fixed else None,
        model=tm._info(model, attn_implementation=impl, **t),
    )


def hf_vit_eager_sdpa(args, dev, fixed: bool) -> Variant:
    """HF ViT, attn_implementation 'eager' -> 'sdpa': a short sequence (197 tokens), no mask."""
    impl = "sdpa" if fixed else "eager"
    model, pool, labels, t = tm.vit(args, dev, impl)
    kw = {"key": "pixel_values", "labels_fn": lambda i, d: labels}
    return Variant(
        tm._hf_step(model, tm._opt(model, dev), pool, dev, **kw),
        f"Hugging Face ViTForImageClassification ({t['n_layers']} layers, hidden {t['d']}, {t['heads']} heads, "
        f"image {t['image']}, patch {t['patch']}), batch {t['batch']}, bf16 autocast, AdamW(fused=True); "
        f"attn_implementation='{impl}'",
        {},
        flop_step=tm.eager_twin_step(model, pool, dev, **kw) if fixed else None,
        model=tm._info(model, attn_implementation=impl, **t),
    )


def _gradscaler_gpt(args, dev, fused: bool, bf16: bool) -> Variant:
    """The MFU run ``fp16_gradscaler``'s GPT and step, its optimizer fused or its dtype bf16 (then with no
    GradScaler, which bf16 does not need)."""
    import torch.nn.functional as F

    sc = tm.sc
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig(n_layers=4, d_model=1024, seq_len=1024, batch=8)
    torch.manual_seed(0)
    model = sc.GPT(cfg).to(dev).train()
    kw = {"fused": True} if fused and dev.type == "cuda" else {}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)  # {}: the default, foreach on CUDA
    scaler = torch.amp.GradScaler(dev.type, enabled=dev.type == "cuda" and not bf16)
    dtype = torch.bfloat16 if bf16 else torch.float16
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)

    def step(i):
        xb, yb = pool[i % len(pool)]
        x, y = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        with torch.autocast(device_type=dev.type, dtype=dtype):
            loss = F.cross_entropy(model(x).view(-1, cfg.vocab), y.view(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    amp = "bf16 autocast, no GradScaler" if bf16 else "fp16 autocast with torch.amp.GradScaler (scale, step, update)"
    return Variant(
        step,
        f"GPT {cfg.n_layers}L d{cfg.d_model} {cfg.n_heads}h seq {cfg.seq_len} batch {cfg.batch} vocab {cfg.vocab}, "
        f"SDPA, {amp}, AdamW({', '.join(f'{k}={v}' for k, v in kw.items()) or 'default: foreach'})",
        {"optimizer": f"AdamW({kw})", "dtype": "bf16" if bf16 else "fp16"},
        model={**sc.gpt_model_info(model), "dtype": amp},
    )


def gradscaler_fused(args, dev, fixed: bool) -> Variant:
    """fp16 + GradScaler, AdamW foreach -> fused=True: GradScaler.step reads found_inf with .item() before a
    foreach step, and hands it to a fused one on the GPU (``_step_supports_amp_scaling``)."""
    return _gradscaler_gpt(args, dev, fused=fixed, bf16=False)


def gradscaler_bf16(args, dev, fixed: bool) -> Variant:
    """fp16 + GradScaler -> bf16 autocast without one, AdamW foreach on both sides: the found_inf .item()
    and the scaler's own kernels gone, the matmuls as fast (16-bit both)."""
    return _gradscaler_gpt(args, dev, fused=False, bf16=fixed)


_HF = {
    "hf_llama_eager_sdpa": {"build": hf_llama_eager_sdpa, "fix": "attn_implementation='eager' -> 'sdpa' (GQA)"},
    "hf_bert_eager_sdpa": {"build": hf_bert_eager_sdpa, "fix": "attn_implementation='eager' -> 'sdpa' (BERT)"},
    "hf_vit_eager_sdpa": {"build": hf_vit_eager_sdpa, "fix": "attn_implementation='eager' -> 'sdpa' (ViT)"},
    "hf_gpt2_fused_adamw": {
        "build": hf_gpt2_fused_adamw,
        "fix": "AdamW(foreach=False, fused=False) -> AdamW(fused=True) on HF GPT-2",
    },
    "gradscaler_fused": {
        "build": gradscaler_fused,
        "fix": "fp16 + GradScaler: AdamW (foreach) -> AdamW(fused=True), no found_inf .item()",
    },
    "gradscaler_bf16": {"build": gradscaler_bf16, "fix": "fp16 autocast + GradScaler -> bf16 autocast, no scaler"},
}
# In the order they are recorded: the four fixes the table names first, the compiled one last.
ORDER = (
    "attention_sdpa",
    "item_sync",
    "fused_adamw",
    "hf_llama_eager_sdpa",
    "hf_gpt2_fused_adamw",
    "pinned_copies",
    "cuda_graph",
    "bf16_autocast",
    "compile_elementwise",
    "hf_bert_eager_sdpa",  # non-causal attention, recorded after the first set
    "hf_vit_eager_sdpa",
    "gradscaler_fused",  # GradScaler's found_inf .item(), recorded from the eighth session of 2026-12-07
    "gradscaler_bf16",
)
PAIRS = {k: _HF.get(k) or ww.PAIRS[k] for k in ORDER}

if __name__ == "__main__":
    ww.PAIRS.clear()
    ww.PAIRS.update(PAIRS)
    rwp.main()
