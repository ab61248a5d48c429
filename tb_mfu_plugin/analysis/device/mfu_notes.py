"""What one device's report says about its MFU besides the figure: the MFU against a second peak,
named for it. MFU is against the dense 16-bit tensor-core peak (``peaks.MFU_DTYPE``, PaLM's
convention); an fp32 or TF32 run also gets its MFU against the peak of the units it ran on (the fp32
CUDA-core or TF32 peak), and an fp8 or fp4 run its MFU against the bf16 peak, to compare with bf16 runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import fmt
from ..options import AnalysisOptions
from .mfu import mfu_for
from .mfu_peak import MfuPeak
from .peaks import PeakChoice, peak_at


@dataclass(frozen=True)
class SecondMfu:
    """The MFU against a second peak, that peak, and the note that names both."""

    mfu: float
    peak: PeakChoice
    against: str  # "compute" (the units the run computed on) or "bf16" (an fp8/fp4 run against bf16)
    note: str


def second_mfu(
    mfu: float | None,
    flops_per_step: float | None,
    step_us: float | None,
    peak: MfuPeak,
    choice: PeakChoice,
    options: AnalysisOptions,
) -> SecondMfu | None:
    """The second, named MFU of a run that computes in another dtype than its MFU's peak; None where
    none applies (a 16-bit run, an unknown MFU, the user's own peak)."""
    compute = peak.dtype.dtype
    if mfu is None or options.peak_tflops or compute is None:
        return None
    if compute in ("fp32", "tf32") and choice.dtype in ("bf16", "fp16"):
        units = "tf32" if compute == "tf32" or options.tf32 else "fp32"
        other = peak_at(peak.props, peak.kernel_names, units, options)
        at = mfu_for(flops_per_step, step_us, other.peak_flops)
        if at is None or other.dtype != units:
            return None
        where = "CUDA-core" if units == "fp32" else "TF32 tensor-core"
        return SecondMfu(
            at,
            other,
            "compute",
            (
                f"MFU {fmt.pct(mfu)} is against the dense {choice.dtype} tensor-core peak "
                f"({fmt.flop_rate(choice.peak_flops)}), the convention of PaLM, torchtitan and Megatron; the "
                f"matmuls ran in {compute} on the {where} units, whose peak ({fmt.flop_rate(other.peak_flops)}) "
                f"this work reaches {fmt.pct(at)} of (see no_tensor_cores: bf16 autocast)."
            ),
        )
    if choice.dtype in ("fp8", "fp4"):
        bf16 = peak_at(peak.props, peak.kernel_names, "bf16", options)
        at = mfu_for(flops_per_step, step_us, bf16.peak_flops)
        if at is None or bf16.dtype not in ("bf16", "fp16"):
            return None
        return SecondMfu(
            at,
            bf16,
            "bf16",
            (
                f"MFU {fmt.pct(mfu)} is against the dense {choice.dtype} peak ({fmt.flop_rate(choice.peak_flops)}), "
                f"the dtype the matmuls ran in; against the bf16 peak ({fmt.flop_rate(bf16.peak_flops)}), as bf16 "
                f"runs are measured, the same work is {fmt.pct(at)}."
            ),
        )
    return None


# Analysed steps this far apart (the longest over the shortest) are not one steady state: the bar the
# recorded truths are held to (a side whose p90 over p10 passes 1.25 is marked unsteady,
# benchmarks/bench_whatif_pairs.STEADY_SPREAD). Of 70 traced truth runs, only the ninth H100 host's two
# Lightning traces pass it (1.38 and 1.45), and their mean read 26-31 % below the truth.
UNEVEN_STEPS = 1.25


def uneven_steps_note(dur_us: list[float]) -> str | None:
    """Why the headline's likely range is wide where the analysed steps ran far apart; None where they
    did not."""
    short, long = min(dur_us, default=0.0), max(dur_us, default=0.0)
    if short <= 0 or long / short <= UNEVEN_STEPS:
        return None
    return (
        f"The analysed steps ran {fmt.us(short)}–{fmt.us(long)}, {long / short:.2f}× apart: the headline MFU "
        "is over their mean, and its likely range reaches the fastest step's, since the profiler's cost "
        "can differ from step to step."
    )


# Work inherited from before the trace is named where it is worth a note: a share of the step it would
# have added to every step's mean without the profiler (FlexAttention's first step on two H100 hosts:
# 2.7 and 3.3 ms over three steps of 13.3-13.5, docs/mfu.md section 6).
CARRIED_NOTE_SHARE = 0.01


def carried_work_note(ops: int, us: float, step_us: float | None) -> str | None:
    """Why the step without the profiler leaves out kernels the first analysed step ran; None where
    there were none worth a note."""
    if ops <= 0 or not step_us or us < CARRIED_NOTE_SHARE * step_us:
        return None
    return (
        f"The first analysed step began with {ops} GPU op{'s' if ops != 1 else ''} ({fmt.us(us)}) that a step "
        "before it had put in the queue: the step without the profiler leaves them out, as in the steady "
        "state the last step leaves as much work to the next one."
    )
