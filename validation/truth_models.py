"""The MFU ground-truth runs of issue 33 (validation/record_mfu_truth.py): third-party model code (Hugging Face
transformers, built from configs) and our own GPT in the precisions and kernels the product must get right.

Each builder returns a ``whatif_common.Variant``: the training step, the step FlopCounterMode counts
(``flop_step``: an eager twin where FlopCounterMode cannot count the real one) and what was run."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from whatif_common import Variant, sc

TINY = {"n_layers": 2, "d": 64, "heads": 4, "kv": 2, "seq": 32, "batch": 2, "vocab": 256}


def _opt(model, dev, **kw):
    return torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if dev.type == "cuda" else {}), **kw)


def _tokens(vocab, batch, seq, dev, n=4):
    g = torch.Generator().manual_seed(1)
    pool = [torch.randint(0, vocab, (batch, seq), generator=g) for _ in range(n)]
    return [p.pin_memory() for p in pool] if dev.type == "cuda" else pool


def _hf_step(model, opt, pool, dev, dtype=torch.bfloat16, key="input_ids", labels_fn=None):
    """A Hugging Face training step: the batch copied non_blocking, the model's own loss (labels=...)."""

    def step(i):
        x = pool[i % len(pool)].to(dev, non_blocking=True)
        lab = labels_fn(i, dev) if labels_fn is not None else x
        with torch.autocast(device_type=dev.type, dtype=dtype):
            loss = model(**{key: x}, labels=lab).loss
        loss.backward()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            model.zero_grad(set_to_none=True)

    return step


def _info(model, **kw) -> dict:
    return {"n_params": sum(p.numel() for p in model.parameters()), **kw}


def _set_attn(model, impl: str) -> None:
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:  # older transformers: the forward reads the config at run time
        model.config._attn_implementation = impl


def eager_twin_step(model, pool, dev, **step_kw):
    """The step FlopCounterMode counts for a model whose attention it cannot count: an eager-attention
    deep copy (the same math, written out), without an optimizer."""
    twin = copy.deepcopy(model)
    _set_attn(twin, "eager")
    return _hf_step(twin, None, pool, dev, **step_kw)


# --------------------------------------------------------------------------- Hugging Face models


def hf_gpt2(args, dev) -> Variant:
    from transformers import GPT2Config, GPT2LMHeadModel

    t = TINY if args.tiny else {"n_layers": 4, "d": 768, "heads": 12, "seq": 1024, "batch": 8, "vocab": 50257}
    cfg = GPT2Config(
        n_layer=t["n_layers"], n_embd=t["d"], n_head=t["heads"], n_positions=t["seq"], vocab_size=t["vocab"]
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).to(dev).train()
    impl = model.config._attn_implementation
    opt = _opt(model, dev)
    pool = _tokens(t["vocab"], t["batch"], t["seq"], dev)
    return Variant(
        _hf_step(model, opt, pool, dev),
        f"Hugging Face GPT2LMHeadModel from GPT2Config(n_layer={t['n_layers']}, n_embd={t['d']}, "
        f"n_head={t['heads']}, vocab {t['vocab']}, tied lm_head), attention '{impl}', seq {t['seq']} batch "
        f"{t['batch']}, bf16 autocast, AdamW(fused=True), pinned non_blocking input, loss from labels=input_ids",
        {},
        model=_info(model, attn_implementation=impl, **t, tokens_per_step=t["batch"] * t["seq"]),
    )


def bert(args, dev, impl: str):
    """HF BertForMaskedLM from a config, with attention ``impl``, and its shape."""
    from transformers import BertConfig, BertForMaskedLM

    t = TINY if args.tiny else {"n_layers": 4, "d": 768, "heads": 12, "seq": 512, "batch": 16, "vocab": 30522}
    cfg = BertConfig(
        num_hidden_layers=t["n_layers"],
        hidden_size=t["d"],
        num_attention_heads=t["heads"],
        intermediate_size=4 * t["d"],
        vocab_size=t["vocab"],
        max_position_embeddings=max(512, t["seq"]),
        attn_implementation=impl,
    )
    torch.manual_seed(0)
    return BertForMaskedLM(cfg).to(dev).train(), t


