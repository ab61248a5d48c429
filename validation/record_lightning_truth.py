#!/usr/bin/env python3
"""A Lightning 2.6 Trainer run of Hugging Face Llama (bf16-mixed) with ThroughputMonitor logging MFU, and
Lightning's own PyTorchProfiler writing a trace of the same run (issue 33's Lightning ground truth).

    python3 validation/record_lightning_truth.py --out validation/mfu_truth               # one H100
    python3 validation/record_lightning_truth.py --device cpu --tiny --out /tmp/mt

Two Trainer runs of the same module and data, one after the other:
  with_profiler     PyTorchProfiler(dirpath, filename, schedule(wait=1, warmup=2, active=3), record_shapes=True):
                    its defaults otherwise (module names recorded, its own tensorboard_trace_handler export)
  without_profiler  profiler=None
Both log ThroughputMonitor(window_size=10) to a CSVLogger every 5 steps. A callback times every training
batch with CUDA events at on_train_batch_start (no extra sync; ThroughputMonitor already synchronizes each
batch). flops_per_batch is FlopCounterMode over one forward+backward of an eager-attention twin (FlopCounterMode
in torch 2.11 rejects SDPA with GQA shapes; the math is the same). Ground truth: <out>/lightning_ground_truth.json.
"""

from __future__ import annotations

import argparse
import copy
import csv
import glob
import gzip
import json
import os
import shutil
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth_models as tm  # noqa: E402
from record_whatif_pairs import percentiles  # noqa: E402
from whatif_common import sc  # noqa: E402

NAME = "lightning_llama_bf16"


class StepTimer:
    """CUDA events (or perf_counter on CPU) at every on_train_batch_start, and once at the end."""

    def __init__(self, dev):
        self.dev, self.events, self.cpu = dev, [], []

    def mark(self):
        self.cpu.append(time.perf_counter())
        if self.dev.type == "cuda":
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.events.append(e)

    def deltas_us(self) -> list[float]:
        sc.sync(self.dev)
        if self.events:
            return [round(a.elapsed_time(b) * 1000.0, 1) for a, b in zip(self.events, self.events[1:], strict=False)]
        return [round((b - a) * 1e6, 1) for a, b in zip(self.cpu, self.cpu[1:], strict=False)]


def build(args, dev):
    import lightning as L
    from transformers import LlamaForCausalLM

    cfg, t = tm._llama_cfg(args, "sdpa")

    class LitLlama(L.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.model = LlamaForCausalLM(cfg)
            self.flops_per_batch = None  # set below, before fit: ThroughputMonitor reads it each batch

        def training_step(self, batch, batch_idx):
            return self.model(input_ids=batch, labels=batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4, **({"fused": True} if dev.type == "cuda" else {}))

    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, t["vocab"], (t["batch"] * 80, t["seq"]), generator=g)
    return LitLlama, cfg, t, data


def count_flops(LitLlama, t, data, dev) -> dict:
    m = LitLlama().model.to(dev)
    twin = copy.deepcopy(m)
    tm._set_attn(twin, "eager")
    x = data[: t["batch"]].to(dev)

    def step(i):
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            twin(input_ids=x, labels=x).loss.backward()

    fl = sc.count_flops(step, dev)
    sc.cleanup(dev)
    return {"flops_per_batch": fl["flops_per_step"], "flops_by_op": fl["flops_by_op"]}


