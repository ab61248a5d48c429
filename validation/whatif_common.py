"""What the what-if pair builders share (pairs_host.py, pairs_kernels.py): the Variant a builder
returns, bf16 autocast, and the GPT step of the GPT-based pairs. Plain PyTorch; CUDA or CPU (--tiny)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_traces"))
import sample_common as sc  # noqa: E402

NO_COPIES = {
    "h2d_bytes_per_step": 0,
    "d2h_bytes_per_step": 0,
    "h2d_copies_per_step": 0,
    "d2h_copies_per_step": 0,
    "sync_count_per_step": 0,
    "copies": [],
    "syncs": [],
}


@dataclass
class Variant:
    step: Callable[[int], None]
    description: str
    expected: dict
    flop_step: Callable[[int], None] | None = None
    model: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    cleanup: Callable[[], None] | None = None
    extra: dict = field(default_factory=dict)


def autocast(dev, enabled=True, cache=True):
    return torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=enabled, cache_enabled=cache)


def gpt_step(model, opt, pool, cfg, dev, pinned: bool, item: list | None = None):
    def step(i):
        xb, yb = pool[i % len(pool)]
        x = xb.to(dev, non_blocking=pinned)
        y = yb.to(dev, non_blocking=pinned)
        with autocast(dev):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        if item is not None:  # the per-step sync: the host waits here for forward and backward
            item.append(loss.item())
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _gpt(cfg, dev, naive=False):
    torch.manual_seed(0)
    return sc.GPT(cfg, naive=naive).to(dev).train()