def hf_bert_eager(args, dev) -> Variant:
    model, t = bert(args, dev, "eager")
    opt = _opt(model, dev)
    pool = _tokens(t["vocab"], t["batch"], t["seq"], dev)
    return Variant(
        _hf_step(model, opt, pool, dev),
        f"Hugging Face BertForMaskedLM from BertConfig({t['n_layers']} layers, hidden {t['d']}, {t['heads']} "
        f"heads, intermediate {4 * t['d']}), attn_implementation='eager' (matmul, softmax, dropout p=0.1), "
        f"seq {t['seq']} batch {t['batch']}, bf16 autocast, AdamW(fused=True), labels = input ids (every token)",
        {},
        model=_info(model, attn_implementation=model.config._attn_implementation, **t),
    )


def vit(args, dev, impl: str | None = None):
    """HF ViTForImageClassification from a config (attention ``impl``, transformers' default when
    None), its pinned image pool, its labels and its shape."""
    from transformers import ViTConfig, ViTForImageClassification

    t = (
        {"n_layers": 2, "d": 64, "heads": 4, "image": 32, "patch": 8, "batch": 2, "labels": 10}
        if args.tiny
        else {"n_layers": 4, "d": 768, "heads": 12, "image": 224, "patch": 16, "batch": 64, "labels": 1000}
    )
    cfg = ViTConfig(
        num_hidden_layers=t["n_layers"],
        hidden_size=t["d"],
        num_attention_heads=t["heads"],
        intermediate_size=4 * t["d"],
        image_size=t["image"],
        patch_size=t["patch"],
        num_labels=t["labels"],
        **({"attn_implementation": impl} if impl is not None else {}),
    )
    torch.manual_seed(0)
    model = ViTForImageClassification(cfg).to(dev).train()
    g = torch.Generator().manual_seed(1)
    pool = [torch.randn(t["batch"], 3, t["image"], t["image"], generator=g) for _ in range(2)]
    labels = torch.randint(0, t["labels"], (t["batch"],), generator=g).to(dev)
    if dev.type == "cuda":
        pool = [p.pin_memory() for p in pool]
    return model, pool, labels, t


def hf_vit(args, dev) -> Variant:
    model, pool, labels, t = vit(args, dev)
    opt = _opt(model, dev)
    return Variant(
        _hf_step(model, opt, pool, dev, key="pixel_values", labels_fn=lambda i, d: labels),
        f"Hugging Face ViTForImageClassification from ViTConfig({t['n_layers']} layers, hidden {t['d']}, "
        f"{t['heads']} heads, image {t['image']}, patch {t['patch']}, {t['labels']} labels), attention "
        f"'{model.config._attn_implementation}', batch {t['batch']}, bf16 autocast, AdamW(fused=True), "
        "fp32 pixel_values pinned non_blocking",
        {},
        model=_info(model, attn_implementation=model.config._attn_implementation, **t),
    )


def _llama_cfg(args, impl: str):
    t = (
        dict(TINY)
        if args.tiny
        else {"n_layers": 4, "d": 1024, "heads": 16, "kv": 4, "seq": 2048, "batch": 4, "vocab": 32000}
    )
    t["ffn"] = 2 * t["d"] if args.tiny else 2816
    return llama_config(t, impl), t


def llama_config(t: dict, impl: str):
    """The LlamaConfig of a recorded run's model dict (``d``, ``ffn``, ``n_layers``, ``heads``, ``kv``,
    ``vocab``, ``seq``): the recorders build from it, and validation/flops_as_run.py rebuilds from it."""
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=t["d"],
        intermediate_size=t["ffn"],
        num_hidden_layers=t["n_layers"],
        num_attention_heads=t["heads"],
        num_key_value_heads=t["kv"],
        vocab_size=t["vocab"],
        max_position_embeddings=t["seq"],
        attn_implementation=impl,
    )


