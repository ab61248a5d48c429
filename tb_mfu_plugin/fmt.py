"""Figures as the terminal shows them: durations, sizes, shares, FLOPs, the kernel's unit.

Plain strings (no rich), so ``cli`` can word a message without loading the tables.
"""

from __future__ import annotations

from .analysis.report import KernelStats, WorkerReport


def pct(x: float | None) -> str:
    """A share (0-1) or an MFU as a percentage."""
    if x is None:
        return "n/a"
    # a share or MFU above 100 % is never printed as a figure (analysis.plausibility)
    return "impossible (>100 %)" if x > 1.0 + 1e-6 else f"{100 * x:.1f} %"


def mfu_text(w: WorkerReport) -> str:
    """MFU, or "impossible" where the analysis found it above 100 % and withheld it."""
    if w.summary is not None and w.summary.mfu is None and "impossible_mfu" in w.flags:
        return "impossible"
    return pct(w.summary.mfu if w.summary is not None else None)


_CORE_SHORT = {"tensor-core": "TC", "cuda-core": "CUDA", "unknown": "?", "not-a-matmul": ""}


def core_unit(k: KernelStats) -> str:
    """Top-kernels cell: TC / CUDA / ? (a GEMM of unknown class) and the dtype the name gives."""
    short = _CORE_SHORT.get(k.core or "", "TC" if k.tensor_core else "")
    return f"{short} {k.dtype}" if short and k.dtype else short


def us(x: float | None) -> str:
    """A duration given in µs, in µs, ms or s."""
    if x is None:
        return "n/a"
    if x >= 1e6:
        return f"{x / 1e6:.2f} s"
    if x >= 1e3:
        return f"{x / 1e3:.2f} ms"
    return f"{x:.1f} µs"


def nbytes(x: float | None) -> str:
    """A byte count in B, KB, MB or GB (powers of 1000)."""
    if x is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"


def tflop(x: float | None) -> str:
    """FLOPs in TFLOP."""
    return "n/a" if x is None else f"{x / 1e12:.3f} TFLOP"
