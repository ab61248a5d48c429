"""What one device's report says about its MFU besides the figure: the per-step spread, the
rates withheld with an impossible MFU, and what an fp32 run scores against the bf16 peak."""

from __future__ import annotations

from typing import Any

from .. import fmt
from ..flops.detail import FlopsDetail
from ..options import AnalysisOptions
from ..report import WorkerReport
from ..time.aggregate import spread
from . import plausibility
from .mfu import mfu_for
from .peaks import PeakChoice, resolve_peak


def mfu_spread(report: WorkerReport) -> None:
    """The per-step MFU spread (its median is the MFU of the median step), from the steps' MFUs
    the plausibility guard left: a withheld MFU is in no spread."""
    assert report.summary is not None
    mfu_spread = spread(st.mfu for st in report.steps)
    if mfu_spread is not None:
        report.summary.distribution["mfu"] = mfu_spread


def withhold_impossible_rates(report: WorkerReport) -> None:
    """The FLOP/s behind an MFU withheld as impossible is not shown either: its FLOPs (or the step)
    are what made the MFU impossible."""
    if plausibility.IMPOSSIBLE_MFU not in report.flags:
        return
    for m in [report.summary, *report.steps]:
        if m is not None and m.mfu is None:
            m.achieved_flops = None


def note_fp32_peak(
    report: WorkerReport,
    detail: FlopsDetail,
    props: dict[str, Any] | None,
    kernel_names: set[str],
    choice: PeakChoice,
    options: AnalysisOptions,
) -> None:
    """An fp32 run is measured against the CUDA-core fp32 peak, which flatters it: say what
    the same work scores against the bf16 tensor-core peak that the fix would use."""
    mfu = report.summary.mfu if report.summary is not None else None
    if choice.dtype != "fp32" or mfu is None or options.peak_tflops:
        return
    bf16 = resolve_peak(props, kernel_names, "bf16", options)
    if not bf16.peak_flops or not choice.peak_flops or bf16.peak_flops <= choice.peak_flops:
        return
    s = report.summary
    assert s is not None
    at_bf16 = mfu_for(s.flops_per_step, s.step_time_mean_us, bf16.peak_flops)
    if at_bf16 is None:
        return
    detail.mfu_at_bf16_peak = at_bf16
    report.notes.append(
        f"MFU {fmt.pct(mfu)} is against the fp32 CUDA-core peak ({fmt.flop_rate(choice.peak_flops)}) because "
        f"the matmuls ran in fp32; against the bf16 tensor-core peak ({fmt.flop_rate(bf16.peak_flops)}) the "
        f"same work is {fmt.pct(at_bf16)} (see no_tensor_cores: bf16 autocast or TF32)."
    )
