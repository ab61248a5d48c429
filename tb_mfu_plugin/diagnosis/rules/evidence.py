"""Evidence that several rules show: the kernels behind a finding, by time per step."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.distinct import distinct_inverse
from ..context import Context


def top_kernels(
    ctx: Context, mask: np.ndarray, limit: int = 5, weights: np.ndarray | None = None
) -> list[dict[str, Any]]:
    """The kernels (by name) in ``mask``, by time per step; ``weighted``: ``weights`` per step."""
    g = ctx.view.gpu
    rows = np.flatnonzero(mask)
    if not len(rows):
        return []
    codes, inv = distinct_inverse(g.name[rows])
    t = np.bincount(inv, weights=g.dur[rows])
    c = np.bincount(inv)
    extra = np.bincount(inv, weights=weights[rows]) if weights is not None else None
    out = []
    for k in np.argsort(-t, kind="stable")[:limit]:
        d: dict[str, Any] = {
            "name": ctx.names[codes[k]],
            "count_per_step": c[k] / ctx.n,
            "us_per_step": t[k] / ctx.n,
        }
        if extra is not None:
            d["weighted"] = extra[k] / ctx.n
        out.append(d)
    return out
