"""Which data type's peak MFU is measured against.

The rule, in order:

1. **Shapes.** The FLOP-weighted dtype of the counted ops (``OpFlops.dominant_dtype()``),
   when shapes were recorded. fp32 ops whose kernels run TF32 (``tf32`` tokens, or nvjet
   ``s`` codes, outweighing the FFMA kernels) use the TF32 peak.
2. **Kernel names.** Without shapes (FLOPs from ``--flops-per-step`` or ``tb_mfu.json``), the
   dtype tokens of the matmul kernels (``analysis.kernels.families``), weighted by kernel time.
3. **Assumed.** Neither: the dense bf16 tensor-core peak (``peaks.ASSUMED_DTYPE``), the PaLM
   convention, and the peak's source says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.distinct import distinct_inverse
from ..fmt import pct
from ..kernels import families as kf


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str | None  # None: unknown, the peak falls back to the assumed bf16
    source: str  # shapes, kernel names, or assumed
    how: str  # the same, with the evidence, for the peak's source line
    kernel_dtype: str | None  # the kernel names' dominant dtype, whatever was chosen
    kernel_shares: dict[str, float]  # matmul kernel time per dtype ("unknown" when the name gives none)


def kernel_dtype_shares(codes: np.ndarray, durations: np.ndarray, classes: kf.NameClasses) -> dict[str, float]:
    """Matmul kernel time per dtype; ``codes``/``durations``: the kernel rows of the analysed steps."""
    if not len(codes):
        return {}
    uniq, inv = distinct_inverse(codes)
    per_name = np.bincount(inv, weights=durations)
    return kf.dtype_shares(uniq.tolist(), per_name.tolist(), classes)


def choose_dtype(shape_dtype: str | None, kernel_shares: dict[str, float]) -> DtypeChoice:
    kdtype = kf.dominant_dtype(kernel_shares)
    if shape_dtype and shape_dtype != "unknown":
        if shape_dtype == "fp32" and kernel_shares.get("tf32", 0.0) > kernel_shares.get("fp32", 0.0):
            share = kernel_shares["tf32"]
            how = f"shapes (fp32 inputs) and TF32 kernels ({pct(share)} of matmul kernel time)"
            return DtypeChoice("tf32", "shapes", how, kdtype, kernel_shares)
        return DtypeChoice(shape_dtype, "shapes", "shapes", kdtype, kernel_shares)
    if kdtype is not None:
        share = kernel_shares[kdtype]
        how = f"kernel names ({pct(share)} of matmul kernel time)"
        return DtypeChoice(kdtype, "kernel names", how, kdtype, kernel_shares)
    return DtypeChoice(None, "assumed", "assumed", None, kernel_shares)