def flop_probe(step, dev) -> dict:
    """What FlopCounterMode made of the real step: its count, or the error it raised (GQA SDPA in torch 2.11)."""
    try:
        fl = sc.count_flops(step, dev)
        return {"flops_per_step": fl["flops_per_step"], "flops_by_op": fl["flops_by_op"]}
    except Exception as e:  # recorded, not fatal: the eager twin gives the count
        return {"error": f"{type(e).__name__}: {str(e)[:400]}"}


def hf_llama(args, dev, impl: str) -> Variant:
    from transformers import LlamaForCausalLM

    cfg, t = _llama_cfg(args, impl)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(dev).train()
    opt = _opt(model, dev)
    pool = _tokens(t["vocab"], t["batch"], t["seq"], dev)
    step = _hf_step(model, opt, pool, dev)
    flop_step, notes, extra = None, [], {}
    if impl != "eager":
        flop_step = eager_twin_step(model, pool, dev)
        notes.append(
            "FLOPs from FlopCounterMode on an eager-attention deep copy (repeat_kv, then matmul/softmax/matmul: "
            "the same math). FlopCounterMode in torch 2.11 rejects scaled_dot_product_attention with GQA shapes; "
            "flop_counter_on_sdpa_model holds what it did on the real SDPA model."
        )
        extra["_probe"] = lambda: {"flop_counter_on_sdpa_model": flop_probe(_hf_step(model, None, pool, dev), dev)}
    gqa = t["heads"] // t["kv"]
    return Variant(
        step,
        f"Hugging Face LlamaForCausalLM from LlamaConfig({t['n_layers']} layers, hidden {t['d']}, intermediate "
        f"{t['ffn']}, {t['heads']} heads, {t['kv']} KV heads (GQA {gqa}:1), vocab {t['vocab']}), "
        f"attn_implementation='{impl}', seq {t['seq']} batch {t['batch']}, bf16 autocast, AdamW(fused=True), "
        "pinned non_blocking input, loss from labels=input_ids",
        {},
        flop_step=flop_step,
        model=_info(model, attn_implementation=impl, **t),
        notes=notes,
        extra=extra,
    )


# --------------------------------------------------------------------------- our own GPT variants


