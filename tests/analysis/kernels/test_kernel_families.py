"""The kernel family table: class and dtype of real kernel names.

Names are copied from real traces (our H200 samples, the TraceLens H100/MI300X twins, the HTA
and torch-tb-profiler fixtures) or, for Blackwell, from kernel names published by TRT-LLM /
FlashInfer / SGLang profiles (no B200 trace is available here)."""

from __future__ import annotations

import numpy as np
import pytest

from tb_mfu_plugin.analysis.kernels import families as kf
from tb_mfu_plugin.analysis.kernels.families import MATMUL_KERNEL
from tb_mfu_plugin.analysis.kernels.kernels import tensor_core_mask

TC, CUDA, NOT, UNK = kf.TENSOR_CORE, kf.CUDA_CORE, kf.NOT_MATMUL, kf.UNKNOWN

CASES = [
    # --- cuBLAS / cuBLASLt / nvjet (H200 samples, TraceLens H100)
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", TC, "bf16"),
    ("nvjet_sm90_tss_128x256_64x4_1x2_h_bz_coopA_TNN", TC, "bf16"),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNT", TC, "fp16"),
    ("nvjet_qqtst_128x256_128x6_2x1_2cta_v_bz_TNT", TC, "fp8"),
    ("nvjet_qqtst_128x256_128x6_2x2_2cta_h_bz_Avec32UE8M0_Bvec32UE8M0_TNT", TC, "fp8"),  # MXFP8
    ("nvjet_sm100_tst_128x256_64x6_2x1_2cta_v_bz_TNT", TC, "bf16"),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
        "__5x_cublas",
        TC,
        "bf16",
    ),
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_"
        "kernel__5x_cublas",
        CUDA,
        "fp32",
    ),
    ("volta_sgemm_128x64_nn", CUDA, "fp32"),
    ("ampere_sgemm_128x64_nn", CUDA, "fp32"),
    ("volta_h884gemm_64x64_ldg8_nn", TC, "fp16"),
    (
        "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, "
        "false, cublasGemvParamsEx<int>>(...)",
        CUDA,
        "bf16",
    ),
    ("void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<float>, float const*)", NOT, None),
    # --- CUTLASS 2.x / 3.x
    (
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_"
        "align1::Params)",
        CUDA,
        "fp32",
    ),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(cutlass_80_tensorop_s1688gemm_"
        "128x64_32x6_nt_align1::Params)",
        TC,
        "tf32",
    ),
    ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>(...)", TC, "bf16"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(...)", TC, "bf16"),
    (
        "void cutlass::device_kernel<cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_128x256x64_1x2x1_0_tnn_align8"
        "_warpspecialized_cooperative_epi_tma>(...)",
        TC,
        "fp16",
    ),
    (
        "void cutlass::device_kernel<cutlass3x_sm100_tensorop_gemm_e4m3_e4m3_f32_void_bf16_256x128x128_2x1x1_0_tnn"
        "_align16_2sm>(...)",
        TC,
        "fp8",
    ),
    (
        "kernel_cutlass_kernel_flashinfergemmkernelsdense_blockscaled_gemm_sm100Sm100BlockScaledPersistentDenseGemm"
        "Kernel_object_at__e2m1",
        TC,
        "fp4",
    ),
    # --- cuDNN
    (
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x128x64_warpgroupsize2x1x1_g1_"
        "execute_segment_k_off_kernel__5x_cudnn",
        TC,
        "bf16",
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize"
        "2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
        TC,
        "tf32",
    ),
    ("volta_scudnn_128x128_stridedB_splitK_small_nn_v1", CUDA, "fp32"),
    ("void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, int)", CUDA, "fp32"),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(...)", CUDA, "fp32"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0", TC, None),
    # --- attention
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
        "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >>(...)",
        TC,
        "bf16",
    ),
    ("fmhaSm100fKernel_QkvE4m3OBfloat16HQk128HV128SeparateQkvCausalP64VarSeqQ128Kv128PersistentContext", TC, "fp8"),
    ("attn_fwd", TC, None),  # Triton flash attention on MI300X (TraceLens)
    # --- TRT-LLM generated GEMMs (Blackwell, block-scaled FP8/FP4 MoE)
    (
        "bmm_E4m3_E4m3E4m3_Fp32_t128x64x128u2_s6_et64x64_m64x64x32_c1x1x1_rM_TN_transOut_noShfl_dsFp8_schPd4x2x2x3_bN"
        "_tma_tmaSf_rgTma_clmp_lbW4_dynB_sm100f",
        TC,
        "fp8",
    ),
    (
        "bmm_Bfloat16_E2m1E2m1_Fp32_Ab16_Bb16_t128x128x256u2_s6_et128x128_m256x128x64_c2x1x1_rM_TN_transOut_schPd2x1x2"
        "x3_biasFp32M_bN_rgTma_clmp_dynB_sm100f",
        TC,
        "fp4",
    ),
    (
        "Bmm_MxE4m3_MxE2m1MxE4m3_Fp32_bA32_bB32_bC32_t128x128x256_s4_et128x128_m256x128x32_cga2x1x1_16dp256b_rM_TN_"
        "transOut_schPd2x1x2x3_swiGlu_bN_tma_tmaSf_sm100f",
        TC,
        "fp8",
    ),  # MXFP4 x MXFP8: the FP8 rate
    (
        "bmm_E4m3_E4m3E4m3_Fp32_t128x128x128u2_s4_et64x64_m64x128x32_cga1x1x1_16dp256b_TN_transOut_schedP2_biasFp32_bN"
        "_ldgsts_sm100f",
        TC,
        "fp8",
    ),
    # --- Triton
    ("triton_tem_fused_mm_0", TC, None),
    ("triton_poi_fused_addmm_relu_0", NOT, None),  # the epilogue of an extern mm, not a matmul
    # --- AMD
    ("Cijk_Ailk_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT64x288x64_MI16x16x1_SN_LDSB1_AFC1_ISA942_IU1", TC, "bf16"),
    ("Cijk_Ailk_Bljk_BBS_BH_MT64x64x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0", TC, "bf16"),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_GRVW4_ISA942", TC, "fp16"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_ISA90a", TC, "fp32"),  # fp32 MFMA
    ("Cijk_Ailk_Bljk_SB_MT64x64x8_SE_K1", UNK, "fp32"),  # Tensile without MFMA: not named, so unknown
    ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt256x64x8_wt64x16x4_ws1x1_wr2x2", TC, "bf16"),
    (
        "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, "
        "ck::bhalf_t>>(...)",
        TC,
        "bf16",
    ),
    ("_ZN5aiter42fmha_fwd_hd128_bf16_causal_a32_rtz_pssk_recompileE", TC, "bf16"),
    ("aiter::fmoe_fp8_blockscale_g1u1_subGU_256", TC, "fp8"),
    ("_ZN5aiter24bf16gemm_256x256_kernelE", TC, "bf16"),
    ("SubTensorOpWithScalar1d", NOT, None),
    # --- not matmuls
    ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float>(...)", NOT, None),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", NOT, None),
    # --- a GEMM no family names
    ("my_new_library_gemm_kernel_v2", UNK, None),
]


