"""``below_roofline``: the ops that lose the most time below their own roof.

Reads ``report.roofline`` (analysis.roofline). Ops under ``roofline_far_below`` of their
roof are named with the likely cause for their side of the ridge:

- memory-bound far below bandwidth: small launches (each call too short to stream) or
  uncoalesced / strided access; the fix is fusion;
- compute-bound below peak: fp32 math, GEMM dims that are not multiples of the tile, or
  GEMMs too small to fill the GPU.

Cost is the named ops' GPU time; the gain is their time minus their time at the roof (an
upper bound: no kernel reaches 100 % of its roof). One finding per side of the ridge.

The GPU events that an earlier finding names are that finding's (one cause, one finding): a
copy that a copy rule names, a hand-written attention's softmax, an unfused elementwise chain, a
per-parameter optimizer, a kernel with too few blocks, an fp32 GEMM on the CUDA cores are each
far below their roof *because* of the cause that finding names. An op's time and lost time count here only for
the share of its kernels' time that no such finding claims.
"""

from __future__ import annotations

import json

import msgspec
import numpy as np

from ...analysis.bytes.roofline import placed_ops
from ...analysis.critical_path.whatif import Change
from ...analysis.evidence.kernels import BelowRooflineEvidence, RooflineOpRow
from ...analysis.fmt import nbytes, us
from ...analysis.report import RooflineOp
from ...analysis.time import intervals
from .. import fixes
from ..context import Context
from ..cost_time import TimeSet, claimed_by, rows_in, rows_time
from ..registry import Fired, Hit, rule
from .copies import memcpy_bound, pageable_memcpy, small_copies
from .evidence import compiled
from .fusion import naive_attention, unfused_elementwise, unfused_optimizer
from .sm_efficiency import low_sm_efficiency
from .tensor_cores import no_tensor_cores


def _matmul_dims(op: RooflineOp) -> list[int]:
    """The M, N, K (and batch) sizes of a recorded matmul's operands, [] when unknown."""
    try:
        dims = json.loads(op.shapes)
    except ValueError:
        return []
    if op.name in ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation"):
        dims = dims[1:]
    out: list[int] = []
    for d in dims[:2]:
        if isinstance(d, list) and all(isinstance(x, int) for x in d):
            out.extend(d[-2:])
    return out


def _cause(ctx: Context, op: RooflineOp) -> str:
    th = ctx.th
    if op.bound == "memory":
        per_call = op.us_per_step / op.count_per_step if op.count_per_step else op.us_per_step
        if per_call < th.roofline_small_launch_us:
            per_call_bytes = op.bytes_per_step / max(op.count_per_step, 1.0)
            return (
                f"small launches: {us(per_call)} and {nbytes(per_call_bytes)} per call, too short to stream at "
                "full bandwidth"
            )
        if op.mean_blocks_per_sm is not None and op.mean_blocks_per_sm < 1.0:
            return f"too few blocks: {op.mean_blocks_per_sm:.2f} per SM leave most SMs idle"
        if op.kernels_per_call >= 2:
            return f"{op.kernels_per_call:.0f} kernels per call: several passes over the data where one would do"
        return "uncoalesced or strided access (transposed or non-contiguous tensors), or a slow kernel for this layout"
    if op.dtype == "fp32":
        return "fp32 math: no bf16/fp16 tensor-core path"
    dims = _matmul_dims(op) if op.op_class == "matmul" else []
    odd = sorted({d for d in dims if d % th.roofline_tile})
    if odd:
        return f"dims {odd} are not multiples of {th.roofline_tile}: partial tiles waste tensor-core work"
    if op.flops_per_step / max(op.count_per_step, 1.0) < 5e9:
        return "small GEMM: too few tiles to fill every SM"
    return "below peak for its shape: kernel choice, clocks or a concurrent stream"


# The findings whose kernels are theirs, not the roofline's (the module's docstring).
_EXPLAINED_BY = (
    pageable_memcpy,
    small_copies,
    memcpy_bound,
    naive_attention,
    unfused_optimizer,
    unfused_elementwise,
    low_sm_efficiency,
    no_tensor_cores,
)


