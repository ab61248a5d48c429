"""The evidence of the rules about kernels: fusion, SM efficiency, tensor cores, the roofline
(``diagnosis/rules/fusion.py``, ``sm_efficiency.py``, ``tensor_cores.py``, ``roofline.py``). Per
step: the mean analysed step."""

from __future__ import annotations

from typing import Annotated

import msgspec

from .common import FindingEvidence, KernelRow
from .units import Count, Shapes, Share, Text, Time, Whole, unit


class NaiveAttentionEvidence(FindingEvidence, tag="naive_attention"):
    chains_per_step: Count
    forward_per_step: Count
    backward_per_step: Count
    ops: list[Text]  # one forward chain's ops
    backward_ops: list[Text] | None
    matmul_input_dims: Shapes | None
    four_d: Annotated[bool, unit("flag", label="4-D scores")] | None  # every chain's: batch x heads x T x T
    gpu_us_per_step: Time
    matmul_us_per_step: Time
    non_matmul_us_per_step: Time
    kernels: list[KernelRow]
    # the blocking copies that build the chains' additive mask (transformers' eager mask): SDPA builds
    # none, so they are this finding's, not sync_point's (analysis.flops.attention_mask)
    mask_syncs_per_step: Count = 0.0
    mask_sync_idle_us_per_step: Time = 0.0


class UnfusedOptimizerEvidence(FindingEvidence, tag="unfused_optimizer"):
    optimizer: list[Text]
    kernels_per_step: Count
    multi_tensor_kernel_share: Share
    foreach_or_fused_ops: dict[str, Whole]  # op -> calls in the optimizer steps
    host_us_per_step: Time
    gpu_span_us_per_step: Time
    gpu_busy_us_per_step: Time
    median_kernel_us: Time
    kernels: list[KernelRow]
    zero_grad_kernels_per_step: Count
    zero_grad_us_per_step: Time
    sync_idle_us_per_step: Time  # sync_point's, inside the span


class UnfusedElementwiseEvidence(FindingEvidence, tag="unfused_elementwise"):
    runs_per_step: Count
    kernels_per_run_median: Count
    kernels_per_run_max: Whole
    kernels_per_step: Count
    us_per_step: Time
    kernels: list[KernelRow]
    costliest_run: list[Text]  # its first kernels
    compiled_regions: list[Text]


class LowSmKernelRow(KernelRow, kw_only=True):
    mean_blocks_per_sm: Count  # time-weighted
    lost_us_per_step: Time


class LowSmEfficiencyEvidence(FindingEvidence, tag="low_sm_efficiency"):
    us_per_step: Time
    lost_us_per_step: Time
    share_of_step: Share
    num_sms: Whole | None
    kernels: list[LowSmKernelRow]


class TensorCoreKernelRow(KernelRow, kw_only=True):
    core_class: Text = msgspec.field(name="class")  # analysis.kernels.families' class
    dtype: Text | None
    family: Text | None  # the table entry that matched


class NoTensorCoresEvidence(FindingEvidence, tag="no_tensor_cores"):
    non_tensor_core_us_per_step: Time
    matmul_conv_us_per_step: Time
    non_tensor_core_share_of_matmul: Share | None
    unknown_core_us_per_step: Time
    basis: list[Text]  # why these kernels are off the tensor cores
    compute_capability: Text | None
    matmul_input_types: dict[str, Whole]  # first-input dtype -> matmul/conv ops
    kernels: list[TensorCoreKernelRow]


class RooflineOpRow(msgspec.Struct, kw_only=True):
    name: Text
    op_class: Text = msgspec.field(name="class")
    shapes: Text  # the recorded Input Dims
    us_per_step: Time
    roof_share: Share | None
    lost_us_per_step: Time | None
    cause: Text


class BelowRooflineEvidence(FindingEvidence, tag="below_roofline"):
    ops: list[RooflineOpRow]
    ops_below: Whole
    lost_us_per_step: Time
    far_below_share: Share  # roofline_far_below
