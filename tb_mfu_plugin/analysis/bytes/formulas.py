"""Byte (and placement-FLOP) formulas per op family; ``op_bytes.BYTE_FORMULAS`` maps op names to them.

Each formula reads the recorded inputs (``Parsed``) and returns an ``OpCost``: the minimum HBM
traffic (inputs read once, outputs written once) and the FLOPs, or None when shapes are missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

from ..flops import shapes as F
from ..flops.formulas import FlopEstimate, Hints
from ..flops.recorded_inputs import Parsed
from .model import (
    LIST_ELEM_BYTES,
    SCALAR_TYPE_BYTES,
    ByteFn,
    OpCost,
    broadcast,
    elem_bytes,
    elem_size,
    is_tensor,
    list_numel,
    numel,
    tensor_bytes,
    tensor_list,
    zero_dim,
)

# ---------------------------------------------------------------------------
# elementwise


def elementwise(arity: int, flops_per_elem: float = 1.0, out_bytes: int | None = None) -> ByteFn:
    """Pointwise op with ``arity`` functional arguments (``add(self, other, alpha)``: 3).

    ``name_`` is in-place (writes ``self``); more than ``arity`` args ending in a tensor
    is the ``out=`` variant (writes ``out``, does not read it). ``out_bytes`` fixes the
    output element size (comparisons: 1); else the widest input's (type promotion).
    """

    def f(p: Parsed, name: str) -> OpCost | None:
        tensors = [i for i in range(len(p.dims)) if is_tensor(p, i)]
        if not tensors:
            # a 0-dim tensor (``num_batches_tracked.add_(1)``): one element read and written
            size = elem_bytes(p.types[0]) if p.types and p.dims and p.dims[0] == [] else None
            return OpCost(float(2 * size), flops_per_elem, "elementwise", p.dtype(0)) if size else None
        inplace = name.endswith("_")
        out_i = tensors[-1] if not inplace and len(p.dims) > arity and tensors[-1] >= arity else None
        reads = [i for i in tensors if i != out_i]
        if not reads:
            return None
        shape = broadcast([p.shape(i) or [] for i in reads])
        if shape is None:
            return None
        n = numel(shape)
        if inplace:
            write = tensor_bytes(p, 0)
        elif out_i is not None:
            write = tensor_bytes(p, out_i)
        else:
            sizes = [elem_size(p, i) for i in reads if i >= len(p.types) or p.types[i] != "bool"]
            write = n * (out_bytes or max(sizes, default=1))
        read = sum(tensor_bytes(p, i) for i in reads)
        return OpCost(float(read + write), float(n * flops_per_elem), "elementwise", p.dtype(0))

    return f


# ---------------------------------------------------------------------------
# "read these, write tensors shaped like those": norms, backward pointwise ops


def rw(
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
        read = sum(tensor_bytes(p, i) for i in range(len(p.dims)) if is_tensor(p, i))
        write = sum(tensor_bytes(p, i) for i in write_like[1:])
        first = p.shape(write_like[0]) or []
        size = write_bytes(p) if write_bytes else None
        write += numel(first) * (size or elem_size(p, write_like[0]))
        if extra is not None:
            write += extra(p)
        return OpCost(float(read + write), float(numel(first) * flops_per_elem), op_class, p.dtype(0))

    return f


def layer_norm_stats(p: Parsed) -> int:
    """mean and rstd (fp32), one per normalised row."""
    x, norm = p.shape(0) or [], p.value(1)
    inner = numel(norm) if isinstance(norm, list) and all(isinstance(v, int) for v in norm) else None
    if inner is None:
        w = p.shape(2)
        inner = numel(w) if w else 1
    return 2 * 4 * max(1, numel(x) // max(1, inner))


def batch_norm_stats(p: Parsed) -> int:
    x = p.shape(0) or [1, 1]
    return 2 * 4 * (x[1] if len(x) > 1 else 1)


def dtype_code_bytes(arg: int) -> Callable[[Parsed], int | None]:
    def f(p: Parsed) -> int | None:
        v = p.value(arg)
        return SCALAR_TYPE_BYTES.get(v) if isinstance(v, int) and not isinstance(v, bool) else None

    return f


def half_to_float(p: Parsed) -> int | None:
    return 4 if p.value(2) is True else None


def dropout_mask(p: Parsed) -> int:
    return numel(p.shape(0) or [])  # one bool per element


# ---------------------------------------------------------------------------
# reductions, gathers, copies


def reduction(dim_i: int | None, flops_per_elem: float = 1.0) -> ByteFn:
    """Read the input once; write the reduced output (all dims when ``dim`` is absent)."""

    def f(p: Parsed, name: str) -> OpCost | None:
        x = p.shape(0)
        if x is None:
            return None
        n = numel(x)
        dims = p.value(dim_i) if dim_i is not None else None
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if isinstance(dims, list) and dims and all(isinstance(d, int) for d in dims) and x:
            reduced = prod(x[d % len(x)] for d in set(dims))
            out = n // max(1, reduced)
        else:
            out = 1
        size = elem_size(p, 0)
        return OpCost(float((n + out) * size), float(n * flops_per_elem), "reduction", p.dtype(0))

    return f


def gather_rows(p: Parsed, name: str) -> OpCost | None:
    """``embedding(weight [V, D], indices)``: read the indices and the rows they pick, write them."""
    w, idx = p.shape(0), p.shape(1)
    if w is None or idx is None or len(w) != 2:
        return None
    out = numel(idx) * w[1] * elem_size(p, 0)
    return OpCost(float(tensor_bytes(p, 1) + 2 * out), 0.0, "embedding", p.dtype(0))


def embedding_backward(p: Parsed, name: str) -> OpCost | None:
    """``embedding_dense_backward(grad [.., D], indices, num_weights, ...)``: read both, write the table."""
    g, num = p.shape(0), p.value(2)
    if g is None or not isinstance(num, int) or isinstance(num, bool):
        return None
    table = num * g[-1] * elem_size(p, 0)
    return OpCost(float(tensor_bytes(p, 0) + tensor_bytes(p, 1) + table), float(numel(g)), "embedding", p.dtype(0))


def index_like(index_i: int) -> ByteFn:
    """``gather(self, dim, index)``: the output has the index's shape; read index + picked values."""

    def f(p: Parsed, name: str) -> OpCost | None:
        idx = p.shape(index_i)
        if idx is None or p.shape(0) is None:
            return None
        out = numel(idx) * elem_size(p, 0)
        return OpCost(float(tensor_bytes(p, index_i) + 2 * out), 0.0, "copy", p.dtype(0))

    return f


