"""What one device's report says about its MFU besides the figure: what an fp32 run scores
against the bf16 tensor-core peak."""

from __future__ import annotations

from .. import fmt
from ..options import AnalysisOptions
from .mfu import mfu_for
from .mfu_peak import MfuPeak
from .peaks import PeakChoice, resolve_peak


def fp32_peak_note(
    mfu: float | None,
    flops_per_step: float | None,
    step_us: float | None,
    peak: MfuPeak,
    choice: PeakChoice,
    options: AnalysisOptions,
) -> tuple[float, str] | None:
    """An fp32 run is measured against the CUDA-core fp32 peak, which flatters it: the same work's
    MFU against the bf16 tensor-core peak that the fix would use, and the note that says so; None
    where that does not apply (another dtype, an unknown MFU, the user's own peak)."""
    if choice.dtype != "fp32" or mfu is None or options.peak_tflops:
        return None
    bf16 = resolve_peak(peak.props, peak.kernel_names, "bf16", options)
    if not bf16.peak_flops or not choice.peak_flops or bf16.peak_flops <= choice.peak_flops:
        return None
    at_bf16 = mfu_for(flops_per_step, step_us, bf16.peak_flops)
    if at_bf16 is None:
        return None
    return at_bf16, (
        f"MFU {fmt.pct(mfu)} is against the fp32 CUDA-core peak ({fmt.flop_rate(choice.peak_flops)}) because "
        f"the matmuls ran in fp32; against the bf16 tensor-core peak ({fmt.flop_rate(bf16.peak_flops)}) the "
        f"same work is {fmt.pct(at_bf16)} (see no_tensor_cores: bf16 autocast or TF32)."
    )
