"""Activation checkpointing: which forward ops re-run inside backward.

A forward op is taken as recompute when it runs inside a *built-in* autograd node (numbered
names such as ``AddmmBackward0``, where non-reentrant checkpointing unpacks and recomputes) or
the reentrant ``CheckpointFunctionBackward`` node, *and* either is a forward conv/attention op
or sits under a forward-only composite op (``aten::linear``, ``aten::matmul``,
``aten::einsum``, ``aten::conv2d``, ``aten::scaled_dot_product_attention``...). Built-in
backward formulas call ``mm``/``bmm``/``convolution_backward`` directly, never those
composites, so genuine backward math is not flagged. Custom ``autograd.Function``,
TorchScript and compiled backward nodes may use ``matmul`` legitimately and are not treated as
recompute; recompute inside a ``torch.compile``d backward (min-cut partitioner) is invisible
in the trace and is not detected.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace.tables import TraceTables
from ..kernels.name_patterns import op_rows_named
from ..time import nesting
from ..time.nesting import ThreadAxis

# Ops that run forward math and that autograd backward formulas never call.
FORWARD_COMPOSITES = frozenset(
    {
        "aten::linear",
        "aten::matmul",
        "aten::einsum",
        "aten::bilinear",
        "aten::tensordot",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::conv_transpose3d",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_attention_math",
    }
)
# Built-in autograd nodes are generated with a numbered name (AddmmBackward0); their
# formulas never call the forward composites. Custom Functions (MyOpBackward),
# TorchScript (DifferentiableGraphBackward) and compiled graphs (CompiledFunctionBackward)
# may, legitimately, so only the reentrant checkpoint's node joins them.
_BACKWARD_NODE = re.compile(r"Backward\d+$|Checkpoint\w*Backward")


def is_backward_node(name: str) -> bool:
    """Autograd nodes inside which a forward composite op can only be recompute."""
    return bool(_BACKWARD_NODE.search(name))


def checkpoint_recompute(
    tables: TraceTables, ax: ThreadAxis, c0: np.ndarray, c1: np.ndarray, forward: np.ndarray, family: np.ndarray
) -> np.ndarray:
    """Which counted ops ``[c0, c1]`` (on the axis) are forward work re-run by checkpointing.

    ``forward`` and ``family`` are per counted op: a forward formula, and its family.
    """
    ckpt = np.zeros(len(c0), bool)
    if not forward.any():
        return ckpt
    bmask = op_rows_named(tables, is_backward_node)
    if not bmask.any():
        return ckpt
    tol = ax.tol
    _, b0, b1 = nesting.sorted_set(ax, np.nonzero(bmask)[0])
    a_rows = np.nonzero(op_rows_named(tables, lambda s: s in FORWARD_COMPOSITES))[0]
    a_in_b = a_rows[nesting.inside_any(ax.g0[a_rows], ax.g1[a_rows], b0, b1, tol)]
    _, a0, a1 = nesting.sorted_set(ax, a_in_b)
    in_b = nesting.inside_any(c0, c1, b0, b1, tol)
    in_a = nesting.inside_any(c0, c1, a0, a1, tol)
    return np.asarray(forward & in_b & (in_a | (family == "conv") | (family == "attention")))
