"""Minimum HBM traffic (and arithmetic) of one operator from its recorded shapes.

The roofline needs, per op, the bytes it must move and the FLOPs it does. Bytes are the
**minimum traffic**: every tensor input read once plus every output written once, at its
recorded dtype. That is what an ideal kernel moves; caches can make a real kernel move
less (inputs already in L2), and multi-pass kernels more (see docs/roofline.md).

- Views (``view``, ``t``, ``expand``, ``slice``...) launch no GPU work, so they never
  reach the roofline; the copies under ``reshape``/``contiguous`` are ``copy_`` ops.
- In-place ops (``add_``) read their inputs and write ``self``; ``out=`` variants write
  the ``out`` tensor and do not read it.
- Broadcasting: each input is read at its own size; the output has the broadcast shape.

FLOPs: matmul, conv and attention take theirs from ``flops.FORMULAS`` (FlopCounterMode
convention, the same as MFU). Other ops get a small per-element count (``flops_per_elem``)
only so that they can be placed on the chart; MFU never counts them.

Every formula is data in ``BYTE_FORMULAS``: op name -> ``ByteFormula`` (class + function).
Nothing here imports torch.
"""

from __future__ import annotations

from functools import lru_cache

from ...trace.tables import OpInputs
from ..flops import shapes as F
from ..flops.formulas import Hints
from ..flops.recorded_inputs import parse_inputs
from .formulas import (
    batch_norm_stats,
    cat,
    chunk_cat,
    copy,
    dropout_mask,
    dtype_code_bytes,
    elementwise,
    embedding_backward,
    fill,
    foreach,
    from_flops,
    fused_adam,
    fused_sgd,
    gather_rows,
    half_to_float,
    index_like,
    layer_norm_stats,
    max_pool_bwd,
    max_pool_fwd,
    nll_bwd,
    nll_fwd,
    reduction,
    rw,
    split_copy,
)
from .model import LIST_ELEM_BYTES, ByteFormula, OpCost, elem_bytes

__all__ = [
    "BYTE_FORMULAS",
    "LIST_ELEM_BYTES",
    "OP_CLASSES",
    "ByteFormula",
    "OpCost",
    "elem_bytes",
    "estimate",
    "is_roofline_op",
    "op_bytes",
]

# ---------------------------------------------------------------------------
# the table

_UNARY = elementwise(1)
_BINARY = elementwise(2)
_ADD = elementwise(3)  # add/sub(self, other, alpha)
_CMP = elementwise(2, out_bytes=1)
_SOFTMAX_BWD = rw("softmax", [0], 3.0, write_bytes=dtype_code_bytes(3))

BYTE_FORMULAS: dict[str, ByteFormula] = {name: ByteFormula(f.family, from_flops) for name, f in F.FORMULAS.items()}
for _n in ("add", "sub", "rsub"):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::{_n}{_v}"] = ByteFormula("elementwise", _ADD)
_TERNARY = ("where", "clamp", "hardtanh", "threshold", "masked_fill")
for _n in (
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "fmod",
    "remainder",
    "atan2",
    "leaky_relu",
    "clamp_min",
    "clamp_max",
    *_TERNARY,
):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::{_n}{_v}"] = ByteFormula("elementwise", elementwise(3 if _n in _TERNARY else 2))
for _n in (
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "abs",
    "sign",
    "reciprocal",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "erf",
    "sin",
    "cos",
    "exp2",
    "log1p",
    "expm1",
    "floor",
    "ceil",
    "round",
    "logical_not",
    "mish",
):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::{_n}{_v}"] = ByteFormula("elementwise", elementwise(2 if _n == "gelu" else 1))
for _n in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"):
    BYTE_FORMULAS[f"aten::{_n}"] = ByteFormula("elementwise", _CMP)
for _n in ("addcmul_", "addcdiv_", "lerp_", "addcmul", "addcdiv", "lerp"):
    BYTE_FORMULAS[f"aten::{_n}"] = ByteFormula("elementwise", elementwise(4 if "addc" in _n else 3, 2.0))
for _n in (
    "gelu_backward",
    "silu_backward",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
    "hardtanh_backward",
    "leaky_relu_backward",
    "native_dropout_backward",
):
    BYTE_FORMULAS[f"aten::{_n}"] = ByteFormula("elementwise", rw("elementwise", [0], 2.0))
