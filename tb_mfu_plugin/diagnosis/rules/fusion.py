"""The fusion rules: work that a fused kernel does in fewer launches and passes over memory
(hand-written attention, a per-parameter optimizer, chains of elementwise kernels)."""

from __future__ import annotations

import numpy as np

from ...analysis.evidence.kernels import NaiveAttentionEvidence, UnfusedElementwiseEvidence, UnfusedOptimizerEvidence
from ...analysis.flops.unshaped import compiled_regions
from ...analysis.kernels import name_patterns as nm
from ...analysis.time import patterns as pt
from ...analysis.time import windows
from .. import fixes
from ..context import Context
from ..cost_time import TimeSet, claimed_by, gap_time, rows_time
from ..registry import GAP_THRESHOLDS, Fired, Hit, rule
from .evidence import top_kernels
from .syncs import sync_point


@rule(
    title="Hand-written attention: {fwd:g} forward and {bwd:g} backward "
    "matmul-softmax-matmul chains per step, no fused attention kernel",
    fix=(
        "Replace the chain with `torch.nn.functional.scaled_dot_product_attention(q, k, v, "
        "attn_mask=..., dropout_p=..., is_causal=True)`, which dispatches to FlashAttention / "
        "memory-efficient / cuDNN kernels (or use the flash-attn package); it never materialises the "
        "B x H x T x T scores."
    ),
    note="gain: the non-matmul time of the chains (scale, mask, softmax, dropout, copies of the "
    "scores), which a fused kernel avoids, and the GPU idle after the blocking copy that builds their "
    "mask, where one does (SDPA's causal path builds no mask); the matmuls are assumed to cost the same",
    thresholds=("attention_max_launches_between", *GAP_THRESHOLDS),
)
def naive_attention(ctx: Context) -> list[Hit]:
    """matmul -> softmax -> (dropout) -> matmul on batched operands, and no fused attention kernel.
    The gain is the non-matmul GPU time of the chains (scale, mask, softmax, dropout and copies over
    the B x H x T x T scores), which a fused kernel does not spend; the matmul FLOPs remain."""
    chains = ctx.attention_chains
    if not chains or ctx.fused_attention_present:
        return []
    g = ctx.view.gpu
    rows = ctx.attention_rows
    cost = float(g.dur[rows].sum()) / ctx.n
    mm = rows & ctx.is_kernel & ctx.mm_code[g.name]
    gain = cost - float(g.dur[mm].sum()) / ctx.n
    fwd = [c for c in chains if not c.backward]
    bwd = [c for c in chains if c.backward]
    four = [c.four_d for c in chains if c.four_d is not None]
    example = fwd[0] if fwd else chains[0]
    # the GPU idle after the syncs that build the mask (sync_point's measure, these syncs being this finding's)
    mask = ctx.attention_mask_syncs
    by_row = ctx.gaps.sync_us_by_row
    mask_idle = sum(by_row.get(int(r), 0.0) for r in mask.tolist()) / ctx.n
    evidence = NaiveAttentionEvidence(
        chains_per_step=len(chains) / ctx.n,
        forward_per_step=len(fwd) / ctx.n,
        backward_per_step=len(bwd) / ctx.n,
        ops=list(example.ops),
        backward_ops=list(bwd[0].ops) if bwd else None,
        matmul_input_dims=example.input_dims,
        four_d=all(four) if four else None,
        gpu_us_per_step=cost,
        matmul_us_per_step=cost - gain,
        non_matmul_us_per_step=gain,
        kernels=top_kernels(ctx, rows & (ctx.is_kernel | ctx.is_memcpy)),
        mask_syncs_per_step=len(mask) / ctx.n,
        mask_sync_idle_us_per_step=mask_idle,
    )
    args = {"fwd": len(fwd) / ctx.n, "bwd": len(bwd) / ctx.n}
    change = fixes.fused_attention(ctx, rows, ctx.is_kernel & ctx.mm_code[g.name])
    time = rows_time(ctx, rows)
    if len(mask):
        time = time.union(gap_time(ctx, sync_rows=set(mask.tolist())))
    cost, gain = cost + mask_idle, gain + mask_idle
    return [Hit(cost_us=cost, gain_us=gain, evidence=evidence, args=args, time=time, change=change)]


