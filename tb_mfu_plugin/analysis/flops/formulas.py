"""The FLOP formulas of matmuls, convolutions and fused attention, as FlopCounterMode counts.

Each formula is a small function of an op's parsed inputs (``recorded_inputs.Parsed``) and
the cross-op ``Hints`` of legacy traces; ``flops.FORMULAS`` names the op each one serves.
The conventions are those of ``torch.utils.flop_counter.FlopCounterMode`` (see ``flops``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import prod

from .recorded_inputs import Parsed, concrete_ints


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
    """Cross-op facts ``conv_hints`` learns for legacy traces without Concrete Inputs."""

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


def mm_args(a_idx: int, b_idx: int) -> FormulaFn:
    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        a, b = p.shape(a_idx), p.shape(b_idx)
        if a is None or b is None or len(a) != 2 or len(b) != 2:
            return None
        return FlopEstimate(float(_mm(a[0], a[1], b[1])), p.dtype(a_idx), "matmul", "fwd")

    return f


def bmm_args(a_idx: int, b_idx: int) -> FormulaFn:
    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        a, b = p.shape(a_idx), p.shape(b_idx)
        if a is None or b is None or len(a) != 3 or len(b) != 3:
            return None
        return FlopEstimate(float(a[0] * _mm(a[1], a[2], b[2])), p.dtype(a_idx), "matmul", "fwd")

    return f


def grouped_mm(p: Parsed, h: Hints) -> FlopEstimate | None:
    """``grouped_mm(mat_a, mat_b, offs, ...)``, the MoE grouped GEMM.

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
    return [(x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(len(w) - 2)]


def conv_fwd(stride_i: int, padding_i: int, dilation_i: int | None, transposed_i: int | None) -> FormulaFn:
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
        stride = concrete_ints(p.value(stride_i), nsp)
        padding = concrete_ints(p.value(padding_i), nsp)
        dilation = concrete_ints(p.value(dilation_i), nsp) if dilation_i is not None else [1] * nsp
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


def conv_backward(p: Parsed, h: Hints) -> FlopEstimate | None:
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


def legacy_cudnn_conv_backward(p: Parsed, h: Hints) -> FlopEstimate | None:
    """torch ≤1.10 ``cudnn_convolution_backward(self, grad_output, weight, ..., output_mask)``.

    ``output_mask`` is never recorded (no Concrete Inputs then); ``conv_hints``
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


def legacy_conv_backward_input(p: Parsed, h: Hints) -> FlopEstimate | None:
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


def _bhsd_at(p: Parsed, qi: int) -> tuple[int, int, int, int, int, int] | None:
    """``_bhsd`` of the q, k, v tensors at arguments ``qi``, ``qi + 1``, ``qi + 2``."""
    q, k, v = p.shape(qi), p.shape(qi + 1), p.shape(qi + 2)
    if q is None or k is None or v is None:
        return None
    return _bhsd(q, k, v)


def sdpa_fwd(p: Parsed, h: Hints) -> FlopEstimate | None:
    s = _bhsd_at(p, 0)
    if s is None:
        return None
    return FlopEstimate(float(_sdpa_fwd_flops(*s)), p.dtype(0), "attention", "fwd")


def sdpa_bwd(p: Parsed, h: Hints) -> FlopEstimate | None:
    s = _bhsd_at(p, 1)
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


def flash_like(direction: str, cu_i: int) -> FormulaFn:
    """The low-level flash/efficient attention kernels' ops, ``"fwd"`` (q at argument 0) or
    ``"bwd"`` (after grad_out: q at argument 1), with ``cum_seq_q`` at argument ``cu_i``."""
    qi = 0 if direction == "fwd" else 1

    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        got = _bshd_dims(p, qi, cu_i)
        if got is None:
            return None
        shapes, exact = got
        if direction == "fwd":
            total, rec = sum(_sdpa_fwd_flops(*s) for s in shapes), 0
        else:
            per_seq = [_sdpa_bwd_flops(*s) for s in shapes]
            total, rec = sum(t for t, _ in per_seq), sum(r for _, r in per_seq)
        return FlopEstimate(float(total), p.dtype(qi), "attention", direction, recompute_flops=float(rec), exact=exact)

    return f


# ---------------------------------------------------------------------------
# FlexAttention compiled by Inductor: its Triton template kernels


def _flex_shape(t: Sequence[int], b: int, per_head: int | None) -> tuple[int, int, int] | None:
    """(S, H, D) of a q/k/v argument of a flex template: ``[B, H, S, D]``, or ``[B·S, H·D]`` when
    Inductor fused the transpose into the kernel (then D, or H, must come from elsewhere: ``per_head``
    is the head dim when known, else H·D is returned as D with H = 1 for the caller to split)."""
    if len(t) == 4 and t[0] == b:
        return t[2], t[1], t[3]
    if len(t) == 2 and b > 0 and t[0] % b == 0:
        if per_head:
            if t[1] % per_head:
                return None
            return t[0] // b, t[1] // per_head, per_head
        return t[0] // b, 1, t[1]
    return None


def _flex_dims(p: Parsed) -> tuple[int, int, int, int, int, int] | None:
    """(B, H_q, Sq, Sk, Dq, Dv) of a flex attention template from its first four arguments: q, k, v
    (``[B, H, S, D]`` or ``[B·S, H·D]``) and the logsumexp ``[B, H_q, Sq]``, which every flex template
    (forward and backward) takes fourth and which fixes B, H_q and Sq."""
    q, k, v, lse = p.shape(0), p.shape(1), p.shape(2), p.shape(3)
    if q is None or k is None or v is None or lse is None or len(lse) != 3:
        return None
    b, hq, sq = lse
    got_q = _flex_shape(q, b, None)
    if got_q is None or got_q[0] != sq:
        return None
    dq = got_q[2] if len(q) == 4 else (got_q[2] // hq if hq and got_q[2] % hq == 0 else 0)
    got_k, got_v = _flex_shape(k, b, dq), _flex_shape(v, b, None)
    if not dq or got_k is None or got_v is None or got_v[0] != got_k[0]:
        return None
    sk, hk = got_k[0], got_k[1]
    if hk <= 0 or hq % hk:
        return None
    dv = got_v[2] if len(v) == 4 else (got_v[2] // hk if got_v[2] % hk == 0 else 0)
    return (b, hq, sq, sk, dq, dv) if dv else None


def flex_template(direction: str) -> FormulaFn:
    """Inductor's Triton templates for ``flex_attention`` (``triton_tem_fused_..flex_attention..``)
    and its backward, counted as FlopCounterMode counts the flex_attention higher-order op: as
    scaled-dot-product attention, dense (a block mask, causal or not, is not discounted: the mask's
    blocks are tensor values, which the trace does not record)."""

    def f(p: Parsed, h: Hints) -> FlopEstimate | None:
        s = _flex_dims(p)
        if s is None:
            return None
        if direction == "fwd":
            return FlopEstimate(float(_sdpa_fwd_flops(*s)), p.dtype(0), "attention", "fwd")
        total, rec = _sdpa_bwd_flops(*s)
        return FlopEstimate(float(total), p.dtype(0), "attention", "bwd", recompute_flops=float(rec))

    return f