BYTE_FORMULAS.update(
    {
        "aten::native_dropout": ByteFormula("elementwise", rw("elementwise", [0], 2.0, dropout_mask)),
        # norms: read everything, write y (+ fp32 statistics); backward writes grads like x, w, b
        "aten::native_layer_norm": ByteFormula("norm", rw("norm", [0], 8.0, layer_norm_stats)),
        "aten::native_layer_norm_backward": ByteFormula("norm", rw("norm", [1, 5, 6], 8.0)),
        "aten::_fused_rms_norm": ByteFormula("norm", rw("norm", [0], 5.0)),
        "aten::native_batch_norm": ByteFormula("norm", rw("norm", [0], 8.0, batch_norm_stats)),
        "aten::_native_batch_norm_legit": ByteFormula("norm", rw("norm", [0], 8.0, batch_norm_stats)),
        "aten::cudnn_batch_norm": ByteFormula("norm", rw("norm", [0], 8.0, batch_norm_stats)),
        "aten::native_batch_norm_backward": ByteFormula("norm", rw("norm", [1, 2, 2], 8.0)),
        "aten::cudnn_batch_norm_backward": ByteFormula("norm", rw("norm", [0, 2, 2], 8.0)),
        "aten::native_group_norm": ByteFormula("norm", rw("norm", [0], 8.0)),
        # softmax: y in fp32 when half_to_float; backward writes grad_input in input_dtype
        "aten::_softmax": ByteFormula("softmax", rw("softmax", [0], 5.0, write_bytes=half_to_float)),
        "aten::_log_softmax": ByteFormula("softmax", rw("softmax", [0], 5.0, write_bytes=half_to_float)),
        "aten::_softmax_backward_data": ByteFormula("softmax", _SOFTMAX_BWD),
        "aten::_log_softmax_backward_data": ByteFormula("softmax", _SOFTMAX_BWD),
        # reductions
        "aten::sum": ByteFormula("reduction", reduction(1)),
        "aten::mean": ByteFormula("reduction", reduction(1)),
        "aten::amax": ByteFormula("reduction", reduction(1)),
        "aten::amin": ByteFormula("reduction", reduction(1)),
        "aten::norm": ByteFormula("reduction", reduction(2, 2.0)),
        "aten::linalg_vector_norm": ByteFormula("reduction", reduction(2, 2.0)),
        "aten::var_mean": ByteFormula("reduction", reduction(1, 3.0)),
        "aten::nll_loss_forward": ByteFormula("reduction", nll_fwd),
        "aten::nll_loss_backward": ByteFormula("reduction", nll_bwd),
        # gathers and copies
        "aten::embedding": ByteFormula("embedding", gather_rows),
        "aten::embedding_dense_backward": ByteFormula("embedding", embedding_backward),
        "aten::index_select": ByteFormula("copy", index_like(2)),
        "aten::gather": ByteFormula("copy", index_like(2)),
        "aten::copy_": ByteFormula("copy", copy),
        "aten::fill_": ByteFormula("copy", fill),
        "aten::zero_": ByteFormula("copy", fill),
        "aten::cat": ByteFormula("copy", cat),
        "aten::chunk_cat": ByteFormula("copy", chunk_cat),
        "aten::split_with_sizes_copy": ByteFormula("copy", split_copy),
        # pooling
        "aten::max_pool2d_with_indices": ByteFormula("pooling", max_pool_fwd),
        "aten::max_pool2d_with_indices_backward": ByteFormula("pooling", max_pool_bwd),
        # optimizers
        "aten::_fused_adamw_": ByteFormula("optimizer", fused_adam),
        "aten::_fused_adam_": ByteFormula("optimizer", fused_adam),
        "aten::_fused_sgd_": ByteFormula("optimizer", fused_sgd),
    }
)
for _n, _fl in (
    ("add", 1.0),
    ("sub", 1.0),
    ("mul", 1.0),
    ("div", 1.0),
    ("lerp", 2.0),
    ("addcmul", 2.0),
    ("addcdiv", 2.0),
    ("sqrt", 1.0),
    ("maximum", 1.0),
    ("neg", 1.0),
    ("zero", 0.0),
    ("copy", 0.0),
    ("norm", 2.0),
    ("sign", 1.0),
    ("clamp_min", 1.0),
    ("reciprocal", 1.0),
    ("pow", 1.0),
):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::_foreach_{_n}{_v}"] = ByteFormula("optimizer", foreach(_fl))

OP_CLASSES = tuple(sorted({f.op_class for f in BYTE_FORMULAS.values()}))


def is_roofline_op(name: str) -> bool:
    """Ops with a byte formula (every FLOP-formula op has one): the decoder's shapes to keep."""
    return name in BYTE_FORMULAS


@lru_cache(maxsize=65536)
def _estimate_cached(name: str, dims: bytes | None, types: bytes | None, concrete: bytes | None) -> OpCost | None:
    formula = BYTE_FORMULAS.get(name)
    if formula is None:
        return None
    p = parse_inputs(OpInputs(dims, types, concrete))
    try:
        return formula.fn(p, name)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError):
        return None


def estimate(name: str, inputs: OpInputs, hints: Hints | None = None) -> OpCost | None:
    """Bytes, FLOPs and class of one op from its recorded inputs, or None (no formula, no shapes).

    ``hints`` are the cross-op facts ``conv_hints`` learns for legacy traces (a forward
    conv's output size from its backward), so that FLOPs here equal MFU's."""
    if hints is not None and name in F.FORMULAS:
        try:
            return from_flops(parse_inputs(inputs), name, hints)
        except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError):
            return None
    return _estimate_cached(name, inputs.dims, inputs.types, inputs.concrete)


def op_bytes(name: str, inputs: OpInputs) -> float | None:
    e = estimate(name, inputs)
    return None if e is None else e.bytes
