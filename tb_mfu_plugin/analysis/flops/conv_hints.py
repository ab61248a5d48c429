"""Cross-op hints for the convolutions of legacy traces (torch <= 1.10, no Concrete Inputs).

Such traces record neither a forward conv's stride and padding nor a conv backward's
``output_mask``. Other ops of the same trace tell them: a conv backward's grad_output has the
forward's output size, and a legacy ``cudnn_convolution_backward`` computed grad_input exactly
when a ``*_backward_input`` child runs inside it. The FLOP count and the roofline pass these to
the formulas as ``flop_formulas.Hints``.
"""

from __future__ import annotations

import numpy as np

from ...trace.tables import OP, TraceTables
from ..time import nesting
from ..time.nesting import ThreadAxis
from . import shapes as F
from .recorded_inputs import parse_inputs

ConvKey = tuple[tuple[int, ...], tuple[int, ...]]


def conv_out_hints(tables: TraceTables, frows: np.ndarray) -> dict[ConvKey, tuple[int, ...]]:
    """(input dims, weight dims) -> output spatial, from the conv backward ops among ``frows``,
    when the trace records no Concrete Inputs for forward convs (legacy traces)."""
    if not _forward_convs_lack_concrete(tables, frows):
        return {}
    c, names = tables.cpu, tables.names
    seen: dict[ConvKey, tuple[int, ...] | None] = {}
    for r in frows.tolist():
        idx = F.CONV_BACKWARD_DIMS.get(names[c.name[r]])
        inp = c.inputs_at(r)
        if idx is None or inp is None:
            continue
        p = parse_inputs(inp)
        go, x, w = p.shape(idx[0]), p.shape(idx[1]), p.shape(idx[2])
        if go is None or x is None or w is None:
            continue
        key = (tuple(x), tuple(w))
        val = tuple(go[2:])
        if key in seen and seen[key] != val:
            seen[key] = None  # ambiguous: two convs with the same shapes, different strides
        else:
            seen.setdefault(key, val)
    return {k: v for k, v in seen.items() if v is not None}


def _forward_convs_lack_concrete(tables: TraceTables, frows: np.ndarray) -> bool:
    """Whether the first forward conv among ``frows`` was recorded without Concrete Inputs."""
    c, names = tables.cpu, tables.names
    for r in frows.tolist():
        if names[c.name[r]] in F.CONV_FORWARD:
            inp = c.inputs_at(r)
            return inp is not None and not inp.concrete
    return False


def _codes_of(tables: TraceTables, name: str) -> np.ndarray:
    """The codes of ``name`` (a cut long name may repeat), the step markers asked once."""
    return np.flatnonzero(tables.name_codes(name.__eq__))


def legacy_grad_input_hints(tables: TraceTables, ax: ThreadAxis, frows: np.ndarray) -> dict[int, bool]:
    """For the legacy ``cudnn_convolution_backward`` rows among ``frows``: was grad_input computed?"""
    c = tables.cpu
    codes = _codes_of(tables, F.LEGACY_CONV_BACKWARD)
    if not len(codes):
        return {}
    parents = frows[np.isin(c.name[frows], codes)]
    child_codes = _codes_of(tables, F.LEGACY_CONV_BACKWARD_INPUT)
    children = np.nonzero(np.isin(c.name, child_codes) & (c.kind == OP))[0]
    pts = np.sort(ax.g0[children])
    has = nesting.contains_point(ax.g0[parents], ax.g1[parents], pts, ax.tol)
    return dict(zip(parents.tolist(), has.tolist(), strict=True))
