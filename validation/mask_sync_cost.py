#!/usr/bin/env python3
"""What the sync in transformers' eager attention mask costs a training step, measured without the profiler.

transformers 5.17 builds eager attention's additive mask each forward with
``torch.where(mask, torch.tensor(0.0, device=...), min)``: the ``torch.tensor`` is a blocking copy from
pageable memory, so the host waits for the GPU queue to drain at every step's start
(tb_mfu_plugin/analysis/flops/attention_mask.py). The what-if of the attention fix (SDPA) takes that sync
away with the attention's kernels. This times the gain pair's Hugging Face Llama step three ways, in turn
(ABCABC...), each built afresh:

- ``eager``: as shipped;
- ``eager_mask_on_gpu``: the same, with the mask's zero made on the GPU (``torch.full((), 0.0, device=...)``
  in masking_utils only): no sync, every kernel the same;
- ``sdpa``: the fix.

``eager`` minus ``eager_mask_on_gpu`` is what the sync alone costs; the tool's model of it is the drop in
its re-timed 'after' when the sync goes (0.7-1.1 ms a step on the recorded pairs).

    python3 validation/mask_sync_cost.py --out /tmp/mask_sync.json            # one GPU, about a minute
    python3 validation/mask_sync_cost.py --device cpu --tiny --out /tmp/m.json  # the script runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_gain_pairs as rgp  # noqa: E402
import record_whatif_pairs as rwp  # noqa: E402
from whatif_common import sc  # noqa: E402


class _TorchMaskOnDevice:
    """``torch`` as masking_utils sees it, but ``torch.tensor(value, device=...)`` made on that device."""

    def __getattr__(self, name: str):
        return getattr(torch, name)

    @staticmethod
    def tensor(value, *, device=None, dtype=None, **kw):
        if device is None or kw:
            return torch.tensor(value, device=device, dtype=dtype, **kw)
        return torch.full((), value, device=device, dtype=dtype)


@contextmanager
def mask_on_device(on: bool) -> Iterator[None]:
    import transformers.masking_utils as mu

    real = mu.torch
    if on:
        mu.torch = _TorchMaskOnDevice()
    try:
        yield
    finally:
        mu.torch = real


def _syncs_in_one_step(step, dev) -> int | None:
    """The syncs one step makes, as CUDA's sync debug mode warns of them (None off CUDA)."""
    if dev.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step(0)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in got)


def time_variant(name: str, args, dev) -> tuple[list[float], int | None]:
    with mask_on_device(name == "eager_mask_on_gpu"):
        v = rgp.hf_llama_eager_sdpa(args, dev, fixed=name == "sdpa")
        try:
            for i in range(args.warmup):
                v.step(i)
            syncs = _syncs_in_one_step(v.step, dev)
            steps = sc.time_unprofiled(v.step, dev, args.timed_steps)["step_time_us_unprofiled_steps"]
        finally:
            if v.cleanup is not None:
                v.cleanup()
    del v
    sc.cleanup(dev)
    return steps, syncs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed-steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    dev = torch.device(args.device)
    names = ("eager", "eager_mask_on_gpu", "sdpa")
    steps: dict[str, list[list[float]]] = {n: [] for n in names}
    syncs: dict[str, int | None] = {}
    for r in range(args.rounds):
        for n in names:
            got, syncs[n] = time_variant(n, args, dev)
            steps[n].append(got)
            print(f"[round {r}] {n}: median {statistics.median(got):.0f} us, {syncs[n]} syncs a step", flush=True)
    out = {
        **{k: v for k, v in sc.env_info(dev).items() if k != "timing_definitions"},
        "what": __doc__.split("\n\n")[0],
        "rounds": args.rounds,
        "variants": {
            n: {
                **rwp.percentiles([x for t in steps[n] for x in t]),
                "median_per_round_us": [statistics.median(t) for t in steps[n]],
                "syncs_in_one_step": syncs[n],  # CUDA's sync debug mode's warnings over one step
                "steps_us": steps[n],
            }
            for n in names
        },
    }
    med = {n: out["variants"][n]["median_us"] for n in names}
    out["sync_cost_us"] = med["eager"] - med["eager_mask_on_gpu"]
    out["fix_gain_us"] = med["eager"] - med["sdpa"]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"sync alone {out['sync_cost_us']:.0f} us a step; the SDPA fix {out['fix_gain_us']:.0f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
