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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import prod

from ..trace.tables import OpInputs
from . import flops as F
from .flops import Parsed, parse_inputs

# Tensor-list dtypes are not recorded (the type reads "TensorList"): assume fp32, the
# dtype of AMP master weights, gradients and optimizer states. Estimates using it are inexact.
LIST_ELEM_BYTES = 4

_ELEM_BYTES: dict[str, int] = {
    "c10::bfloat16": 2, "bfloat16": 2, "c10::half": 2, "half": 2, "float": 4, "float32": 4,
    "double": 8, "float64": 8, "long int": 8, "int64_t": 8, "long": 8, "int": 4, "int32": 4,
    "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "int8": 1, "uint8": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::half>": 4,
}
# c10::ScalarType codes, as recorded in Concrete Inputs (softmax backward's input_dtype)
_SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}


def elem_bytes(type_name: str | None) -> int | None:
    """Bytes per element of a recorded ``Input type`` (``"c10::BFloat16"`` -> 2), None if unknown."""
    if not type_name:
        return None
    t = type_name.lower()
    got = _ELEM_BYTES.get(t)
    if got is not None:
        return got
    if "float8" in t:
        return 1
    if "float4" in t:
        return 1  # two e2m1 values per byte; packed tensors record the byte count as elements
    return None


@dataclass(frozen=True)
class OpCost:
    bytes: float  # minimum HBM traffic
    flops: float
    op_class: str
    dtype: str | None = None
    exact: bool = True  # False when an assumption was needed (tensor-list dtype, conv output...)


ByteFn = Callable[[Parsed, str], "OpCost | None"]


@dataclass(frozen=True)
class ByteFormula:
    op_class: str  # elementwise | reduction | norm | softmax | embedding | copy | pooling | ...
    fn: ByteFn


# ---------------------------------------------------------------------------
# tensor helpers


def _is_tensor(p: Parsed, i: int) -> bool:
    return p.shape(i) is not None and (i >= len(p.types) or p.types[i] not in ("TensorList", "Scalar"))


def _numel(shape: Sequence[int]) -> int:
    return prod(shape) if shape else 1


def _size(p: Parsed, i: int, default: int = 4) -> int:
    got = elem_bytes(p.types[i]) if i < len(p.types) else None
    return got if got is not None else default


def _tbytes(p: Parsed, i: int) -> int:
    """Bytes of tensor argument ``i`` (0 when it is not a tensor with known dims)."""
    s = p.shape(i)
    return _numel(s) * _size(p, i) if s is not None else 0


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for k, d in enumerate(s):
            j = n - len(s) + k
            if out[j] == 1:
                out[j] = d
            elif d not in (1, out[j]):
                return None
    return out


def _tensor_list(p: Parsed, i: int) -> list[list[int]] | None:
    """Shapes of a recorded TensorList argument; None when the list was not recorded.

    The profiler writes long lists as ``[]`` (observed on torch 2.11 for the ~60-tensor
    lists of a GPT's fused AdamW); a list of 0-dim tensors is ``[[], [], ...]``.
    """
    if i >= len(p.dims):
        return None
    d = p.dims[i]
    if not isinstance(d, list) or not d or not all(isinstance(x, list) for x in d):
        return None
    if not all(all(isinstance(v, int) for v in x) for x in d):
        return None
    return d


def _list_numel(shapes: list[list[int]] | None) -> int:
    return sum(_numel(s) for s in shapes) if shapes else 0


# ---------------------------------------------------------------------------
# elementwise


