"""``no_tensor_cores``: matmul / conv time in kernels shown to run off the tensor cores."""

from __future__ import annotations

import numpy as np

from ...analysis.critical_path.whatif import Change
from ...analysis.evidence.kernels import NoTensorCoresEvidence, TensorCoreKernelRow
from ...analysis.kernels import families as kf
from ...core.distinct import distinct
from .. import fixes
from ..context import Context
from ..cost_time import rows_time
from ..registry import Hit, rule
from .evidence import kernel_totals

# Dtypes that already run at a tensor-core data width: a bf16 GEMV on the CUDA cores is
# memory-bound by shape, and autocast or TF32 would not change it.
_NARROW = frozenset({"bf16", "fp16", "fp8", "fp4", "int8"})


def _no_tc_evidence(ctx: Context) -> tuple[np.ndarray, list[str]]:
    """Kernel rows that are positive evidence of matmul math off the tensor cores, and why.

    - CUDA-core matmul/conv kernels by name (FFMA, SIMT, SGEMM, scudnn, Winograd, GEMV), unless
      their dtype is already 16-bit or narrower;
    - GEMM-like kernels of unknown class, only when the recorded matmul inputs are all fp32 and no
      kernel of the run shows TF32 (fp32 inputs without TF32 run on CUDA cores).
    A kernel the table does not know is never evidence by itself.
    """
    g, cls = ctx.view.gpu, ctx.classes
    code = cls.core[g.name]
    base = ctx.is_kernel & ctx.in_step
    narrow = np.fromiter((d in _NARROW for d in cls.dtype), bool, len(cls.dtype))
    rows = base & (code == kf.CODE[kf.CUDA_CORE]) & ~narrow[g.name]
    basis = ["CUDA-core kernel names (FFMA/SIMT/SGEMM/scudnn/Winograd/GEMV)"] if rows.any() else []
    unknown = base & (code == kf.CODE[kf.UNKNOWN])
    types = ctx.matmul_input_dtypes
    kernel_codes = distinct(g.name[ctx.is_kernel])
    tf32 = any(cls.dtype[int(c)] == "tf32" for c in kernel_codes)
    if unknown.any() and types and set(types) == {"float"} and not tf32:
        rows = rows | unknown
        basis.append("fp32 matmul inputs (Input type) with no TF32 kernel in the run")
    return rows, basis


def _kernels(ctx: Context, rows: np.ndarray) -> list[TensorCoreKernelRow]:
    """The evidence kernels, each with its class, dtype and family (the table entry that matched)."""
    cls = ctx.classes
    return [
        TensorCoreKernelRow(
            name=ctx.names[code],
            count_per_step=n,
            us_per_step=us,
            core_class=kf.CLASSES[cls.core[code]],
            dtype=cls.dtype[code],
            family=cls.family[code],
        )
        for code, n, us, _ in kernel_totals(ctx, rows)
    ]


def _before_ampere(cc: str | None) -> bool:
    """Compute capability below 8.0: no TF32 or bf16 tensor cores."""
    try:
        major = float(cc) if cc else None
    except ValueError:
        major = None
    return major is not None and major < 8.0


@rule(
    title="No tensor cores: {share:share} of matmul/conv time runs on CUDA cores",
    fix={
        "fp16": "Run matmuls and convolutions in fp16 on the tensor cores: `with torch.autocast('cuda', "
        "dtype=torch.float16):` around the forward pass plus `torch.amp.GradScaler('cuda')` (this GPU has "
        "no TF32 or bf16 tensor cores).",
        "bf16": "Use the tensor cores: `with torch.autocast('cuda', dtype=torch.bfloat16):` around the forward "
        "pass, or at least TF32 for fp32 math: `torch.backends.cuda.matmul.allow_tf32 = True` and "
        "`torch.backends.cudnn.allow_tf32 = True` (or `torch.set_float32_matmul_precision('high')`).",
    },
    note="gain: that time x (1 - 1/{speedup:g}), a conservative tensor-core speed-up; "
    "kernels the family table does not know (unknown) are not counted unless the inputs are fp32",
    thresholds=("no_tc_min_share", "tensor_core_speedup"),
)
def no_tensor_cores(ctx: Context) -> list[Hit]:
    """Matmul / conv time in kernels shown to run off the tensor cores (fp32 without TF32 or AMP)."""
    th, g = ctx.th, ctx.view.gpu
    non_tc, basis = _no_tc_evidence(ctx)
    time = float(g.dur[non_tc].sum()) / ctx.n
    if time <= 0 or time < th.no_tc_min_share * ctx.step_us:
        return []
    code = ctx.classes.core[g.name]
    mm = ctx.is_kernel & ctx.in_step & (code != kf.CODE[kf.NOT_MATMUL])
    mm_time = float(g.dur[mm].sum()) / ctx.n
    unknown_time = float(g.dur[mm & (code == kf.CODE[kf.UNKNOWN])].sum()) / ctx.n
    cc = ctx.report.device.compute_capability if ctx.report.device else None
    evidence = NoTensorCoresEvidence(
        non_tensor_core_us_per_step=time,
        matmul_conv_us_per_step=mm_time,
        non_tensor_core_share_of_matmul=time / mm_time if mm_time > 0 else None,
        unknown_core_us_per_step=unknown_time,
        basis=basis,
        compute_capability=cc,
        matmul_input_types=ctx.matmul_input_dtypes,
        kernels=_kernels(ctx, non_tc),
    )
    return [
        Hit(
            cost_us=time,
            gain_us=time * (1.0 - 1.0 / th.tensor_core_speedup),
            evidence=evidence,
            args={"share": time / max(mm_time, 1e-9), "speedup": th.tensor_core_speedup},
            fix=("fp16" if _before_ampere(cc) else "bf16",),
            time=rows_time(ctx, non_tc),
            change=_change(ctx, non_tc),
        )
    ]


def _change(ctx: Context, rows: np.ndarray) -> Change:
    factor, basis = fixes.tensor_core_factor(ctx, ctx.th.tensor_core_speedup)
    return fixes.scaled(
        rows, factor, f"the fp32 matmul kernels on the 16-bit tensor cores at their share of the peak ({basis})"
    )