def _spans(ctx: Context, launched: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step with any of the ``launched`` rows, in step order: the first start and last end of them."""
    g = ctx.view.gpu
    rows = np.flatnonzero(launched & (ctx.step_of >= 0))
    step = ctx.step_of[rows]
    first, last = np.full(ctx.n, np.inf), np.full(ctx.n, -np.inf)
    np.minimum.at(first, step, g.ts[rows])
    np.maximum.at(last, step, g.end[rows])
    has = np.bincount(step, minlength=ctx.n) > 0
    return first[has], last[has]


def _span_time(ctx: Context, launched: np.ndarray) -> TimeSet:
    """Per step, from the first to the last of the ``launched`` rows (as ``_gpu_span``)."""
    return TimeSet.of(*_spans(ctx, launched))


def _gpu_span(ctx: Context, launched: np.ndarray) -> float:
    """Per step, from the first to the last of the ``launched`` rows, µs per step."""
    first, last = _spans(ctx, launched)
    return windows.running_total(last - first) / ctx.n  # added step by step


@rule(
    after=(sync_point,),
    title="Per-parameter optimizer: {kernels:.0f} kernels per step under Optimizer.step ({cls})",
    fix={
        "fused": "Use `torch.optim.{cls}(params, ..., fused=True)` (or `foreach=True`):",
        "foreach": "Use the foreach implementation of {cls} (`foreach=True`) or a fused optimizer:",
        "why": "one multi-tensor launch set per step instead of a few kernels per parameter. "
        "Outside torch.optim: `apex.optimizers.FusedAdam` or DeepSpeed's `FusedAdam`.",
        "zero_grad": "Also call `optimizer.zero_grad(set_to_none=True)` (the default since torch 2.0).",
    },
    note="gain: the GPU span of the optimizer step minus {ratio:g} x its "
    "kernel busy time (what a fused/foreach version is assumed to need), less the idle in it that "
    "host-device syncs cause (sync_point's); the launch gaps inside the span are this finding's, not "
    "launch_bound's",
    thresholds=(
        "optimizer_min_kernels_per_step",
        "optimizer_max_multi_tensor_share",
        "optimizer_fused_work_ratio",
        "optimizer_fused_host_us_per_kernel",
    ),
)
def unfused_optimizer(ctx: Context, fired: Fired) -> list[Hit]:
    """Many small per-parameter kernels under ``Optimizer.step``."""
    th, g = ctx.th, ctx.view.gpu
    rows = ctx.optimizer_rows
    if not len(rows):
        return []
    launched = ctx.optimizer_kernels
    n_k = launched.sum() / ctx.n
    if n_k < th.optimizer_min_kernels_per_step:
        return []
    multi = nm.multi_tensor_kernel_mask(ctx.names, ctx.tables.gpu_name_codes)[g.name] & launched
    multi_share = float(multi.sum()) / max(1, int(launched.sum()))
    w = pt.Windows.of_rows(ctx.tables, rows)
    fused_ops = pt.ops_named_in(ctx.tables, w, ("aten::_fused_", "aten::_foreach_"))
    if multi_share > th.optimizer_max_multi_tensor_share or any(k.startswith("aten::_fused_") for k in fused_ops):
        return []
    busy = ctx.per_step_union(launched) / ctx.n
    span = _gpu_span(ctx, launched)
    names = ctx.optimizer_classes
    cls = names[0] if names else "Optimizer"
    zg = ctx.zero_grad_launched & ctx.is_kernel
    fix = ("fused" if cls in fixes.FUSED_CAPABLE else "foreach", "why") + (("zero_grad",) if zg.any() else ())
    args = {"kernels": n_k, "cls": cls, "ratio": th.optimizer_fused_work_ratio}
    # the GPU idle that host-device syncs cause inside the span is sync_point's
    whole = _span_time(ctx, launched)
    time = whole.minus(claimed_by(fired, sync_point.id))
    syncs = (whole.us - time.us) / ctx.n
    evidence = UnfusedOptimizerEvidence(
        optimizer=names,
        kernels_per_step=n_k,
        multi_tensor_kernel_share=multi_share,
        foreach_or_fused_ops=fused_ops,
        host_us_per_step=float(ctx.tables.cpu.dur[rows].sum()) / ctx.n,
        gpu_span_us_per_step=span,
        gpu_busy_us_per_step=busy,
        median_kernel_us=float(np.median(g.dur[launched])),
        kernels=top_kernels(ctx, launched),
        zero_grad_kernels_per_step=zg.sum() / ctx.n,
        zero_grad_us_per_step=float(g.dur[zg].sum()) / ctx.n,
        sync_idle_us_per_step=syncs,
    )
    gain = span - th.optimizer_fused_work_ratio * busy - syncs
    change = fixes.fused_optimizer(ctx, launched, th.optimizer_fused_work_ratio, th.optimizer_fused_host_us_per_kernel)
    return [Hit(cost_us=span - syncs, gain_us=gain, evidence=evidence, args=args, fix=fix, time=time, change=change)]


@rule(
    title="Unfused elementwise chains: {runs:.0f} runs of >= {min_run} non-matmul kernels per step",
    fix={
        "": "Fuse them: `torch.compile(model)` (Inductor generates fused Triton kernels), fused LayerNorm/RMSNorm "
        "(`torch.nn.functional.layer_norm` / `rms_norm`, Apex `FusedLayerNorm`), a fused MLP/activation "
        "kernel, or a custom Triton kernel for the hot run.",
        "compiled": "The run already uses torch.compile: these chains run outside its compiled graphs (eager ATen "
        "kernels, such as the loss or code after a graph break). Compile them too: move the loss into the compiled "
        "function (compile a function that returns the loss, not only the model), remove the graph breaks "
        "(`TORCH_LOGS=graph_breaks`), or use fused kernels for them (`F.cross_entropy`, fused norms).",
    },
    note="gain: each run fused into one kernel as long as its longest member",
    thresholds=("elementwise_min_run", "elementwise_min_share", "attention_max_launches_between"),
)
def unfused_elementwise(ctx: Context) -> list[Hit]:
    """Long runs of small elementwise / normalisation kernels between matmuls; fusing a run
    leaves about one kernel as long as its longest member."""
    th, g = ctx.th, ctx.view.gpu
    krows = np.flatnonzero(ctx.is_kernel & ctx.in_step)
    claimed = ctx.optimizer_launched | ctx.zero_grad_launched | ctx.attention_rows
    kern = g.take(krows)
    ew = nm.elementwise_kernel_mask(ctx.names, ctx.tables.gpu_name_codes)
    runs = pt.elementwise_runs(kern, ew, ~claimed[krows], th.elementwise_min_run)
    if not runs:
        return []
    cost = sum(float(kern.dur[r].sum()) for r in runs) / ctx.n
    gain = sum(float(kern.dur[r].sum() - kern.dur[r].max()) for r in runs) / ctx.n
    if gain < th.elementwise_min_share * ctx.step_us:
        return []
    lens = np.array([len(r) for r in runs])
    in_runs = np.zeros(len(g), bool)
    in_runs[krows[np.concatenate(runs)]] = True
    longest = runs[int(np.argmax([kern.dur[r].sum() for r in runs]))]
    regions = compiled_regions(ctx.tables)
    evidence = UnfusedElementwiseEvidence(
        runs_per_step=len(runs) / ctx.n,
        kernels_per_run_median=float(np.median(lens)),
        kernels_per_run_max=int(lens.max()),
        kernels_per_step=int(lens.sum()) / ctx.n,
        us_per_step=cost,
        kernels=top_kernels(ctx, in_runs),
        costliest_run=[ctx.names[c] for c in kern.name[longest][:12]],
        compiled_regions=regions,
    )
    args = {"runs": len(runs) / ctx.n, "min_run": th.elementwise_min_run}
    fix = ("compiled",) if regions else ("",)
    change = fixes.fused_runs(ctx, krows, runs)
    time = rows_time(ctx, in_runs)
    return [Hit(cost_us=cost, gain_us=gain, evidence=evidence, args=args, fix=fix, time=time, change=change)]
