"""FLOP formulas on shapes worked out by hand, and parity with torch's FlopCounterMode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tb_mfu_plugin.analysis.flops import shapes as F
from tb_mfu_plugin.analysis.flops.formulas import FlopEstimate, Hints
from tb_mfu_plugin.analysis.flops.recorded_inputs import dtype_of, parse_inputs
from tb_mfu_plugin.trace.tables import OpInputs


def inp(dims: list[Any], types: list[str] | None = None, concrete: list[str] | None = None) -> OpInputs:
    if types is None:
        types = ["c10::BFloat16" if d else "" for d in dims]
    return OpInputs(
        json.dumps(dims).encode(),
        json.dumps(types).encode(),
        json.dumps(concrete).encode() if concrete is not None else None,
    )


def est(name: str, i: OpInputs, hints: Hints | None = None) -> FlopEstimate:
    e = F.estimate(name, i, hints)
    assert e is not None, name
    return e


# ---------------------------------------------------------------- matmuls


def test_mm_addmm_bmm_baddbmm() -> None:
    assert F.op_flops("aten::mm", inp([[4, 8], [8, 16]])) == 2 * 4 * 16 * 8 == 1024
    assert F.op_flops("aten::addmm", inp([[16], [4, 8], [8, 16], [], []])) == 1024
    assert F.op_flops("aten::bmm", inp([[3, 4, 8], [3, 8, 16]])) == 3 * 1024
    assert F.op_flops("aten::baddbmm", inp([[3, 4, 16], [3, 4, 8], [3, 8, 16], [], []])) == 3 * 1024
    assert F.op_flops("aten::_addmm_activation", inp([[16], [4, 8], [8, 16], [], [], []])) == 1024


def test_scaled_mm_is_fp8() -> None:
    i = inp([[32, 64], [64, 128], [], []], ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"])
    e = est("aten::_scaled_mm", i)
    assert e.flops == 2 * 32 * 128 * 64
    assert e.dtype == "fp8"


@pytest.mark.parametrize(
    "a,b,expected",
    [
        ([384, 256], [4, 256, 128], 2 * 384 * 256 * 128),  # MoE: each token meets one expert
        ([4, 8, 16], [4, 16, 32], 4 * 2 * 8 * 32 * 16),  # batched
        ([8, 64], [64, 32], 2 * 8 * 32 * 64),  # split along K
        ([4, 8, 16], [16, 128], 2 * 8 * 16 * 128),  # split along N
    ],
)
def test_grouped_mm(a: list[int], b: list[int], expected: int) -> None:
    assert F.op_flops("aten::_grouped_mm", inp([a, b, [4]])) == expected


def test_matmul_shapes_that_do_not_fit_give_none() -> None:
    assert F.op_flops("aten::mm", inp([[4, 8, 2], [8, 16]])) is None
    assert F.op_flops("aten::bmm", inp([[4, 8], [8, 16]])) is None
    assert F.op_flops("aten::mm", OpInputs(b"not json", None, None)) is None
    assert F.op_flops("aten::relu", inp([[4, 8]])) is None


# ---------------------------------------------------------------- convolutions

CONV_TYPES = ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]


def conv_inputs(
    x: list[int],
    w: list[int],
    stride: str,
    padding: str,
    transposed: str = "False",
    groups: str = "1",
    dilation: str = "[1, 1]",
) -> OpInputs:
    return inp(
        [x, w, [w[0]], [], [], [], [], [], []],
        CONV_TYPES,
        ["", "", "", stride, padding, dilation, transposed, "[0, 0]", groups],
    )


def test_convolution_stride_padding_from_concrete_inputs() -> None:
    # 16x16 input, 3x3 kernel, stride 2, padding 1 -> 8x8 output
    i = conv_inputs([2, 3, 16, 16], [8, 3, 3, 3], "[2, 2]", "[1, 1]")
    expected = 2 * 2 * 8 * 3 * 9 * 64
    assert F.op_flops("aten::convolution", i) == expected == 55296
    assert F.op_flops("aten::_convolution", i) == expected
    assert F.op_dtype("aten::convolution", i) == "fp32"


def test_convolution_dilation_and_padding_zero() -> None:
    # 10x10, 3x3 kernel, dilation 2 -> effective 5x5, no padding -> 6x6
    i = conv_inputs([1, 4, 10, 10], [4, 4, 3, 3], "[1, 1]", "[0, 0]", dilation="[2, 2]")
    assert F.op_flops("aten::convolution", i) == 2 * 1 * 4 * 4 * 9 * 36


def test_grouped_and_transposed_convolution() -> None:
    grouped = conv_inputs([2, 8, 8, 8], [8, 4, 3, 3], "[1, 1]", "[1, 1]", groups="2")
    assert F.op_flops("aten::convolution", grouped) == 2 * 2 * 8 * 4 * 9 * 64  # w[1] is C_in/groups
    transposed = conv_inputs([2, 8, 8, 8], [8, 4, 4, 4], "[2, 2]", "[1, 1]", transposed="True")
    assert F.op_flops("aten::convolution", transposed) == 2 * 2 * 8 * 4 * 16 * 64  # input spatial


def test_cudnn_convolution_has_padding_before_stride() -> None:
    i = inp(
        [[2, 3, 16, 16], [8, 3, 3, 3], [], [], [], [], [], [], []],
        ["float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
        ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
    )
    assert F.op_flops("aten::cudnn_convolution", i) == 55296


def test_slow_conv2d_forward() -> None:
    i = inp([[2, 3, 16, 16], [8, 3, 3, 3], [], [8], [], []], None, ["", "", "[3, 3]", "", "[2, 2]", "[1, 1]"])
    assert F.op_flops("aten::_slow_conv2d_forward", i) == 55296


def test_conv1d_and_conv3d() -> None:
    c1 = inp(
        [[2, 4, 32], [8, 4, 5], [8], [], [], [], [], [], []],
        CONV_TYPES,
        ["", "", "", "[1]", "[2]", "[1]", "False", "[0]", "1"],
    )
    assert F.op_flops("aten::convolution", c1) == 2 * 2 * 8 * 4 * 5 * 32
    c3 = inp(
        [[1, 2, 4, 4, 4], [3, 2, 1, 1, 1], [3], [], [], [], [], [], []],
        CONV_TYPES,
        ["", "", "", "[1, 1, 1]", "[0, 0, 0]", "[1, 1, 1]", "False", "[0, 0, 0]", "1"],
    )
    assert F.op_flops("aten::convolution", c3) == 2 * 1 * 3 * 2 * 1 * 64


def test_legacy_convolution_without_concrete_inputs() -> None:
    i = inp([[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []], ["float", "float"] + [""] * 7)
    i = OpInputs(i.dims, i.types, None)
    # output size learnt from a backward op with the same input/weight shapes
    hints = Hints(conv_out={((32, 3, 224, 224), (64, 3, 7, 7)): (112, 112)})
    e = est("aten::cudnn_convolution", i, hints)
    assert e.flops == 2 * 32 * 64 * 3 * 49 * 112 * 112 and e.exact
    # aten::convolution's transposed flag is unknown there: right number, flagged
    assert est("aten::convolution", i, hints).flops == e.flops
    assert not est("aten::convolution", i, hints).exact
    # no hint: documented fallback, stride 1 "same" padding, flagged inexact
    e = est("aten::cudnn_convolution", i)
    assert e.flops == 2 * 32 * 64 * 3 * 49 * 224 * 224 and not e.exact


BWD_TYPES = [
    "float",
    "float",
    "float",
    "ScalarList",
    "ScalarList",
    "ScalarList",
    "ScalarList",
    "Scalar",
    "ScalarList",
    "Scalar",
    "ScalarList",
]


def conv_bwd(
    go: list[int], x: list[int], w: list[int], stride: str, transposed: str, groups: str, mask: str
) -> OpInputs:
    return inp(
        [go, x, w, [], [], [], [], [], [], [], []],
        BWD_TYPES,
        ["", "", "", f"[{w[0]}]", stride, "[1, 1]", "[1, 1]", transposed, "[0, 0]", groups, mask],
    )


def test_convolution_backward_counts_each_computed_gradient() -> None:
    # grad_input (a transposed conv over grad_out's spatial) + grad_weight
    both = conv_bwd([2, 8, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3], "[2, 2]", "False", "1", "[True, True, True]")
    one = 2 * 2 * 8 * 3 * 9 * 64
    assert F.op_flops("aten::convolution_backward", both) == 2 * one
    weight_only = conv_bwd([2, 8, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3], "[2, 2]", "False", "1", "[False, True, True]")
    assert F.op_flops("aten::convolution_backward", weight_only) == one
    input_only = conv_bwd([2, 8, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3], "[2, 2]", "False", "1", "[True, False, False]")
    assert F.op_flops("aten::convolution_backward", input_only) == one


def test_convolution_backward_grouped_and_transposed_follow_flop_counter() -> None:
    # FlopCounterMode's grad_weight term reads C_in in full, so a grouped conv's
    # grad_weight counts groups x the real work; we follow it for parity.
    grouped = conv_bwd([2, 8, 8, 8], [2, 8, 8, 8], [8, 4, 3, 3], "[1, 1]", "False", "2", "[True, True, True]")
    assert F.op_flops("aten::convolution_backward", grouped) == 73728 + 147456
    transposed = conv_bwd([2, 4, 16, 16], [2, 8, 8, 8], [8, 4, 4, 4], "[2, 2]", "True", "1", "[True, True, True]")
    assert F.op_flops("aten::convolution_backward", transposed) == 262144


def test_legacy_cudnn_convolution_backward() -> None:
    # torch 1.9: (self, grad_output, weight, ...), output_mask never recorded
    i = inp(
        [[32, 64, 56, 56], [32, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], [], []],
        ["float", "float", "float"] + ["GenericList"] * 8,
    )
    i = OpInputs(i.dims, i.types, None)
    one = 2 * 32 * 64 * 64 * 9 * 56 * 56
    assert est("aten::cudnn_convolution_backward", i, Hints(grad_input=True)).flops == 2 * one
    assert est("aten::cudnn_convolution_backward", i, Hints(grad_input=False)).flops == one
    assert not est("aten::cudnn_convolution_backward", i).exact
    bi = inp([[], [32, 64, 56, 56], [64, 64, 3, 3], [], [], [], []], ["GenericList", "float", "float"] + [""] * 4)
    assert F.op_flops("aten::cudnn_convolution_backward_input", bi) == one


# ---------------------------------------------------------------- attention

B, H, S, D = 2, 4, 128, 64
QKV = [[B, H, S, D]] * 3
FWD = 4 * B * H * S * S * D  # two batched matmuls
SCORES = 2 * B * H * S * D * S  # one of them: q @ k^T


@pytest.mark.parametrize(
    "name",
    [
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
    ],
)
def test_sdpa_forward(name: str) -> None:
    e = est(name, inp(QKV + [[], [], []]))
    assert e.flops == FWD == 33554432
    assert e.family == "attention" and e.direction == "fwd" and e.recompute_flops == 0
    assert e.dtype == "bf16"


@pytest.mark.parametrize(
    "name",
    [
        "aten::_scaled_dot_product_flash_attention_backward",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_cudnn_attention_backward",
    ],
)
def test_sdpa_backward_is_two_and_a_half_forwards(name: str) -> None:
    e = est(name, inp([[B, H, S, D]] + QKV + [[], []]))
    assert e.flops == 2.5 * FWD == 5 * SCORES
    assert e.recompute_flops == SCORES  # the Q.K^T recompute, one fifth
    assert e.direction == "bwd"


def test_sdpa_gqa_and_cross_attention() -> None:
    gqa = inp([[2, 8, 128, 64], [2, 2, 128, 64], [2, 2, 128, 64]])
    assert F.op_flops("aten::_scaled_dot_product_flash_attention", gqa) == 4 * 2 * 8 * 128 * 128 * 64
    cross = inp([[1, 2, 10, 8], [1, 2, 20, 8], [1, 2, 20, 16]])
    cross_flops = 2 * 2 * 10 * 20 * 8 + 2 * 2 * 10 * 20 * 16
    assert F.op_flops("aten::_scaled_dot_product_efficient_attention", cross) == cross_flops
    bad = inp([[2, 3, 128, 64], [2, 2, 128, 64], [2, 2, 128, 64]])  # 3 heads over 2 kv heads
    assert F.op_flops("aten::_scaled_dot_product_flash_attention", bad) is None


def test_low_level_attention_kernels_use_bshd_layout() -> None:
    bshd = [[B, S, H, D]] * 3
    assert F.op_flops("aten::_flash_attention_forward", inp(bshd + [[], [], [], []])) == FWD
    assert F.op_flops("aten::_efficient_attention_forward", inp(bshd + [[], [], [], [], []])) == FWD
    e = est("aten::_flash_attention_backward", inp([[B, S, H, D]] + bshd + [[B, S, H, D], [B, H, S], [], []]))
    assert e.flops == 5 * SCORES and e.recompute_flops == SCORES
    e = est("aten::_efficient_attention_backward", inp([[B, S, H, D]] + bshd + [[], [B, S, H, D], [], []]))
    assert e.flops == 5 * SCORES


def test_variable_length_flash_assumes_equal_lengths() -> None:
    # two sequences packed into 256 tokens: [total, H, D] with cum_seq_q of 3 offsets
    packed = [[2 * S, H, D]] * 3 + [[3], [3], [], []]
    e = est("aten::_flash_attention_forward", inp(packed))
    assert e.flops == FWD and not e.exact


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    "t,expected",
    [
        ("c10::BFloat16", "bf16"),
        ("c10::Half", "fp16"),
        ("float", "fp32"),
        ("double", "fp64"),
        ("c10::Float8_e4m3fn", "fp8"),
        ("c10::Float8_e5m2", "fp8"),
        ("c10::Float8_e4m3fnuz", "fp8"),
        ("c10::Float4_e2m1fn_x2", "fp4"),
        ("long int", None),
        ("", None),
        (None, None),
    ],
)
def test_dtype_of(t: str | None, expected: str | None) -> None:
    assert dtype_of(t) == expected


def test_concrete_values() -> None:
    p = parse_inputs(inp([[], [], [], [], []], None, ["[2, 2]", "False", "1", "0.", ""]))
    assert [p.value(i) for i in range(5)] == [[2, 2], False, 1, 0.0, None]


def test_is_flop_op_is_the_table() -> None:
    assert F.is_flop_op("aten::mm")
    assert F.is_flop_op("aten::_scaled_dot_product_flash_attention_backward")
    assert not F.is_flop_op("aten::linear")  # composite: its addmm counts
    assert not F.is_flop_op("aten::matmul")
    assert not F.is_flop_op("aten::scaled_dot_product_attention")
    assert set(F.FORMULAS) >= {"aten::convolution_backward", "aten::_grouped_mm", "aten::_scaled_mm"}


# ---------------------------------------------------------------- parity with torch


def test_parity_with_flop_counter_mode_formulas() -> None:
    torch = pytest.importorskip("torch")
    fc = pytest.importorskip("torch.utils.flop_counter")
    assert F.op_flops("aten::mm", inp([[37, 53], [53, 71]])) == fc.mm_flop((37, 53), (53, 71))
    assert F.op_flops("aten::bmm", inp([[5, 37, 53], [5, 53, 71]])) == fc.bmm_flop((5, 37, 53), (5, 53, 71))
    qkv = inp([[3, 6, 77, 32], [3, 2, 91, 32], [3, 2, 91, 48]])
    assert F.op_flops("aten::_scaled_dot_product_flash_attention", qkv) == fc.sdpa_flop_count(
        (3, 6, 77, 32), (3, 2, 91, 32), (3, 2, 91, 48)
    )
    got = F.op_flops(
        "aten::_scaled_dot_product_efficient_attention_backward",
        inp([[3, 6, 77, 48], [3, 6, 77, 32], [3, 2, 91, 32], [3, 2, 91, 48]]),
    )
    assert got == fc.sdpa_backward_flop_count((3, 6, 77, 48), (3, 6, 77, 32), (3, 2, 91, 32), (3, 2, 91, 48))
    # a real convolution and its backward, as FlopCounterMode counts them
    conv = torch.nn.Conv2d(6, 12, 5, stride=3, padding=2, dilation=2, groups=3)
    x = torch.randn(2, 6, 29, 31, requires_grad=True)
    with fc.FlopCounterMode(display=False) as counter:
        conv(x).sum().backward()
    counts = counter.get_flop_counts()["Global"]
    out = conv(x)
    fwd = conv_inputs([2, 6, 29, 31], [12, 2, 5, 5], "[3, 3]", "[2, 2]", groups="3", dilation="[2, 2]")
    assert F.op_flops("aten::convolution", fwd) == counts[torch.ops.aten.convolution]
    bwd = inp(
        [list(out.shape), [2, 6, 29, 31], [12, 2, 5, 5], [], [], [], [], [], [], [], []],
        BWD_TYPES,
        ["", "", "", "[12]", "[3, 3]", "[2, 2]", "[2, 2]", "False", "[0, 0]", "3", "[True, True, True]"],
    )
    assert F.op_flops("aten::convolution_backward", bwd) == counts[torch.ops.aten.convolution_backward]
