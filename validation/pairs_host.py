"""What-if pairs whose fix changes the host side: (b) copies, (c) .item(), (d) AdamW, (h) DataLoader.
Each builder returns the "before" (fixed=False) or "after" (fixed=True) variant of its pair."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from whatif_common import Variant, _gpt, autocast, gpt_step, sc

# --------------------------------------------------------------------------- (b) copies


def copies(args, dev, fixed: bool) -> Variant:
    rows, d_in, hidden, n_cls = (64, 64, 128, 10) if args.tiny else (8192, 2048, 8192, 1000)
    torch.manual_seed(0)
    model = (
        nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, d_in), nn.GELU(), nn.Linear(d_in, n_cls))
        .to(dev)
        .train()
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    g = torch.Generator().manual_seed(1)
    pool = [(torch.randn(rows, d_in, generator=g), torch.randint(0, n_cls, (rows,), generator=g)) for _ in range(2)]
    pin = fixed and dev.type == "cuda"
    if pin:
        pool = [(x.pin_memory(), y.pin_memory()) for x, y in pool]

    def step(i):
        xb, yb = pool[i % len(pool)]
        x = xb.to(dev, non_blocking=fixed)  # before: pageable + blocking (a cudaStreamSynchronize each)
        y = yb.to(dev, non_blocking=fixed)
        with autocast(dev):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    xb, yb = rows * d_in * 4, rows * 8
    kind = "Memcpy HtoD (Pinned -> Device)" if fixed else "Memcpy HtoD (Pageable -> Device)"
    how = "pinned, .to(device, non_blocking=True)" if fixed else "pageable, .to(device) (blocking)"
    return Variant(
        step,
        f"MLP {d_in}->{hidden}->{d_in}->{n_cls} (GELU), batch {rows}, bf16 autocast, fused AdamW; "
        f"per step an fp32 ({rows}, {d_in}) input ({xb >> 20} MiB) and int64 labels copied from "
        f"host memory: {how}",
        {
            "h2d_bytes_per_step": xb + yb,
            "d2h_bytes_per_step": 0,
            "h2d_copies_per_step": 2,
            "d2h_copies_per_step": 0,
            "sync_count_per_step": 0 if fixed else 2,
            "copies": [
                {"what": f"x fp32 ({rows},{d_in}) {how}", "kind": kind, "bytes": xb},
                {"what": f"y int64 ({rows},) {how}", "kind": kind, "bytes": yb},
            ],
            "syncs": []
            if fixed
            else [
                "aten::copy_ of x (blocking pageable H2D: cudaStreamSynchronize)",
                "aten::copy_ of y (blocking pageable H2D: cudaStreamSynchronize)",
            ],
        },
        model={"d_in": d_in, "hidden": hidden, "n_classes": n_cls, "batch": rows},
        notes=[
            "Both copies go on the default stream, so even pinned and non_blocking they run between "
            "the previous step's optimizer and this step's forward on the GPU; the fix removes the host "
            "waits and the pageable staging, not the copy itself."
        ],
    )


# --------------------------------------------------------------------------- (c) .item()


def item(args, dev, fixed: bool, batch: int = 24) -> Variant:
    # batch 24: the GPU's forward+backward (~40 ms) outlasts the host's whole step (~28 ms on the
    # recording host), so without the sync the step is GPU-bound and the optimizer's launches hide
    # behind the backward; with it they cannot (at batch 8 the step was host-bound and the sync free)
    # (item_sync_host_bound keeps batch 8: the control pair, whose sync costs nothing)
    cfg = sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig(batch=batch)
    model = _gpt(cfg, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False, fused=False)
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    losses: list[float] = []
    tokens = cfg.batch * cfg.seq_len
    exp = sc.pinned_input_expected(tokens * 8)
    if not fixed:
        exp.update(
            {
                "d2h_bytes_per_step": 4,
                "d2h_copies_per_step": 1,
                "sync_count_per_step": 1,
                "syncs": [
                    "aten::item / aten::_local_scalar_dense of the fp32 loss (cudaMemcpyAsync DtoH + "
                    "cudaStreamSynchronize), between loss.backward() and opt.step()"
                ],
            }
        )
        exp["copies"] = exp["copies"] + [
            {"what": "loss.item() (0-d fp32)", "kind": "Memcpy DtoH (Device -> Pageable)", "bytes": 4}
        ]
    exp["non_syncs_that_look_like_syncs"] = (
        "AdamW(foreach=False) calls aten::item on its CPU step counters once per parameter: CPU-only, not GPU syncs"
    )
    return Variant(
        gpt_step(model, opt, pool, cfg, dev, pinned=dev.type == "cuda", item=None if fixed else losses),
        f"GPT {cfg.n_layers}L d{cfg.d_model} seq {cfg.seq_len} batch {cfg.batch}, SDPA, bf16 autocast, "
        "pinned non_blocking input, for-loop AdamW(foreach=False, fused=False); "
        + ("no .item()" if fixed else "losses.append(loss.item()) after loss.backward(), before opt.step()"),
        exp,
        model=sc.gpt_model_info(model),
        notes=[
            "The .item() sits between backward and the optimizer step: the host waits for the forward "
            "and backward kernels, then launches the ~70 per-parameter optimizer updates while the GPU "
            "idles. Without it, the host launches the optimizer (and the next forward) while the GPU "
            "still runs the backward."
        ],
    )


# --------------------------------------------------------------------------- (d) AdamW


def adamw(args, dev, fixed: bool) -> Variant:
    cfg = (
        sc.GPTConfig.tiny()
        if args.tiny
        else sc.GPTConfig(n_layers=6, d_model=512, n_heads=8, seq_len=512, batch=8, vocab=8192)
    )
    model = _gpt(cfg, dev)
    kw = {"fused": True} if fixed and dev.type == "cuda" else {"foreach": False, "fused": False}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    n = len(list(model.parameters()))
    return Variant(
        gpt_step(model, opt, pool, cfg, dev, pinned=dev.type == "cuda"),
        f"GPT {cfg.n_layers}L d{cfg.d_model} {cfg.n_heads}h seq {cfg.seq_len} batch {cfg.batch} vocab "
        f"{cfg.vocab} ({n} parameter tensors), SDPA, bf16 autocast, pinned non_blocking input, no .item(); "
        f"optimizer AdamW({', '.join(f'{k}={v}' for k, v in kw.items())})",
        {**sc.pinned_input_expected(cfg.batch * cfg.seq_len * 8), "optimizer": f"AdamW({kw})"},
        model={**sc.gpt_model_info(model), "n_param_tensors": n},
    )


# --------------------------------------------------------------------------- (h) DataLoader workers


class TunableAugment(torch.utils.data.Dataset):
    """Per-sample numpy work of a tunable cost: a base vector rolled and scaled by the index, plus noise,
    smoothed by ``passes`` 9-tap convolutions, then clipped. Deterministic in the index."""

    def __init__(self, n: int, dim: int, n_classes: int, passes: int):
        rng = np.random.default_rng(0)
        self.base = rng.standard_normal((64, dim), dtype=np.float32)
        self.noise = rng.random((61, dim), dtype=np.float32) - np.float32(0.5)
        self.labels = rng.integers(0, n_classes, size=97)
        self.taps = np.hanning(9).astype(np.float32) / np.float32(4.0)
        self.n, self.dim, self.passes = n, dim, passes

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        x = np.roll(self.base[idx % 64], (idx * 37) % self.dim) * np.float32(0.8 + (idx % 5) * 0.1)
        x = x + np.float32(0.2) * self.noise[idx % 61]
        for _ in range(1 + self.passes):
            x = np.convolve(x, self.taps, mode="same")
        return torch.from_numpy(np.clip(x, -3.0, 3.0).astype(np.float32)), int(self.labels[idx % 97])


def _loader(ds, B, workers, pin):
    # num_workers is the only argument that differs (prefetch_factor stays at its default, 2);
    # one iterator serves the whole run, so its workers start once, before the timed steps
    return torch.utils.data.DataLoader(
        ds, batch_size=B, shuffle=False, num_workers=workers, pin_memory=pin, drop_last=True
    )


def calibrate_passes(dev, B, dim, n_cls, step_on, target_ratio=2.5) -> dict:
    """Pick the dataset's cost so that one batch on the main thread takes about target_ratio x the GPU
    step: clearly loader-bound with num_workers=0, and hidden by 4 workers (a quarter of the cost each)."""
    t = sc.time_unprofiled(step_on, dev, 15)["step_time_us_unprofiled"]

    def batch_us(passes):
        it = iter(_loader(TunableAugment(B * 20, dim, n_cls, passes), B, 0, dev.type == "cuda"))
        next(it)
        t0 = time.perf_counter()
        for _ in range(6):
            next(it)
        return (time.perf_counter() - t0) / 6 * 1e6

    lo, hi = batch_us(0), batch_us(8)
    slope = max((hi - lo) / 8, 1e-3)
    passes = int(min(64, max(0, round((target_ratio * t - lo) / slope))))
    return {
        "gpu_step_us_resident_batch": t,
        "batch_us_passes_0": lo,
        "batch_us_passes_8": hi,
        "passes": passes,
        "predicted_batch_us": lo + slope * passes,
        "target_ratio": target_ratio,
        "batch_us_chosen": batch_us(passes),
    }


_CAL: dict = {}


def dataloader(args, dev, fixed: bool) -> Variant:
    B, dim, hidden, n_cls = (8, 64, 128, 10) if args.tiny else (256, 1024, 8192, 1000)
    torch.manual_seed(0)
    model = (
        nn.Sequential(
            nn.Linear(dim, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Linear(hidden, n_cls),
        )
        .to(dev)
        .train()
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    pin = dev.type == "cuda"

    def train(xb, yb):
        x, y = xb.to(dev, non_blocking=pin), yb.to(dev, non_blocking=pin)
        with autocast(dev):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    if "passes" not in _CAL:  # once per pair, so before and after use the same dataset
        ds0 = TunableAugment(B, dim, n_cls, 0)
        xr, yr = torch.stack([ds0[i][0] for i in range(B)]), torch.tensor([ds0[i][1] for i in range(B)])
        if pin:
            xr, yr = xr.pin_memory(), yr.pin_memory()
        _CAL.update(calibrate_passes(dev, B, dim, n_cls, lambda i: train(xr, yr)))
    workers = 4 if fixed else 0
    ds = TunableAugment(B * 1_000_000, dim, n_cls, _CAL["passes"])
    it = iter(_loader(ds, B, workers, pin))  # workers start here, before any timed step

    def step(i):
        xb, yb = next(it)
        train(xb, yb)

    def cleanup():
        nonlocal it
        del it

    return Variant(
        step,
        f"MLP {dim}->{hidden}->{hidden}->{hidden}->{n_cls} (GELU), batch {B}, bf16 autocast, fused "
        f"AdamW, fed by DataLoader(num_workers={workers}, pin_memory=True"
        + f") over a per-sample numpy Dataset ({1 + _CAL['passes']} 9-tap convolutions a sample); "
        "pinned non_blocking copies",
        {
            "h2d_bytes_per_step": B * dim * 4 + B * 8,
            "d2h_bytes_per_step": 0,
            "h2d_copies_per_step": 2,
            "d2h_copies_per_step": 0,
            "sync_count_per_step": 0,
            "syncs": [],
            "copies": [
                {
                    "what": f"x fp32 ({B},{dim}) from the loader's pinned batch, non_blocking",
                    "kind": "Memcpy HtoD (Pinned -> Device)",
                    "bytes": B * dim * 4,
                },
                {
                    "what": f"y int64 ({B},) from the loader's pinned batch, non_blocking",
                    "kind": "Memcpy HtoD (Pinned -> Device)",
                    "bytes": B * 8,
                },
            ],
        },
        model={"dim": dim, "hidden": hidden, "batch": B, "num_workers": workers},
        cleanup=cleanup,
        extra={"dataset_calibration": dict(_CAL)},
        notes=[
            "The dataset's cost (passes) was calibrated on the device before both variants: one batch "
            "on the main thread takes about 2.5x the GPU step with a resident batch."
        ],
    )
