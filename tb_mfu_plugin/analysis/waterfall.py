"""The waterfall: "GPU busy X % but MFU Y %: where the rest goes".

From the step time down to the model FLOPs at peak, each ``loss`` entry removes the time
lost to one cause and each ``subtotal`` is what remains, so ``total - losses = subtotal``
at every level and the last entry (``result``) is MFU x step time. All values are µs per
step: totals over the analysed steps divided by their number (the mean step,
``summary.step_time_us``), so they add up exactly. That is the aggregation of the
summary (``analysis.time.aggregate``: time-weighted shares, mean FLOPs per step) and of MFU, so
each level is the summary's share of the mean step: ``gpu_busy`` = ``gpu_busy_share`` x
step, ``kernels`` = ``kernel_time_share`` x step, ``mfu`` = ``summary.mfu`` x step.

    step time
      - GPU idle: data loading | after syncs | launch gaps | inside graph replays | waiting for host work | other
    = GPU busy
      - copies & memsets with no kernel running
    = kernels running
      - communication kernels (NCCL) with no compute kernel running
      - non-matmul kernels (no matmul/conv kernel running)
    = matmul/conv running
      - low SM efficiency (SMs idle while matmul/conv kernels run: < 1 block per SM)
    = matmul/conv at full SM coverage
      - matmul efficiency (below peak FLOP/s: tile shapes, memory-bound GEMMs, clocks)
    = model FLOPs at peak (MFU x step)        [no value (None) when MFU is unknown or impossible]

Each level is clamped into what remains above it; when the FLOPs at peak exceed the
matmul time (FLOPs counted for work outside matmul kernels, or a wrong peak) the entry is
marked ``clamped`` and the result is the matmul time, not MFU x step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .device_facts import DeviceFacts
from .fmt import template
from .report import BarKind, MfuStatus, WaterfallBar
from .time.idle_gaps import GRAPH, HOST, LAUNCH, OTHER, SYNC

# The idle losses, in the order drawn: (entry id, label, cause of the gaps' time; None: data loading).
_IDLE = (
    ("idle_dataloader", "GPU idle: data loading", None),
    ("idle_sync", "GPU idle: after host-device syncs", SYNC),
    ("idle_launch", "GPU idle: launch gaps (<= {launch_gap_max:time})", LAUNCH),
    ("idle_graph", "GPU idle: between kernels of CUDA graph replays", GRAPH),
    ("idle_host", "GPU idle: waiting for host work", HOST),
    ("idle_other", "GPU idle: other", OTHER),
)


class _Bars:
    """The entries in order, and what remains of the step after the losses so far."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.remaining = step
        self.out: list[WaterfallBar] = []

    def entry(self, id: str, label: str, kind: BarKind, us: float, **extra: Any) -> None:
        """``extra``: the keys only some bars have (``WaterfallBar.group``, ``known``, ``clamped``, ``mfu``)."""
        share = round(us / self.step, 5)
        self.out.append(WaterfallBar(id=id, label=label, kind=kind, us_per_step=round(us, 3), share=share, **extra))

    def loss(self, id: str, label: str, us: float, **extra: Any) -> None:
        """A loss, clamped into what remains above it."""
        us = min(max(0.0, us), self.remaining)
        self.remaining -= us
        self.entry(id, label, "loss", us, **extra)

    def subtotal(self, id: str, label: str) -> None:
        self.entry(id, label, "subtotal", self.remaining)

    def unknown(self, id: str, label: str) -> None:
        """The result bar when it has no value: no µs, no share, no MFU."""
        self.out.append(WaterfallBar(id=id, label=label, kind="result", us_per_step=None, share=None, mfu=None))


def waterfall(ctx: DeviceFacts, mfu: float | None, status: MfuStatus) -> list[WaterfallBar]:
    """The bars of one device's analysed steps (``ctx``: its facts, the idle gaps attributed with the
    analysis' thresholds), down to ``mfu`` x the mean step when ``status`` says the MFU is known."""
    if ctx.n == 0 or ctx.total_us <= 0:
        return []
    bars = _Bars(ctx.step_us)
    bars.entry("step", "Step time", "total", ctx.step_us)
    gaps = ctx.gaps
    launch_max = ctx.view.gap_thresholds.launch_gap_max_us
    for id, label, cause in _IDLE:
        us = float(gaps.dataloader_us.sum()) if cause is None else gaps.total(cause)
        bars.loss(id, template(label, launch_gap_max=launch_max), us / ctx.n, group="idle")
    bars.subtotal("gpu_busy", "GPU busy")
    _busy(ctx, bars)
    _result(bars, mfu, status)
    return bars.out


def _busy(ctx: DeviceFacts, bars: _Bars) -> None:
    """From GPU busy down to matmul/conv at full SM coverage."""
    n, g = ctx.n, ctx.view.gpu
    everything = np.ones(len(g), bool)
    busy = ctx.per_step_union(everything) / n
    kernel = ctx.per_step_union(ctx.is_kernel) / n
    compute = ctx.per_step_union(ctx.is_kernel & ~ctx.comm_code[g.name]) / n
    mm_mask = ctx.is_kernel & ctx.mm_code[g.name]
    matmul = ctx.per_step_union(mm_mask) / n
    bps_full = np.where(np.isnan(ctx.view.bps), 1.0, ctx.view.bps)  # unknown blocks: assume full
    covered = ctx.per_step_coverage(mm_mask, bps_full) / n

    bars.loss("copies", "Copies & memsets with no kernel running", busy - kernel)
    bars.subtotal("kernels", "Kernels running")
    bars.loss("communication", "Communication kernels with no compute running", kernel - compute)
    bars.loss("non_matmul", "Non-matmul kernels (no matmul/conv running)", compute - matmul)
    bars.subtotal("matmul", "Matmul/conv running")
    bars.loss(
        "low_sm_efficiency",
        "Low SM efficiency in matmul/conv (< 1 block per SM)",
        matmul - covered,
        known=bool((~np.isnan(ctx.view.bps[mm_mask])).any()),
    )
    bars.subtotal("matmul_covered", "Matmul/conv at full SM coverage")


def _result(bars: _Bars, mfu: float | None, status: MfuStatus) -> None:
    """The last bar: the model FLOPs at peak, the MFU of the traced steps x the mean traced step (the
    step every bar takes apart; the headline MFU is over the step without the profiler's host cost,
    which the waterfall does not decompose), when MFU is known. When it is unknown or impossible the
    bar has no value (None), never the time left above it."""
    if status.state == "impossible":  # analysis.device.plausibility: never drawn as a figure
        bars.unknown("mfu", "Model FLOPs at peak (MFU impossible: above 100 %)")
    elif status.state == "known" and mfu is not None:
        ideal = mfu * bars.step
        clamped = ideal > bars.remaining
        bars.loss("matmul_efficiency", "Matmul efficiency (below peak FLOP/s)", bars.remaining - ideal)
        shown = float(f"{mfu:.5g}")  # significant digits: a tiny MFU stays a figure, never 0
        bars.entry(
            "mfu", "Model FLOPs at peak (MFU of the traced steps)", "result", bars.remaining, clamped=clamped, mfu=shown
        )
    else:
        bars.unknown("mfu", "Model FLOPs at peak (MFU unknown: no FLOPs or peak)")
