"""A B200 MoE step of block-scaled FP8/FP4 GEMMs: tensor-core math, so no ``no_tensor_cores``.

**Hand-made trace.** No real B200 trace is available here. The kernel names are copied from
published TRT-LLM-generated (trtllm-gen) batched-GEMM cubins and cuBLASLt/FMHA names seen in
SGLang/FlashInfer profiles on B200 (``bmm_E4m3_E4m3E4m3_Fp32_..._sm100f``,
``bmm_Bfloat16_E2m1E2m1_Fp32_..._sm100f``, ``Bmm_MxE4m3_MxE2m1MxE4m3_..._sm100f``,
``nvjet_sm100_tst_...``, ``fmhaSm100fKernel_...``); the timings are made up so that the
MoE GEMMs take 77 % of the matmul time, as in the run the issue describes, where the old
name list called them CUDA-core and ``no_tensor_cores`` fired."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.running.pipeline import analyze_run
from tb_mfu_plugin.trace.locate.discover import discover_runs

B200 = {
    "id": 0,
    "name": "NVIDIA B200",
    "computeMajor": 10,
    "computeMinor": 0,
    "numSms": 148,
    "maxThreadsPerMultiprocessor": 2048,
}

FP8_MOE = (
    "bmm_E4m3_E4m3E4m3_Fp32_t128x64x128u2_s6_et64x64_m64x64x32_c1x1x1_rM_TN_transOut_noShfl_dsFp8_schPd4x2x2"
    "x3_bN_tma_tmaSf_rgTma_clmp_lbW4_dynB_sm100f"
)
FP4_MOE = (
    "bmm_Bfloat16_E2m1E2m1_Fp32_Ab16_Bb16_t128x128x256u2_s6_et128x128_m256x128x64_c2x1x1_rM_TN_transOut_schPd"
    "2x1x2x3_biasFp32M_bN_rgTma_clmp_dynB_sm100f"
)
MX_MOE = (
    "Bmm_MxE4m3_MxE2m1MxE4m3_Fp32_bA32_bB32_bC32_t128x128x256_s4_et128x128_m256x128x32_cga2x1x1_16dp256b_rM_TN"
    "_transOut_schPd2x1x2x3_swiGlu_bN_tma_tmaSf_sm100f"
)
DENSE = "nvjet_sm100_tst_128x256_64x6_2x1_2cta_v_bz_TNT"
ATTN = "fmhaSm100fKernel_QkvE4m3OBfloat16HQk128HV128SeparateQkvCausalP64VarSeqQ128Kv128PersistentContext"
ROUTING = "void moe::dev::routing::routingMainKernel<moe::dev::routing::KernelParams<__nv_bfloat16>>(...)"

# (kernel, µs per step): MoE GEMMs 770 of 1000 µs of matmul time
STEP = [(FP4_MOE, 440.0), (FP8_MOE, 230.0), (MX_MOE, 100.0), (DENSE, 150.0), (ATTN, 80.0), (ROUTING, 60.0)]


def _b200_run(tmp_path: Path) -> Path:
    b = TraceBuilder(devices=[B200])
    t = 0.0
    for n in (1, 2, 3):
        b.step(n, t, 1300)
        gpu = t + 20
        for i, (name, dur) in enumerate(STEP):
            b.launch_kernel(name, t + 2 + i, gpu, dur, blocks_per_sm=1.0, occupancy=None)
            gpu += dur + 5
        t += 1300
    return b.write(tmp_path / "b200" / "rank0.pt.trace.json.gz").parent


def test_block_scaled_moe_gemms_are_tensor_core_and_no_tensor_cores_stays_silent(tmp_path: Path) -> None:
    (found,) = discover_runs(str(_b200_run(tmp_path)))
    (w,) = analyze_run(found, AnalysisOptions(flops_per_step=2e12)).workers
    assert w.error is None and w.summary is not None and w.flops is not None
    kernel_us = sum(d for _, d in STEP)
    assert w.summary.tensor_core_kernel_share == pytest.approx(1000 / kernel_us)
    assert w.summary.unknown_core_kernel_share == 0 and w.summary.cuda_core_matmul_kernel_share == 0
    assert "no_tensor_cores" not in {f.id for f in w.findings}
    by_name = {k.name: k for k in w.top_kernels}
    assert {by_name[n].dtype for n in (FP4_MOE, FP8_MOE, MX_MOE, DENSE, ATTN)} == {"fp4", "fp8", "bf16"}
    assert by_name[MX_MOE].dtype == "fp8"  # MXFP4 x MXFP8 runs at the FP8 rate
    assert all(by_name[n].core == "tensor-core" for n in (FP4_MOE, FP8_MOE, MX_MOE, DENSE, ATTN))
    assert by_name[ROUTING].core == "not-a-matmul"
    # no shapes: the peak follows the kernels' dominant dtype, FP4 (440 of 1000 µs; FP8 410)
    peak = w.flops.peak
    assert peak.dtype == "fp4" and peak.dtype_source == "kernel names"
    assert peak.peak_flops == pytest.approx(9000e12) and w.flops.kernel_dtype_shares["fp4"] == pytest.approx(0.44)
    assert w.summary.mfu_traced == pytest.approx(2e12 / 1300e-6 / 9000e12)