def _elementwise(arity: int, flops_per_elem: float = 1.0, out_bytes: int | None = None) -> ByteFn:
    """Pointwise op with ``arity`` functional arguments (``add(self, other, alpha)``: 3).

    ``name_`` is in-place (writes ``self``); more than ``arity`` args ending in a tensor
    is the ``out=`` variant (writes ``out``, does not read it). ``out_bytes`` fixes the
    output element size (comparisons: 1); else the widest input's (type promotion).
    """

    def f(p: Parsed, name: str) -> OpCost | None:
        tensors = [i for i in range(len(p.dims)) if _is_tensor(p, i)]
        if not tensors:
            # a 0-dim tensor (``num_batches_tracked.add_(1)``): one element read and written
            size = elem_bytes(p.types[0]) if p.types and p.dims and p.dims[0] == [] else None
            return OpCost(float(2 * size), flops_per_elem, "elementwise", p.dtype(0)) if size else None
        inplace = name.endswith("_")
        out_i = tensors[-1] if not inplace and len(p.dims) > arity and tensors[-1] >= arity else None
        reads = [i for i in tensors if i != out_i]
        if not reads:
            return None
        shape = _broadcast([p.shape(i) or [] for i in reads])
        if shape is None:
            return None
        n = _numel(shape)
        if inplace:
            write = _tbytes(p, 0)
        elif out_i is not None:
            write = _tbytes(p, out_i)
        else:
            sizes = [_size(p, i) for i in reads if i >= len(p.types) or p.types[i] != "bool"]
            write = n * (out_bytes or max(sizes, default=1))
        read = sum(_tbytes(p, i) for i in reads)
        return OpCost(float(read + write), float(n * flops_per_elem), "elementwise", p.dtype(0))

    return f


# ---------------------------------------------------------------------------
# "read these, write tensors shaped like those": norms, backward pointwise ops


def _rw(
    op_class: str,
    write_like: Sequence[int],
    flops_per_elem: float = 1.0,
    extra: Callable[[Parsed], int] | None = None,
    write_bytes: Callable[[Parsed], int | None] | None = None,
) -> ByteFn:
    """Read every tensor argument once; write tensors shaped like args ``write_like``
    (an index repeated writes twice), plus ``extra(p)`` bytes (small statistics).
    ``write_bytes`` overrides the element size of the first written tensor."""

    def f(p: Parsed, name: str) -> OpCost | None:
        if p.shape(write_like[0]) is None:
            return None
        read = sum(_tbytes(p, i) for i in range(len(p.dims)) if _is_tensor(p, i))
        write = sum(_tbytes(p, i) for i in write_like[1:])
        first = p.shape(write_like[0]) or []
        size = write_bytes(p) if write_bytes else None
        write += _numel(first) * (size or _size(p, write_like[0]))
        if extra is not None:
            write += extra(p)
        return OpCost(float(read + write), float(_numel(first) * flops_per_elem), op_class, p.dtype(0))

    return f