@pytest.mark.parametrize(("name", "core", "dtype"), CASES)
def test_class_and_dtype(name: str, core: str, dtype: str | None) -> None:
    got = kf.classify(name, bool(MATMUL_KERNEL.search(name)))
    assert (got.core, got.dtype) == (core, dtype), got.family
    assert bool(tensor_core_mask([name])[0]) is (core == TC)


def test_user_patterns_add_tensor_core_families() -> None:
    name = "my_new_library_gemm_kernel_v2"
    assert kf.classify(name, True, (r"my_new_library",)).core == TC
    assert tensor_core_mask([name, "volta_sgemm_128x64_nn"], (r"my_new_library",)).tolist() == [True, False]


def test_classify_names_only_the_given_codes() -> None:
    names = ["volta_sgemm_128x64_nn", "nvjet_sm90_tst_64x8_64x16_2x4_h_bz_bias_TNT", "aten::mm"]
    cls = kf.classify_names(names, [1])
    assert cls.core.tolist() == [kf.CODE[NOT], kf.CODE[TC], kf.CODE[NOT]]  # code 0 was not asked for
    assert cls.dtype == [None, "bf16", None]


def test_dtype_shares_weight_by_kernel_time() -> None:
    names = ["nvjet_sm90_tst_1", "sm80_xmma_gemm_f32f32_ffma_x", "my_gemm", "vectorized_elementwise_kernel"]
    cls = kf.classify_names(names)
    shares = kf.dtype_shares([0, 1, 2, 3], [60.0, 20.0, 20.0, 900.0], cls)
    assert shares == pytest.approx({"bf16": 0.6, "fp32": 0.2, "unknown": 0.2})  # the elementwise kernel is out
    assert kf.dominant_dtype(shares) == "bf16"
    assert kf.dominant_dtype({"unknown": 1.0}) is None


def test_every_family_is_reachable() -> None:
    """Each family of the table is the first match of at least one name above (no dead entries)."""
    hit = {kf.classify(n, bool(MATMUL_KERNEL.search(n))).family for n, _, _ in CASES}
    assert {f.name for f in kf.FAMILIES} - hit == set()
    assert np.all([f.core in kf.CLASSES and f.core != UNK for f in kf.FAMILIES])