def fp16_gradscaler(args, dev) -> Variant:
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig(n_layers=4, d_model=1024, seq_len=1024, batch=8)
    torch.manual_seed(0)
    model = sc.GPT(cfg).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)  # the default (foreach on CUDA): GradScaler syncs
    scaler = torch.amp.GradScaler(dev.type, enabled=dev.type == "cuda")
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)

    def step(i):
        xb, yb = pool[i % len(pool)]
        x, y = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        with torch.autocast(device_type=dev.type, dtype=torch.float16):
            loss = F.cross_entropy(model(x).view(-1, cfg.vocab), y.view(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    return Variant(
        step,
        f"GPT {cfg.n_layers}L d{cfg.d_model} {cfg.n_heads}h seq {cfg.seq_len} batch {cfg.batch} vocab {cfg.vocab}, "
        "SDPA, fp16 autocast with torch.amp.GradScaler (scale, step, update), AdamW default (foreach): "
        "GradScaler.step reads found_inf with .item(), one host sync a step",
        {},
        model={**sc.gpt_model_info(model), "dtype": "fp16 autocast + GradScaler"},
    )


def fp32_gpt(args, dev) -> Variant:
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig(n_layers=4, d_model=1024, seq_len=1024, batch=4)
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = sc.GPT(cfg).to(dev).train()
    opt = _opt(model, dev)
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)

    def step(i):
        xb, yb = pool[i % len(pool)]
        x, y = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        loss = F.cross_entropy(model(x).view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def restore():
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags

    return Variant(
        step,
        f"GPT {cfg.n_layers}L d{cfg.d_model} {cfg.n_heads}h seq {cfg.seq_len} batch {cfg.batch} vocab {cfg.vocab}, "
        "SDPA, plain fp32 (no autocast), torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False, "
        "AdamW(fused=True)",
        {},
        model={**sc.gpt_model_info(model), "dtype": "fp32", "allow_tf32": False},
        cleanup=restore,
    )


class MoE(nn.Module):
    """Top-k routed experts (SwiGLU-free: Linear -> GELU -> Linear per expert), weights as (E, d, h) tensors.

    ``grouped``: one torch._grouped_mm per projection over the tokens sorted by expert (bf16, offsets in
    int32); else a Python loop of one matmul per expert (the counts read to the host with .tolist())."""

    def __init__(self, d: int, hidden: int, experts: int, top_k: int):
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        # stored (E, out, in) and passed transposed (column-major per expert), as torchtitan does
        self.w1 = nn.Parameter(torch.randn(experts, hidden, d) / math.sqrt(d))
        self.w2 = nn.Parameter(torch.randn(experts, d, hidden) / math.sqrt(hidden))
        self.k, self.E = top_k, experts
        self.grouped = True

    def forward(self, x):
        B, T, d = x.shape
        flat = x.reshape(-1, d)
        probs = self.router(flat).float().softmax(-1)
        weight, expert = probs.topk(self.k, dim=-1)  # (N, k)
        order = expert.reshape(-1).argsort()
        token = order // self.k
        xs = flat[token]
        counts = torch.bincount(expert.reshape(-1), minlength=self.E)
        if self.grouped:
            dt = torch.bfloat16
            offs = counts.cumsum(0).to(torch.int32)
            h = F.gelu(torch._grouped_mm(xs.to(dt), self.w1.to(dt).transpose(-2, -1), offs=offs))
            ys = torch._grouped_mm(h, self.w2.to(dt).transpose(-2, -1), offs=offs)
        else:
            parts, start = [], 0
            for e, n in enumerate(counts.tolist()):
                seg = xs[start : start + n]
                parts.append(F.gelu(seg @ self.w1[e].t()) @ self.w2[e].t())
                start += n
            ys = torch.cat(parts)
        ys = ys * weight.reshape(-1)[order].unsqueeze(-1).to(ys.dtype)
        out = torch.zeros_like(flat, dtype=ys.dtype).index_add_(0, token, ys)
        return out.view(B, T, d).to(x.dtype)


def moe_grouped_gemm(args, dev) -> Variant:
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig(n_layers=4, d_model=1024, seq_len=1024, batch=8)
    E, k, hidden = (4, 2, 128) if args.tiny else (8, 2, 2816)
    torch.manual_seed(0)
    model = sc.GPT(cfg).to(dev).train()
    for blk in model.blocks:
        blk.mlp = MoE(cfg.d_model, hidden, E, k).to(dev)
    grouped, notes = dev.type == "cuda", []
    if grouped:  # one forward and backward through torch._grouped_mm; the loop if it cannot run here
        try:
            x = torch.randint(0, cfg.vocab, (2, cfg.seq_len), device=dev)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                model(x).float().mean().backward()
            model.zero_grad(set_to_none=True)
        except Exception as e:
            grouped = False
            notes.append(f"torch._grouped_mm failed here, the loop was used: {type(e).__name__}: {str(e)[:300]}")
    for blk in model.blocks:
        blk.mlp.grouped = grouped
    opt = _opt(model, dev)
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)

    def make(grouped_mm: bool, with_opt: bool):
        def step(i):
            for blk in model.blocks:
                blk.mlp.grouped = grouped_mm
            xb, yb = pool[i % len(pool)]
            x, y = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x).view(-1, cfg.vocab), y.view(-1))
            loss.backward()
            if with_opt:
                opt.step()
            opt.zero_grad(set_to_none=True)
            for blk in model.blocks:
                blk.mlp.grouped = grouped

        return step

    tokens = cfg.batch * cfg.seq_len
    analytic = 3 * 2 * 2 * tokens * k * cfg.d_model * hidden * cfg.n_layers  # two projections, fwd + 2x bwd
    return Variant(
        make(grouped, True),
        f"GPT {cfg.n_layers}L d{cfg.d_model} {cfg.n_heads}h seq {cfg.seq_len} batch {cfg.batch} whose MLP is an MoE "
        f"of {E} experts (d->{hidden}->d, GELU), top-{k} routing, tokens sorted by expert; the expert GEMMs are "
        + ("torch._grouped_mm (bf16, int32 offsets), one per projection" if grouped else "a loop (CPU dry run)")
        + "; SDPA, bf16 autocast, AdamW(fused=True)",
        {},
        flop_step=make(False, False),
        model={
            **sc.gpt_model_info(model),
            "experts": E,
            "top_k": k,
            "expert_hidden": hidden,
            "expert_gemm": "torch._grouped_mm" if grouped else "loop",
        },
        notes=notes
        + [
            "FlopCounterMode has no formula for torch._grouped_mm: FLOPs are counted on the same model and batch "
            "with the expert GEMMs as a loop of matmuls (same routing, same shapes, same math). "
            "expert_flops_analytic = 3 (fwd+bwd) x 2 projections x 2 x tokens x top_k x d x hidden x layers."
        ],
        extra={"expert_flops_analytic_per_step": float(analytic)},
    )