def copy(p: Parsed, name: str) -> OpCost | None:
    """``copy_(dst, src)``: read src, write dst (a dtype cast changes the element size)."""
    if zero_dim(p, 0) and zero_dim(p, 1):
        return OpCost(float(elem_size(p, 0) + elem_size(p, 1)), 0.0, "copy", p.dtype(1))
    if p.shape(0) is None or p.shape(1) is None:
        return None
    return OpCost(float(tensor_bytes(p, 1) + tensor_bytes(p, 0)), 0.0, "copy", p.dtype(1))


def fill(p: Parsed, name: str) -> OpCost | None:
    """``fill_(self, value)`` / ``zero_(self)``: write self (a 0-dim tensor is one element)."""
    if p.shape(0) is None:
        return OpCost(float(elem_size(p, 0)), 0.0, "copy", p.dtype(0)) if zero_dim(p, 0) else None
    return OpCost(float(tensor_bytes(p, 0)), 0.0, "copy", p.dtype(0))


def cat(p: Parsed, name: str) -> OpCost | None:
    """``cat(tensors, dim)``: read every input, write their concatenation (list dtype assumed)."""
    shapes = tensor_list(p, 0)
    if shapes is None:
        return None
    n = list_numel(shapes)
    return OpCost(float(2 * n * LIST_ELEM_BYTES), 0.0, "copy", None, exact=False)


