#!/usr/bin/env python3
"""Record the memory samples (issue 25): traces with profile_memory=True and their ground truth.

    python3 sample_traces/record_memory.py --out sample_traces          # one H200
    python3 sample_traces/record_memory.py --device cpu --tiny --out /tmp/st   # CPU dry run

Runs (one small GPT, same seed, inputs, optimizer and step; each differs from gpt_memory in one way):
  gpt_memory                 no activation checkpointing
  gpt_memory_checkpointing   every block under checkpoint(block, x, use_reentrant=False)
  gpt_memory_batch2x         twice the batch
  memory_leak                gpt_memory plus a deliberate leak: an 8 MiB fp32 copy of a slice of the
                             logits appended to a list that lives across steps

Ground truth is measured with the caching allocator's own counters (host-side, no sync):
reset_peak_memory_stats() at each step start, memory_allocated() at step start and end,
max_memory_allocated() at the end of each phase (forward, backward, optimizer) and of the step,
memory_reserved() at the end, in unprofiled steps and again in the profiled steps.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sample_common as sc  # noqa: E402

WORKER = "rank0"
LEAK_BYTES = 8 * 1024 * 1024
PHASES = ("forward", "backward", "optimizer")


def memory_config(tiny: bool, batch_mult: int) -> sc.GPTConfig:
    base = sc.GPTConfig.tiny() if tiny else sc.GPTConfig(n_layers=4, d_model=512, n_heads=8, seq_len=512,
                                                         batch=8, vocab=8192)
    base.batch *= batch_mult
    return base


class MemProbe:
    """Per-step allocator readings. ``begin``/``phase``/``end`` are called from inside the step;
    on CUDA each also records a CUDA event, so phase times come from the GPU timeline."""

    def __init__(self, dev):
        self.dev = dev
        self.cuda = dev.type == "cuda"
        self.rows: list[dict] = []
        self._cur: dict = {}
        self._events: list = []

    def _alloc(self) -> int | None:
        return torch.cuda.memory_allocated(self.dev) if self.cuda else None

    def _peak(self) -> int | None:
        return torch.cuda.max_memory_allocated(self.dev) if self.cuda else None

    def _event(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def begin(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.dev)
        self._cur = {"allocated_start": self._alloc(), "phases": {}}
        self._events = [("start", self._event())]

    def phase(self, name: str):
        self._cur["phases"][name] = {"allocated": self._alloc(), "peak_so_far": self._peak()}
        self._events.append((name, self._event()))

    def end(self):
        c = self._cur
        c["allocated_end"] = self._alloc()
        c["peak_allocated"] = self._peak()
        c["reserved_end"] = torch.cuda.memory_reserved(self.dev) if self.cuda else None
        c["_events"] = self._events
        self.rows.append(c)

    def finish(self) -> list[dict]:
        """Rows with phase times (us) resolved; call after the device is synchronized."""
        sc.sync(self.dev)
        out = []
        for r in self.rows:
            ev = r.pop("_events")
            times = {}
            for (_, a), (name, b) in zip(ev, ev[1:]):
                times[name] = a.elapsed_time(b) * 1000.0 if self.cuda else (b - a) * 1e6
            r["phase_time_us"] = times
            peak = r["peak_allocated"]
            r["peak_phase"] = next((p for p in PHASES if peak is not None
                                    and r["phases"].get(p, {}).get("peak_so_far") == peak), None)
            r["growth_bytes"] = (None if r["allocated_start"] is None
                                 else r["allocated_end"] - r["allocated_start"])
            out.append(r)
        self.rows = []
        return out


def summarize(rows: list[dict]) -> dict:
    def med(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    starts = [r["allocated_start"] for r in rows]
    start_growth = ([b - a for a, b in zip(starts, starts[1:])] if starts and starts[0] is not None else [])
    phase_t = {p: statistics.median([r["phase_time_us"][p] for r in rows]) for p in PHASES}
    return {
        "steps": len(rows),
        "peak_allocated_bytes_median": med("peak_allocated"),
        "peak_allocated_bytes_max": max((r["peak_allocated"] or 0) for r in rows) if rows else None,
        "allocated_start_bytes_median": med("allocated_start"),
        "allocated_end_bytes_median": med("allocated_end"),
        "reserved_end_bytes_median": med("reserved_end"),
        "growth_within_step_bytes_median": med("growth_bytes"),
        "allocated_start_growth_per_step_bytes": start_growth,
        "allocated_start_growth_per_step_bytes_median": statistics.median(start_growth) if start_growth else None,
        "peak_phase_counts": {p: sum(r["peak_phase"] == p for r in rows) for p in PHASES},
        "phase_time_us_median": phase_t,
    }


def build(args, dev, checkpointing: bool, batch_mult: int, leak: bool):
    cfg = memory_config(args.tiny, batch_mult)
    torch.manual_seed(0)
    model = sc.GPT(cfg, naive=False).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=1)
    kept: list[torch.Tensor] = []  # the leak: lives across steps
    leak_rows = LEAK_BYTES // (4 * cfg.vocab)  # fp32 rows of logits[0] that make 8 MiB
    probe = MemProbe(dev)
    mode = {"probe": True}

    def forward(idx):
        B, T = idx.shape
        x = model.wte(idx) + model.wpe(torch.arange(T, device=idx.device))
        for blk in model.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if checkpointing else blk(x)
        return model.lm_head(model.ln_f(x))

    def step(i):
        p = probe if mode["probe"] else None
        if p:
            p.begin()
        xb, yb = pool[i % len(pool)]
        x = xb.to(dev, non_blocking=True)
        y = yb.to(dev, non_blocking=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            logits = forward(x)
            loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1))
        if leak:  # e.g. "keep the logits for a later look": an fp32 copy, never freed
            kept.append(logits[0, :leak_rows].detach().float())
        if p:
            p.phase("forward")
        loss.backward()
        if p:
            p.phase("backward")
        opt.step()
        opt.zero_grad(set_to_none=True)
        if p:
            p.phase("optimizer")
            p.end()

    def flop_step(i):
        mode["probe"] = False
        try:
            step(i)
        finally:
            mode["probe"] = True

    info = sc.gpt_model_info(model)
    info["activation_checkpointing"] = checkpointing
    return cfg, model, step, flop_step, probe, kept, info, leak_rows


def record(name, args, dev, checkpointing=False, batch_mult=1, leak=False) -> dict:
    t_start = time.time()
    run_dir = os.path.join(args.out, name)
    os.makedirs(run_dir, exist_ok=True)
    sc.remove_traces(run_dir, WORKER)
    cfg, model, step, flop_step, probe, kept, info, leak_rows = build(args, dev, checkpointing, batch_mult, leak)
    for i in range(args.warmup):
        step(i)
    probe.finish()
    flops = sc.count_flops(flop_step, dev)
    flops.pop("_flops_by_module", None)
    for i in range(2):
        step(i)
    probe.finish()
    n_kept_before = len(kept)
    timing = sc.time_unprofiled(step, dev, args.timed_steps)
    unprof_rows = probe.finish()
    n_kept_timed = len(kept) - n_kept_before
    prof = sc.profile_steps(step, dev, run_dir, WORKER, args.active, drain_before_active=True,
                            profile_memory=True)
    prof_rows = probe.finish()[-args.active:]  # the wait and warmup steps came first
    tokens = cfg.batch * cfg.seq_len
    in_bytes = tokens * 8
    total_mem = torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda" else None
    un, pr = summarize(unprof_rows), summarize(prof_rows)
    gt = {
        "workload": name,
        "description": describe(cfg, checkpointing, batch_mult, leak, leak_rows),
        **sc.env_info(dev),
        "profiler_options": ("activities=[CPU, CUDA], record_shapes=True, profile_memory=True, "
                             "tensorboard_trace_handler(use_gzip=True)"),
        "steps_profiled": prof["steps_profiled"],
        "flops_per_step": flops["flops_per_step"],
        "flops_by_op": flops["flops_by_op"],
        "flops_source": "FlopCounterMode",
        **timing,
        **{k: v for k, v in prof.items() if k != "steps_profiled"},
        "tokens_per_step": tokens,
        "model": info,
        "expected": {**sc.pinned_input_expected(in_bytes),
                     "leak_bytes_per_step": LEAK_BYTES if leak else 0},
        "mfu_unprofiled": sc.mfu(flops["flops_per_step"], timing["step_time_us_unprofiled"]),
        "mfu_profiled": sc.mfu(flops["flops_per_step"], prof["step_time_us_profiled_wall"]),
        "memory": {
            "device_total_memory_bytes": total_mem,
            "unprofiled": un,
            "profiled": pr,
            "per_step_unprofiled": unprof_rows,
            "per_step_profiled": prof_rows,
            "peak_profiled_vs_unprofiled": (pr["peak_allocated_bytes_median"] / un["peak_allocated_bytes_median"]
                                            if un["peak_allocated_bytes_median"] else None),
            "peak_share_of_device_unprofiled": (un["peak_allocated_bytes_median"] / total_mem
                                                if total_mem and un["peak_allocated_bytes_median"] else None),
            "parameters_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "method": ("torch.cuda.reset_peak_memory_stats() at each step start; memory_allocated() at step start "
                       "and end; max_memory_allocated() after the forward (loss computed), after backward, after "
                       "opt.step()+zero_grad and at step end; memory_reserved() at step end. Host-side allocator "
                       "counters, no device sync. peak_phase = the first phase whose running max equals the step "
                       "peak. phase_time_us from CUDA events at the same points."),
        },
        **sc.gpt_analytic_flops(info, tokens),
        "notes": ["Drained (torch.cuda.synchronize) at the end of the last warmup profiler step, not recorded.",
                  "No .item() in the loop: 0 host syncs per step."],
        "drained_before_active": True,
        "warmup_steps": args.warmup,
        "recorded_at_unix": int(time.time()),
    }
    if leak:
        gt["memory"]["leak"] = {
            "bytes_per_step": LEAK_BYTES,
            "what": f"kept.append(logits[0, :{leak_rows}].detach().float()): fp32 ({leak_rows}, {cfg.vocab}) = "
                    f"{LEAK_BYTES} B, appended every step (unprofiled, FLOP-count and profiled steps alike) "
                    "to a Python list that is never cleared",
            "tensors_kept_at_end": len(kept),
            "tensors_kept_during_unprofiled_timing": n_kept_timed,
        }
    with open(os.path.join(run_dir, "ground_truth.json"), "w") as f:
        json.dump(gt, f, indent=2)
    print(f"[{name}] {timing['step_time_us_unprofiled']:.0f} us unprof, {prof['step_time_us_profiled_wall']:.0f} "
          f"us prof, peak {un['peak_allocated_bytes_median']} / prof {pr['peak_allocated_bytes_median']}, start "
          f"growth {un['allocated_start_growth_per_step_bytes_median']}, trace {prof['trace_bytes']}, "
          f"{time.time() - t_start:.0f} s", flush=True)
    del model, kept
    sc.cleanup(dev)
    return gt


def describe(cfg, checkpointing, batch_mult, leak, leak_rows) -> str:
    s = (f"Small GPT ({cfg.n_layers} layers, d {cfg.d_model}, {cfg.n_heads} heads, seq {cfg.seq_len}, batch "
         f"{cfg.batch}, vocab {cfg.vocab}), SDPA causal attention, bf16 autocast, AdamW(fused=True), pinned input "
         "copied non_blocking, no .item(); recorded with profile_memory=True.")
    if checkpointing:
        s += " Every block runs as torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)."
    if batch_mult != 1:
        s += f" {batch_mult}x the batch of gpt_memory."
    if leak:
        s += (f" A deliberate leak: each step appends an fp32 copy of logits[0, :{leak_rows}] ({LEAK_BYTES} B) to a "
              "list kept across steps.")
    return s


def compare(plain: dict, other: dict, what: str) -> dict:
    """Derived figures of one run against gpt_memory (same process, same model and seed)."""
    pu, ou = plain["memory"]["unprofiled"], other["memory"]["unprofiled"]
    out = {"against": "gpt_memory", "what": what,
           "step_time_us_unprofiled": [plain["step_time_us_unprofiled"], other["step_time_us_unprofiled"]],
           "peak_allocated_bytes_median": [pu["peak_allocated_bytes_median"], ou["peak_allocated_bytes_median"]],
           "flops_per_step": [plain["flops_per_step"], other["flops_per_step"]]}
    if pu["peak_allocated_bytes_median"] is None:
        return out
    if what == "checkpointing":
        out["memory_saved_bytes"] = pu["peak_allocated_bytes_median"] - ou["peak_allocated_bytes_median"]
        out["recompute_flops_per_step"] = other["flops_per_step"] - plain["flops_per_step"]
        out["recompute_time_us_step_delta"] = other["step_time_us_unprofiled"] - plain["step_time_us_unprofiled"]
        out["recompute_time_us_backward_delta"] = (ou["phase_time_us_median"]["backward"]
                                                   - pu["phase_time_us_median"]["backward"])
    else:  # batch2x: the part of the peak that scales with the batch, and what that says about headroom
        per_batch = ou["peak_allocated_bytes_median"] - pu["peak_allocated_bytes_median"]
        fixed = pu["peak_allocated_bytes_median"] - per_batch
        total = plain["memory"]["device_total_memory_bytes"]
        out["batch_scaled_bytes_at_1x"] = per_batch
        out["batch_independent_bytes"] = fixed
        out["batch_independent_vs_step_start"] = fixed / pu["allocated_start_bytes_median"]
        out["headroom_batch_factor_linear"] = (total - fixed) / per_batch if per_batch > 0 else None
        out["headroom_note"] = ("peak(B) = fixed + B/B0 * per_batch fitted through the 1x and 2x runs; the batch "
                                "factor that would fill the device is (total - fixed) / per_batch")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed-steps", type=int, default=25)
    ap.add_argument("--active", type=int, default=3)
    ap.add_argument("--compile-backend", default="inductor", help="unused (accepted for record_all.sh's shared list)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", dev.index or 0)
        torch.cuda.set_device(dev)
    runs = {"gpt_memory": {}, "gpt_memory_checkpointing": {"checkpointing": True},
            "gpt_memory_batch2x": {"batch_mult": 2}, "memory_leak": {"leak": True}}
    names = [n for n in args.only.split(",") if n] or list(runs)
    done, failed = {}, []
    for name in names:
        try:
            done[name] = record(name, args, dev, **runs[name])
        except Exception:
            traceback.print_exc()
            failed.append(name)
            sc.cleanup(dev)
    if "gpt_memory" in done:  # the comparisons go into the other runs' ground truth
        for name, what in (("gpt_memory_checkpointing", "checkpointing"), ("gpt_memory_batch2x", "batch2x")):
            if name in done:
                path = os.path.join(args.out, name, "ground_truth.json")
                gt = json.load(open(path))
                gt["memory"]["vs_gpt_memory"] = compare(done["gpt_memory"], done[name], what)
                json.dump(gt, open(path, "w"), indent=2)
                print(name, json.dumps(gt["memory"]["vs_gpt_memory"]), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