@rule(
    after=_EXPLAINED_BY,
    title={
        "memory": "{count} memory-bound ops far below HBM bandwidth lose {lost:time} per step",
        "compute": "{count} compute-bound ops far below peak lose {lost:time} per step",
    },
    fix={
        "memory": (
            "Fuse the memory-bound ops so each tensor is read and written once: `torch.compile` the model (or "
            "the block), use fused kernels (`F.scaled_dot_product_attention`, `torch.optim.AdamW(fused=True)`, "
            "fused LayerNorm/RMSNorm), avoid `.contiguous()`/transposed copies, use `channels_last` for convnets' "
            "batch norm, and batch small launches (`torch._foreach_*`)."
        ),
        "memory_compiled": (
            "Fuse the memory-bound ops so each tensor is read and written once. The run already uses "
            "`torch.compile`: fuse what it leaves eager (the code after graph breaks, `TORCH_LOGS=graph_breaks`; "
            "a loss outside the compiled function), use fused kernels (`F.scaled_dot_product_attention`, "
            "`torch.optim.AdamW(fused=True)`, fused LayerNorm/RMSNorm), avoid `.contiguous()`/transposed copies, "
            "and batch small launches (`torch._foreach_*`)."
        ),
        "compute": (
            "Keep GEMMs on the tensor-core path at full tiles: bf16 autocast for fp32 matmuls, pad hidden sizes, "
            "vocabulary and batch to multiples of 64 (e.g. vocab 50257 -> 50304), and batch small GEMMs "
            "(`torch.bmm`, grouped GEMM) so that every SM gets tiles."
        ),
    },
    note="gain: their GPU time minus their time at the roof, an upper bound (kernels reach ~80-90 % of a roof at "
    "best); the copies, attention chains, elementwise chains, per-parameter optimizer, kernels with too few blocks "
    "or CUDA-core GEMMs that another finding names are left to it",
    thresholds=(
        "roofline_far_below",
        "roofline_min_op_share",
        "roofline_min_share",
        "roofline_small_launch_us",
        "roofline_tile",
        "roofline_top_ops",
    ),
)
def below_roofline(ctx: Context, fired: Fired) -> list[Hit]:
    """The ops far below their roof, one hit per side of the ridge (``subject``: memory / compute)."""
    r = ctx.report.roofline
    if r is None or not r.peak_flops or not r.peak_bandwidth or ctx.step_us <= 0:
        return []
    claimed = claimed_by(fired, *(x.id for x in _EXPLAINED_BY))
    ops = _unclaimed_ops(ctx, r.ops, claimed)
    hits = (_side(ctx, ops, bound, claimed) for bound in ("memory", "compute"))
    return [h for h in hits if h is not None]


def _unclaimed_ops(ctx: Context, ops: list[RooflineOp], claimed: TimeSet) -> list[RooflineOp]:
    """``ops`` with their time and lost time scaled to the share of their kernels' time that no
    earlier finding claims (an op whose kernels are all claimed is left out)."""
    if not len(claimed.start):
        return ops
    keys, group, mask = _op_groups(ctx, ops)
    g = ctx.view.gpu
    taken = rows_in(ctx, mask, claimed)
    n = len(keys)
    whole = np.bincount(group[mask], weights=g.dur[mask], minlength=n)[:n]
    part = np.bincount(group[taken], weights=g.dur[taken], minlength=n)[:n]
    out = []
    for o in ops:
        k = keys[_op_key(o)]
        free = 1.0 - part[k] / whole[k] if whole[k] > 0 else 1.0
        if free <= 0:
            continue
        if free < 1.0:
            o = msgspec.structs.replace(
                o, us_per_step=o.us_per_step * free, lost_us_per_step=(o.lost_us_per_step or 0.0) * free
            )
        out.append(o)
    return out


