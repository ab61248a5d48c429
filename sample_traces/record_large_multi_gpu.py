#!/usr/bin/env python3
"""Record one GPT of a few billion parameters under DDP, FSDP2 (full shard) and TP x DP on one
host of N GPUs (issue 38: N = 8), each run with its ground truth beside it.

One strategy per torchrun invocation, as record_multi_gpu.py (whose ``record`` does all the work:
wrapping, optimizers, FlopCounterMode, the unprofiled step, the profiled steps under the 2 MiB
cap, ground_truth.json); this script only picks the model, names the runs and adds the host's
interconnect to the ground truth:

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    for s in ddp fsdp2 tpdp; do
      torchrun --standalone --nproc_per_node 8 sample_traces/record_large_multi_gpu.py --strategy $s \\
        --out sample_traces
    done
    # or, with the others' conventions (timeouts, tarball after each run):
    PHASES=large NGPU=8 bash sample_traces/record_all.sh /tmp/rec $OUT/traces8.tar
    # CPU dry run (gloo, tiny shapes; --tiny is the same as --model tiny):
    torchrun --standalone --nproc_per_node 2 sample_traces/record_large_multi_gpu.py --device cpu --model tiny \\
      --strategy tpdp --tp 2 --out /tmp/st
    # one GPU: the code paths, the memory and the step of the full model (no communication to speak of)
    torchrun --standalone --nproc_per_node 1 sample_traces/record_large_multi_gpu.py --strategy ddp --out /tmp/st

Writes <out>/<strategy>_<N>gpu_<model>/ (TP x DP: tp<T>dp<D>_<N>gpu_<model>/) holding
rank<r>.<ns>.pt.trace.json.gz for every rank and ground_truth.json (rank 0).

The model (``gpt2b``): the samples' pre-LN GPT (sample_common.GPT) at 9 layers, d_model 4096, 32 heads
of 128, seq 1024, vocab 32768: 2,085,056,512 parameters (the untied lm_head and both embedding
tables included), batch 4 a rank (4,096 tokens). Few layers of a large width keep the trace of a
step small (the per-step event count grows with the layers, the FLOPs with d_model^2) and the
GEMMs large. Memory on an 80 GB H100 under DDP, the strategy that shards nothing: fp32 weights,
gradients and two AdamW moments 16 B a parameter (33.4 GB), DDP's gradient buckets 4 B (8.3 GB),
autocast's bf16 weight copies 2 B (4.2 GB), activations a few GB.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_multi_gpu as rmg  # noqa: E402
import sample_common as sc  # noqa: E402

MODELS = {
    "gpt2b": sc.GPTConfig(n_layers=9, d_model=4096, n_heads=32, seq_len=1024, batch=4, vocab=32768),
    "tiny": sc.GPTConfig.tiny(),
}
# NVLink multicast (NVLS) stays off: on the shared hosts a program that uses it can put the GPUs out of
# service for a day or more (the machine notes). Set here too, before NCCL starts, so a torchrun started
# without record_all.sh's exports cannot turn it on.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def run_name(strategy: str, model: str):
    def name(ws: int, tp: int, dp: int) -> str:
        head = f"tp{tp}dp{dp}" if strategy == "tpdp" else strategy
        return f"{head}_{ws}gpu_{model}"

    return name


def interconnect(dev) -> dict:
    """How the ranks' GPUs are linked, as the host reports it (nvidia-smi topo -m: NV18 = 18 NVLink 4
    links through the NVSwitches), and what NCCL was told: the differences from the seed's eight A100s
    (NVLink 3) that the README's table explains."""
    out: dict = {"env": {k: os.environ.get(k) for k in sorted(NO_MULTICAST)}}
    if dev.type != "cuda":
        return out
    v = torch.cuda.nccl.version()  # a tuple in recent torch, an int in old ones
    out["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    out["gpus_on_host"] = torch.cuda.device_count()
    out["device_total_memory_bytes"] = torch.cuda.get_device_properties(dev).total_memory
    try:
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30)
        out["nvidia_smi_topo"] = topo.stdout.splitlines() if topo.returncode == 0 else topo.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        out["nvidia_smi_topo"] = f"not read: {type(e).__name__}: {e}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategy", required=True, choices=["ddp", "fsdp2", "tpdp"])
    ap.add_argument("--tp", type=int, default=2, choices=[1, 2, 4, 8],
                    help="TP degree for --strategy tpdp, inside consecutive ranks (DP degree = world_size / tp)")
    ap.add_argument("--model", default="gpt2b", choices=sorted(MODELS))
    sc.add_run_args(ap, os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    model = "tiny" if args.tiny else args.model
    os.environ.update(NO_MULTICAST)
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if args.device == "cuda" else torch.device("cpu")
    link = interconnect(dev)

    def extra(gt: dict, notes: list) -> None:
        gt["model_preset"] = model
        gt["interconnect"] = link
        gt["description"] += f" ({gt['model']['n_params'] / 1e9:.2f} B parameters, preset '{model}')"
        notes.append(
            "Recorded by record_large_multi_gpu.py (issue 38): the seed article's strategy table (eight A100s: "
            "DDP about 35 % MFU, TP 42 %, optimised FSDP 48 %) on one host of this world size. Weights initialised "
            "on the device with the same seed on every rank. peak_memory_allocated_bytes (per rank) is "
            "torch.cuda.max_memory_allocated over the whole recording, the FlopCounterMode passes included.")

    rmg.record(args, MODELS[model], run_name=run_name(args.strategy, model), init_on_device=True, extra=extra)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
