#!/usr/bin/env python3
"""A zoo of CUDA kernels, from one block to many waves and from about 1 us to about 20 ms, plus two real
training steps, run twice: under torch.profiler (the trace's fields) and under Nsight Compute (the
hardware's SM efficiency). validation/sm_zoo_match.py matches the two kernel by kernel.

    python3 validation/sm_zoo.py --mode trace --out DIR        # DIR/zoo/*.pt.trace.json.gz, DIR/step_*/..
    ncu --clock-control none --cache-control none --profile-from-start off --page raw --csv --print-units base \
        --metrics <record_issue33.sh's list> --log-file DIR/ncu_cases.csv python3 validation/sm_zoo.py --mode ncu \
        --part cases                                          # then --part steps into DIR/ncu_steps.csv

Both modes build the same inputs and run every case once as a warm-up first (module loading, cuBLAS
handles, heuristics), outside what is recorded. Then the trace mode records each case ``--reps`` times
(a torch.cuda.synchronize() after each, each inside record_function("zoo:<case>")); the ncu mode runs
each case once between cudaProfilerStart/Stop, so ncu profiles only those kernels, in the same order.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_traces"))
import sample_common as sc  # noqa: E402


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def cases() -> dict:
    """name -> a function that launches the case's kernel(s). Inputs are allocated here, once."""
    z: dict = {}
    for p in (7, 10, 13, 15, 16, 17, 19, 21, 23, 25, 27):
        a, b, c = _r(2**p), _r(2**p), torch.empty(2**p, device="cuda")
        z[f"add_f32_2e{p}"] = lambda a=a, b=b, c=c: torch.add(a, b, out=c)
    for p in (20, 26):
        a, b = _r(2**p, dtype=torch.bfloat16), _r(2**p, dtype=torch.bfloat16)
        z[f"mul_bf16_2e{p}"] = lambda a=a, b=b: a * b
    big = torch.empty(2**28, device="cuda")
    z["fill_f32_2e28"] = lambda: big.fill_(1.0)
    t = _r(4096, 4096)
    z["transpose_copy_4096"] = lambda: t.t().contiguous()
    small = [_r(64, 128) for _ in range(32)]
    z["cat_32_small"] = lambda: torch.cat(small)
    two = [_r(4096, 4096), _r(4096, 4096)]
    z["cat_2_large"] = lambda: torch.cat(two)
    for rows, cols in ((8, 1024), (4096, 64), (4096, 32000)):
        x = _r(rows, cols)
        z[f"softmax_{rows}x{cols}"] = lambda x=x: F.softmax(x, dim=-1)
    ln_x, ln = _r(8192, 1024, dtype=torch.bfloat16), torch.nn.LayerNorm(1024, device="cuda", dtype=torch.bfloat16)
    z["layernorm_8192x1024_bf16"] = lambda: ln(ln_x)
    for p in (10, 20, 27):
        x = _r(2**p)
        z[f"sum_2e{p}"] = lambda x=x: x.sum()
    r2 = _r(8192, 8192)
    z["sum_dim1_8192x8192"] = lambda: r2.sum(dim=1)
    z["sum_dim0_8192x8192"] = lambda: r2.sum(dim=0)
    am = _r(4096, 32000)
    z["argmax_4096x32000"] = lambda: am.argmax(dim=-1)
    cs = _r(2**24)
    z["cumsum_2e24"] = lambda: cs.cumsum(0)
    so = _r(2**20)
    z["sort_2e20"] = lambda: so.sort()
    tk = _r(8192, 1024)
    z["topk2_8192x1024"] = lambda: tk.topk(2, dim=-1)
    emb, idx = _r(32000, 1024, dtype=torch.bfloat16), torch.randint(0, 32000, (8192,), device="cuda")
    z["embedding_8192x1024"] = lambda: F.embedding(idx, emb)
    dr = _r(2**24)
    z["dropout_2e24"] = lambda: F.dropout(dr, p=0.1, training=True)
    rn = torch.empty(2**24, device="cuda")
    z["randn_2e24"] = lambda: rn.normal_()
    mf, mm = _r(4096, 4096), torch.rand(4096, 4096, device="cuda") > 0.5
    z["masked_fill_4096"] = lambda: mf.masked_fill(mm, 0.0)
    gi, gsrc = torch.randint(0, 2**20, (8192,), device="cuda"), _r(2**20, 64)
    z["index_select_8192x64"] = lambda: gsrc.index_select(0, gi)
    for n in (128, 512, 1024, 4096, 8192):
        a, b = _r(n, n, dtype=torch.bfloat16), _r(n, n, dtype=torch.bfloat16)
        z[f"gemm_bf16_{n}"] = lambda a=a, b=b: a @ b
    ga, gb = _r(16384, 8192, dtype=torch.bfloat16), _r(8192, 16384, dtype=torch.bfloat16)
    z["gemm_bf16_16384x16384x8192"] = lambda: ga @ gb
    for m, n, k in ((16, 4096, 4096), (64, 64, 65536), (128, 256, 32768), (256, 1024, 16384)):
        a, b = _r(m, k, dtype=torch.bfloat16), _r(k, n, dtype=torch.bfloat16)
        z[f"gemm_bf16_{m}x{n}x{k}"] = lambda a=a, b=b: a @ b
    fa, fb = _r(8192, 8192), _r(8192, 8192)
    z["gemm_fp32_8192_no_tf32"] = lambda: fa @ fb
    for m, n, k in ((64, 64, 65536), (128, 256, 32768)):
        a, b = _r(m, k), _r(k, n)
        z[f"gemm_fp32_{m}x{n}x{k}_no_tf32"] = lambda a=a, b=b: a @ b
    ta, tb = _r(4096, 4096), _r(4096, 4096)

    def tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return ta @ tb
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    z["gemm_tf32_4096"] = tf32
    ba, bb = _r(64, 256, 64, dtype=torch.bfloat16), _r(64, 64, 256, dtype=torch.bfloat16)
    z["bmm_bf16_64x256x64x256"] = lambda: torch.bmm(ba, bb)
    cx, cw = _r(32, 64, 56, 56, dtype=torch.bfloat16), _r(64, 64, 3, 3, dtype=torch.bfloat16)
    z["conv3x3_bf16_nchw_32x64x56"] = lambda: F.conv2d(cx, cw, padding=1)
    ix, iw = _r(32, 3, 224, 224), _r(64, 3, 7, 7)
    z["conv7x7s2_fp32_32x3x224"] = lambda: F.conv2d(ix, iw, stride=2, padding=3)
    for b, h, s in ((1, 1, 128), (8, 16, 2048)):
        q, k, v = (_r(b, h, s, 64, dtype=torch.bfloat16) for _ in range(3))
        z[f"sdpa_causal_{b}x{h}x{s}"] = lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    params = [torch.nn.Parameter(_r(1024, 1024)) for _ in range(20)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    z["fused_adamw_20x1M"] = opt.step
    lp, tg = F.log_softmax(_r(2**20, 16), -1), torch.randint(0, 16, (2**20,), device="cuda")
    z["nll_loss_1M_rows"] = lambda: F.nll_loss(lp, tg)
    ce, ct = _r(8192, 32000, dtype=torch.bfloat16), torch.randint(0, 32000, (8192,), device="cuda")
    z["cross_entropy_8192x32000_bf16"] = lambda: F.cross_entropy(ce, ct)
    return z


STEPS = {  # name -> (GPTConfig kwargs, AdamW kwargs)
    "step_gpt_2L_d1024": ({"n_layers": 2, "d_model": 1024, "seq_len": 1024, "batch": 8}, {"fused": True}),
    "step_gpt_2L_d512_small": (
        {"n_layers": 2, "d_model": 512, "n_heads": 8, "seq_len": 256, "batch": 4, "vocab": 8192},
        {},
    ),
    "step_hf_llama_2L": ({}, {}),  # make_hf_llama_step
}


def make_hf_llama_step():
    """Third-party model code: Hugging Face Llama, 2 layers, SDPA with GQA, bf16 autocast, fused AdamW."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=2,
        num_attention_heads=16,
        num_key_value_heads=4,
        vocab_size=32000,
        max_position_embeddings=1024,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, 32000, (4, 1024), device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, "HF LlamaForCausalLM 2L hidden 1024 GQA 16/4 sdpa, seq 1024 batch 4, bf16 autocast, AdamW(fused)"


def make_step(name: str):
    if name == "step_hf_llama_2L":
        return make_hf_llama_step()
    cfg_kw, opt_kw = STEPS[name]
    cfg = sc.GPTConfig(**cfg_kw)
    torch.manual_seed(0)
    model = sc.GPT(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **opt_kw)
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len), device="cuda", generator=g)
    y = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len), device="cuda", generator=g)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    desc = f"GPT {cfg_kw}, data on the GPU, bf16 autocast, AdamW({opt_kw or 'default: foreach'}), SDPA"
    return step, desc


def run_trace(args, zoo: dict) -> None:
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    d = os.path.join(args.out, "zoo")
    os.makedirs(d, exist_ok=True)
    with profile(activities=acts, record_shapes=True) as prof:
        for name, fn in zoo.items():
            for _ in range(args.reps):
                with record_function(f"zoo:{name}"):
                    fn()
                torch.cuda.synchronize()
    prof.export_chrome_trace(os.path.join(d, "rank0.zoo.pt.trace.json.gz"))
    descs = {}
    for name in STEPS:
        step, descs[name] = make_step(name)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        sd = os.path.join(args.out, name)
        os.makedirs(sd, exist_ok=True)
        with profile(activities=acts, record_shapes=True) as prof:
            with record_function("ProfilerStep#0"):
                step()
            torch.cuda.synchronize()
        prof.export_chrome_trace(os.path.join(sd, f"rank0.{name}.pt.trace.json.gz"))
    meta = {
        "cases": list(zoo),
        "reps": args.reps,
        "steps": descs,
        "device_name": torch.cuda.get_device_name(0),
        "num_sms": torch.cuda.get_device_properties(0).multi_processor_count,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
    }
    with open(os.path.join(args.out, "zoo_meta.json"), "w") as f:
        json.dump(meta, f, indent=2)


def run_ncu(zoo: dict, part: str) -> None:
    torch.cuda.synchronize()
    if part in ("all", "cases"):
        torch.cuda.cudart().cudaProfilerStart()
        for fn in zoo.values():
            fn()
            torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    for name in STEPS if part in ("all", "steps") else ():
        step, _ = make_step(name)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        step()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("trace", "ncu"), required=True)
    ap.add_argument("--out", default="/tmp/sm_zoo")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--part", choices=("all", "cases", "steps"), default="all", help="ncu mode: what is profiled")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    zoo = cases()
    for fn in zoo.values():  # warm-up: module loading, handles, heuristics
        fn()
    torch.cuda.synchronize()
    run_trace(args, zoo) if args.mode == "trace" else run_ncu(zoo, args.part)
    print(f"sm_zoo {args.mode}: {len(zoo)} cases", flush=True)


if __name__ == "__main__":
    main()
