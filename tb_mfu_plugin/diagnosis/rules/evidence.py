"""Evidence that several rules show: the kernels behind a finding, by time per step."""

from __future__ import annotations

import numpy as np

from ...analysis.evidence import KernelRow
from ...analysis.flops.unshaped import compiled_regions
from ...core.distinct import distinct_inverse
from ..context import Context


def compiled(ctx: Context) -> bool:
    """Whether the host recorded torch.compile regions: a fix must not tell such a run to compile
    (it does), only what it leaves out (graph breaks, eager code) or another mode."""
    return bool(compiled_regions(ctx.tables))


def kernel_totals(
    ctx: Context, mask: np.ndarray, limit: int = 5, weights: np.ndarray | None = None
) -> list[tuple[int, float, float, float]]:
    """The kernels (by name) in ``mask``, by time per step: (name code, count per step, µs per step,
    ``weights`` per step: 0 without them)."""
    g = ctx.view.gpu
    rows = np.flatnonzero(mask)
    if not len(rows):
        return []
    codes, inv = distinct_inverse(g.name[rows])
    t = np.bincount(inv, weights=g.dur[rows])
    c = np.bincount(inv)
    extra = np.bincount(inv, weights=weights[rows]) if weights is not None else np.zeros(len(codes))
    return [
        (int(codes[k]), c[k] / ctx.n, t[k] / ctx.n, extra[k] / ctx.n)
        for k in np.argsort(-t, kind="stable")[:limit].tolist()
    ]


def top_kernels(ctx: Context, mask: np.ndarray, limit: int = 5) -> list[KernelRow]:
    """The kernels (by name) in ``mask``, by time per step."""
    return [
        KernelRow(name=ctx.names[code], count_per_step=n, us_per_step=us)
        for code, n, us, _ in kernel_totals(ctx, mask, limit)
    ]