def _side(ctx: Context, all_ops: list[RooflineOp], bound: str, claimed: TimeSet) -> Hit | None:
    """The hit for one side of the ridge (``bound``), or None when its ops lose too little."""
    th = ctx.th
    ops = [
        o
        for o in all_ops
        if o.bound == bound
        and o.roof_share is not None
        and o.roof_share < th.roofline_far_below
        and (o.lost_us_per_step or 0.0) >= th.roofline_min_op_share * ctx.step_us
    ]
    lost = sum(o.lost_us_per_step or 0.0 for o in ops)
    if not ops or lost < th.roofline_min_share * ctx.step_us:
        return None
    ops.sort(key=lambda o: -(o.lost_us_per_step or 0.0))
    named = [
        RooflineOpRow(
            name=o.name,
            op_class=o.op_class,
            shapes=o.shapes,
            us_per_step=o.us_per_step,
            roof_share=o.roof_share,
            lost_us_per_step=o.lost_us_per_step,
            cause=_cause(ctx, o),
        )
        for o in ops[: th.roofline_top_ops]
    ]
    evidence = BelowRooflineEvidence(
        ops=named, ops_below=len(ops), lost_us_per_step=lost, far_below_share=th.roofline_far_below
    )
    time = _ops_time(ctx, ops, claimed)
    return Hit(
        cost_us=sum(o.us_per_step for o in ops),
        gain_us=lost,
        evidence=evidence,
        args={"count": len(ops), "lost": lost},
        title=bound,
        fix=(bound + ("_compiled" if bound == "memory" and compiled(ctx) else ""),),
        subject=bound,
        time=time,
        change=_at_roof(ctx, ops, claimed, bound) if time is not None else None,  # (None: no trace)
    )


def _op_key(o: RooflineOp) -> tuple[str, str, str, str | None, bool]:
    return (o.name, o.op_class, o.shapes, o.dtype, o.exact)


def _op_groups(
    ctx: Context, ops: list[RooflineOp]
) -> tuple[dict[tuple[str, str, str, str | None, bool], int], np.ndarray, np.ndarray]:
    """The distinct keys of ``ops`` (name, class, shapes, dtype, exact: two ops of the roofline
    that differ only in inputs it does not show share one), and for each row of the view the key
    of the op that launched it (as the roofline placed it, an op that started in a step), and
    whether it has one."""
    placed = placed_ops(ctx.tables)
    index: dict[tuple[str, str, str, str | None, bool], int] = {}
    for o in ops:
        index.setdefault(_op_key(o), len(index))
    of_group = np.fromiter((index.get(g, -1) for g in placed.groups), np.int64, len(placed.groups))
    steps = ctx.steps
    in_step = intervals.window_of_unsorted(placed.ts, steps.cpu_start, steps.cpu_end) >= 0
    of_op = np.where(in_step & ~placed.host_copy, of_group[placed.group], -1)
    op = placed.gpu_op[np.flatnonzero(ctx.tables.gpu.device == ctx.device_index)]
    group = np.where(op >= 0, of_op[np.maximum(op, 0)], -1) if len(of_op) else np.full(len(op), -1)
    return index, group, group >= 0


def _at_roof(ctx: Context, ops: list[RooflineOp], claimed: TimeSet, bound: str) -> Change:
    """The change its fix makes: the ops' GPU events, less those another finding claims, at their roof."""
    index, group, mask = _op_groups(ctx, ops)
    share = np.ones(len(index))
    for o in ops:
        share[index[_op_key(o)]] = min(1.0, max(0.0, o.roof_share or 1.0))
    mask = mask & ~rows_in(ctx, mask, claimed)
    factor = np.where(mask, share[np.maximum(group, 0)], 1.0)
    return fixes.scaled(mask, factor, f"the {len(ops)} {bound}-bound ops far below their roof at their roof")


def _ops_time(ctx: Context, ops: list[RooflineOp], claimed: TimeSet) -> TimeSet:
    """When the GPU events of ``ops`` run (the events each launched), less the claimed time."""
    _, _, mask = _op_groups(ctx, ops)
    return rows_time(ctx, mask).minus(claimed)
