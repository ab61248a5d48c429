"""Figures as the terminal shows them: durations, sizes, shares, FLOPs, the kernel's unit.

Plain strings (no rich), so ``cli`` can word a message without loading the tables. Each
function writes a figure as the tab's ``frontend/src/format.ts`` function of the same name does,
so the CLI, the tab and the offline page show one figure as one string
(tests/e2e/test_faces.py checks it on the samples).
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

from .analysis.report import KernelStats, Summary, WorkerReport

NA = "n/a"  # an unknown figure, as the tab's format.ts writes it
IMPOSSIBLE = "impossible (>100 %)"


def _fixed(x: float, digits: int) -> str:
    """``x`` with ``digits`` decimals and thousands separators, rounded as the tab's
    ``toLocaleString('en-US')`` rounds: half away from zero, on the shortest decimal that reads
    back as ``x`` (so 12.25 gives 12.3 on both faces, where ``format`` would give 12.2)."""
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{q:,.{digits}f}"


def pct(x: float | None, digits: int | None = None) -> str:
    """A share (0-1) or an MFU as a percentage: one decimal, two under 1 % (format.ts ``pct``)."""
    if x is None or not math.isfinite(x):
        return NA
    # a share or MFU above 100 % is never printed as a figure (analysis.plausibility)
    if x > 1.0 + 1e-6:
        return IMPOSSIBLE
    v = 100 * x
    d = digits if digits is not None else (1 if abs(v) >= 1 or v == 0 else 2)
    return f"{_fixed(v, d)} %"


def mfu_shown(s: Summary | None, flags: list[str]) -> str:
    """MFU, or "impossible" where the analysis found it above 100 % and withheld it."""
    if s is not None and s.mfu is None and "impossible_mfu" in flags:
        return "impossible"
    return pct(s.mfu if s is not None else None)


def mfu_text(w: WorkerReport) -> str:
    """A worker's MFU as ``mfu_shown`` writes it."""
    return mfu_shown(w.summary, w.flags)


_CORE_SHORT = {"tensor-core": "TC", "cuda-core": "CUDA", "unknown": "?", "not-a-matmul": ""}


def core_unit(k: KernelStats) -> str:
    """Top-kernels cell: TC / CUDA / ? (a GEMM of unknown class) and the dtype the name gives."""
    short = _CORE_SHORT.get(k.core or "", "TC" if k.tensor_core else "")
    return f"{short} {k.dtype}" if short and k.dtype else short


def dur(x: float | None) -> str:
    """A duration given in µs, in ns, µs, ms or s (format.ts ``dur``)."""
    if x is None or not math.isfinite(x):
        return NA
    a = abs(x)
    if a < 1:
        return f"{_fixed(x * 1000, 0)} ns"
    if a < 1000:
        return f"{_fixed(x, 2 if a < 10 else 1 if a < 100 else 0)} µs"
    if a < 1e6:
        return f"{_fixed(x / 1000, 2 if a < 1e4 else 1)} ms"
    return f"{_fixed(x / 1e6, 2)} s"


us = dur  # the name the tables were written with


def ms(x: float | None, digits: int = 2) -> str:
    """A duration given in µs, always in ms (format.ts ``ms``: the step time's headline)."""
    if x is None or not math.isfinite(x):
        return NA
    return f"{_fixed(x / 1000, digits)} ms"


def nbytes(x: float | None) -> str:
    """A byte count in decimal units, 1 MB = 1e6 B (format.ts ``bytes``)."""
    if x is None or not math.isfinite(x):
        return NA
    if abs(x) < 1000:
        return f"{_fixed(x, 0)} B"
    v, unit = x / 1000, "kB"
    for bigger in ("MB", "GB", "TB", "PB"):
        if abs(v) < 1000:
            break
        v, unit = v / 1000, bigger
    return f"{_fixed(v, 2 if abs(v) < 10 else 1 if abs(v) < 100 else 0)} {unit}"


def flops(x: float | None) -> str:
    """A FLOP count in FLOP, MFLOP, GFLOP, TFLOP or PFLOP (format.ts ``flops``)."""
    if x is None or not math.isfinite(x):
        return NA
    a = abs(x)
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if a >= scale:
            return f"{_fixed(x / scale, 2)} {unit}"
    return f"{_fixed(x, 0)} FLOP"


tflop = flops  # the name the tables were written with
