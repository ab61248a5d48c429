"""``dataloader_stall``: the GPU idle while the host loads the next batch."""

from __future__ import annotations

from ...analysis.evidence.host import DataloaderStallEvidence
from .. import fixes
from ..context import Context
from ..cost_time import claimed_by, gap_time
from ..registry import GAP_THRESHOLDS, Fired, Hit, rule
from .fusion import unfused_optimizer


@rule(
    after=(unfused_optimizer,),
    title="DataLoader stall: GPU idle {share:share} of the step while the next batch loads",
    fix={
        "single_process": "The DataLoader runs in the training process (num_workers=0).",
        "workers": "Load data in the background: `DataLoader(..., num_workers=N, pin_memory=True, "
        "persistent_workers=True, prefetch_factor=2)` with N around the CPU cores per GPU; move heavy "
        "decoding/augmentation to the GPU or a dedicated pipeline (DALI).",
    },
    thresholds=("dataloader_min_share", *GAP_THRESHOLDS),
)
def dataloader_stall(ctx: Context, fired: Fired) -> list[Hit]:
    """The GPU idle while the host is inside DataLoader calls (typically at step starts), outside
    a per-parameter optimizer step that unfused_optimizer names (the idle inside it is its own)."""
    rows = ctx.dataloader_rows
    if not len(rows):
        return []
    time = gap_time(ctx, dataloader=True).minus(claimed_by(fired, unfused_optimizer.id))
    stall = time.us / ctx.n
    if stall < ctx.th.dataloader_min_share * ctx.step_us:
        return []
    cpu = ctx.tables.cpu
    names = sorted({ctx.names[c] for c in cpu.name[rows]})
    single = any("SingleProcess" in n for n in names)
    evidence = DataloaderStallEvidence(
        ops=names,
        calls_per_step=len(rows) / ctx.n,
        host_us_per_step=float(cpu.dur[rows].sum()) / ctx.n,
        gpu_idle_us_per_step=stall,
        single_process=single,
    )
    fix = ("single_process", "workers") if single else ("workers",)
    return [
        Hit(
            cost_us=stall,
            gain_us=stall,
            evidence=evidence,
            args={"share": stall / ctx.step_us},
            fix=fix,
            time=time,
            change=fixes.host_hidden(
                cpu.ts[rows], cpu.end[rows], "the DataLoader calls hidden (batches loaded ahead by workers)"
            ),
        )
    ]
