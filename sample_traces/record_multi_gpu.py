#!/usr/bin/env python3
"""Record the multi-GPU sample traces (DDP, FSDP2, tensor parallel, TP x DP) and their ground truth.

One strategy per torchrun invocation keeps a failure (or hang) in one from losing the others:

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    for s in ddp fsdp2 tp; do
      torchrun --standalone --nproc_per_node 2 sample_traces/record_multi_gpu.py --strategy $s --out sample_traces
    done
    # 2-D: DeviceMesh ("dp", "tp") = (N/2, 2): TP inside each pair of ranks, FSDP2 across pairs
    torchrun --standalone --nproc_per_node 4 sample_traces/record_multi_gpu.py --strategy tpdp --tp 2 \
      --out sample_traces
    # CPU dry run (gloo, tiny shapes):
    torchrun --standalone --nproc_per_node 2 sample_traces/record_multi_gpu.py --device cpu --tiny --strategy tp --out /tmp/st
    torchrun --standalone --nproc_per_node 4 sample_traces/record_multi_gpu.py --device cpu --tiny --strategy tpdp \
      --out /tmp/st

Writes <out>/<strategy>_<N>gpu/rank<r>.<ns>.pt.trace.json.gz for every rank and
<out>/<strategy>_<N>gpu/ground_truth.json (rank 0).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sample_common as sc  # noqa: E402


def is_dtensor(t) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover
        from torch.distributed._tensor import DTensor
    return isinstance(t, DTensor)


def tp_plan():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    return {
        "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
        "attn.proj": RowwiseParallel(),
        "mlp.fc1": ColwiseParallel(), "mlp.fc2": RowwiseParallel(),
    }


def wrap(strategy: str, model: sc.GPT, dev, ws: int, local_rank: int, tp: int = 1):
    from torch.distributed.device_mesh import init_device_mesh
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, device_ids=[local_rank] if dev.type == "cuda" else None)
    if strategy == "tpdp":
        # 2-D mesh, row-major: ranks [[0, 1], [2, 3]] for (dp, tp) = (2, 2), so each TP group is a
        # pair of consecutive ranks and each DP group takes one rank of every pair.
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import parallelize_module
        assert ws % tp == 0 and model.cfg.n_heads % tp == 0, "world_size and n_heads must divide by --tp"
        mesh2d = init_device_mesh(dev.type, (ws // tp, tp), mesh_dim_names=("dp", "tp"))
        for blk in model.blocks:  # TP inside the pair, exactly as --strategy tp
            parallelize_module(blk, mesh2d["tp"], tp_plan())
        for blk in model.blocks:  # then FSDP2 across pairs (the torch "FSDP + TP" 2-D recipe)
            fully_shard(blk, mesh=mesh2d["dp"])
        fully_shard(model, mesh=mesh2d["dp"])
        return model
    mesh = init_device_mesh(dev.type, (ws,))
    if strategy == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for blk in model.blocks:
            fully_shard(blk, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    if strategy == "tp":
        from torch.distributed.tensor.parallel import parallelize_module
        assert model.cfg.n_heads % ws == 0, "n_heads must divide by the TP degree"
        for blk in model.blocks:
            parallelize_module(blk, mesh, tp_plan())
        return model
    raise ValueError(strategy)


def make_optimizers(model):
    """Fused AdamW.  Under TP the block weights are DTensors and the rest plain tensors; a
    fused/foreach call may not mix the two, nor DTensors of different meshes (TP x DP: block
    weights on the 2-D (dp, tp) mesh, the FSDP-sharded root weights on the dp mesh), so each
    mesh (and the plain tensors) gets its own optimizer.  For ddp/fsdp2/tp this gives the same
    optimizers as before (DTensors first, then plain tensors)."""
    params = [p for p in model.parameters() if p.requires_grad]
    dt = [p for p in params if is_dtensor(p)]
    plain = [p for p in params if not is_dtensor(p)]
    groups: list[tuple[object, list]] = []  # (mesh, params), in first-seen order
    for p in dt:
        for mesh, g in groups:
            if mesh == p.device_mesh:
                g.append(p)
                break
        else:
            groups.append((p.device_mesh, [p]))
    opts, desc = [], []
    for mesh, g in groups + ([(None, plain)] if plain else []):
        opts.append(torch.optim.AdamW(g, lr=1e-4, fused=True))
        desc.append({"mesh": None if mesh is None else
                     {"shape": list(mesh.mesh.shape), "dim_names": list(mesh.mesh_dim_names or [])},
                     "params": len(g)})
    return opts, {"dtensor_params": len(dt), "plain_params": len(plain), "optimizers": desc}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategy", required=True, choices=["ddp", "fsdp2", "tp", "tpdp"])
    ap.add_argument("--tp", type=int, default=2, help="TP degree for --strategy tpdp (DP degree = world_size / tp)")
    sc.add_run_args(ap, os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    record(args, sc.GPTConfig.tiny() if args.tiny else sc.GPTConfig())


def record(args, cfg: sc.GPTConfig, run_name=None, init_on_device: bool = False, extra=None):
    """Records one strategy (``args.strategy``, ``args.tp``; the run arguments of
    ``sc.add_run_args``) on ``cfg`` under this torchrun, and writes the ground truth.

    run_name(world_size, tp_degree, dp_degree) names the run directory (default
    ``<strategy>_<N>gpu``). init_on_device builds the model's weights on the device, which a
    model of billions of parameters needs (a CPU init then copy takes a minute and 8 bytes a
    parameter of host memory per rank); the default keeps the 2- and 4-GPU runs' CPU init.
    extra(gt, notes) may add fields and notes to rank 0's ground truth before it is written."""
    rank, ws, local_rank, dev = sc.init_distributed(args.device)
    strategy = args.strategy
    # TP degree (ranks that share one batch and split the block weights) and DP degree
    tp_deg = {"tp": ws, "tpdp": args.tp}.get(strategy, 1)
    dp_deg = ws // tp_deg
    run_name = f"{strategy}_{ws}gpu" if run_name is None else run_name(ws, tp_deg, dp_deg)
    dp_rank = rank // tp_deg  # row-major (dp, tp) mesh: a TP group is tp_deg consecutive ranks
    run_dir = os.path.join(args.out, run_name)
    worker = f"rank{rank}"
    if rank == 0:
        os.makedirs(run_dir, exist_ok=True)
    dist.barrier()
    sc.remove_traces(run_dir, worker)

    torch.manual_seed(0)  # identical init on every rank
    if init_on_device:
        with torch.device(dev):  # the same seed and kernels on every rank: the same weights
            model = sc.GPT(cfg, naive=False).train()
    else:
        model = sc.GPT(cfg, naive=False).to(dev).train()
    info = sc.gpt_model_info(model)
    # TP: every rank must see the same batch; DDP/FSDP: each rank its own shard of data;
    # TP x DP: the ranks of one TP group share a batch, each DP index has its own
    data_seed = 1 + dp_rank
    pool = sc.gpt_batch_pool(cfg, 4, pin=dev.type == "cuda", seed=data_seed)

    def make_step(m, opts):
        def step(i):
            xb, yb = pool[i % len(pool)]
            x = xb.to(dev, non_blocking=True)
            y = yb.to(dev, non_blocking=True)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                logits = m(x)
                loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), y.reshape(-1))
            loss.backward()
            for o in opts:
                o.step()
                o.zero_grad(set_to_none=True)
        return step

    # FLOPs of the plain (unsharded) model on this rank's batch, fwd+bwd (no optimizer step: it counts 0)
    fc_plain = sc.count_flops(lambda i: make_step(model, [])(i), dev)
    model.zero_grad(set_to_none=True)
    flops_plain = fc_plain["flops_per_step"]

    wrapped = wrap(strategy, model, dev, ws, local_rank, tp=tp_deg)
    opts, opt_info = make_optimizers(wrapped)
    step = make_step(wrapped, opts)
    t0 = time.time()
    for i in range(args.warmup):
        step(i)
    sc.sync(dev)
    warm_s = time.time() - t0

    counter_on_wrapped = None
    try:
        fc_w = sc.count_flops(step, dev)
        counter_on_wrapped = {"flops_per_step": fc_w["flops_per_step"], "flops_by_op": fc_w["flops_by_op"]}
    except Exception as e:
        counter_on_wrapped = {"error": f"{type(e).__name__}: {e}"}
    for i in range(2):
        step(i)

    tokens_local = cfg.batch * cfg.seq_len
    head_flops = 6.0 * tokens_local * cfg.d_model * cfg.vocab  # lm_head fwd (2) + bwd (4) per token
    if strategy == "tp":
        flops_rank = (flops_plain - head_flops) / ws + head_flops
        flops_source = ("analytic from FlopCounterMode: the unsharded model on the same batch counted by "
                        "FlopCounterMode; block matmuls and attention (sharded over ranks) divided by world_size, "
                        "lm_head (6*tokens*d_model*vocab, replicated on every rank) counted in full")
        tokens_global = tokens_local  # every rank processes the same batch
        model_flops_global = flops_plain
    elif strategy == "tpdp":
        flops_rank = (flops_plain - head_flops) / tp_deg + head_flops
        flops_source = ("analytic from FlopCounterMode, as for TP: the unsharded model on this rank's batch (the "
                        "batch its TP group shares) counted by FlopCounterMode; block matmuls and attention "
                        "(sharded over the tp mesh dimension) divided by the TP degree, lm_head "
                        "(6*tokens*d_model*vocab, replicated inside the TP group; FSDP2 only shards its storage) "
                        "counted in full. FSDP2 over dp adds communication, not FLOPs")
        tokens_global = tokens_local * dp_deg  # one batch per TP group
        model_flops_global = flops_plain * dp_deg
    else:
        wrapped_ok = ("flops_per_step" in counter_on_wrapped and
                      abs(counter_on_wrapped["flops_per_step"] - flops_plain) <= 0.01 * flops_plain)
        flops_rank = counter_on_wrapped["flops_per_step"] if wrapped_ok else flops_plain
        flops_source = ("FlopCounterMode on the wrapped model (local batch); equals the plain-model count"
                        if wrapped_ok else
                        "FlopCounterMode on the plain (unwrapped) model with this rank's batch")
        tokens_global = tokens_local * ws
        model_flops_global = flops_plain * ws

    timing = sc.time_unprofiled(step, dev, args.timed_steps)
    if rank == 0:
        print(f"[{run_name}] unprofiled median {timing['step_time_us_unprofiled']:.1f} us", flush=True)

    prof, tried = sc.profile_under_limit(step, dev, run_dir, worker, ws, args.trace_limit)

    mine = {
        "rank": rank,
        "flops_per_step": flops_rank,
        "flops_source": flops_source,
        "flops_counter_on_wrapped_model": counter_on_wrapped,
        "flops_plain_model_local_batch": flops_plain,
        "flops_by_op_plain_model": fc_plain["flops_by_op"],
        **sc.rank_timing(flops_rank, timing, prof),
        "optimizers": opt_info,
    }
    if dev.type == "cuda":  # the caching allocator's peak over the whole recording (host-side, no sync)
        mine["peak_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
    per_rank = [None] * ws
    dist.all_gather_object(per_rank, mine)

    if rank == 0:
        slowest_unprof = max(r["step_time_us_unprofiled"] for r in per_rank)
        slowest_prof = max(r["step_time_us_profiled_wall"] for r in per_rank)
        in_bytes = cfg.batch * cfg.seq_len * 8
        n_params = info["n_params"]
        expected = {**sc.pinned_input_expected(in_bytes, "pinned"), "scope": "per rank"}
        notes = ["Built with no host syncs and no D2H copies in the step; any that appear in the trace come from "
                 "the library (DDP/FSDP2/DTensor) and were not planned.",
                 "FlopCounterMode counts the fused SDPA backward as 2.5x its forward (5 matmuls, recomputing the scores), while the hand-written attention's backward counts as 2x (4 bmm); the same math therefore counts 0.5 x forward-attention FLOPs more with SDPA (68.7 GFLOP/step at these shapes). The analytic PaLM formula uses 2x."]
        cw = per_rank[0]["flops_counter_on_wrapped_model"]
        cw_is_plain = "flops_per_step" in cw and abs(cw["flops_per_step"] - flops_plain) <= 0.01 * flops_plain
        if strategy == "tpdp" and cw_is_plain:
            notes.append(
                f"FlopCounterMode run directly on the TP x DP model reported {cw['flops_per_step']:.6g} FLOPs per "
                f"rank, the unsharded plain-model count on the same batch ({flops_plain:.6g}): it sees DTensor-level "
                "ops (global shapes), i.e. the whole TP group's FLOPs, not what this rank executes; flops_per_step "
                "uses the analytic split instead (see flops_source).")
        elif strategy in ("tp", "tpdp") and "flops_per_step" in cw:
            notes.append(
                f"FlopCounterMode run directly on the {'TP' if strategy == 'tp' else 'TP x DP'} model reported "
                f"{cw['flops_per_step']:.6g} FLOPs per rank "
                f"(unsharded plain-model count on the same batch: {flops_plain:.6g}): it sees DTensor-level ops "
                "(global shapes) for the sharded Linears but local tensors for attention, so it is neither the "
                "global nor the per-rank executed count; flops_per_step uses the analytic split instead "
                "(see flops_source).")
        if strategy == "ddp":
            expected["collectives"] = {
                "allreduce_grad_bytes_per_step": 4 * n_params,
                "description": ("DDP all-reduces every fp32 gradient once per step (bucketed, default 25 MiB "
                                "buckets, first bucket 1 MiB), overlapped with backward"),
            }
        elif strategy == "tpdp":
            notes.append("FSDP2 (over the dp mesh dimension) itself issues small non_blocking pinned->device copies "
                         "every step (metadata for fsdp::split_with_sizes_copy in FSDP::all_gather_copy_out and "
                         "fsdp::chunk_cat in FSDP::post_backward_reduce), as in the fsdp2 runs; they are not part of "
                         "`expected` (built copies) but are listed under observed_in_trace.")
            notes.append(f"Mesh: init_device_mesh(('dp', 'tp') = ({dp_deg}, {tp_deg})), row-major: TP groups "
                         f"{[[d * tp_deg + t for t in range(tp_deg)] for d in range(dp_deg)]}, DP groups "
                         f"{[[d * tp_deg + t for d in range(dp_deg)] for t in range(tp_deg)]}. The ranks of a TP "
                         "group process the same batch; DP groups process different batches.")
            expected["collectives"] = {
                "description": (f"TP (tp={tp_deg}) inside each TP group exactly as the tp runs: q/k/v (Colwise), "
                                "attn.proj (Rowwise), mlp.fc1 (Colwise), mlp.fc2 (Rowwise), "
                                f"{cfg.n_heads // tp_deg} heads per rank; forward all-reduce of the (B,T,d) "
                                "activation after each Rowwise layer (2 per block), backward all-reduces of the "
                                "input gradients of the Colwise layers (tp process group). "
                                f"DP (dp={dp_deg}) across TP groups with FSDP2: fully_shard(mesh=mesh['dp']) per "
                                "block (on top of the TP DTensors) then root (wte, wpe, ln_f, lm_head, replicated "
                                "within the TP group), no MixedPrecisionPolicy: fp32 all-gathers over dp in forward "
                                "and again in backward (reshard_after_forward=True), fp32 gradients "
                                "reduce-scattered over dp once per step"),
                "tp_degree": tp_deg,
                "dp_degree": dp_deg,
                "dp_implementation": "FSDP2 fully_shard over the dp mesh dimension",
            }
        elif strategy == "fsdp2":
            notes.append("FSDP2 itself issues small non_blocking pinned->device copies every step (metadata for "
                         "fsdp::split_with_sizes_copy in FSDP::all_gather_copy_out and fsdp::chunk_cat in "
                         "FSDP::post_backward_reduce); they are not part of `expected` (built copies) but are "
                         "listed under observed_in_trace.")
            expected["collectives"] = {
                "description": ("fully_shard per block then root, no MixedPrecisionPolicy (fp32 params "
                                "all-gathered, autocast casts at op level): each block all-gathered in forward and "
                                "again in backward (reshard_after_forward=True), root params (wte, wpe, ln_f, "
                                "lm_head) gathered once; fp32 gradients reduce-scattered once per step"),
                "reduce_scatter_grad_bytes_per_step_approx": 4 * n_params,
            }
        else:
            expected["collectives"] = {
                "description": ("TP over q/k/v (Colwise), attn.proj (Rowwise), mlp.fc1 (Colwise), mlp.fc2 "
                                f"(Rowwise); {cfg.n_heads // ws} heads per rank. Forward: one all-reduce of the "
                                "(B,T,d) activation after each Rowwise layer (2 per block). Backward: all-reduces "
                                "of the input gradients of the Colwise layers. Embeddings, LayerNorms and lm_head "
                                "are replicated (same batch, same grads on every rank)."),
            }
        strategy_label = f"tp\u00d7dp (tp={tp_deg}, dp={dp_deg})" if strategy == "tpdp" else strategy
        label = ("TP x DP (2-D mesh; TP inside a group, FSDP2 across groups)" if strategy == "tpdp"
                 else strategy.upper())
        gt = {
            "workload": run_name,
            "description": (f"GPT ({cfg.n_layers} layers, d={cfg.d_model}) bf16 autocast, SDPA, fused AdamW, pinned "
                            f"non_blocking input, trained with {label} on {ws} GPUs"),
            "strategy": strategy_label,
            "world_size": ws,
            **({"mesh": {"shape": [dp_deg, tp_deg], "dim_names": ["dp", "tp"],
                         "tp_groups": [[d * tp_deg + t for t in range(tp_deg)] for d in range(dp_deg)],
                         "dp_groups": [[d * tp_deg + t for d in range(dp_deg)] for t in range(tp_deg)],
                         "dp_implementation": "FSDP2 fully_shard(mesh=mesh['dp']) per block, then root"}}
               if strategy == "tpdp" else {}),
            **sc.env_info(dev),
            "steps_profiled": prof["steps_profiled"],
            "flops_per_step": per_rank[0]["flops_per_step"],
            "flops_by_op": fc_plain["flops_by_op"] if strategy not in ("tp", "tpdp") else {
                "note": "per-op counts of the UNSHARDED model on the same batch; see per_rank", **fc_plain["flops_by_op"]},
            "flops_source": flops_source,
            "flops_scope": "per rank (rank 0); per_rank lists every rank",
            "model_flops_per_step_global": model_flops_global,
            "step_time_us_unprofiled": per_rank[0]["step_time_us_unprofiled"],
            "step_time_us_unprofiled_slowest_rank": slowest_unprof,
            "step_time_us_profiled_wall": per_rank[0]["step_time_us_profiled_wall"],
            "step_time_us_profiled_wall_slowest_rank": slowest_prof,
            "unprofiled_timed_steps": args.timed_steps,
            "tokens_per_step": tokens_local,
            "tokens_per_step_scope": ("per rank: tokens this rank's model processes (under TP every rank processes "
                                      "the same tokens; under TP x DP the ranks of a TP group do)"),
            "tokens_per_step_global": tokens_global,
            "tokens_per_s_unprofiled": tokens_global / (slowest_unprof * 1e-6),
            "tokens_per_s_profiled": tokens_global / (slowest_prof * 1e-6),
            "mfu_unprofiled": sc.mfu(per_rank[0]["flops_per_step"], per_rank[0]["step_time_us_unprofiled"]),
            "mfu_profiled": sc.mfu(per_rank[0]["flops_per_step"], per_rank[0]["step_time_us_profiled_wall"]),
            "mfu_model_unprofiled": model_flops_global / (slowest_unprof * 1e-6) / (ws * sc.PEAK_BF16_FLOPS),
            "mfu_model_profiled": model_flops_global / (slowest_prof * 1e-6) / (ws * sc.PEAK_BF16_FLOPS),
            "mfu_definitions": {
                "mfu_unprofiled/mfu_profiled": "rank 0's executed FLOPs (flops_per_step) / its step time / peak",
                "mfu_model_*": ("useful model FLOPs of the global batch (model_flops_per_step_global) / slowest "
                                "rank's step time / (world_size * peak); for TP the replicated lm_head counts once "
                                "(for TP x DP once per TP group)"),
            },
            "model": {**info, "batch_per_rank": cfg.batch},
            **sc.gpt_analytic_flops(info, tokens_local),
            "analytic_flops_scope": ("unsharded model on tokens_per_step (one rank's tokens): equals the per-rank "
                                     "executed FLOPs for DDP/FSDP2; for TP it is the whole model's FLOPs, which "
                                     "the ranks share; for TP x DP the FLOPs that one TP group shares"),
            "analytic_flops_per_step_global": sc.gpt_analytic_flops(info, tokens_global)["analytic_flops_per_step"],
            "expected": expected,
        }
        if extra is not None:
            extra(gt, notes)
        sc.write_ground_truth(run_dir, gt, per_rank, notes, tried, args.warmup, warm_s)
        print(f"[{run_name}] per-rank step us unprof {[round(r['step_time_us_unprofiled']) for r in per_rank]} "
              f"prof {[round(r['step_time_us_profiled_wall']) for r in per_rank]} "
              f"flops/rank {per_rank[0]['flops_per_step'] / 1e12:.3f} TF "
              f"MFU {gt['mfu_unprofiled']:.3f}/{gt['mfu_profiled']:.3f} model-MFU {gt['mfu_model_unprofiled']:.3f} "
              f"tok/s {gt['tokens_per_s_unprofiled']:.0f} trace bytes {[r['trace_bytes'] for r in per_rank]} "
              f"wrapped-counter {[r['flops_counter_on_wrapped_model'].get('flops_per_step', r['flops_counter_on_wrapped_model'].get('error')) for r in per_rank]}",
              flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
