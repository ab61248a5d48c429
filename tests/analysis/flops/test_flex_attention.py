"""FlexAttention under torch.compile: Inductor runs it as Triton template kernels, which the profiler
records as cpu_ops named after the kernel with their arguments' shapes. Their FLOPs are
FlopCounterMode's for the flex_attention op: scaled-dot-product attention, dense (4·B·H·Sq·Sk·D
forward, 2.5x backward), whatever the block mask.

(Eager flex_attention needs no formula of its own: it records ``FlexAttentionAutogradOp`` around
the ``aten::matmul``/``aten::bmm`` of its unfused implementation, which are counted; seen on a
torch 2.13 CPU trace, where its backward is not supported.)"""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.flops import shapes as F
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.tables import OpInputs

B, H, S, D = 4, 16, 2048, 64
FWD = "triton_tem_fused_flex_attention_transpose_view_5"
BWD = "triton_tem_fused_flex_attention_backward_transpose_view_7"
BF16 = "c10::BFloat16"


def _inputs(dims: list[list[int]], types: list[str]) -> OpInputs:
    return OpInputs(json.dumps(dims).encode(), json.dumps(types).encode(), None)


# As the H200 gpt_flex_attention trace records them (causal BlockMask of 16 x 16 blocks of 128):
# the forward reads q, k, v as [B·S, H·D] (the transposes fused in), then logsumexp and max
# [B, H, S], the mask's block counts and indices, and writes the [B, H, S, D] output.
MASK = [[1, 1, 16], [1, 1, 16, 16], [1, 1, 16], [1, 1, 16, 16]]
FWD_DIMS = [[B * S, H * D]] * 3 + [[B, H, S]] * 2 + MASK + [[B, H, S, D], [], [], [], []]
FWD_TYPES = [BF16] * 3 + ["float"] * 2 + ["int"] * 4 + [BF16] + ["Scalar"] * 4
BWD_DIMS = [[B, H, S, D]] * 3 + [[B, H, S]] * 2 + [[B * S, H * D]] + [[B, H, S, D]] * 2 + MASK * 2 + [[B, H, S, D]]
BWD_TYPES = [BF16] * 3 + ["float"] * 2 + [BF16] * 3 + ["int"] * 8 + [BF16]


def test_forward_template_is_dense_sdpa() -> None:
    e = F.estimate(FWD, _inputs(FWD_DIMS, FWD_TYPES))
    assert e is not None and (e.family, e.direction, e.dtype) == ("attention", "fwd", "bf16")
    assert e.flops == 4 * B * H * S * S * D  # 68.7 GFLOP per layer: QKᵀ and PV, no causal discount


def test_backward_template_is_two_and_a_half_forwards() -> None:
    e = F.estimate(BWD, _inputs(BWD_DIMS, BWD_TYPES))
    assert e is not None and (e.family, e.direction) == ("attention", "bwd")
    assert e.flops == 2.5 * 4 * B * H * S * S * D
    assert e.recompute_flops == 2 * B * H * S * S * D  # the recomputed QKᵀ


def test_grouped_query_heads_from_the_fused_layout() -> None:
    """GQA with 4 KV heads: k and v are [B·S, 4·D]; the heads come from q's head dim."""
    dims = [[B * S, H * D], [B * S, 4 * D], [B * S, 4 * D], [B, H, S]] + MASK + [[B, H, S, D]]
    e = F.estimate(FWD, _inputs(dims, [BF16] * 3 + ["float"] + ["int"] * 4 + [BF16]))
    assert e is not None and e.flops == 4 * B * H * S * S * D


@pytest.mark.parametrize(
    "dims",
    [
        [[B * S, H * D]] * 3,  # no logsumexp: not a flex template's arguments
        [[B * S, H * D], [B * S, H * D], [B * S, H * D], [B, H, S + 1]],  # Sq disagrees with q
        [[B * S, H * D], [B * S, 3 * D], [B * S, 3 * D], [B, H, S]],  # 3 KV heads do not divide 16
    ],
)
def test_shapes_that_do_not_fit_give_no_estimate(dims: list[list[int]]) -> None:
    assert F.estimate(FWD, _inputs(dims, [BF16] * len(dims))) is None


def test_only_the_templates_have_a_formula() -> None:
    assert F.is_flop_op(FWD) and F.is_flop_op(BWD)
    # the persistent reduction and pointwise kernels of the backward's prologue are no attention
    assert not F.is_flop_op("triton_per_fused_flex_attention_backward_transpose_view_6")
    assert not F.is_flop_op("triton_poi_fused_flex_attention_backward_transpose_view_7")


@pytest.mark.parametrize("run", ["gpt_flex_attention", "gpt_flex_attention_full"])
def test_real_flex_attention_runs_count_every_flop(run: str) -> None:
    """H200, torch 2.11, the whole GPT compiled: 4 layers of flex attention, causal BlockMask or
    none. FlopCounterMode (flex replaced by SDPA, the same math) counts 5.0852e12 a step."""
    d = SAMPLES / run
    if not d.is_dir():
        pytest.skip(f"sample trace not recorded: {d}")
    truth = json.loads((d / "ground_truth.json").read_text())
    (w,) = analyze_path(str(d)).runs[0].workers
    assert w.summary is not None and w.summary.flops_per_step == truth["flops_per_step"]
