"""FLOPs of one operator from its recorded shapes.

torch 2.x writes no ``flops`` arg into exported traces, so FLOPs come from the
``Input Dims`` / ``Input type`` / ``Concrete Inputs`` args that
``record_shapes=True`` records on ``cpu_op`` events.

Every formula lives in one table, ``FORMULAS``: op name -> ``Formula`` (family,
direction and a small function of the parsed inputs). The conventions are those
of ``torch.utils.flop_counter.FlopCounterMode``, so users can cross-check against
PyTorch's own counter:

- a matmul is 2·M·N·K (one multiply and one add per term; bias adds are free);
- a convolution is 2·N·C_out·(C_in/groups)·prod(kernel)·prod(output spatial),
  where a transposed convolution uses the *input* spatial size;
- ``convolution_backward`` is one conv per computed gradient (``output_mask``);
- fused attention forward is two batched matmuls, 4·B·H·Sq·Sk·D (no causal
  discount), and its backward is five, i.e. 2.5× the forward: it recomputes the
  Q·Kᵀ scores. That recompute share (one fifth of the backward) is reported
  separately so MFU in the PaLM sense (no recompute) can be derived.

Nothing here imports torch. Shapes are parsed from raw JSON bytes and memoised,
since a training trace repeats the same few hundred shapes thousands of times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import prod
from typing import Any

import msgspec

from ..trace.tables import OpInputs

# ---------------------------------------------------------------------------
# dtypes


def dtype_of(type_name: str | None) -> str | None:
    """Normalise a recorded ``Input type`` string to a compute dtype.

    ``"c10::BFloat16"`` -> ``"bf16"``, ``"c10::Half"`` -> ``"fp16"``, ``"float"`` ->
    ``"fp32"``, ``"c10::Float8_e4m3fn"`` -> ``"fp8"``. ``None`` for non-float
    types and empty strings.
    """
    if not type_name:
        return None
    t = type_name.lower()
    if "bfloat16" in t:
        return "bf16"
    if t in ("c10::half", "half") or "float16" in t:
        return "fp16"
    if "float8" in t:
        return "fp8"
    if "float4" in t:
        return "fp4"
    if t in ("float", "float32"):
        return "fp32"
    if t in ("double", "float64"):
        return "fp64"
    if t in ("signed char", "int8", "c10::qint8"):
        return "int8"
    return None


# ---------------------------------------------------------------------------
# parsed inputs


@dataclass(frozen=True)
class Parsed:
    """An op's recorded inputs, decoded. ``dims[i]`` is ``[]`` for non-tensors."""

    dims: list[Any]
    types: list[str]
    concrete: list[str]

    def shape(self, i: int) -> list[int] | None:
        """Shape of argument ``i`` if it is a tensor with known, plausible dims, else None."""
        if i >= len(self.dims):
            return None
        d = self.dims[i]
        if not isinstance(d, list) or not d or not all(isinstance(x, int) for x in d):
            return None
        return d if plausible_shape(d) else None

    def value(self, i: int) -> Any:
        """Concrete value of argument ``i`` (int, float, bool, list, str) or None."""
        if i >= len(self.concrete):
            return None
        return _concrete_value(self.concrete[i])

    def dtype(self, i: int = 0) -> str | None:
        if i < len(self.types):
            return dtype_of(self.types[i])
        return None


# A recorded shape with a negative dim, or a tensor of more than 2^38 elements (more
# than any GPU's memory holds at one byte each), is no real shape: its op's FLOPs are
# unknown rather than 1e29. One op above 2^60 FLOPs (15+ minutes of a 1 PFLOP/s GPU)
# is refused the same way.
MAX_NUMEL = 1 << 38
MAX_OP_FLOPS = float(1 << 60)


def plausible_shape(dims: Sequence[Any]) -> bool:
    n = 1
    for x in dims:
        if type(x) is not int or x < 0:
            return False
        n *= x
        if n > MAX_NUMEL:
            return False
    return True


_decode_list = msgspec.json.Decoder(list[Any])


def _decode(raw: bytes | None) -> list[Any]:
    if not raw:
        return []
    try:
        v = _decode_list.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return []
    return v