def fit(args, dev, LitLlama, t, data, flops: float, run_dir: str, profiled: bool) -> dict:
    import lightning as L
    from lightning.pytorch.callbacks import Callback, ThroughputMonitor
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.profilers import PyTorchProfiler

    timer = StepTimer(dev)

    class Timing(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            timer.mark()

        def on_train_end(self, trainer, pl_module):
            timer.mark()

    profiler = None
    if profiled:
        profiler = PyTorchProfiler(
            dirpath=run_dir,
            filename="lightning",
            schedule=torch.profiler.schedule(wait=1, warmup=2, active=args.active, repeat=1),
            record_shapes=True,
        )
    module = LitLlama()
    module.flops_per_batch = flops
    loader = torch.utils.data.DataLoader(data, batch_size=t["batch"], shuffle=False, pin_memory=dev.type == "cuda")
    monitor = ThroughputMonitor(
        batch_size_fn=lambda b: b.shape[0], length_fn=lambda b: b.numel(), window_size=args.window
    )
    logger = CSVLogger(run_dir, name="csv", version="with_profiler" if profiled else "without_profiler")
    trainer = L.Trainer(
        accelerator="gpu" if dev.type == "cuda" else "cpu",
        devices=1,
        precision="bf16-mixed",
        max_steps=args.steps,
        log_every_n_steps=args.log_every,
        callbacks=[monitor, Timing()],
        profiler=profiler,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    t0 = time.time()
    trainer.fit(module, loader)
    steps = timer.deltas_us()
    rows = list(csv.DictReader(open(os.path.join(logger.log_dir, "metrics.csv"))))
    key = next((k for k in (rows[0] if rows else {}) if k.endswith("device/mfu")), None)
    mfu = [(int(r["step"]), float(r[key])) for r in rows if key and r.get(key)]
    return {
        "step_time_us_steps": steps,
        "fit_seconds": round(time.time() - t0, 2),
        "throughput_monitor_mfu_by_step": mfu,
        "throughput_monitor_mfu_key": key,
        "throughput_monitor_rows": rows,
        "available_flops": getattr(monitor, "available_flops", None),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "mfu_truth"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--steps", type=int, default=70)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--active", type=int, default=3)
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
    import lightning
    from lightning.fabric.utilities import throughput as lt

    patched = None
    if dev.type == "cuda" and lt.get_available_flops(dev, torch.bfloat16) is None:
        # Lightning 2.6.6's table has no H200 ("FLOPs not found for 'NVIDIA H200'"): give it the H100 SXM's
        # entry, whose dense bf16 peak (989.4e12) the H200 SXM shares, so ThroughputMonitor logs MFU
        chip = torch.cuda.get_device_name(dev).lower()
        lt._CUDA_FLOPS[chip] = lt._CUDA_FLOPS["h100 sxm"]
        patched = f"lightning.fabric.utilities.throughput._CUDA_FLOPS[{chip!r}] = _CUDA_FLOPS['h100 sxm']"
    LitLlama, cfg, t, data = build(args, dev)
    fl = count_flops(LitLlama, t, data, dev)
    run_dir = os.path.join(args.out, NAME)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    res = {}
    for profiled in (True, False):
        res["with_profiler" if profiled else "without_profiler"] = fit(
            args, dev, LitLlama, t, data, fl["flops_per_batch"], run_dir, profiled
        )
        sc.cleanup(dev)
    for f in glob.glob(os.path.join(run_dir, "*.pt.trace.json")):  # Lightning writes plain JSON: gzip it
        with open(f, "rb") as src, gzip.open(f + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(f)
    traces = sorted(os.path.basename(f) for f in glob.glob(os.path.join(run_dir, "*.pt.trace.json*")))
    skip = 1 + 2 + args.active + args.window  # the profiler's steps, then a whole window after them
    for r in res.values():
        s = r["step_time_us_steps"]
        r["step_time_unprofiled_after_profiler"] = percentiles(s[skip:]) if len(s) > skip + 10 else None
        r["mfu_from_step_times_after_profiler"] = (
            sc.mfu(fl["flops_per_batch"], statistics.median(s[skip:])) if len(s) > skip else None
        )
        by_step = r["throughput_monitor_mfu_by_step"]
        r["throughput_monitor_mfu_windows_after_profiler"] = [m for st, m in by_step if st >= skip]
    wp = res["with_profiler"]["step_time_us_steps"]
    doc = {
        "name": NAME,
        "description": (
            f"Lightning {lightning.__version__} Trainer(precision='bf16-mixed', devices=1, max_steps={args.steps}) "
            "of a "
            f"LightningModule holding Hugging Face LlamaForCausalLM ({t['n_layers']} layers, hidden {t['d']}, "
            f"{t['heads']} heads, {t['kv']} KV heads, attn sdpa, vocab {t['vocab']}), batch {t['batch']} seq "
            f"{t['seq']}, AdamW(fused=True), DataLoader(pin_memory=True, num_workers=0); ThroughputMonitor("
            f"window_size={args.window}) with flops_per_batch set, CSVLogger every {args.log_every} steps"
        ),
        **{k: v for k, v in sc.env_info(dev).items() if k != "timing_definitions"},
        "flops_per_batch": fl["flops_per_batch"],
        "flops_by_op": fl["flops_by_op"],
        "flops_source": "FlopCounterMode over one forward+backward of an eager-attention twin (same math)",
        "profiler": (
            f"lightning.pytorch.profilers.PyTorchProfiler(dirpath, filename='lightning', schedule=torch.profiler."
            f"schedule(wait=1, warmup=2, active={args.active}, repeat=1), record_shapes=True); its defaults "
            "otherwise (record_module_names=True: [pl][module] annotations). Lightning writes plain JSON; it was "
            "gzipped afterwards"
        ),
        "profiled_batches": list(range(3, 3 + args.active)),
        "step_time_us_profiled_steps": wp[3 : 3 + args.active],
        "steps_skipped_for_unprofiled_figures": skip,
        "mfu_definition": "flops_per_batch / step time / 989.4e12; ThroughputMonitor: flops / time over its window "
        "/ available_flops (its table's bf16 peak for 'h100 sxm', 989.4e12)",
        "lightning_flops_table_patch": patched,
        "runs": res,
        "trace_dir": NAME,
        "trace_files": traces,
        "trace_bytes": [os.path.getsize(os.path.join(run_dir, f)) for f in traces],
        "model": {**t, "n_params": sum(p.numel() for p in LitLlama().model.parameters())},
    }
    with open(os.path.join(args.out, "lightning_ground_truth.json"), "w") as f:
        json.dump(doc, f, indent=2)
    for k, r in res.items():
        after = r["step_time_unprofiled_after_profiler"] or {}
        print(
            f"[{NAME}/{k}] after-profiler median {after.get('median_us')} us, "
            f"MFU {r['mfu_from_step_times_after_profiler']}, ThroughputMonitor MFU windows "
            f"{r['throughput_monitor_mfu_windows_after_profiler']}",
            flush=True,
        )
    print(
        f"[{NAME}] profiled steps {doc['step_time_us_profiled_steps']} us, flops {fl['flops_per_batch']:.4e}, "
        f"traces {traces} {doc['trace_bytes']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
