"""The FLOPs block of a worker's report (``WorkerReport.flops``): how the FLOPs behind MFU
were counted, the peak, and every MFU-like figure besides the headline. ``analysis.device.mfu``
fills it; ``analysis.device.plausibility`` withholds the figures above 100 %.

Units as in ``analysis.report``: FLOPs per step, shares 0-1, TFLOP/s where the name says so.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType


class OpFlopsShare(msgspec.Struct, kw_only=True):
    op: str
    flops_share: float  # of all counted FLOPs


class UnattributedOp(msgspec.Struct, kw_only=True):
    """An op whose kernels ran outside every counted op (no FLOP formula, or no shapes)."""

    op: str
    kernel_us: float
    kernels: int


class PeakFacts(msgspec.Struct, kw_only=True):
    """The peak MFU is measured against and how it was chosen (``analysis.peaks.PeakChoice``).
    The defaults are the unknown peak; ``analysis.device.mfu`` always fills them."""

    name: str | None = None  # the GPU model ("H200 SXM"), None if unknown
    peak_flops: float | None = None
    dtype: str | None = None
    dtype_source: str | None = None  # shapes, kernel names, option, or assumed (PaLM)
    source: str | None = None  # one line: why this peak
    inferred: bool = False  # the GPU model was guessed from kernel names / properties


class ImpossibleValues(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The MFU-like figures that came out above 1, as computed (each key only when it did)."""

    mfu: float | None = None
    steps: dict[str, float] | None = None  # step number -> its MFU
    hfu: float | None = None
    mfu_model: float | None = None
    mfu_user: float | None = None
    mfu_at_bf16_peak: float | None = None
    mfu_at_compute_peak: float | None = None


class Impossible(msgspec.Struct, kw_only=True):
    values: ImpossibleValues
    likely_cause: str  # peak | flops | step
    explanation: str


class FlopsDetail(msgspec.Struct, kw_only=True):
    """How the FLOPs behind MFU were counted, and every MFU-like figure besides the headline
    (``analysis.device.mfu``). Per-step figures are means over the analysed steps."""

    source: str | None  # "shapes", None when the trace gave no FLOPs from shapes
    convention: str  # FlopCounterMode
    flops_per_step: float | None  # the count MFU uses: activation-checkpoint re-runs left out
    executed_flops_per_step: float | None  # every executed FLOP (HFU)
    model_flops_per_step: float | None  # all recompute removed (PaLM)
    attention_recompute_flops_per_step: float
    checkpoint_recompute_flops_per_step: float
    ops_counted: int
    dtype: str | None  # FLOP-weighted compute dtype of the counted ops
    dtype_shares: dict[str, float]  # dtype -> share of counted FLOPs
    by_op: list[OpFlopsShare]
    approximate_share: float  # of FLOPs counted by approximate formulas
    notes: list[str]
    unattributed_kernel_us: float
    unattributed_kernel_share: float | None  # of kernel time; None without kernel time
    unattributed_top: list[UnattributedOp]
    # The rest is filled after the count, from the headline choice and the peak.
    headline_source: str | None = None  # where the FLOPs of the headline MFU come from
    hfu: float | None = None
    mfu_model: float | None = None
    user_flops_per_step: float | None = None
    user_flops_source: str | None = None
    mfu_user: float | None = None
    achieved_tflops_while_busy: float | None = None
    peak: PeakFacts = msgspec.field(default_factory=PeakFacts)
    kernel_dtype: str | None = None  # the dominant dtype of the matmul kernel names
    kernel_dtype_shares: dict[str, float] = {}  # matmul kernel time per dtype ("unknown": none named)
    # Keys present only when they apply (UNSET is left out of the JSON, None is written): the MFU of
    # an fp8/fp4 run against the bf16 peak; the MFU of an fp32/TF32 run against the peak of the units
    # it ran on (compute_peak: the fp32 CUDA-core or TF32 peak); the figures above 100 %.
    mfu_at_bf16_peak: float | None | UnsetType = UNSET
    mfu_at_compute_peak: float | None | UnsetType = UNSET
    compute_peak: PeakFacts | UnsetType = UNSET
    impossible: Impossible | UnsetType = UNSET
