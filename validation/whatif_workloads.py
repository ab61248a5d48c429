"""The eight what-if pairs of issue 26, by name: each builder returns the "before" or the "after" variant
of one pair. Both variants of a pair share the model, the batch, the seed and everything else but the one
fix named in ``PAIRS[name]["fix"]``."""

from __future__ import annotations

import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pairs_host import _CAL, adamw, copies, dataloader, item  # noqa: E402
from pairs_kernels import attention, bf16, compile_elementwise, cuda_graph  # noqa: E402
from whatif_common import sc  # noqa: E402

__all__ = ["PAIRS", "_CAL", "sc"]

PAIRS = {
    "attention_sdpa": {"build": attention, "fix": "hand-written attention -> F.scaled_dot_product_attention"},
    "pinned_copies": {"build": copies, "fix": "pageable blocking .to(device) -> pinned .to(device, non_blocking=True)"},
    "item_sync": {"build": item, "fix": "a per-step loss.item() (between backward and opt.step) -> none"},
    "item_sync_host_bound": {
        "build": functools.partial(item, batch=8),
        "fix": "the item_sync fix at batch 8, where the step is host-bound: a control pair whose sync costs nothing",
    },
    "fused_adamw": {"build": adamw, "fix": "AdamW(foreach=False, fused=False) -> AdamW(fused=True)"},
    "cuda_graph": {"build": cuda_graph, "fix": "eager step -> the same step captured in a torch.cuda.CUDAGraph"},
    "bf16_autocast": {"build": bf16, "fix": "fp32 (TF32 off) -> bf16 autocast"},
    "compile_elementwise": {"build": compile_elementwise, "fix": "eager elementwise chain -> torch.compile of it"},
    "dataloader_workers": {"build": dataloader, "fix": "DataLoader num_workers=0 -> num_workers=4"},
}