@lru_cache(maxsize=65536)
def _implausible(name: str, dims: bytes | None, types: bytes | None, concrete: bytes | None) -> bool:
    shapes = [d for d in _decode(dims) if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    if not all(plausible_shape(d) for d in shapes):
        return True
    formula = FORMULAS.get(name)
    if formula is None:
        return False
    try:
        e = formula.fn(parse_inputs(OpInputs(dims, types, concrete)), _NO_HINTS)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return False
    return e is not None and not _plausible_flops(e)


def implausible_input_ops(names: Sequence[str], op_names: Any, inputs: Mapping[int, OpInputs]) -> int:
    """How many kept ops have impossible recorded shapes (and therefore unknown FLOPs).

    ``op_names`` is the cpu table's name column, ``inputs`` its recorded inputs.
    """
    return sum(
        1 for row, i in inputs.items() if _implausible(names[int(op_names[row])], i.dims, i.types, i.concrete)
    )


def _plausible_flops(e: FlopEstimate) -> bool:
    return 0.0 <= e.flops <= MAX_OP_FLOPS


def parse_inputs(inputs: OpInputs) -> Parsed:
    dims = _decode(inputs.dims)
    types = [t if isinstance(t, str) else "" for t in _decode(inputs.types)]
    concrete = [c if isinstance(c, str) else "" for c in _decode(inputs.concrete)]
    return Parsed(dims, types, concrete)


@lru_cache(maxsize=4096)
def _concrete_value(s: str) -> Any:
    """Parse one ``Concrete Inputs`` string: ``"[2, 2]"``, ``"False"``, ``"1"``, ``"0."``."""
    if s is None:
        return None
    s = s.strip()
    if not s:
        return None
    if s in ("True", "False"):
        return s == "True"
    if s.startswith("[") and s.endswith("]"):
        inner = s[1:-1].strip()
        if not inner:
            return []
        out: list[Any] = []
        for part in inner.split(","):
            v = _concrete_value(part.strip())
            out.append(v)
        return out
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def _ints(v: Any, n: int) -> list[int] | None:
    """A concrete int list of length ``n`` (a single int is broadcast), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return [v] * n
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        if len(v) == n:
            return v
        if len(v) == 1:
            return v * n
    return None


# ---------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class FlopEstimate:
    flops: float
    dtype: str | None
    family: str  # "matmul" | "conv" | "attention"
    direction: str  # "fwd" | "bwd"
    # FLOPs inside ``flops`` that recompute forward work (fused attention backward
    # recomputes Q·Kᵀ). FlopCounterMode counts them; MFU in the PaLM sense does not.
    recompute_flops: float = 0.0
    # False when a documented assumption was needed (e.g. conv stride unknown).
    exact: bool = True


@dataclass(frozen=True)
class Hints:
    """Cross-op facts ``analysis.mfu`` can supply for legacy traces without Concrete Inputs."""

    # (input dims, weight dims) -> output spatial dims, learnt from conv backward ops
    conv_out: Mapping[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]] | None = None
    # for a legacy conv backward: whether grad_input was computed (a *_backward_input child exists)
    grad_input: bool | None = None


FormulaFn = Callable[[Parsed, Hints], FlopEstimate | None]


@dataclass(frozen=True)
class Formula:
    family: str
    direction: str
    fn: FormulaFn
    # True where torch.utils.flop_counter.FlopCounterMode has no formula for the op
    beyond_flop_counter: bool = False


# ---------------------------------------------------------------------------
# matmul family


def _mm(m: int, k: int, n: int) -> int:
    return 2 * m * n * k


def _mm_args(a_idx: int, b_idx: int) -> FormulaFn:
    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        a, b = p.shape(a_idx), p.shape(b_idx)
        if a is None or b is None or len(a) != 2 or len(b) != 2:
            return None
        return FlopEstimate(float(_mm(a[0], a[1], b[1])), p.dtype(a_idx), "matmul", "fwd")

    return f


def _bmm_args(a_idx: int, b_idx: int) -> FormulaFn:
    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        a, b = p.shape(a_idx), p.shape(b_idx)
        if a is None or b is None or len(a) != 3 or len(b) != 3:
            return None
        return FlopEstimate(float(a[0] * _mm(a[1], a[2], b[2])), p.dtype(a_idx), "matmul", "fwd")

    return f


def _grouped_mm(p: Parsed, h: Hints) -> FlopEstimate | None:
    """``_grouped_mm(mat_a, mat_b, offs, ...)``, the MoE grouped GEMM.

    - 2D × 3D: a ``[tokens, K]``, b ``[G, K, N]``: each token row meets one
      expert, 2·tokens·K·N (rows past the last offset are counted: an upper bound);
    - 3D × 3D: a batched mm, 2·G·M·N·K;
    - 2D × 2D: a ``[M, K_total]``, b ``[K_total, N]`` split along K: 2·M·N·K_total;
    - 3D × 2D: a ``[G, M, K]``, b ``[K, N_total]`` split along N: 2·M·K·N_total.
    """
    a, b = p.shape(0), p.shape(1)
    if a is None or b is None:
        return None
    dt = p.dtype(0)
    if len(a) == 2 and len(b) == 3:
        flops = _mm(a[0], a[1], b[2])
    elif len(a) == 3 and len(b) == 3:
        flops = a[0] * _mm(a[1], a[2], b[2])
    elif len(a) == 2 and len(b) == 2:
        flops = _mm(a[0], a[1], b[1])
    elif len(a) == 3 and len(b) == 2:
        flops = _mm(a[1], a[2], b[1])
    else:
        return None
    return FlopEstimate(float(flops), dt, "matmul", "fwd")


# ---------------------------------------------------------------------------
# convolution family


def conv_flop_count(x: Sequence[int], w: Sequence[int], out_spatial: Sequence[int], transposed: bool) -> int:
    """FlopCounterMode's ``conv_flop_count``: 2·N·C_out·C_in_w·prod(kernel)·prod(spatial).

    ``spatial`` is the output spatial size, or the input's for a transposed conv.
    ``w`` is ``[C_out, C_in/groups, *kernel]`` (for a transposed conv FlopCounterMode
    still reads ``w[0]·w[1]``, which is ``C_in·C_out/groups``).
    """
    spatial = list(x[2:]) if transposed else list(out_spatial)
    return 2 * x[0] * w[0] * w[1] * prod(w[2:]) * prod(spatial)


def _conv_out_spatial(
    x: Sequence[int], w: Sequence[int], stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int]
) -> list[int]:
    return [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(len(w) - 2)
    ]


def _conv_fwd(stride_i: int, padding_i: int, dilation_i: int | None, transposed_i: int | None) -> FormulaFn:
    """Forward conv with stride/padding/dilation at the given argument positions."""

    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        x, w = p.shape(0), p.shape(1)
        if x is None or w is None or len(x) < 3 or len(x) != len(w):
            return None
        nsp = len(w) - 2
        transposed = p.value(transposed_i) if transposed_i is not None else False
        dt = p.dtype(0)
        if transposed is True:
            return FlopEstimate(float(conv_flop_count(x, w, [], True)), dt, "conv", "fwd")
        stride = _ints(p.value(stride_i), nsp)
        padding = _ints(p.value(padding_i), nsp)
        dilation = _ints(p.value(dilation_i), nsp) if dilation_i is not None else [1] * nsp
        exact = True
        if stride is not None and padding is not None and dilation is not None:
            out = _conv_out_spatial(x, w, stride, padding, dilation)
        else:
            known = h.conv_out.get((tuple(x), tuple(w))) if h.conv_out else None
            if known is not None and len(known) == nsp:
                out = list(known)
            else:
                # Legacy traces record no stride/padding. Documented fallback: stride 1
                # and "same" padding, i.e. output spatial = input spatial (an over-count
                # for strided convs, flagged inexact).
                out = list(x[2:])
                exact = False
        if transposed is None:
            exact = exact and transposed_i is None
        if any(o <= 0 for o in out):
            return None
        return FlopEstimate(float(conv_flop_count(x, w, out, False)), dt, "conv", "fwd", exact=exact)

    return f


def _t(shape: Sequence[int]) -> list[int]:
    return [shape[1], shape[0], *shape[2:]]


def _conv_backward(p: Parsed, h: Hints) -> FlopEstimate | None:
    """``convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)``, as FlopCounterMode counts it."""
    go, x, w = p.shape(0), p.shape(1), p.shape(2)
    if go is None or x is None or w is None:
        return None
    transposed = p.value(7)
    mask = p.value(10)
    exact = True
    if not (isinstance(mask, list) and len(mask) >= 2 and all(isinstance(m, bool) for m in mask)):
        mask = [True if h.grad_input is None else h.grad_input, True]
        exact = h.grad_input is not None
    if not isinstance(transposed, bool):
        transposed = False
        exact = False
    flops = 0
    if mask[0]:
        # grad_input = conv_transpose(grad_out, weight), output shape = input shape
        flops += conv_flop_count(go, w, x[2:], not transposed)
    if mask[1]:
        if transposed:
            flops += conv_flop_count(_t(go), _t(x), _t(w)[2:], False)
        else:
            flops += conv_flop_count(_t(x), _t(go), _t(w)[2:], False)
    return FlopEstimate(float(flops), p.dtype(0), "conv", "bwd", exact=exact)


def _legacy_cudnn_conv_backward(p: Parsed, h: Hints) -> FlopEstimate | None:
    """torch ≤1.10 ``cudnn_convolution_backward(self, grad_output, weight, ..., output_mask)``.

    ``output_mask`` is never recorded (no Concrete Inputs then); ``analysis.mfu``
    passes ``Hints.grad_input`` from the presence of a ``*_backward_input`` child.
    """
    x, go, w = p.shape(0), p.shape(1), p.shape(2)
    if go is None or x is None or w is None:
        return None
    grad_input = True if h.grad_input is None else h.grad_input
    flops = conv_flop_count(_t(x), _t(go), _t(w)[2:], False)
    if grad_input:
        flops += conv_flop_count(go, w, x[2:], True)
    dt = p.dtype(1) or p.dtype(0)
    return FlopEstimate(float(flops), dt, "conv", "bwd", exact=h.grad_input is not None)


def _legacy_conv_backward_input(p: Parsed, h: Hints) -> FlopEstimate | None:
    """torch ≤1.10 ``cudnn_convolution_backward_input(self_size, grad_output, weight, ...)``."""
    go, w = p.shape(1), p.shape(2)
    if go is None or w is None or len(go) != len(w):
        return None
    return FlopEstimate(float(conv_flop_count(go, w, [], True)), p.dtype(1), "conv", "bwd")


# ``cudnn_convolution_backward_weight(weight_size, grad_output, self, ...)`` records no
# weight shape, so it has no formula; its parent ``cudnn_convolution_backward`` does.


# ---------------------------------------------------------------------------
# attention family


def _sdpa_fwd_flops(b: int, h: int, sq: int, sk: int, dq: int, dv: int) -> int:
    return 2 * b * h * sq * sk * dq + 2 * b * h * sq * sk * dv


def _sdpa_bwd_flops(b: int, h: int, sq: int, sk: int, dq: int, dv: int) -> tuple[int, int]:
    """(total, recompute) of FlopCounterMode's ``sdpa_backward_flop_count``."""
    bh = b * h
    recompute = 2 * bh * sq * dq * sk  # scores = q @ kᵀ, again
    total = recompute
    total += 2 * bh * sq * dv * sk  # grad_scores = grad_out @ vᵀ
    total += 2 * bh * sk * sq * dv  # grad_v = scoresᵀ @ grad_out
    total += 2 * bh * sq * sk * dq  # grad_q = grad_scores @ k
    total += 2 * bh * dq * sq * sk  # grad_k = qᵀ @ grad_scores
    return total, recompute


