"""Evidence extraction: name classes, host windows, attention chains, elementwise runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.flops import attention_chains as ac
from tb_mfu_plugin.analysis.kernels import name_patterns as nm
from tb_mfu_plugin.analysis.kernels.kernels import tensor_core_mask
from tb_mfu_plugin.analysis.time import patterns as pt
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.tables import GpuTable, TraceTables

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"


def _tables(b: TraceBuilder, tmp_path: Path) -> TraceTables:
    return decode_trace(str(b.write(tmp_path / "p.pt.trace.json.gz")), keep_inputs=lambda n: n == "aten::matmul")


def _annotation(b: TraceBuilder, name: str, ts: float, dur: float) -> None:
    b.events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": name,
            "pid": b.pid,
            "tid": b.tid,
            "ts": ts,
            "dur": dur,
            "args": {},
        }
    )


# One kernel name per line: the long real names stay whole, each with its noqa.
# fmt: off
@pytest.mark.parametrize(
    ("name", "matmul", "tensor_core_or_simt"),
    [
        ("volta_sgemm_128x64_nn", True, "simt"),
        ("void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int)", True, "simt"),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", True, "tc"),
        # cuBLAS xmma GEMMs running FFMA (fp32, TF32 off): CUDA cores, seen on the H200 sample
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", True, "simt"),  # noqa: E501
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)", True, "simt"),  # noqa: E501
        ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn", True, "tc"),  # noqa: E501
        ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(Params)", True, "simt"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128", True, "tc"),
        ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct)", False, None),
        ("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", False, None),
        ("void at::native::unrolled_elementwise_kernel<convert_float_to_half>(int)", False, None),
        (ADD, False, None),
    ],
)
# fmt: on
def test_matmul_kernel_names(name: str, matmul: bool, tensor_core_or_simt: str | None) -> None:
    assert bool(nm.matmul_kernel_mask([name])[0]) is matmul
    assert bool(nm.elementwise_kernel_mask([name])[0]) is (not matmul)
    if tensor_core_or_simt is not None:  # no_tensor_cores counts the SIMT ones
        assert bool(tensor_core_mask([name])[0]) is (tensor_core_or_simt == "tc")


def test_other_name_classes() -> None:
    names = [
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >(Params)",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
        "void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor>()",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "triton_poi_fused_add_mul_0",
        ADD,
    ]
    assert nm.fused_attention_kernel_mask(names).tolist() == [True, True, False, False, False, False]
    assert nm.multi_tensor_kernel_mask(names).tolist() == [False, False, True, False, False, False]
    assert nm.comm_kernel_mask(names).tolist() == [False, False, False, True, False, False]
    # fused attention is matmul work; Inductor and NCCL kernels never join an elementwise run
    assert nm.elementwise_kernel_mask(names).tolist() == [False, False, False, False, False, True]


def test_windows_and_launched_in(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    _annotation(b, "Optimizer.step#AdamW.step", 100, 100)
    _annotation(b, "Optimizer.step#AdamW.step", 120, 10)  # nested duplicate: dropped
    b.launch_kernel(ADD, 110, 300, 2)  # launched inside
    b.launch_kernel(ADD, 250, 310, 2)  # outside
    t = _tables(b, tmp_path)
    rows = pt.optimizer_step_rows(t)
    assert len(rows) == 1 and t.cpu.dur[rows[0]] == 100
    inside = pt.launched_in(t, t.launcher, pt.Windows.of_rows(t, rows))
    assert inside.tolist() == [True, False]
    # another thread's launches are not inside the window
    other = pt.Windows(np.array([b.pid]), np.array([b.tid + 1]), np.array([0.0]), np.array([1000.0]))
    assert not pt.launched_in(t, t.launcher, other).any()


def test_dataloader_rows_from_ops_and_annotations(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 5, 50)  # 2021 traces: a cpu_op
    _annotation(b, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 500, 10)
    b.launch_kernel(ADD, 600, 610, 2)
    t = _tables(b, tmp_path)
    assert t.cpu.ts[pt.dataloader_rows(t)].tolist() == [5, 500]


def _chain(
    b: TraceBuilder, t0: float, inner: str = "aten::bmm", dims: list | None = None, gap_launches: int = 1
) -> None:
    args = {"Input Dims": dims} if dims is not None else {}
    b.op("aten::matmul", t0, 50, **args)
    b.op(inner, t0 + 10, 35)
    b.launch_kernel(GEMM, t0 + 15, t0 + 20, 30)
    for i in range(gap_launches):
        b.op("aten::mul", t0 + 52 + i, 0.5)
        b.launch_kernel(ADD, t0 + 52.2 + i, t0 + 52 + i, 1)
    t1 = t0 + 60 + gap_launches
    b.op("aten::softmax", t1, 20)
    b.op("aten::_softmax", t1 + 2, 15)
    b.launch_kernel("softmax_kernel", t1 + 5, t1, 40)
    b.op("aten::dropout", t1 + 25, 5)
    b.op("aten::matmul", t1 + 40, 40, **args)
    b.op(inner, t1 + 45, 30)
    b.launch_kernel(GEMM, t1 + 50, t1 + 40, 30)


def test_attention_chain_without_shapes(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    _chain(b, 100)
    (c,) = ac.attention_chains(_tables(b, tmp_path))
    assert c.ops == ("aten::matmul", "aten::softmax", "aten::dropout", "aten::matmul")
    assert not c.backward and c.four_d is None and c.shapes is None
    assert c.start == 100 and c.end == 100 + 61 + 80


def test_attention_chain_shapes_and_rejections(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 5000)
    _chain(b, 100, dims=[[8, 16, 1024, 64], [8, 16, 64, 1024]])
    (c,) = ac.attention_chains(_tables(b, tmp_path))
    assert c.four_d is True and c.shapes == "[[8, 16, 1024, 64], [8, 16, 64, 1024]]"

    b = TraceBuilder()
    b.step(1, 0, 5000)
    _chain(b, 100, dims=[[1024, 64], [64, 1024]])  # recorded 2-D operands
    _chain(b, 1000, inner="aten::mm")  # aten::matmul folded to mm: a Linear
    _chain(b, 2000, gap_launches=9)  # too much work between the matmul and the softmax
    t = _tables(b, tmp_path)
    assert ac.attention_chains(t) == []
    assert len(ac.attention_chains(t, max_launches_between=9)) == 1


def test_elementwise_runs() -> None:
    n = 8
    names = [GEMM, ADD, "triton_poi_fused_add_0"]
    code = np.array([0, 1, 1, 1, 1, 0, 1, 2], np.int32)
    gpu = GpuTable(
        kind=np.zeros(n, np.int8),
        name=code,
        ts=np.arange(n) * 10.0,
        dur=np.full(n, 5.0),
        device=np.zeros(n, np.int32),
        stream=np.full(n, 7),
        correlation=np.arange(n),
        external_id=np.full(n, -1),
        blocks_per_sm=np.full(n, np.nan, np.float32),
        occupancy_pct=np.full(n, np.nan, np.float32),
        grid_blocks=np.full(n, -1),
        block_threads=np.full(n, -1),
        bytes=np.full(n, -1),
        comm=np.full(n, -1, np.int32),
    )
    ew = nm.elementwise_kernel_mask(names)
    (run,) = pt.elementwise_runs(gpu, ew, np.ones(n, bool), min_len=4)
    assert run.tolist() == [1, 2, 3, 4]
    eligible = np.ones(n, bool)
    eligible[2] = False  # claimed by another pattern: the run breaks
    assert pt.elementwise_runs(gpu, ew, eligible, min_len=4) == []


def test_host_activity(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::outer", 100, 300)
    b.op("aten::inner", 150, 50)  # nested: counted in its parent
    _annotation(b, "## logging ##", 500, 200)
    b.launch_kernel(ADD, 900, 910, 2)
    t = _tables(b, tmp_path)
    assert pt.host_activity(t, 200, 600) == [
        {"name": "aten::outer", "us": 200.0},
        {"name": "## logging ##", "us": 100.0},
    ]
