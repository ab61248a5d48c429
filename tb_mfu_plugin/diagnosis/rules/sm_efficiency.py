"""``low_sm_efficiency``: kernels launching fewer blocks than SMs, for long enough to matter."""

from __future__ import annotations

import numpy as np

from ...analysis.evidence.kernels import LowSmEfficiencyEvidence, LowSmKernelRow
from .. import fixes
from ..context import Context
from ..cost_time import claimed_by, rows_in, rows_time
from ..registry import Fired, Hit, rule
from .evidence import compiled, kernel_totals
from .fusion import naive_attention, unfused_elementwise


@rule(
    after=(naive_attention, unfused_elementwise),
    title="Low SM efficiency: kernels with < {blocks:g} block per SM run {us:time} per step",
    fix={
        "": "Give these kernels more parallel work: a larger batch (or sequence), fusing them with neighbours "
        "(`torch.compile`), or running independent work on another `torch.cuda.Stream`; for small GEMMs "
        "batch them (`torch.bmm`, grouped GEMM).",
        "compiled": "Give these kernels more parallel work: a larger batch (or sequence), fusing them with "
        "neighbours (the run is compiled: remove the graph breaks around them, `TORCH_LOGS=graph_breaks`), or "
        "running independent work on another `torch.cuda.Stream`; for small GEMMs batch them (`torch.bmm`, "
        "grouped GEMM).",
    },
    note="gain: duration x (1 - blocks per SM), the idle SMs' share, assuming the work would "
    "spread over all SMs and no other stream fills them; kernels that a fired naive_attention or "
    "unfused_elementwise names are theirs (fusing them is the lever) and not counted here",
    thresholds=("low_blocks_per_sm", "low_sm_min_kernel_us", "low_sm_min_share"),
)
def low_sm_efficiency(ctx: Context, fired: Fired) -> list[Hit]:
    """Kernels launching fewer blocks than SMs, for long enough to matter: part of the GPU
    sits idle while they run. Lost time: duration x (1 - blocks per SM)."""
    th, g, bps = ctx.th, ctx.view.gpu, ctx.view.bps
    sel = (
        ctx.is_kernel
        & ctx.in_step
        & ~ctx.comm_code[g.name]  # collectives use few blocks by design
        & ~np.isnan(bps)
        & (bps < th.low_blocks_per_sm)
        & (g.dur >= th.low_sm_min_kernel_us)
    )
    sel &= ~rows_in(ctx, sel, claimed_by(fired, naive_attention.id, unfused_elementwise.id))
    if not sel.any():
        return []
    lost_rows = np.where(sel, g.dur * (1.0 - np.clip(np.nan_to_num(bps), 0.0, 1.0)), 0.0)
    lost = float(lost_rows.sum()) / ctx.n
    if lost < th.low_sm_min_share * ctx.step_us:
        return []
    time = float(g.dur[sel].sum()) / ctx.n
    rows = np.flatnonzero(sel)
    top = []
    for code, n, us, lost_us in kernel_totals(ctx, sel, weights=lost_rows):
        mine = rows[g.name[rows] == code]
        blocks = float(np.average(bps[mine], weights=g.dur[mine]))
        top.append(
            LowSmKernelRow(
                name=ctx.names[code],
                count_per_step=n,
                us_per_step=us,
                mean_blocks_per_sm=blocks,
                lost_us_per_step=lost_us,
            )
        )
    evidence = LowSmEfficiencyEvidence(
        us_per_step=time,
        lost_us_per_step=lost,
        share_of_step=time / ctx.step_us,
        num_sms=ctx.report.device.num_sms if ctx.report.device else None,
        kernels=top,
    )
    args = {"blocks": th.low_blocks_per_sm, "us": time}
    fix = ("compiled",) if compiled(ctx) else ("",)
    factor = np.clip(np.nan_to_num(bps), 0.0, 1.0)
    change = fixes.scaled(sel, factor, "the kernels with too few blocks spread over every SM: duration x blocks per SM")
    return [
        Hit(cost_us=time, gain_us=lost, evidence=evidence, args=args, fix=fix, time=rows_time(ctx, sel), change=change)
    ]