def _bhsd(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> tuple[int, int, int, int, int, int] | None:
    """(B, H_q, Sq, Sk, Dq, Dv) from [B, H, S, D] tensors (GQA allowed: H_kv divides H_q)."""
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    b, h, sq, dq = q
    _, hk, sk, _ = k
    dv = v[3]
    if hk <= 0 or h % hk:
        return None
    return b, h, sq, sk, dq, dv


def _sdpa_fwd(p: Parsed, h: Hints) -> FlopEstimate | None:
    q, k, v = p.shape(0), p.shape(1), p.shape(2)
    if q is None or k is None or v is None:
        return None
    s = _bhsd(q, k, v)
    if s is None:
        return None
    return FlopEstimate(float(_sdpa_fwd_flops(*s)), p.dtype(0), "attention", "fwd")


def _sdpa_bwd(p: Parsed, h: Hints) -> FlopEstimate | None:
    q, k, v = p.shape(1), p.shape(2), p.shape(3)
    if q is None or k is None or v is None:
        return None
    s = _bhsd(q, k, v)
    if s is None:
        return None
    total, rec = _sdpa_bwd_flops(*s)
    return FlopEstimate(float(total), p.dtype(1), "attention", "bwd", recompute_flops=float(rec))


def _bshd_dims(p: Parsed, qi: int, cu_i: int) -> tuple[list[tuple[int, int, int, int, int, int]], bool] | None:
    """Per-sequence (B, H, Sq, Sk, Dq, Dv) for the low-level flash/efficient kernels.

    Their tensors are ``[B, S, H, D]``; with ``cum_seq_q`` (variable length) the
    query is ``[total, H, D]`` (flash) or ``[1, total, H, D]`` (efficient). Sequence
    lengths are tensor *values*, not recorded, so varlen assumes equal lengths
    (total / batch) and is flagged inexact.
    """
    q, k, v = p.shape(qi), p.shape(qi + 1), p.shape(qi + 2)
    if q is None or k is None or v is None:
        return None
    cu = p.shape(cu_i)
    if cu is not None and len(cu) == 1 and cu[0] > 1:
        nb = cu[0] - 1
        if len(q) == 3 and len(k) == 3 and len(v) == 3:
            tq, hq, dq = q
            tk, _, _ = k
            dv = v[2]
        elif len(q) == 4 and len(k) == 4 and len(v) == 4:
            _, tq, hq, dq = q
            _, tk, _, _ = k
            dv = v[3]
        else:
            return None
        sq = max(1, round(tq / nb))
        sk = max(1, round(tk / nb))
        return [(nb, hq, sq, sk, dq, dv)], False
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    b, sq, hq, dq = q
    _, sk, hk, _ = k
    return [(b, hq, sq, sk, dq, v[3])], True


def _flash_like_fwd(cu_i: int) -> FormulaFn:
    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        got = _bshd_dims(p, 0, cu_i)
        if got is None:
            return None
        shapes, exact = got
        flops = sum(_sdpa_fwd_flops(*s) for s in shapes)
        return FlopEstimate(float(flops), p.dtype(0), "attention", "fwd", exact=exact)

    return f


def _flash_like_bwd(cu_i: int) -> FormulaFn:
    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        got = _bshd_dims(p, 1, cu_i)
        if got is None:
            return None
        shapes, exact = got
        total = rec = 0
        for s in shapes:
            t, r = _sdpa_bwd_flops(*s)
            total += t
            rec += r
        return FlopEstimate(float(total), p.dtype(1), "attention", "bwd", recompute_flops=float(rec), exact=exact)

    return f


# ---------------------------------------------------------------------------
# the table

_MM = _mm_args(0, 1)
_ADDMM = _mm_args(1, 2)
_BMM = _bmm_args(0, 1)
_BADDBMM = _bmm_args(1, 2)

FORMULAS: dict[str, Formula] = {
    # matmuls: 2·M·N·K
    "aten::mm": Formula("matmul", "fwd", _MM),
    "aten::addmm": Formula("matmul", "fwd", _ADDMM),
    "aten::bmm": Formula("matmul", "fwd", _BMM),
    "aten::baddbmm": Formula("matmul", "fwd", _BADDBMM),
    "aten::_scaled_mm": Formula("matmul", "fwd", _MM),
    "aten::_scaled_mm_v2": Formula("matmul", "fwd", _MM, beyond_flop_counter=True),
    "aten::_addmm_activation": Formula("matmul", "fwd", _ADDMM, beyond_flop_counter=True),
    "aten::_grouped_mm": Formula("matmul", "fwd", _grouped_mm, beyond_flop_counter=True),
    "aten::_scaled_grouped_mm": Formula("matmul", "fwd", _grouped_mm, beyond_flop_counter=True),
    "aten::_scaled_grouped_mm_v2": Formula("matmul", "fwd", _grouped_mm, beyond_flop_counter=True),
    # convolutions (argument positions of stride, padding, dilation, transposed)
    "aten::convolution": Formula("conv", "fwd", _conv_fwd(3, 4, 5, 6)),
    "aten::_convolution": Formula("conv", "fwd", _conv_fwd(3, 4, 5, 6)),
    "aten::convolution_overrideable": Formula("conv", "fwd", _conv_fwd(3, 4, 5, 6)),
    "aten::cudnn_convolution": Formula("conv", "fwd", _conv_fwd(3, 2, 4, None)),
    "aten::_slow_conv2d_forward": Formula("conv", "fwd", _conv_fwd(4, 5, None, None)),
    "aten::convolution_backward": Formula("conv", "bwd", _conv_backward),
    "aten::convolution_backward_overrideable": Formula("conv", "bwd", _conv_backward, beyond_flop_counter=True),
    # torch <= 1.10 names (2021 traces): counted through their shapes, no Concrete Inputs
    "aten::cudnn_convolution_backward": Formula("conv", "bwd", _legacy_cudnn_conv_backward),
    "aten::cudnn_convolution_backward_input": Formula("conv", "bwd", _legacy_conv_backward_input),
    # fused attention, [B, H, S, D] tensors
    "aten::_scaled_dot_product_flash_attention": Formula("attention", "fwd", _sdpa_fwd),
    "aten::_scaled_dot_product_efficient_attention": Formula("attention", "fwd", _sdpa_fwd),
    "aten::_scaled_dot_product_cudnn_attention": Formula("attention", "fwd", _sdpa_fwd),
    "aten::_scaled_dot_product_flash_attention_backward": Formula("attention", "bwd", _sdpa_bwd),
    "aten::_scaled_dot_product_efficient_attention_backward": Formula("attention", "bwd", _sdpa_bwd),
    "aten::_scaled_dot_product_cudnn_attention_backward": Formula("attention", "bwd", _sdpa_bwd),
    # the kernels underneath, [B, S, H, D] tensors (counted only when called directly)
    "aten::_flash_attention_forward": Formula("attention", "fwd", _flash_like_fwd(3)),
    "aten::_efficient_attention_forward": Formula("attention", "fwd", _flash_like_fwd(4)),
    "aten::_flash_attention_backward": Formula("attention", "bwd", _flash_like_bwd(6)),
    "aten::_efficient_attention_backward": Formula("attention", "bwd", _flash_like_bwd(6)),
}

# Legacy conv ops that need Hints.grad_input / the children that reveal it.
LEGACY_CONV_BACKWARD = "aten::cudnn_convolution_backward"
LEGACY_CONV_BACKWARD_INPUT = "aten::cudnn_convolution_backward_input"
# Backward conv ops whose dims reveal a forward conv's output spatial size:
# name -> (grad_out index, input index, weight index)
CONV_BACKWARD_DIMS: dict[str, tuple[int, int, int]] = {
    "aten::convolution_backward": (0, 1, 2),
    "aten::cudnn_convolution_backward": (1, 0, 2),
}
CONV_FORWARD = frozenset(n for n, f in FORMULAS.items() if f.family == "conv" and f.direction == "fwd")


def is_flop_op(name: str) -> bool:
    """True for ops with a FLOP formula: use as the decoder's ``keep_inputs`` predicate.

    Also keeps the shapes of legacy conv backward ops, which tell forward convs
    their output size in traces without Concrete Inputs.
    """
    return name in FORMULAS


_NO_HINTS = Hints()


@lru_cache(maxsize=65536)
def _estimate_cached(name: str, dims: bytes | None, types: bytes | None, concrete: bytes | None) -> FlopEstimate | None:
    formula = FORMULAS.get(name)
    if formula is None:
        return None
    p = parse_inputs(OpInputs(dims, types, concrete))
    try:
        e = formula.fn(p, _NO_HINTS)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return None
    return e if e is None or _plausible_flops(e) else None


def estimate(name: str, inputs: OpInputs, hints: Hints | None = None) -> FlopEstimate | None:
    """Full estimate (FLOPs, dtype, family, direction, recompute share, exactness) or None."""
    if hints is None or (hints.conv_out is None and hints.grad_input is None):
        return _estimate_cached(name, inputs.dims, inputs.types, inputs.concrete)
    formula = FORMULAS.get(name)
    if formula is None:
        return None
    try:
        e = formula.fn(parse_inputs(inputs), hints)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return None
    return e if e is None or _plausible_flops(e) else None


def op_flops(name: str, inputs: OpInputs) -> float | None:
    """FLOPs of one op from its recorded inputs, or None (no formula, unparsable shapes)."""
    e = estimate(name, inputs)
    return None if e is None else e.flops


def op_dtype(name: str, inputs: OpInputs) -> str | None:
    """Compute dtype of a formula op (``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp8"``...)."""
    e = estimate(name, inputs)
    return None if e is None else e.dtype
