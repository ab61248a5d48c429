"""FlopCounterMode on the model as it ran, for the truth runs torch 2.11 could not count (issue 33).

On the GPU machine (torch 2.11) FlopCounterMode rejects scaled_dot_product_attention with GQA shapes,
so the recorders counted HF Llama with SDPA on an eager-attention twin (``flops_source``: "FlopCounterMode
on an eager twin"; ``flop_counter_on_sdpa_model`` holds the error), and the Lightning run set
ThroughputMonitor's ``flops_per_batch`` from the same twin. The twin does the same math, but
FlopCounterMode counts a fused attention's backward as 2.5× its forward (it recomputes Q·Kᵀ) and the
eager one's as 2×: the twin's count is not FlopCounterMode's convention for the model that ran.

Newer torch counts GQA (its ``sdpa_backward_flop_count`` takes H_kv dividing H_q). This script builds each
such configuration's model as its ground truth recorded it, on meta tensors (no GPU, no memory),
routes transformers' SDPA call to ``aten._scaled_dot_product_cudnn_attention`` (the kernels the traces show
ran: cuDNN's, with the key and value's 4 heads), and counts one training step with FlopCounterMode.

    python validation/flops_as_run.py            # rewrites validation/flops_as_run.json
    python validation/flops_as_run.py --check    # exits 1 where the file differs from today's count

needs transformers (not a test dependency); truth_tables.py reads the file it writes.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from contextlib import contextmanager

import torch
from torch.utils.flop_counter import FlopCounterMode

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "flops_as_run.json")


# What identifies a recorded Llama's FLOPs: the recorders' model dicts hold these (the Lightning one has no
# attn_implementation: its description says sdpa).
CONFIG_KEYS = ("n_layers", "d", "heads", "kv", "seq", "batch", "vocab", "ffn", "n_params")


def config_of(model: dict) -> str:
    return ",".join(f"{k}={model.get(k)}" for k in CONFIG_KEYS)


def twin_counted(root: str = HERE) -> dict[str, dict]:
    """Each configuration some recorder counted on an eager twin because FlopCounterMode rejected the SDPA model
    that ran (the MFU truth runs' ``flop_counter_on_sdpa_model`` error, the Lightning run's ``flops_source``),
    keyed by ``config_of``, with the runs that recorded it."""
    found: dict[str, dict] = {}
    runs: list[tuple[str, dict]] = []
    for path in sorted(glob.glob(os.path.join(root, "**", "ground_truth.json"), recursive=True)):
        for name, run in json.load(open(path)).get("runs", {}).items():
            if "error" in (run.get("flop_counter_on_sdpa_model") or {}):
                runs.append((name, run["model"]))
    for path in sorted(glob.glob(os.path.join(root, "**", "lightning_ground_truth.json"), recursive=True)):
        g = json.load(open(path))
        if "twin" in g.get("flops_source", "") and "attn sdpa" in g.get("description", ""):
            runs.append((g["name"], g["model"]))
    for name, model in runs:
        entry = found.setdefault(config_of(model), {"model": {k: model.get(k) for k in CONFIG_KEYS}, "runs": []})
        if name not in entry["runs"]:
            entry["runs"].append(name)
    return found


@contextmanager
def sdpa_as_cudnn():
    """transformers' SDPA call, as the cuDNN attention op: the op FlopCounterMode counts GQA on."""
    original = torch.nn.functional.scaled_dot_product_attention

    def cudnn(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        out = torch.ops.aten._scaled_dot_product_cudnn_attention(
            q, k, v, attn_mask, True, dropout_p, is_causal, False, scale=scale
        )
        return out[0]

    torch.nn.functional.scaled_dot_product_attention = cudnn
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = original


def llama_step_flops(m: dict) -> dict:
    """One training step (forward with the model's own loss, backward) of the recorded Llama, counted."""
    from transformers import LlamaForCausalLM
    from truth_models import llama_config

    with torch.device("meta"):
        model = LlamaForCausalLM(llama_config(m, "sdpa")).train()
    n_params = sum(p.numel() for p in model.parameters())
    if n_params != m["n_params"]:
        raise SystemExit(f"rebuilt Llama has {n_params} parameters, the recorded one {m['n_params']}")
    ids = torch.zeros(m["batch"], m["seq"], dtype=torch.long, device="meta")
    counter = FlopCounterMode(display=False)
    with sdpa_as_cudnn(), counter:
        model(input_ids=ids, labels=ids).loss.backward()
    by_op = {str(k): int(v) for k, v in counter.get_flop_counts()["Global"].items()}
    if not any("cudnn_attention" in k for k in by_op):
        raise SystemExit("the step ran no cuDNN attention: transformers did not call scaled_dot_product_attention")
    return {"flops_per_step": counter.get_total_flops(), "flops_by_op": by_op}


def counts() -> dict:
    import transformers

    configs = {}
    for key, entry in twin_counted().items():
        if entry["model"].get("kv") is None:
            raise SystemExit(f"{entry['runs']}: no builder for this model here ({entry['model']})")
        configs[key] = {**entry, **llama_step_flops(entry["model"])}
    return {
        "source": "FlopCounterMode on the model as it ran "
        "(meta tensors; SDPA as aten._scaled_dot_product_cudnn_attention)",
        "torch_version": torch.__version__.split("+")[0],
        "transformers_version": transformers.__version__,
        "configs": configs,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = ap.parse_args()
    now = counts()
    if args.check:
        kept = json.load(open(OUT))
        same = {k: v["flops_per_step"] for k, v in kept["configs"].items()} == {
            k: v["flops_per_step"] for k, v in now["configs"].items()
        }
        print("same counts" if same else f"{OUT} differs from today's count")
        return 0 if same else 1
    with open(OUT, "w") as f:
        json.dump(now, f, indent=1)
        f.write("\n")
    for r in now["configs"].values():
        print(f"{', '.join(r['runs'])}: {r['flops_per_step']:.6e} FLOPs/step {r['flops_by_op']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
