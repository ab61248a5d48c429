"""Minimum bytes per op from recorded shapes: hand-computed cases, then real samples."""

from __future__ import annotations

import glob
import json
from math import prod
from typing import Any

import pytest

from tb_mfu_plugin.analysis.bytes import op_bytes as B
from tb_mfu_plugin.analysis.flops import shapes as F
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.tables import OP, OpInputs

try:
    from conftest import SAMPLES
except ImportError:  # pragma: no cover
    from pathlib import Path

    SAMPLES = Path(__file__).resolve().parents[3] / "sample_traces"

BF16, FP32, I64 = "c10::BFloat16", "float", "long int"


def est(name: str, dims: list[Any], types: list[str], concrete: list[str] | None = None) -> B.OpCost:
    inputs = OpInputs(
        json.dumps(dims).encode(),
        json.dumps(types).encode(),
        json.dumps(concrete).encode() if concrete is not None else None,
    )
    got = B.estimate(name, inputs)
    assert got is not None, name
    return got


# --------------------------------------------------------------------------- elementwise


def test_streaming_mul_out_variant_reads_x_and_writes_out_once() -> None:
    # torch.mul(x, 2.0, out=y), as recorded in sample_traces/roofline_microbench
    n = 1 << 28
    c = est("aten::mul", [[n], [], [n]], [BF16, "double", BF16])
    assert c.bytes == 2 * n * 2  # 512 MiB read + 512 MiB written, the out tensor is not read
    assert c.flops == n and c.op_class == "elementwise" and c.dtype == "bf16"


def test_functional_binary_broadcasts_and_promotes() -> None:
    # add(float [8, 1024, 1024], float [1024, 1024]): each input read at its own size
    c = est("aten::add", [[8, 1024, 1024], [1024, 1024], []], [FP32, FP32, "Scalar"], ["", "", "1"])
    assert c.bytes == 4 * (8 * 1024 * 1024 + 1024 * 1024) + 4 * 8 * 1024 * 1024
    # bf16 * fp32 writes fp32 (the widest input)
    c = est("aten::mul", [[4, 8], [4, 8]], [BF16, FP32])
    assert c.bytes == 32 * 2 + 32 * 4 + 32 * 4


def test_in_place_reads_all_inputs_and_writes_self() -> None:
    c = est("aten::add_", [[32768, 1024], [32768, 1024], []], [FP32, FP32, "Scalar"], ["", "", "1"])
    n = 32768 * 1024
    assert c.bytes == 4 * n * 3  # read self and other, write self
    # masked_fill_ with a broadcast bool mask [1, 1, T, T]
    c = est("aten::masked_fill_", [[8, 16, 64, 64], [1, 1, 64, 64], []], [BF16, "bool", "Scalar"])
    assert c.bytes == 2 * 8 * 16 * 64 * 64 * 2 + 64 * 64


def test_comparisons_write_bools_and_zero_dim_tensors_count_one_element() -> None:
    assert est("aten::eq", [[10, 10], [10, 10]], [I64, I64]).bytes == 800 + 800 + 100
    assert est("aten::add_", [[], [], []], [I64, I64, "Scalar"]).bytes == 16  # num_batches_tracked += 1


# --------------------------------------------------------------------------- matmul, attention, conv


