"""Each rule on a hand-made trace with its answer worked out, and at its threshold edges:
the rule fires at the measured value and stays silent just above it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tb_mfu_plugin.analysis.evidence.host import HostActivity
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.per_device import analyze_device
from tb_mfu_plugin.diagnosis import DEFAULT, RULE_IDS, Diagnosis, diagnose
from tb_mfu_plugin.diagnosis.sync_subjects import GRAD_SCALER_STEP
from tb_mfu_plugin.reporting.device import device_report
from tb_mfu_plugin.trace.decode.decode import decode_trace

from ..helpers import Builder, analyze, ids, mfu_options, one, rule_gain

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float> >(int)"
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float, float, float>(float*)"


def test_rule_ids_are_the_fixed_ones() -> None:
    assert RULE_IDS == (
        "sync_point",
        "pageable_memcpy",
        "small_copies",
        "memcpy_bound",
        "naive_attention",
        "unfused_optimizer",
        "unfused_elementwise",
        "launch_bound",
        "tiny_kernels_in_graphs",
        "low_sm_efficiency",
        "no_tensor_cores",
        "dataloader_stall",
        "exposed_communication",
        "low_bus_bandwidth",
        "pipeline_bubble",
        "gpu_idle",
        "below_roofline",
        "memory_leak",
        "near_oom",
        "allocator_fragmentation",
        "memory_headroom",
        "activation_checkpointing",
    )


# --------------------------------------------------------------------------- sync_point


def _sync_trace(explicit: bool) -> Builder:
    b = Builder()
    b.step(1, 0, 1000)
    b.launch("k1", 10, 20, 380)  # GPU [20, 400)
    if explicit:
        b.sync("cudaDeviceSynchronize", 470, 120)  # torch.cuda.synchronize(): no op around it
    else:
        b.op("aten::item", 450, 150)
        b.op("aten::_local_scalar_dense", 455, 140)
        b.copy("DtoH (Device -> Pageable)", 460, 401, 2, 4)  # GPU [401, 403)
        b.sync("cudaStreamSynchronize", 470, 120)  # returns at 590, inside the idle gap [403, 660)
    # aten::item on a CPU tensor (the optimizer's step counter): no sync inside, not a finding
    b.op("aten::item", 600, 20)
    b.op("aten::_local_scalar_dense", 602, 15)
    b.launch("k2", 650, 660, 330)  # GPU [660, 990)
    return b


def test_sync_point_blames_item_through_nesting(tmp_path: Path) -> None:
    rep, *_ = analyze(_sync_trace(explicit=False), tmp_path)
    f = one(rep, "sync_point")
    ev = f.evidence
    assert ev.call == "tensor.item()" and f.subject == "tensor.item()"
    assert ev.root_op == "aten::item" and ev.op == "aten::_local_scalar_dense"
    assert ev.api == "cudaStreamSynchronize" and ev.copy_direction == "D2H"
    assert ev.count_per_step == 1  # the CPU-tensor aten::item is not counted
    assert ev.host_blocked_us_per_step == 120
    # min(idle gap it returned in = 257 µs, blocked = 120 µs)
    assert rule_gain(f) == pytest.approx(120)
    assert not ev.explicit


def test_explicit_synchronize_says_which_call(tmp_path: Path) -> None:
    rep, *_ = analyze(_sync_trace(explicit=True), tmp_path)
    f = one(rep, "sync_point")
    assert f.evidence.call == "torch.cuda.synchronize()"
    assert f.evidence.explicit is True and f.evidence.root_op is None
    assert "torch.cuda.synchronize()" in f.title
    assert "Event" in f.recommendation


UNSCALE = "aten::_amp_foreach_non_finite_check_and_unscale_"


def _scaler_trace(
    optimizer: str | None = "AdamW", between: str | None = None, unscale_step: int = 1, unscale: bool = True
) -> Builder:
    """fp16 training with torch.amp.GradScaler and an optimizer that cannot take found_inf on the GPU:
    ``scaler.step`` runs unscale_'s check, reads found_inf with .item() (a D2H copy and a sync), then
    the optimizer's step. ``between``: an op between the check and the read (a scalar read of the
    user's own: not GradScaler's); ``unscale_step`` 0: the check ran before the step."""
    b = Builder()
    b.step(1, 0, 1000)
    b.launch("k1", 10, 20, 380)  # GPU [20, 400)
    if unscale:
        at = 300 if unscale_step == 1 else -500
        b.op(UNSCALE, at, 30)
    if between is not None:
        b.op(between, 420, 10)
        if between == "aten::item":
            b.op("aten::_local_scalar_dense", 421, 8)
    b.op("aten::item", 450, 150)
    b.op("aten::_local_scalar_dense", 455, 140)
    b.copy("DtoH (Device -> Pageable)", 460, 401, 2, 4)  # GPU [401, 403)
    b.sync("cudaStreamSynchronize", 470, 120)  # returns at 590, inside the idle gap [403, 660)
    if optimizer is not None:  # a custom loop's step has no annotation
        b.op(f"Optimizer.step#{optimizer}.step", 600, 40)
    b.launch("k2", 650, 660, 330)  # GPU [660, 990)
    return b


def test_grad_scaler_found_inf_read_is_named_with_its_own_fix(tmp_path: Path) -> None:
    """The .item() right after GradScaler's unscale check is GradScaler.step's: the user never wrote
    it, so "keep the value on the GPU" cannot apply; a fused optimizer takes found_inf on the GPU."""
    rep, *_ = analyze(_scaler_trace(), tmp_path)
    f = one(rep, "sync_point")
    assert f.subject == GRAD_SCALER_STEP and f.evidence.call == GRAD_SCALER_STEP
    assert "GradScaler" in f.title
    assert "torch.optim.AdamW(params, ..., fused=True)" in f.recommendation
    assert "bfloat16" in f.recommendation and "loss.detach()" not in f.recommendation
    assert rule_gain(f) == pytest.approx(120)  # the gain is the sync's, as for any .item()


def test_grad_scaler_with_an_optimizer_without_fused_names_it(tmp_path: Path) -> None:
    rep, *_ = analyze(_scaler_trace(optimizer="RMSprop"), tmp_path)
    f = one(rep, "sync_point")
    assert f.subject == GRAD_SCALER_STEP
    assert "RMSprop cannot" in f.recommendation and "torch.optim.RMSprop" not in f.recommendation


def test_grad_scaler_with_no_named_optimizer_claims_none(tmp_path: Path) -> None:
    rep, *_ = analyze(_scaler_trace(optimizer=None), tmp_path)
    f = one(rep, "sync_point")
    assert f.subject == GRAD_SCALER_STEP
    assert "fused=True" in f.recommendation and "torch.optim." not in f.recommendation
    assert "cannot)" not in f.recommendation and "None" not in f.recommendation


@pytest.mark.parametrize(
    "kw",
    [
        {"unscale": False},  # no GradScaler: the user's own .item()
        {"unscale_step": 0},  # the check ran in the step before
        {"between": "aten::item"},  # another scalar read came first: that one was GradScaler's
    ],
)
def test_item_not_after_the_unscale_check_stays_the_users(tmp_path: Path, kw: dict) -> None:
    rep, *_ = analyze(_scaler_trace(**kw), tmp_path)
    subjects = {f.subject for f in rep.findings if f.id == "sync_point"}
    assert "tensor.item()" in subjects and GRAD_SCALER_STEP not in subjects


def test_grad_scaler_read_after_clip_grad_norm_is_still_its(tmp_path: Path) -> None:
    """scaler.unscale_(opt); clip_grad_norm_(...); scaler.step(opt): ops between, no scalar read."""
    rep, *_ = analyze(_scaler_trace(between="aten::_foreach_norm"), tmp_path)
    assert one(rep, "sync_point").subject == GRAD_SCALER_STEP


def test_sync_point_threshold_edge(tmp_path: Path) -> None:
    b = _sync_trace(explicit=False)
    assert "sync_point" in ids(analyze(b, tmp_path, replace(DEFAULT, sync_min_per_step=1.0))[0])
    assert "sync_point" not in ids(analyze(b, tmp_path, replace(DEFAULT, sync_min_per_step=1.01))[0])


# --------------------------------------------------------------------------- copies


def _copy_trace(pinned_too: bool = False, memory: str = "Pageable", host_end: float = 1000) -> Builder:
    b = Builder()
    b.step(1, 0, host_end)  # (host_end < 1000: the host's step ends before its GPU work does)
    b.copy(f"HtoD ({memory} -> Device)", 5, 10, 800, 8 << 20)  # 8 MiB in 800 µs: 10.5 GB/s
    if pinned_too:
        b.copy("HtoD (Pinned -> Device)", 6, 810, 100, 2 << 20)  # 2 MiB in 100 µs: 21 GB/s
    b.launch(GEMM, 7, 920, 80)
    return b


def test_pageable_memcpy_gain_is_the_faster_pinned_transfer(tmp_path: Path) -> None:
    rep, *_ = analyze(_copy_trace(), tmp_path)
    f = one(rep, "pageable_memcpy")
    (c,) = f.evidence.copies
    assert c.pinned_gbps == 40.0 and "assumed" in c.pinned_gbps_source  # H100: compute capability 9.0
    assert rule_gain(f) == pytest.approx(800 - (8 << 20) / 40e3, abs=0.1)
    assert "pin_memory=True" in f.recommendation and "non_blocking=True" in f.recommendation


def test_pageable_memcpy_uses_measured_pinned_bandwidth(tmp_path: Path) -> None:
    rep, *_ = analyze(_copy_trace(pinned_too=True), tmp_path)
    (c,) = one(rep, "pageable_memcpy").evidence.copies
    assert "measured" in c.pinned_gbps_source
    assert c.pinned_gbps == pytest.approx((2 << 20) / 100 / 1e3, abs=0.05)  # evidence is rounded


def test_pageable_memcpy_threshold_edges(tmp_path: Path) -> None:
    b = _copy_trace()
    by_bytes = replace(DEFAULT, pageable_min_bytes_per_step=8 << 20, pageable_min_share=1.0)
    assert "pageable_memcpy" in ids(analyze(b, tmp_path, by_bytes)[0])
    by_share = replace(DEFAULT, pageable_min_bytes_per_step=1e12, pageable_min_share=0.79)
    assert "pageable_memcpy" in ids(analyze(b, tmp_path, by_share)[0])
    neither = replace(DEFAULT, pageable_min_bytes_per_step=(8 << 20) + 1, pageable_min_share=0.81)
    assert "pageable_memcpy" not in ids(analyze(b, tmp_path, neither)[0])


def test_memcpy_bound(tmp_path: Path) -> None:
    b = _copy_trace(memory="Pinned", host_end=20)
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "memcpy_bound")
    assert f.evidence.copy_only_us_per_step == pytest.approx(800)
    # re-timed without the copies: the GEMM runs 110 µs after where they began, as it ran after them
    assert rule_gain(f) == pytest.approx(800) and f.est_gain_us_per_step == pytest.approx(800)
    # overlapping alone can hide the copy only behind the 200 µs that are not copies
    assert f.evidence.gain_if_overlapped_us_per_step == pytest.approx(200)
    assert f.severity == "high"
    assert "memcpy_bound" in ids(analyze(b, tmp_path, replace(DEFAULT, memcpy_bound_share=0.79))[0])
    assert "memcpy_bound" not in ids(analyze(b, tmp_path, replace(DEFAULT, memcpy_bound_share=0.81))[0])


def test_small_copies(tmp_path: Path) -> None:
    b = Builder()
    b.step(1, 0, 1000)
    for i in range(40):
        b.copy("DtoD (Device -> Device)", 1 + i, 10 + 20 * i, 5, 1024)
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "small_copies")
    assert f.evidence.small_copies_per_step == 40 and f.evidence.d2d_copies_per_step == 40
    assert rule_gain(f) == pytest.approx(200)
    edge = replace(DEFAULT, small_copies_per_step=40, d2d_copies_per_step=1e9)
    assert "small_copies" in ids(analyze(b, tmp_path, edge)[0])
    above = replace(DEFAULT, small_copies_per_step=41, d2d_copies_per_step=41)
    assert "small_copies" not in ids(analyze(b, tmp_path, above)[0])


# --------------------------------------------------------------------------- attention


def _attention_trace(inner: str = "aten::bmm", fused: bool = False, dims: list | None = None) -> Builder:
    b = Builder()
    b.step(1, 0, 1000)
    args = {"Input Dims": dims} if dims is not None else {}
    b.op("aten::matmul", 100, 50, **args)
    b.op(inner, 110, 35)
    b.launch(GEMM, 115, 120, 30)  # [120, 150)
    b.op("aten::mul", 160, 10)
    b.launch(MUL, 162, 150, 20)  # [150, 170): the scale
    b.op("aten::softmax", 180, 20)
    b.op("aten::_softmax", 182, 15)
    b.launch(SOFTMAX, 185, 170, 40)  # [170, 210)
    b.op("aten::dropout", 205, 5)
    b.op("aten::matmul", 220, 40, **args)
    b.op(inner, 225, 30)
    b.launch(GEMM, 230, 210, 30)  # [210, 240)
    if fused:
        b.launch("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >(Params)", 300, 300, 50)
    return b


def test_naive_attention_cost_is_the_chain_and_gain_its_non_matmul_part(tmp_path: Path) -> None:
    rep, *_ = analyze(_attention_trace(dims=[[2, 4, 16, 8], [2, 4, 8, 16]]), tmp_path)
    f = one(rep, "naive_attention")
    ev = f.evidence
    assert ev.ops == ["aten::matmul", "aten::softmax", "aten::dropout", "aten::matmul"]
    assert ev.forward_per_step == 1 and ev.backward_per_step == 0
    assert ev.four_d is True and ev.matmul_input_dims == [[2, 4, 16, 8], [2, 4, 8, 16]]
    assert ev.gpu_us_per_step == pytest.approx(120)  # 30 + 20 + 40 + 30
    assert rule_gain(f) == pytest.approx(60)  # scale + softmax; the matmuls stay
    assert "scaled_dot_product_attention" in f.recommendation


def test_naive_attention_silent_with_fused_kernel_or_unbatched_matmul(tmp_path: Path) -> None:
    assert "naive_attention" not in ids(analyze(_attention_trace(fused=True), tmp_path)[0])
    # aten::matmul dispatching to aten::mm: a folded 2-D matmul (a Linear), not attention
    assert "naive_attention" not in ids(analyze(_attention_trace(inner="aten::mm"), tmp_path)[0])
    # recorded 2-D operands
    assert "naive_attention" not in ids(analyze(_attention_trace(dims=[[16, 8], [8, 16]]), tmp_path)[0])


def test_naive_attention_launch_gap_edge(tmp_path: Path) -> None:
    b = _attention_trace()  # one launch (the scale) between the first matmul and the softmax
    assert "naive_attention" in ids(analyze(b, tmp_path, replace(DEFAULT, attention_max_launches_between=1))[0])
    assert "naive_attention" not in ids(analyze(b, tmp_path, replace(DEFAULT, attention_max_launches_between=0))[0])


def test_naive_attention_backward_chain(tmp_path: Path) -> None:
    b = Builder()
    b.step(1, 0, 1000)
    t = 100
    for name in ("aten::bmm", "aten::bmm", "aten::_softmax_backward_data", "aten::bmm", "aten::bmm"):
        b.op(name, t, 20)
        b.launch(GEMM if "bmm" in name else SOFTMAX, t + 2, t, 20)
        t += 30
    rep, *_ = analyze(b, tmp_path)
    ev = one(rep, "naive_attention").evidence
    assert ev.backward_per_step == 1
    assert ev.backward_ops == ["aten::bmm", "aten::bmm", "aten::_softmax_backward_data", "aten::bmm", "aten::bmm"]


# --------------------------------------------------------------------------- optimizer


def _optimizer_trace(kernel: str = ADD, n: int = 70) -> Builder:
    b = Builder()
    b.step(1, 0, 2000)
    b.launch(GEMM, 10, 20, 200)
    b.annotation("Optimizer.step#AdamW.step", 300, 1500)
    for i in range(n):
        b.op("aten::add_", 310 + 20 * i, 15)
        b.launch(kernel, 312 + 20 * i, 320 + 20 * i, 2)
    return b


def test_unfused_optimizer(tmp_path: Path) -> None:
    rep, *_ = analyze(_optimizer_trace(), tmp_path)
    f = one(rep, "unfused_optimizer")
    ev = f.evidence
    assert ev.optimizer == ["AdamW"] and ev.kernels_per_step == 70
    span = 20 * 69 + 2
    assert ev.gpu_span_us_per_step == pytest.approx(span)
    assert rule_gain(f) == pytest.approx(span - 0.5 * 140)
    assert "torch.optim.AdamW(params, ..., fused=True)" in f.recommendation
    edge = _optimizer_trace()
    assert "unfused_optimizer" in ids(analyze(edge, tmp_path, replace(DEFAULT, optimizer_min_kernels_per_step=70))[0])
    above = replace(DEFAULT, optimizer_min_kernels_per_step=71)
    assert "unfused_optimizer" not in ids(analyze(edge, tmp_path, above)[0])


def test_foreach_optimizer_is_not_unfused(tmp_path: Path) -> None:
    b = _optimizer_trace(kernel="void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor>()")
    assert "unfused_optimizer" not in ids(analyze(b, tmp_path)[0])


# --------------------------------------------------------------------------- kernels


def _elementwise_trace() -> Builder:
    b = Builder()
    b.step(1, 0, 1000)
    b.launch(GEMM, 1, 10, 90)
    for i in range(5):
        b.launch(ADD.replace("add", f"add{i}"), 2 + i, 100 + 100 * i, 100)
    b.launch(GEMM, 8, 600, 100)
    return b


def test_unfused_elementwise(tmp_path: Path) -> None:
    b = _elementwise_trace()
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "unfused_elementwise")
    assert f.evidence.runs_per_step == 1 and f.evidence.kernels_per_run_max == 5
    assert f.evidence.cost_us_per_step == pytest.approx(500)
    assert rule_gain(f) == pytest.approx(400)  # fused: one kernel as long as the longest
    assert "torch.compile" in f.recommendation
    assert "unfused_elementwise" in ids(analyze(b, tmp_path, replace(DEFAULT, elementwise_min_run=5))[0])
    assert "unfused_elementwise" not in ids(analyze(b, tmp_path, replace(DEFAULT, elementwise_min_run=6))[0])
    assert "unfused_elementwise" in ids(analyze(b, tmp_path, replace(DEFAULT, elementwise_min_share=0.4))[0])
    assert "unfused_elementwise" not in ids(analyze(b, tmp_path, replace(DEFAULT, elementwise_min_share=0.41))[0])


def _launch_trace() -> Builder:
    b = Builder()
    b.step(1, 0, 1100)
    for i in range(100):
        b.launch(ADD, 5 + 10 * i, 10 + 10 * i, 2)  # 2 µs kernels, 8 µs apart
    return b


def test_launch_bound(tmp_path: Path) -> None:
    b = _launch_trace()
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "launch_bound")
    ev = f.evidence
    assert ev.kernels_per_step == 100 and ev.median_kernel_us == 2
    # the gap before the first kernel, 99 gaps of 8 µs, and the 98 µs tail: all short
    assert ev.launch_gap_us_per_step == pytest.approx(10 + 99 * 8 + 98)
    assert rule_gain(f) == pytest.approx(900)
    assert "gpu_idle" not in ids(rep)  # launch_bound claims that idle
    assert "CUDA Graphs" in f.recommendation
    assert "launch_bound" in ids(analyze(b, tmp_path, replace(DEFAULT, launch_min_kernels_per_step=100))[0])
    above, *_ = analyze(b, tmp_path, replace(DEFAULT, launch_min_kernels_per_step=101))
    assert "launch_bound" not in ids(above) and "gpu_idle" in ids(above)  # unclaimed idle is reported
    assert "launch_bound" in ids(analyze(b, tmp_path, replace(DEFAULT, launch_gap_min_share=0.81))[0])  # 900/1100
    assert "launch_bound" not in ids(analyze(b, tmp_path, replace(DEFAULT, launch_gap_min_share=0.82))[0])


def test_low_sm_efficiency_skips_collectives(tmp_path: Path) -> None:
    b = Builder()
    b.step(1, 0, 1000)
    b.launch(SOFTMAX, 1, 10, 400, blocks_per_sm=0.25)
    b.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 2, 500, 400, blocks_per_sm=0.1, stream=9)
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "low_sm_efficiency")
    assert f.evidence.us_per_step == pytest.approx(400)
    assert rule_gain(f) == pytest.approx(300)  # 400 µs x (1 - 0.25)
    (k,) = f.evidence.kernels
    assert k.mean_blocks_per_sm == pytest.approx(0.25)
    assert "low_sm_efficiency" in ids(analyze(b, tmp_path, replace(DEFAULT, low_sm_min_share=0.3))[0])
    assert "low_sm_efficiency" not in ids(analyze(b, tmp_path, replace(DEFAULT, low_sm_min_share=0.31))[0])
    assert "low_sm_efficiency" not in ids(analyze(b, tmp_path, replace(DEFAULT, low_blocks_per_sm=0.25))[0])


@pytest.mark.parametrize(("kernel", "fires"), [("volta_sgemm_128x64_nn", True), (GEMM, False)])
def test_no_tensor_cores(tmp_path: Path, kernel: str, fires: bool) -> None:
    b = Builder()
    b.step(1, 0, 1000)
    b.launch(kernel, 1, 10, 200)
    b.launch(ADD, 2, 210, 700)
    rep, *_ = analyze(b, tmp_path)
    assert ("no_tensor_cores" in ids(rep)) is fires
    if fires:
        f = one(rep, "no_tensor_cores")
        assert rule_gain(f) == pytest.approx(100)  # 200 µs x (1 - 1/2)
        assert "bfloat16" in f.recommendation  # compute capability 9.0: bf16 / TF32
        assert "no_tensor_cores" in ids(analyze(b, tmp_path, replace(DEFAULT, no_tc_min_share=0.2))[0])
        assert "no_tensor_cores" not in ids(analyze(b, tmp_path, replace(DEFAULT, no_tc_min_share=0.21))[0])


@pytest.mark.parametrize("fp32_inputs", [False, True])
def test_no_tensor_cores_unknown_gemms_need_fp32_inputs(tmp_path: Path, fp32_inputs: bool) -> None:
    """A GEMM no family names is unknown: never evidence by itself, but fp32 inputs without TF32 are."""
    b = Builder()
    b.step(1, 0, 1000)
    types = ["float", "float"] if fp32_inputs else ["c10::BFloat16", "c10::BFloat16"]
    ext = b.op("aten::mm", 5, 300, **{"Input Dims": [[64, 64], [64, 64]], "Input type": types})
    corr = b.runtime("cudaLaunchKernel", 6, 1.0, ext=ext)
    b.kernel("my_new_library_gemm_kernel_v2", 10, 200, corr, ext=ext)
    b.launch(ADD, 320, 210, 700)
    rep, *_ = analyze(b, tmp_path)
    assert rep.summary is not None and rep.summary.unknown_core_kernel_share == pytest.approx(200 / 900)
    assert ("no_tensor_cores" in ids(rep)) is fp32_inputs
    if fp32_inputs:
        ev = one(rep, "no_tensor_cores").evidence
        assert ev.basis == ["fp32 matmul inputs (Input type) with no TF32 kernel in the run"]
        assert [k.core_class for k in ev.kernels] == ["unknown"]


def test_no_tensor_cores_ignores_bf16_gemv(tmp_path: Path) -> None:
    """A bf16 GEMV runs on CUDA cores by shape: autocast or TF32 would not change it."""
    b = Builder()
    b.step(1, 0, 1000)
    b.launch("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float>(...)", 1, 10, 500)
    rep, *_ = analyze(b, tmp_path)
    assert rep.summary is not None and rep.summary.cuda_core_matmul_kernel_share == pytest.approx(1.0)
    assert "no_tensor_cores" not in ids(rep)


# --------------------------------------------------------------------------- idle


@pytest.mark.parametrize("as_op", [False, True])  # torch 2.x annotation / 2021 cpu_op
def test_dataloader_stall(tmp_path: Path, as_op: bool) -> None:
    b = Builder()
    b.step(1, 0, 1000)
    name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    if as_op:
        b.op(name, 2, 300)
    else:
        b.annotation(name, 2, 300)
    b.launch(GEMM, 310, 320, 680)
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "dataloader_stall")
    assert f.evidence.gpu_idle_us_per_step == pytest.approx(300)
    assert f.evidence.single_process is True
    assert "num_workers" in f.recommendation
    assert "dataloader_stall" in ids(analyze(b, tmp_path, replace(DEFAULT, dataloader_min_share=0.3))[0])
    assert "dataloader_stall" not in ids(analyze(b, tmp_path, replace(DEFAULT, dataloader_min_share=0.31))[0])


def test_gpu_idle_names_what_the_host_did(tmp_path: Path) -> None:
    b = Builder()
    b.step(1, 0, 1000)
    b.launch(GEMM, 5, 10, 100)  # [10, 110)
    b.op("aten::expensive_cpu_thing", 120, 580)
    b.launch(GEMM, 850, 900, 100)  # the host launches late: GPU idle [110, 900)
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "gpu_idle")
    ev = f.evidence
    assert ev.unexplained_us_per_step == pytest.approx(800)  # [0, 10) and [110, 900)
    assert ev.host_gaps_us_per_step == pytest.approx(790)
    (gap, *_) = ev.largest_gaps
    assert gap.us == pytest.approx(790) and gap.host_launched_during_gap
    assert gap.host_activity[0] == HostActivity(name="aten::expensive_cpu_thing", us=580)
    assert "gpu_idle" in ids(analyze(b, tmp_path, replace(DEFAULT, gpu_idle_min_share=0.8))[0])
    assert "gpu_idle" not in ids(analyze(b, tmp_path, replace(DEFAULT, gpu_idle_min_share=0.81))[0])


# --------------------------------------------------------------------------- engine


def test_mfu_after_and_severity(tmp_path: Path) -> None:
    # the host's step ends once it has launched, so the GPU holds the step: without the copies the
    # re-timed step is the GEMM's 80 µs after the 110 µs it waited behind them
    b = _copy_trace(memory="Pinned", host_end=20)
    rep, *_ = analyze(b, tmp_path, options=mfu_options(0.2, 1000.0))
    f = one(rep, "memcpy_bound")
    assert f.est_gain_us_per_step == pytest.approx(800)
    assert f.est_mfu_after == pytest.approx(0.2 * 1000 / (1000 - 800), rel=1e-3)
    low = replace(DEFAULT, high_share=0.9, medium_share=0.8)
    assert one(analyze(b, tmp_path, low)[0], "memcpy_bound").severity == "medium"


def test_error_report_gets_no_findings(tmp_path: Path) -> None:
    b = Builder()  # no step marker, and device 1 ran nothing: its report is an error, with nothing diagnosed
    b.kernel("k", 0, 10, 1)
    tables = decode_trace(str(b.write(tmp_path / "w.pt.trace.json.gz")))
    analysis = analyze_device(tables, 1, AnalysisOptions())
    assert analysis.report.error is not None and analysis.view is None
    assert diagnose(analysis) == Diagnosis()
    report = device_report(tables, 1, AnalysisOptions(), DEFAULT)
    assert report.findings == [] and report.waterfall == [] and report.error == analysis.report.error


def test_a_failing_retiming_keeps_the_findings_with_their_own_estimates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tb_mfu_plugin.diagnosis import engine

    def broken(*_: object) -> None:
        raise ValueError("a bug in the model")

    monkeypatch.setattr(engine, "retime", broken)
    rep, *_ = analyze(_sync_trace(explicit=False), tmp_path)
    f = one(rep, "sync_point")
    assert f.est_gain_us_per_step == pytest.approx(rule_gain(f)) and rep.whatif is None
    assert "what-if re-timing failed: ValueError: a bug in the model" in rep.notes