def chunk_cat(p: Parsed, name: str) -> OpCost | None:
    """``chunk_cat(tensors, dim, num_chunks, out)``: FSDP2's gradient packing; out's dtype is recorded."""
    shapes = tensor_list(p, 0)
    if shapes is None:
        return None
    n = list_numel(shapes)
    write = tensor_bytes(p, 3) or n * LIST_ELEM_BYTES
    return OpCost(float(n * LIST_ELEM_BYTES + write), 0.0, "copy", p.dtype(3), exact=False)


def split_copy(p: Parsed, name: str) -> OpCost | None:
    """``split_with_sizes_copy(self, sizes, dim, out)``: read self, write the same bytes into the outs."""
    if p.shape(0) is None:
        return None
    return OpCost(float(2 * tensor_bytes(p, 0)), 0.0, "copy", p.dtype(0))


# ---------------------------------------------------------------------------
# pooling


def max_pool_fwd(p: Parsed, name: str) -> OpCost | None:
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
    out = numel(x[:-nsp]) * numel(out_sp)
    return OpCost(float(tensor_bytes(p, 0) + out * (elem_size(p, 0) + 8)), float(out * numel(k)), "pooling", p.dtype(0))


def max_pool_bwd(p: Parsed, name: str) -> OpCost | None:
    """``max_pool2d_with_indices_backward(grad_out, self, ..., indices)``: read grad + indices, write grad_in."""
    if p.shape(0) is None or p.shape(1) is None:
        return None
    idx = tensor_bytes(p, len(p.dims) - 1)
    moved = tensor_bytes(p, 0) + idx + tensor_bytes(p, 1)
    return OpCost(float(moved), float(numel(p.shape(0) or [])), "pooling", p.dtype(0))


# ---------------------------------------------------------------------------
# loss


def nll_fwd(p: Parsed, name: str) -> OpCost | None:
    """``nll_loss_forward(self [N, C], target [N], ...)``: read the targets and one value per row."""
    x, t = p.shape(0), p.shape(1)
    if x is None or t is None:
        return None
    return OpCost(float(tensor_bytes(p, 1) + numel(t) * elem_size(p, 0) + 8), float(numel(t)), "reduction", p.dtype(0))


def nll_bwd(p: Parsed, name: str) -> OpCost | None:
    """``nll_loss_backward(grad, self, target, ...)``: write grad_input (shaped like self), read targets."""
    if p.shape(1) is None or p.shape(2) is None:
        return None
    moved = tensor_bytes(p, 2) + tensor_bytes(p, 1)
    return OpCost(float(moved), float(numel(p.shape(2) or [])), "reduction", p.dtype(1))


# ---------------------------------------------------------------------------
# optimizers and foreach ops (tensor lists: dtype assumed, see LIST_ELEM_BYTES)


def fused_adam(p: Parsed, name: str) -> OpCost | None:
    """``_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, ...)``:
    read params, grads and both moments; write params and both moments (+ the max when amsgrad)."""
    return _fused_optimizer(p, 4 + 3, 4, 2, 12)


def fused_sgd(p: Parsed, name: str) -> OpCost | None:
    """``_fused_sgd_(params, grads, momentum_buffers, ...)``: read p, g (and buffers), write p (and buffers)."""
    return _fused_optimizer(p, 2 + 1, 2, 2, 4)


def _fused_optimizer(p: Parsed, elems_per_param: int, extra_list: int, extra_elems: int, flops: int) -> OpCost | None:
    """A fused optimizer over the parameter list (argument 0): ``elems_per_param`` reads and writes
    per element, ``extra_elems`` more when the state list at ``extra_list`` is given, ``flops`` each."""
    params = tensor_list(p, 0)
    if params is None:
        return None
    n = list_numel(params)
    extra = bool(tensor_list(p, extra_list))
    elems = n * (elems_per_param + (extra_elems if extra else 0))
    return OpCost(float(elems * LIST_ELEM_BYTES), float(n * flops), "optimizer", None, exact=False)