def flex_attention_compile(args, dev) -> Variant:
    import record_compiled as rc
    from torch.nn.attention.flex_attention import create_block_mask

    cfg = (
        sc.GPTConfig.tiny()
        if args.tiny
        else sc.GPTConfig(n_layers=6, d_model=768, n_heads=12, seq_len=1024, batch=8, vocab=32768)
    )
    torch.manual_seed(0)
    model = sc.GPT(cfg).to(dev).train()
    bm = create_block_mask(rc.causal, B=None, H=None, Q_LEN=cfg.seq_len, KV_LEN=cfg.seq_len, device=str(dev))
    for blk in model.blocks:
        blk.attn.__class__ = rc.FlexAttention
        blk.attn.block_mask = bm
        blk.attn.sdpa_twin = dev.type == "cpu"
    opt = _opt(model, dev)
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    compiled = torch.compile(model, backend=args.compile_backend)
    eager = rc._train_step(model, opt, pool, cfg, dev)

    def twin(i):
        old = [b.attn.sdpa_twin for b in model.blocks]
        for b in model.blocks:
            b.attn.sdpa_twin = True
        try:
            eager(i)
        finally:
            for b, o in zip(model.blocks, old, strict=True):
                b.attn.sdpa_twin = o

    return Variant(
        rc._train_step(compiled, opt, pool, cfg, dev),
        f"GPT {cfg.n_layers}L d{cfg.d_model} {cfg.n_heads}h seq {cfg.seq_len} batch {cfg.batch} vocab {cfg.vocab}, "
        "attention flex_attention with a causal BlockMask, the whole model under torch.compile (inductor), "
        "bf16 autocast, AdamW(fused=True) eager, pinned non_blocking input",
        {},
        flop_step=twin,
        model={**sc.gpt_model_info(model), "attention": "flex_attention, causal BlockMask, torch.compile"},
        notes=[
            "FLOPs from FlopCounterMode on the same module run eagerly with flex_attention replaced by "
            "F.scaled_dot_product_attention(is_causal=True): dense count (forward 4*B*H*S*S*D, backward 2.5x), as "
            "for every other causal run here; flex skips the masked blocks, so it executes about half of the "
            "attention FLOPs counted."
        ],
        extra={**rc.attention_flops(cfg, True), "compile_backend": args.compile_backend},
    )


BUILDERS = {
    "hf_gpt2": hf_gpt2,
    "hf_bert_eager": hf_bert_eager,
    "hf_vit": hf_vit,
    "hf_llama_sdpa_gqa": lambda a, d: hf_llama(a, d, "sdpa"),
    "hf_llama_eager": lambda a, d: hf_llama(a, d, "eager"),
    "fp16_gradscaler": fp16_gradscaler,
    "moe_grouped_gemm": moe_grouped_gemm,
    "flex_attention_compile": flex_attention_compile,
    "fp32_gpt": fp32_gpt,
}