def _layer_norm_stats(p: Parsed) -> int:
    """mean and rstd (fp32), one per normalised row."""
    x, norm = p.shape(0) or [], p.value(1)
    inner = _numel(norm) if isinstance(norm, list) and all(isinstance(v, int) for v in norm) else None
    if inner is None:
        w = p.shape(2)
        inner = _numel(w) if w else 1
    return 2 * 4 * max(1, _numel(x) // max(1, inner))


def _batch_norm_stats(p: Parsed) -> int:
    x = p.shape(0) or [1, 1]
    return 2 * 4 * (x[1] if len(x) > 1 else 1)


def _dtype_code_bytes(arg: int) -> Callable[[Parsed], int | None]:
    def f(p: Parsed) -> int | None:
        v = p.value(arg)
        return _SCALAR_TYPE_BYTES.get(v) if isinstance(v, int) and not isinstance(v, bool) else None

    return f


def _half_to_float(p: Parsed) -> int | None:
    return 4 if p.value(2) is True else None


def _dropout_mask(p: Parsed) -> int:
    return _numel(p.shape(0) or [])  # one bool per element


# ---------------------------------------------------------------------------
# reductions, gathers, copies


def _reduction(dim_i: int | None, flops_per_elem: float = 1.0) -> ByteFn:
    """Read the input once; write the reduced output (all dims when ``dim`` is absent)."""

    def f(p: Parsed, name: str) -> OpCost | None:
        x = p.shape(0)
        if x is None:
            return None
        n = _numel(x)
        dims = p.value(dim_i) if dim_i is not None else None
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if isinstance(dims, list) and dims and all(isinstance(d, int) for d in dims) and x:
            reduced = prod(x[d % len(x)] for d in set(dims))
            out = n // max(1, reduced)
        else:
            out = 1
        size = _size(p, 0)
        return OpCost(float((n + out) * size), float(n * flops_per_elem), "reduction", p.dtype(0))

    return f


def _gather_rows(p: Parsed, name: str) -> OpCost | None:
    """``embedding(weight [V, D], indices)``: read the indices and the rows they pick, write them."""
    w, idx = p.shape(0), p.shape(1)
    if w is None or idx is None or len(w) != 2:
        return None
    out = _numel(idx) * w[1] * _size(p, 0)
    return OpCost(float(_tbytes(p, 1) + 2 * out), 0.0, "embedding", p.dtype(0))


def _embedding_backward(p: Parsed, name: str) -> OpCost | None:
    """``embedding_dense_backward(grad [.., D], indices, num_weights, ...)``: read both, write the table."""
    g, num = p.shape(0), p.value(2)
    if g is None or not isinstance(num, int) or isinstance(num, bool):
        return None
    table = num * g[-1] * _size(p, 0)
    return OpCost(float(_tbytes(p, 0) + _tbytes(p, 1) + table), float(_numel(g)), "embedding", p.dtype(0))


def _index_like(index_i: int) -> ByteFn:
    """``gather(self, dim, index)``: the output has the index's shape; read index + picked values."""

    def f(p: Parsed, name: str) -> OpCost | None:
        idx = p.shape(index_i)
        if idx is None or p.shape(0) is None:
            return None
        out = _numel(idx) * _size(p, 0)
        return OpCost(float(_tbytes(p, index_i) + 2 * out), 0.0, "copy", p.dtype(0))

    return f


def _zero_dim(p: Parsed, i: int) -> bool:
    """Argument ``i`` is a 0-dim tensor: dims ``[]`` with a tensor dtype (a step counter)."""
    return i < len(p.dims) and p.dims[i] == [] and i < len(p.types) and elem_bytes(p.types[i]) is not None


def _copy(p: Parsed, name: str) -> OpCost | None:
    """``copy_(dst, src)``: read src, write dst (a dtype cast changes the element size)."""
    if _zero_dim(p, 0) and _zero_dim(p, 1):
        return OpCost(float(_size(p, 0) + _size(p, 1)), 0.0, "copy", p.dtype(1))
    if p.shape(0) is None or p.shape(1) is None:
        return None
    return OpCost(float(_tbytes(p, 1) + _tbytes(p, 0)), 0.0, "copy", p.dtype(1))


def _fill(p: Parsed, name: str) -> OpCost | None:
    """``fill_(self, value)`` / ``zero_(self)``: write self (a 0-dim tensor is one element)."""
    if p.shape(0) is None:
        return OpCost(float(_size(p, 0)), 0.0, "copy", p.dtype(0)) if _zero_dim(p, 0) else None
    return OpCost(float(_tbytes(p, 0)), 0.0, "copy", p.dtype(0))


def _cat(p: Parsed, name: str) -> OpCost | None:
    """``cat(tensors, dim)``: read every input, write their concatenation (list dtype assumed)."""
    shapes = _tensor_list(p, 0)
    if shapes is None:
        return None
    n = _list_numel(shapes)
    return OpCost(float(2 * n * LIST_ELEM_BYTES), 0.0, "copy", None, exact=False)


def _chunk_cat(p: Parsed, name: str) -> OpCost | None:
    """``_chunk_cat(tensors, dim, num_chunks, out)``: FSDP2's gradient packing; out's dtype is recorded."""
    shapes = _tensor_list(p, 0)
    if shapes is None:
        return None
    n = _list_numel(shapes)
    write = _tbytes(p, 3) or n * LIST_ELEM_BYTES
    return OpCost(float(n * LIST_ELEM_BYTES + write), 0.0, "copy", p.dtype(3), exact=False)


def _split_copy(p: Parsed, name: str) -> OpCost | None:
    """``split_with_sizes_copy(self, sizes, dim, out)``: read self, write the same bytes into the outs."""
    if p.shape(0) is None:
        return None
    return OpCost(float(2 * _tbytes(p, 0)), 0.0, "copy", p.dtype(0))


# ---------------------------------------------------------------------------
# pooling


def _max_pool_fwd(p: Parsed, name: str) -> OpCost | None:
    """``max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil)``: write y and int64 indices."""
    x = p.shape(0)
    k = p.value(1)
    if x is None or len(x) < 3 or not isinstance(k, list) or not k:
        return None
    nsp = len(k)
    stride = p.value(2) or k
    pad = p.value(3) or [0] * nsp
    dil = p.value(4) or [1] * nsp
    if not all(isinstance(v, list) and len(v) == nsp for v in (stride, pad, dil)):
        return None
    out_sp = [(x[-nsp + i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    out = _numel(x[:-nsp]) * _numel(out_sp)
    return OpCost(float(_tbytes(p, 0) + out * (_size(p, 0) + 8)), float(out * _numel(k)), "pooling", p.dtype(0))


def _max_pool_bwd(p: Parsed, name: str) -> OpCost | None:
    """``max_pool2d_with_indices_backward(grad_out, self, ..., indices)``: read grad + indices, write grad_in."""
    if p.shape(0) is None or p.shape(1) is None:
        return None
    idx = _tbytes(p, len(p.dims) - 1)
    return OpCost(float(_tbytes(p, 0) + idx + _tbytes(p, 1)), float(_numel(p.shape(0) or [])), "pooling", p.dtype(0))


# ---------------------------------------------------------------------------
# loss


def _nll_fwd(p: Parsed, name: str) -> OpCost | None:
    """``nll_loss_forward(self [N, C], target [N], ...)``: read the targets and one value per row."""
    x, t = p.shape(0), p.shape(1)
    if x is None or t is None:
        return None
    return OpCost(float(_tbytes(p, 1) + _numel(t) * _size(p, 0) + 8), float(_numel(t)), "reduction", p.dtype(0))


def _nll_bwd(p: Parsed, name: str) -> OpCost | None:
    """``nll_loss_backward(grad, self, target, ...)``: write grad_input (shaped like self), read targets."""
    if p.shape(1) is None or p.shape(2) is None:
        return None
    return OpCost(float(_tbytes(p, 2) + _tbytes(p, 1)), float(_numel(p.shape(2) or [])), "reduction", p.dtype(1))


# ---------------------------------------------------------------------------
# optimizers and foreach ops (tensor lists: dtype assumed, see LIST_ELEM_BYTES)


def _fused_adam(p: Parsed, name: str) -> OpCost | None:
    """``_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, ...)``:
    read params, grads and both moments; write params and both moments (+ the max when amsgrad)."""
    params = _tensor_list(p, 0)
    if params is None:
        return None
    n = _list_numel(params)
    amsgrad = bool(_tensor_list(p, 4))
    elems = n * (4 + 3 + (2 if amsgrad else 0))
    return OpCost(float(elems * LIST_ELEM_BYTES), float(n * 12), "optimizer", None, exact=False)


def _fused_sgd(p: Parsed, name: str) -> OpCost | None:
    """``_fused_sgd_(params, grads, momentum_buffers, ...)``: read p, g (and buffers), write p (and buffers)."""
    params = _tensor_list(p, 0)
    if params is None:
        return None
    n = _list_numel(params)
    mom = bool(_tensor_list(p, 2))
    elems = n * (2 + 1 + (2 if mom else 0))
    return OpCost(float(elems * LIST_ELEM_BYTES), float(n * 4), "optimizer", None, exact=False)


def _foreach(flops_per_elem: float = 1.0) -> ByteFn:
    """``_foreach_<op>[_](list, list | scalar ...)``: read every list, write the first one's shape."""

    def f(p: Parsed, name: str) -> OpCost | None:
        lists = [_tensor_list(p, i) for i in range(len(p.dims)) if i < len(p.types) and p.types[i] == "TensorList"]
        if not lists or lists[0] is None or any(x is None for x in lists):
            return None
        n = _list_numel(lists[0])
        read = sum(_list_numel(x) for x in lists)
        write = n
        if name.startswith("aten::_foreach_copy_"):
            read -= n  # the destination is written, not read
        elif name.startswith("aten::_foreach_norm"):
            write = len(lists[0])
        return OpCost(float((read + write) * LIST_ELEM_BYTES), float(n * flops_per_elem), "optimizer", None,
                      exact=False)

    return f


# ---------------------------------------------------------------------------
# matmul, conv, attention: FLOPs from flops.py, bytes here


def _matmul_bytes(p: Parsed, est: F.FlopEstimate, name: str) -> int | None:
    a_i = 1 if name in ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation") else 0
    a, b = p.shape(a_i), p.shape(a_i + 1)
    if a is None or b is None:
        return None
    size = _size(p, a_i, 2)
    read = _tbytes(p, a_i) + _tbytes(p, a_i + 1) + (_tbytes(p, 0) if a_i == 1 else 0)
    if len(a) == 2 and len(b) == 2:
        out = a[0] * b[1]
    elif len(a) == 3 and len(b) == 3:
        out = a[0] * a[1] * b[2]
    elif len(a) == 2 and len(b) == 3:
        out = a[0] * b[2]
    elif len(a) == 3 and len(b) == 2:
        out = a[0] * a[1] * b[1]
    else:
        return None
    out_size = 2 if size == 1 else size  # fp8 GEMMs write bf16 (out_dtype is not recorded)
    return read + out * out_size


def _conv_bytes(p: Parsed, est: F.FlopEstimate, name: str) -> tuple[int, bool] | None:
    if est.direction == "bwd":
        # grad_out, input, weight read; grad_input and grad_weight written (like input, weight).
        # The legacy cudnn_convolution_backward(self, grad_output, weight) swaps the first two.
        gi, xi = (1, 0) if name == F.LEGACY_CONV_BACKWARD else (0, 1)
        if name == F.LEGACY_CONV_BACKWARD_INPUT:
            return None  # its first argument is a size list: the input is not recorded
        return 2 * (_tbytes(p, xi) + _tbytes(p, 2)) + _tbytes(p, gi), est.exact
    x, w = p.shape(0), p.shape(1)
    if x is None or w is None or len(w) < 3:
        return None
    # FLOPs = 2·N·C_out·(C_in/g)·prod(k)·prod(out spatial): the output's element count follows
    per_out = 2 * w[1] * _numel(w[2:])
    out = int(est.flops // per_out) if per_out else 0
    bias = _tbytes(p, 2) if _is_tensor(p, 2) else 0
    return _tbytes(p, 0) + _tbytes(p, 1) + bias + out * _size(p, 0), est.exact


def _attention_bytes(p: Parsed, est: F.FlopEstimate, name: str) -> int | None:
    """Fused attention reads Q, K, V and writes O (+ the fp32 log-sum-exp); backward reads
    dO, Q, K, V, O, lse and writes dQ, dK, dV. Never the Sq x Sk score matrix."""
    first = 0 if est.direction == "fwd" else 1
    q = p.shape(first)
    if q is None or p.shape(first + 1) is None or p.shape(first + 2) is None:
        return None
    qkv = _tbytes(p, first) + _tbytes(p, first + 1) + _tbytes(p, first + 2)
    rows = _numel(q[:-1])  # one log-sum-exp per query row and head
    if est.direction == "fwd":
        return qkv + _tbytes(p, first) + rows * 4
    return 2 * qkv + 2 * _tbytes(p, 0) + rows * 4


def _from_flops(p: Parsed, name: str, hints: F.Hints | None = None) -> OpCost | None:
    est = F.FORMULAS[name].fn(p, hints or F.Hints())
    if est is None:
        return None
    exact = est.exact
    if est.family == "matmul":
        b = _matmul_bytes(p, est, name)
    elif est.family == "conv":
        got = _conv_bytes(p, est, name)
        b, exact = (got[0], got[1]) if got is not None else (None, exact)
    else:
        b = _attention_bytes(p, est, name)
    if b is None:
        return None
    return OpCost(float(b), est.flops, est.family, est.dtype, exact)


# ---------------------------------------------------------------------------
# the table

_UNARY = _elementwise(1)
_BINARY = _elementwise(2)
_ADD = _elementwise(3)  # add/sub(self, other, alpha)
_CMP = _elementwise(2, out_bytes=1)
_SOFTMAX_BWD = _rw("softmax", [0], 3.0, write_bytes=_dtype_code_bytes(3))

BYTE_FORMULAS: dict[str, ByteFormula] = {name: ByteFormula(f.family, _from_flops) for name, f in F.FORMULAS.items()}
for _n in ("add", "sub", "rsub"):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::{_n}{_v}"] = ByteFormula("elementwise", _ADD)
_TERNARY = ("where", "clamp", "hardtanh", "threshold", "masked_fill")
for _n in ("mul", "div", "pow", "maximum", "minimum", "fmod", "remainder", "atan2", "leaky_relu", "clamp_min",
           "clamp_max", *_TERNARY):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::{_n}{_v}"] = ByteFormula("elementwise", _elementwise(3 if _n in _TERNARY else 2))
for _n in ("neg", "exp", "log", "sqrt", "rsqrt", "abs", "sign", "reciprocal", "tanh", "sigmoid", "relu", "gelu",
           "silu", "erf", "sin", "cos", "exp2", "log1p", "expm1", "floor", "ceil", "round", "logical_not", "mish"):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::{_n}{_v}"] = ByteFormula("elementwise", _elementwise(2 if _n == "gelu" else 1))
for _n in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"):
    BYTE_FORMULAS[f"aten::{_n}"] = ByteFormula("elementwise", _CMP)
for _n in ("addcmul_", "addcdiv_", "lerp_", "addcmul", "addcdiv", "lerp"):
    BYTE_FORMULAS[f"aten::{_n}"] = ByteFormula("elementwise", _elementwise(4 if "addc" in _n else 3, 2.0))
for _n in ("gelu_backward", "silu_backward", "threshold_backward", "sigmoid_backward", "tanh_backward",
           "hardtanh_backward", "leaky_relu_backward", "native_dropout_backward"):
    BYTE_FORMULAS[f"aten::{_n}"] = ByteFormula("elementwise", _rw("elementwise", [0], 2.0))
BYTE_FORMULAS.update(
    {
        "aten::native_dropout": ByteFormula("elementwise", _rw("elementwise", [0], 2.0, _dropout_mask)),
        # norms: read everything, write y (+ fp32 statistics); backward writes grads like x, w, b
        "aten::native_layer_norm": ByteFormula("norm", _rw("norm", [0], 8.0, _layer_norm_stats)),
        "aten::native_layer_norm_backward": ByteFormula("norm", _rw("norm", [1, 5, 6], 8.0)),
        "aten::_fused_rms_norm": ByteFormula("norm", _rw("norm", [0], 5.0)),
        "aten::native_batch_norm": ByteFormula("norm", _rw("norm", [0], 8.0, _batch_norm_stats)),
        "aten::_native_batch_norm_legit": ByteFormula("norm", _rw("norm", [0], 8.0, _batch_norm_stats)),
        "aten::cudnn_batch_norm": ByteFormula("norm", _rw("norm", [0], 8.0, _batch_norm_stats)),
        "aten::native_batch_norm_backward": ByteFormula("norm", _rw("norm", [1, 2, 2], 8.0)),
        "aten::cudnn_batch_norm_backward": ByteFormula("norm", _rw("norm", [0, 2, 2], 8.0)),
        "aten::native_group_norm": ByteFormula("norm", _rw("norm", [0], 8.0)),
        # softmax: y in fp32 when half_to_float; backward writes grad_input in input_dtype
        "aten::_softmax": ByteFormula("softmax", _rw("softmax", [0], 5.0, write_bytes=_half_to_float)),
        "aten::_log_softmax": ByteFormula("softmax", _rw("softmax", [0], 5.0, write_bytes=_half_to_float)),
        "aten::_softmax_backward_data": ByteFormula("softmax", _SOFTMAX_BWD),
        "aten::_log_softmax_backward_data": ByteFormula("softmax", _SOFTMAX_BWD),
        # reductions
        "aten::sum": ByteFormula("reduction", _reduction(1)),
        "aten::mean": ByteFormula("reduction", _reduction(1)),
        "aten::amax": ByteFormula("reduction", _reduction(1)),
        "aten::amin": ByteFormula("reduction", _reduction(1)),
        "aten::norm": ByteFormula("reduction", _reduction(2, 2.0)),
        "aten::linalg_vector_norm": ByteFormula("reduction", _reduction(2, 2.0)),
        "aten::var_mean": ByteFormula("reduction", _reduction(1, 3.0)),
        "aten::nll_loss_forward": ByteFormula("reduction", _nll_fwd),
        "aten::nll_loss_backward": ByteFormula("reduction", _nll_bwd),
        # gathers and copies
        "aten::embedding": ByteFormula("embedding", _gather_rows),
        "aten::embedding_dense_backward": ByteFormula("embedding", _embedding_backward),
        "aten::index_select": ByteFormula("copy", _index_like(2)),
        "aten::gather": ByteFormula("copy", _index_like(2)),
        "aten::copy_": ByteFormula("copy", _copy),
        "aten::fill_": ByteFormula("copy", _fill),
        "aten::zero_": ByteFormula("copy", _fill),
        "aten::cat": ByteFormula("copy", _cat),
        "aten::_chunk_cat": ByteFormula("copy", _chunk_cat),
        "aten::split_with_sizes_copy": ByteFormula("copy", _split_copy),
        # pooling
        "aten::max_pool2d_with_indices": ByteFormula("pooling", _max_pool_fwd),
        "aten::max_pool2d_with_indices_backward": ByteFormula("pooling", _max_pool_bwd),
        # optimizers
        "aten::_fused_adamw_": ByteFormula("optimizer", _fused_adam),
        "aten::_fused_adam_": ByteFormula("optimizer", _fused_adam),
        "aten::_fused_sgd_": ByteFormula("optimizer", _fused_sgd),
    }
)
for _n, _fl in (("add", 1.0), ("sub", 1.0), ("mul", 1.0), ("div", 1.0), ("lerp", 2.0), ("addcmul", 2.0),
                ("addcdiv", 2.0), ("sqrt", 1.0), ("maximum", 1.0), ("neg", 1.0), ("zero", 0.0), ("copy", 0.0),
                ("norm", 2.0), ("sign", 1.0), ("clamp_min", 1.0), ("reciprocal", 1.0), ("pow", 1.0)):
    for _v in ("", "_"):
        BYTE_FORMULAS[f"aten::_foreach_{_n}{_v}"] = ByteFormula("optimizer", _foreach(_fl))

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


def estimate(name: str, inputs: OpInputs, hints: F.Hints | None = None) -> OpCost | None:
    """Bytes, FLOPs and class of one op from its recorded inputs, or None (no formula, no shapes).

    ``hints`` are the cross-op facts ``analysis.mfu`` learns for legacy traces (a forward
    conv's output size from its backward), so that FLOPs here equal MFU's."""
    if hints is not None and name in F.FORMULAS:
        try:
            return _from_flops(parse_inputs(inputs), name, hints)
        except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError):
            return None
    return _estimate_cached(name, inputs.dims, inputs.types, inputs.concrete)


def op_bytes(name: str, inputs: OpInputs) -> float | None:
    e = estimate(name, inputs)
    return None if e is None else e.bytes