def test_matmul_reads_both_operands_and_writes_the_product() -> None:
    c = est("aten::mm", [[8192, 1024], [1024, 32768]], [BF16, BF16])
    assert c.bytes == 2 * (8192 * 1024 + 1024 * 32768 + 8192 * 32768)
    assert c.flops == 2 * 8192 * 1024 * 32768 and c.op_class == "matmul"
    c = est("aten::addmm", [[4096], [8192, 1024], [1024, 4096], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"])
    assert c.bytes == 2 * (4096 + 8192 * 1024 + 1024 * 4096 + 8192 * 4096)
    c = est("aten::bmm", [[128, 1024, 64], [128, 64, 1024]], [BF16, BF16])
    assert c.bytes == 2 * 128 * (1024 * 64 * 2 + 1024 * 1024)


def test_fused_attention_never_counts_the_score_matrix() -> None:
    q = [8, 16, 1024, 64]
    fwd = est("aten::_scaled_dot_product_cudnn_attention", [q, q, q, [], []], [BF16, BF16, BF16, "", "Scalar"])
    qkv = 3 * prod(q) * 2
    assert fwd.bytes == qkv + prod(q) * 2 + 8 * 16 * 1024 * 4  # + O + fp32 log-sum-exp
    assert fwd.bytes < 8 * 16 * 1024 * 1024 * 2  # far less than one bf16 T x T matrix
    bwd = est("aten::_scaled_dot_product_flash_attention_backward", [q, q, q, q, q, [8, 16, 1024]], [BF16] * 5 + [FP32])
    assert bwd.bytes == 2 * qkv + 2 * prod(q) * 2 + 8 * 16 * 1024 * 4
    assert bwd.op_class == "attention" and bwd.flops == 2.5 * fwd.flops


def test_conv_output_size_follows_from_the_flop_formula() -> None:
    # ResNet stem: 64x3x224x224, 7x7 stride 2 pad 3 -> 64x64x112x112
    dims = [[64, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []]
    types = [BF16, BF16, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"]
    concrete = ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"]
    c = est("aten::cudnn_convolution", dims, types, concrete)
    assert c.bytes == 2 * (64 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + 64 * 64 * 112 * 112)


# --------------------------------------------------------------------------- norms, softmax, gathers, optimizer


def test_layer_norm_reads_x_and_params_writes_y_and_fp32_stats() -> None:
    c = est(
        "aten::native_layer_norm",
        [[8, 1024, 1024], [], [1024], [1024], []],
        [FP32, "ScalarList", FP32, FP32, "Scalar"],
        ["", "[1024]", "", "", "1e-05"],
    )
    n, rows = 8 * 1024 * 1024, 8 * 1024
    assert c.bytes == 4 * n + 2 * 4 * 1024 + 4 * n + 2 * 4 * rows
    assert c.op_class == "norm"


def test_softmax_half_to_float_and_backward_input_dtype() -> None:
    n = 8 * 16 * 128 * 128
    assert (
        est("aten::_softmax", [[8, 16, 128, 128], [], []], [BF16, "Scalar", "Scalar"], ["", "-1", "True"]).bytes
        == 2 * n + 4 * n
    )
    # _softmax_backward_data(grad fp32, out fp32, dim, input_dtype=15 (bf16)) writes bf16
    assert (
        est(
            "aten::_softmax_backward_data",
            [[8, 16, 128, 128], [8, 16, 128, 128], [], []],
            [FP32, FP32, "Scalar", "Scalar"],
            ["", "", "-1", "15"],
        ).bytes
        == 4 * n * 2 + 2 * n
    )


def test_embedding_reads_only_the_rows_it_gathers() -> None:
    c = est("aten::embedding", [[32768, 1024], [8, 1024], [], [], []], [FP32, I64, "Scalar", "Scalar", "Scalar"])
    rows = 8 * 1024
    assert c.bytes == rows * 8 + 2 * rows * 1024 * 4  # indices + picked rows read, output written
    assert c.flops == 0


def test_reduction_writes_the_reduced_shape() -> None:
    c = est("aten::sum", [[8192, 1024], [], [], []], [BF16, "ScalarList", "Scalar", ""], ["", "[0]", "True", ""])
    assert c.bytes == 2 * (8192 * 1024 + 1024)


def test_copy_casts_and_fills() -> None:
    assert est("aten::copy_", [[4, 4], [4, 4], []], [BF16, FP32, "Scalar"]).bytes == 16 * 4 + 16 * 2
    assert est("aten::fill_", [[], []], [FP32, "Scalar"]).bytes == 4


def test_fused_adamw_moves_params_grads_and_both_moments() -> None:
    shapes = [[4096, 4096], [4096]]
    dims = [shapes, shapes, shapes, shapes, [], [[], []]] + [[]] * 9
    types = ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""]
    c = est("aten::_fused_adamw_", dims, types)
    n = 4096 * 4096 + 4096
    assert c.bytes == n * 7 * 4  # read p, g, m, v; write p, m, v (fp32 assumed: not exact)
    assert c.op_class == "optimizer" and not c.exact


def test_long_tensor_lists_recorded_empty_have_no_estimate() -> None:
    dims: list[Any] = [[]] * 15
    inputs = OpInputs(json.dumps(dims).encode(), json.dumps(["TensorList"] * 6 + ["Scalar"] * 9).encode(), None)
    assert B.estimate("aten::_fused_adamw_", inputs) is None


def test_every_flop_formula_has_a_byte_formula() -> None:
    assert set(F.FORMULAS) <= set(B.BYTE_FORMULAS)
    assert B.is_roofline_op("aten::native_layer_norm") and not B.is_roofline_op("aten::view")


# --------------------------------------------------------------------------- real samples


def _ops(run: str, names: set[str]) -> list[tuple[str, list[Any], list[str], B.OpCost]]:
    (path,) = glob.glob(str(SAMPLES / run / "*.pt.trace.json.gz"))
    t = decode_trace(path, keep_inputs=B.is_roofline_op)
    out = []
    for r in t.cpu.input_rows.tolist():
        inp = t.cpu.inputs_at(r)
        assert inp is not None
        name = t.names[t.cpu.name[r]]
        if t.cpu.kind[r] != OP or name not in names:
            continue
        cost = B.estimate(name, inp)
        if cost is not None:
            out.append((name, json.loads(inp.dims or b"[]"), json.loads(inp.types or b"[]"), cost))
    return out


def test_sample_matmuls_follow_flop_counter_shape_reasoning() -> None:
    """Each mm of the GPT sample: FLOPs 2·M·N·K (FlopCounterMode), bytes (MK + KN + MN)·2."""
    ops = _ops("gpt_sdpa_fused", {"aten::mm"})
    assert len(ops) > 50
    for _, dims, types, c in ops:
        (m, k), (k2, n) = dims[0], dims[1]
        assert k == k2 and types[0] == BF16
        assert c.flops == 2 * m * n * k
        assert c.bytes == 2 * (m * k + k * n + m * n)
        assert c.flops / c.bytes == pytest.approx(m * n * k / (m * k + k * n + m * n))


def test_sample_pointwise_ops_move_inputs_plus_one_output() -> None:
    """Same-shape pointwise ops of the naive-attention GPT: (inputs + 1) x numel x element size."""
    ops = _ops("gpt_naive_attention", {"aten::gelu", "aten::mul", "aten::add", "aten::gelu_backward"})
    assert ops
    for name, dims, types, c in ops:
        tensors = [(d, t) for d, t in zip(dims, types, strict=False) if d and t not in ("Scalar", "")]
        if len({tuple(d) for d, _ in tensors}) != 1 or len({t for _, t in tensors}) != 1:
            continue  # broadcast or mixed dtypes: covered by the hand-made cases
        size = {BF16: 2, FP32: 4}[tensors[0][1]]
        assert c.bytes == (len(tensors) + 1) * prod(tensors[0][0]) * size, (name, dims)