def foreach(flops_per_elem: float = 1.0) -> ByteFn:
    """``_foreach_<op>[_](list, list | scalar ...)``: read every list, write the first one's shape."""

    def f(p: Parsed, name: str) -> OpCost | None:
        lists = [tensor_list(p, i) for i in range(len(p.dims)) if i < len(p.types) and p.types[i] == "TensorList"]
        if not lists or lists[0] is None or any(x is None for x in lists):
            return None
        n = list_numel(lists[0])
        read = sum(list_numel(x) for x in lists)
        write = n
        if name.startswith("aten::_foreach_copy_"):
            read -= n  # the destination is written, not read
        elif name.startswith("aten::_foreach_norm"):
            write = len(lists[0])
        return OpCost(
            float((read + write) * LIST_ELEM_BYTES), float(n * flops_per_elem), "optimizer", None, exact=False
        )

    return f


# ---------------------------------------------------------------------------
# matmul, conv, attention: FLOPs from flops.py, bytes here


def matmul_bytes(p: Parsed, est: FlopEstimate, name: str) -> int | None:
    a_i = 1 if name in ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation") else 0
    a, b = p.shape(a_i), p.shape(a_i + 1)
    if a is None or b is None:
        return None
    size = elem_size(p, a_i, 2)
    read = tensor_bytes(p, a_i) + tensor_bytes(p, a_i + 1) + (tensor_bytes(p, 0) if a_i == 1 else 0)
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


def conv_bytes(p: Parsed, est: FlopEstimate, name: str) -> tuple[int, bool] | None:
    if est.direction == "bwd":
        # grad_out, input, weight read; grad_input and grad_weight written (like input, weight).
        # The legacy cudnn_convolution_backward(self, grad_output, weight) swaps the first two.
        gi, xi = (1, 0) if name == F.LEGACY_CONV_BACKWARD else (0, 1)
        if name == F.LEGACY_CONV_BACKWARD_INPUT:
            return None  # its first argument is a size list: the input is not recorded
        return 2 * (tensor_bytes(p, xi) + tensor_bytes(p, 2)) + tensor_bytes(p, gi), est.exact
    x, w = p.shape(0), p.shape(1)
    if x is None or w is None or len(w) < 3:
        return None
    # FLOPs = 2·N·C_out·(C_in/g)·prod(k)·prod(out spatial): the output's element count follows
    per_out = 2 * w[1] * numel(w[2:])
    out = int(est.flops // per_out) if per_out else 0
    bias = tensor_bytes(p, 2) if is_tensor(p, 2) else 0
    return tensor_bytes(p, 0) + tensor_bytes(p, 1) + bias + out * elem_size(p, 0), est.exact


def attention_bytes(p: Parsed, est: FlopEstimate, name: str) -> int | None:
    """Fused attention reads Q, K, V and writes O (+ the fp32 log-sum-exp); backward reads
    dO, Q, K, V, O, lse and writes dQ, dK, dV. Never the Sq x Sk score matrix."""
    first = 0 if est.direction == "fwd" else 1
    q = p.shape(first)
    if q is None or p.shape(first + 1) is None or p.shape(first + 2) is None:
        return None
    qkv = tensor_bytes(p, first) + tensor_bytes(p, first + 1) + tensor_bytes(p, first + 2)
    rows = numel(q[:-1])  # one log-sum-exp per query row and head
    if est.direction == "fwd":
        return qkv + tensor_bytes(p, first) + rows * 4
    return 2 * qkv + 2 * tensor_bytes(p, 0) + rows * 4


def from_flops(p: Parsed, name: str, hints: Hints | None = None) -> OpCost | None:
    est = F.FORMULAS[name].fn(p, hints or Hints())
    if est is None:
        return None
    exact = est.exact
    if est.family == "matmul":
        b = matmul_bytes(p, est, name)
    elif est.family == "conv":
        got = conv_bytes(p, est, name)
        b, exact = (got[0], got[1]) if got is not None else (None, exact)
    else:
        b = attention_bytes(p, est, name)
    if b is None:
        return None
    return OpCost(float(b), est.flops, est.family, est.dtype, exact)
