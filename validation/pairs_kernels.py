"""What-if pairs whose fix changes the GPU's kernels: (a) attention, (e) CUDA graph, (f) bf16, (g) compile.
Each builder returns the "before" (fixed=False) or "after" (fixed=True) variant of its pair."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from whatif_common import NO_COPIES, Variant, _gpt, autocast, gpt_step, sc

# --------------------------------------------------------------------------- (a) attention


def attention(args, dev, fixed: bool) -> Variant:
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig(seq_len=2048, batch=4)
    model = _gpt(cfg, dev, naive=not fixed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    tokens = cfg.batch * cfg.seq_len
    att = (
        "F.scaled_dot_product_attention(is_causal=True)"
        if fixed
        else "hand-written: q@k^T -> *scale -> masked_fill(causal) -> softmax -> dropout(p=0) -> @v"
    )
    return Variant(
        gpt_step(model, opt, pool, cfg, dev, pinned=dev.type == "cuda"),
        f"GPT {cfg.n_layers}L d{cfg.d_model} {cfg.n_heads}h seq {cfg.seq_len} batch {cfg.batch}, bf16 "
        f"autocast, fused AdamW, pinned non_blocking input, no .item(); attention: {att}",
        {**sc.pinned_input_expected(tokens * 8), "attention": att},
        model=sc.gpt_model_info(model),
        notes=[
            "FlopCounterMode counts SDPA's backward as 2.5x its forward and the hand-written "
            "attention's as 2x, so the after counts 0.5 x forward-attention FLOPs more for the same "
            "math."
        ],
    )


# --------------------------------------------------------------------------- (e) CUDA graph


def cuda_graph(args, dev, fixed: bool) -> Variant:
    width, depth, B = 256, 8, 32
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10)).to(dev).train()
    flop_model = copy.deepcopy(model)
    x = torch.randn(B, width, device=dev)
    y = torch.randint(0, 10, (B,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=False, capturable=dev.type == "cuda")

    def eager_step():
        with autocast(dev, cache=False):  # the weight cache must be off inside a capture; off in both
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    graph = None
    if fixed and dev.type == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
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
        else:
            opt.zero_grad(set_to_none=True)
            eager_step()

    def flop_step(i):  # an eager copy: a replay has no aten ops, and the same count serves both
        with autocast(dev):
            F.cross_entropy(flop_model(x), y).backward()

    how = "captured once in a torch.cuda.CUDAGraph and replayed" if fixed else "run eagerly, kernel by kernel"
    return Variant(
        step,
        f"Tiny MLP ({depth} x Linear({width},{width})+ReLU, head 10), batch {B}, bf16 autocast "
        "(cache off), AdamW(foreach=False, capturable=True), data on the GPU; the whole step "
        f"(forward, backward, optimizer) {how}",
        {**NO_COPIES, "graph_launches_per_step": 1 if graph is not None else 0},
        flop_step=flop_step,
        model={"depth": depth, "width": width, "batch": B, "cuda_graph": fixed},
    )


# --------------------------------------------------------------------------- (f) bf16 autocast


def bf16(args, dev, fixed: bool) -> Variant:
    width, depth, n_cls, B = (64, 2, 10, 64) if args.tiny else (4096, 4, 1000, 4096)
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False  # off in both: only autocast differs
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, n_cls)).to(dev).train()
    x = torch.randn(B, width, device=dev)
    y = torch.randint(0, n_cls, (B,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")

    def step(i):
        with autocast(dev, enabled=fixed):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def restore():
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags

    return Variant(
        step,
        f"MLP {depth} x Linear({width},{width})+ReLU, head {n_cls}, batch {B}, data on the GPU, fused "
        "AdamW, torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False; "
        + ("bf16 autocast" if fixed else "plain fp32 (no autocast)"),
        dict(NO_COPIES),
        model={
            "width": width,
            "depth": depth,
            "batch": B,
            "n_classes": n_cls,
            "dtype": "bf16 autocast" if fixed else "fp32",
            "allow_tf32": False,
        },
        cleanup=restore,
    )


# --------------------------------------------------------------------------- (g) torch.compile


def gelu_chain(x):
    """tanh-GELU written out: about nine elementwise kernels forward in eager, each over the whole tensor."""
    inner = x + 0.044715 * x * x * x
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * inner))


def compile_elementwise(args, dev, fixed: bool) -> Variant:
    rows, d, hidden, n_cls = (64, 32, 128, 10) if args.tiny else (8192, 1024, 16384, 1000)
    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(d, hidden).to(dev), nn.Linear(hidden, n_cls).to(dev)
    params = list(fc1.parameters()) + list(fc2.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, fused=dev.type == "cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(rows, d, device=dev, generator=g)
    y = torch.randint(0, n_cls, (rows,), device=dev, generator=g)
    act = gelu_chain
    if fixed:
        act = torch.compile(gelu_chain, fullgraph=True, dynamic=False, backend=args.compile_backend)

    def make(fn):
        def step(i):
            with autocast(dev):
                loss = F.cross_entropy(fc2(fn(fc1(x))), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    return Variant(
        make(act),
        f"Linear({d},{hidden}) -> hand-written tanh-GELU chain -> Linear({hidden},{n_cls}), "
        f"batch {rows}, bf16 autocast, data on the GPU, fused AdamW; the GELU chain "
        + (
            "under torch.compile(fullgraph=True) (inductor: one fused Triton kernel forward, one backward)"
            if fixed
            else "in eager (one kernel per elementwise op)"
        ),
        dict(NO_COPIES),
        flop_step=make(gelu_chain),
        model={
            "rows": rows,
            "d": d,
            "hidden": hidden,
            "n_classes": n_cls,
            "compiled": "gelu_chain only" if fixed else "nothing",
        },
        extra={"compile_backend": args.compile_backend} if fixed else {},
    )
