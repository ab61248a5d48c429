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

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ...trace.tables import CpuTable, OpInputs
from .formulas import (
    FlopEstimate,
    Formula,
    Hints,
    bmm_args,
    conv_backward,
    conv_fwd,
    flash_like,
    flex_template,
    grouped_mm,
    legacy_conv_backward_input,
    legacy_cudnn_conv_backward,
    mm_args,
    sdpa_bwd,
    sdpa_fwd,
)
from .recorded_inputs import MAX_OP_FLOPS, decode_list, parse_inputs, plausible_shape

# ---------------------------------------------------------------------------
# the table

_MM = mm_args(0, 1)
_ADDMM = mm_args(1, 2)
_BMM = bmm_args(0, 1)
_BADDBMM = bmm_args(1, 2)

FORMULAS: dict[str, Formula] = {
    # matmuls: 2·M·N·K
    "aten::mm": Formula("matmul", "fwd", _MM),
    "aten::addmm": Formula("matmul", "fwd", _ADDMM),
    "aten::bmm": Formula("matmul", "fwd", _BMM),
    "aten::baddbmm": Formula("matmul", "fwd", _BADDBMM),
    "aten::_scaled_mm": Formula("matmul", "fwd", _MM),
    "aten::_scaled_mm_v2": Formula("matmul", "fwd", _MM, beyond_flop_counter=True),
    "aten::_addmm_activation": Formula("matmul", "fwd", _ADDMM, beyond_flop_counter=True),
    "aten::_grouped_mm": Formula("matmul", "fwd", grouped_mm, beyond_flop_counter=True),
    "aten::_scaled_grouped_mm": Formula("matmul", "fwd", grouped_mm, beyond_flop_counter=True),
    "aten::_scaled_grouped_mm_v2": Formula("matmul", "fwd", grouped_mm, beyond_flop_counter=True),
    # convolutions (argument positions of stride, padding, dilation, transposed)
    "aten::convolution": Formula("conv", "fwd", conv_fwd(3, 4, 5, 6)),
    "aten::_convolution": Formula("conv", "fwd", conv_fwd(3, 4, 5, 6)),
    "aten::convolution_overrideable": Formula("conv", "fwd", conv_fwd(3, 4, 5, 6)),
    "aten::cudnn_convolution": Formula("conv", "fwd", conv_fwd(3, 2, 4, None)),
    "aten::_slow_conv2d_forward": Formula("conv", "fwd", conv_fwd(4, 5, None, None)),
    "aten::convolution_backward": Formula("conv", "bwd", conv_backward),
    "aten::convolution_backward_overrideable": Formula("conv", "bwd", conv_backward, beyond_flop_counter=True),
    # torch <= 1.10 names (2021 traces): counted through their shapes, no Concrete Inputs
    "aten::cudnn_convolution_backward": Formula("conv", "bwd", legacy_cudnn_conv_backward),
    "aten::cudnn_convolution_backward_input": Formula("conv", "bwd", legacy_conv_backward_input),
    # fused attention, [B, H, S, D] tensors
    "aten::_scaled_dot_product_flash_attention": Formula("attention", "fwd", sdpa_fwd),
    "aten::_scaled_dot_product_efficient_attention": Formula("attention", "fwd", sdpa_fwd),
    "aten::_scaled_dot_product_cudnn_attention": Formula("attention", "fwd", sdpa_fwd),
    "aten::_scaled_dot_product_flash_attention_backward": Formula("attention", "bwd", sdpa_bwd),
    "aten::_scaled_dot_product_efficient_attention_backward": Formula("attention", "bwd", sdpa_bwd),
    "aten::_scaled_dot_product_cudnn_attention_backward": Formula("attention", "bwd", sdpa_bwd),
    # the kernels underneath, [B, S, H, D] tensors (counted only when called directly)
    "aten::_flash_attention_forward": Formula("attention", "fwd", flash_like("fwd", 3)),
    "aten::_efficient_attention_forward": Formula("attention", "fwd", flash_like("fwd", 4)),
    "aten::_flash_attention_backward": Formula("attention", "bwd", flash_like("bwd", 6)),
    "aten::_efficient_attention_backward": Formula("attention", "bwd", flash_like("bwd", 6)),
}

# Ops whose name is made up per program: Inductor names a template kernel after the ops it fuses
# ("triton_tem_fused_flex_attention_transpose_view_5"), and records it as a cpu_op with its
# arguments' shapes. Backward first: its name holds the forward's.
FORMULA_PATTERNS: tuple[tuple[re.Pattern[str], Formula], ...] = (
    (re.compile(r"^triton_tem_fused_\w*flex_attention_backward"), Formula("attention", "bwd", flex_template("bwd"))),
    (re.compile(r"^triton_tem_fused_\w*flex_attention"), Formula("attention", "fwd", flex_template("fwd"))),
)


@lru_cache(maxsize=65536)
def formula_of(name: str) -> Formula | None:
    """The FLOP formula of an op name: ``FORMULAS``, else the first of ``FORMULA_PATTERNS`` it matches."""
    got = FORMULAS.get(name)
    if got is not None:
        return got
    return next((f for pattern, f in FORMULA_PATTERNS if pattern.match(name)), None)


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
    # formula_of's test without its cache: the decoder asks once per distinct name, and a trace of
    # many steps has one name per step, which would only churn the cache
    return FORMULAS.get(name) is not None or _ANY_FORMULA_PATTERN.match(name) is not None


# FORMULA_PATTERNS as one alternation: it matches where any of them does
_ANY_FORMULA_PATTERN = re.compile("|".join(f"(?:{pattern.pattern})" for pattern, _ in FORMULA_PATTERNS))


_NO_HINTS = Hints()


@lru_cache(maxsize=65536)
def _estimate_cached(name: str, dims: bytes | None, types: bytes | None, concrete: bytes | None) -> FlopEstimate | None:
    formula = formula_of(name)
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
    formula = formula_of(name)
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


@lru_cache(maxsize=65536)
def _implausible(name: str, dims: bytes | None, types: bytes | None, concrete: bytes | None) -> bool:
    shapes = [d for d in decode_list(dims) if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    if not all(plausible_shape(d) for d in shapes):
        return True
    formula = formula_of(name)
    if formula is None:
        return False
    try:
        e = formula.fn(parse_inputs(OpInputs(dims, types, concrete)), _NO_HINTS)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return False
    return e is not None and not _plausible_flops(e)


def implausible_input_ops(names: Sequence[str], cpu: CpuTable) -> int:
    """How many kept ops of the cpu table have impossible recorded shapes (and therefore unknown
    FLOPs); each distinct (op, inputs) pair is judged once."""
    codes, ids, pair_of = cpu.distinct_inputs(cpu.input_rows)
    if not len(codes):
        return 0
    counts = np.bincount(pair_of, minlength=len(codes))
    records = cpu.input_records
    return sum(
        n
        for code, i, n in zip(codes.tolist(), ids.tolist(), counts.tolist(), strict=True)
        if _implausible(names[code], records[i].dims, records[i].types, records[i].concrete)
    )


def _plausible_flops(e: FlopEstimate) -> bool:
    return 0.0 <= e.flops <= MAX_OP_FLOPS
