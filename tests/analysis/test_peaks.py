"""Peak table: name-matching traps, per-GPU values, inference from kernel names, overrides."""

from __future__ import annotations

import pytest

from tb_mfu_plugin.analysis.device import peaks as P
from tb_mfu_plugin.analysis.options import AnalysisOptions


@pytest.mark.parametrize(
    "device,key",
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H800", "H100 SXM"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-PCIE-40GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A100-PG509-200", "A100"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),
        ("Tesla V100S-PCIE-32GB", "V100S PCIe"),
        ("Tesla V100-DGXS-32GB", "V100 SXM2"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce RTX 3090 Ti", "RTX 3090 Ti"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI250X", "MI250X (per GCD)"),
        ("AMD Instinct MI250", "MI250 (per GCD)"),
    ],
)
def test_device_names(device: str, key: str) -> None:
    g = P.match_gpu(device)
    assert g is not None and g.key == key


@pytest.mark.parametrize("device", ["AMD Radeon Graphics", "NVIDIA Graphics Device", "", None, "ARTEMIS"])
def test_unknown_names(device: str | None) -> None:
    assert P.match_gpu(device) is None


def test_l40s_is_not_l4_and_a10g_is_not_a10_and_h200_is_not_h20() -> None:
    l40s, l4 = P.match_gpu("NVIDIA L40S"), P.match_gpu("NVIDIA L4")
    assert l40s is not None and l4 is not None and l40s.tflops["bf16"] == 362.05 and l4.tflops["bf16"] == 121.0
    assert P.match_gpu("NVIDIA A10G").key == "A10G"  # type: ignore[union-attr]
    assert P.match_gpu("NVIDIA H200").key == "H200 SXM"  # type: ignore[union-attr]
    assert P.match_gpu("NVIDIA H20").tflops["bf16"] == 148.0  # type: ignore[union-attr]


def test_reference_values() -> None:
    def bf16(name: str) -> float:
        g = P.match_gpu(name)
        assert g is not None
        return g.tflops["bf16"]

    assert bf16("NVIDIA H100 80GB HBM3") == bf16("NVIDIA H200") == 989.4
    assert bf16("NVIDIA A100-SXM4-80GB") == 312.0
    assert bf16("NVIDIA L40S") == 362.05
    # H100 NVL per GPU (the first NVL sheet quoted a pair) and below SXM; PCIe below both
    assert bf16("NVIDIA H100 PCIe") == 756.5 < bf16("NVIDIA H100 NVL") == 835.5 < 989.4
    # MI250X per GCD: half the package's 383 TFLOP/s
    assert bf16("AMD Instinct MI250X") == pytest.approx(383.0 / 2)
    # dense everywhere: the H100 SXM fp8 figure is half of the 3958 sparse one
    assert P.match_gpu("NVIDIA H100 80GB HBM3").tflops["fp8"] == pytest.approx(3957.8 / 2)  # type: ignore[union-attr]


def test_every_entry_is_dense_and_ordered() -> None:
    for g in P.PEAKS.values():
        t = g.tflops
        assert "fp32" in t and ("bf16" in t or "fp16" in t)
        if "tf32" in t:
            assert t["fp32"] <= t["tf32"] <= t["bf16"]
        if "fp8" in t:
            assert t["fp8"] == pytest.approx(2 * t["bf16"], rel=0.02)  # L40S sheet: 733 vs 2 x 362.05


H200 = {"name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0, "numSms": 132}


def test_resolve_from_device_properties() -> None:
    c = P.resolve_peak(H200, [], "bf16", AnalysisOptions())
    assert c.peak_flops == pytest.approx(989.4e12) and c.dtype == "bf16" and not c.inferred
    assert "H200" in c.source and "deviceProperties" in c.source


def test_mfu_is_against_the_16_bit_peak_or_a_faster_dtypes() -> None:
    """Issue 33: PaLM's convention. fp32, TF32, bf16 and fp16 runs are measured against the dense
    bf16 tensor-core peak, fp8 and fp4 runs against their own faster peak; the peak of one dtype as
    it is (the second figure) comes from peak_at."""
    for dtype in ("fp32", "tf32", "bf16", "fp16"):
        c = P.resolve_peak(H200, [], dtype, AnalysisOptions(tf32=dtype == "tf32"))
        assert c.dtype == "bf16" and c.peak_flops == pytest.approx(989.4e12), dtype
    assert "the run computes in fp32" in P.resolve_peak(H200, [], "fp32", AnalysisOptions()).source
    assert P.resolve_peak(H200, [], "fp8", AnalysisOptions()).peak_flops == pytest.approx(1978.9e12)
    assert P.peak_at(H200, [], "fp32").peak_flops == pytest.approx(67e12)
    assert P.peak_at(H200, [], "tf32").peak_flops == pytest.approx(494.7e12)


def test_dtype_fallbacks_are_explained() -> None:
    v100 = {"name": "Tesla V100-SXM2-32GB"}
    c = P.resolve_peak(v100, [], "bf16", AnalysisOptions())  # no bf16 tensor cores: the 16-bit peak is fp16's
    assert c.dtype == "fp16" and c.peak_flops == pytest.approx(125e12)
    c = P.peak_at(v100, [], "fp8")
    assert c.dtype == "fp16" and "no fp8" in c.source
    assert P.resolve_peak(v100, [], "fp16", AnalysisOptions()).peak_flops == pytest.approx(125e12)
    a100 = {"name": "NVIDIA A100-SXM4-80GB"}
    c = P.resolve_peak(a100, [], "fp8", AnalysisOptions())
    assert c.dtype == "bf16" and c.peak_flops == pytest.approx(312e12)
    # no dtype at all: the dense bf16 tensor-core peak (PaLM convention), never the fp32 one
    c = P.resolve_peak(a100, [], None, AnalysisOptions())
    assert c.dtype == "bf16" and c.peak_flops == pytest.approx(312e12)
    assert c.dtype_source == "assumed" and "PaLM convention" in c.source
    c = P.resolve_peak(v100, [], None, AnalysisOptions())  # no bf16 tensor cores: the fp16 ones
    assert c.dtype == "fp16" and c.peak_flops == pytest.approx(125e12) and c.dtype_source == "assumed"
    c = P.resolve_peak(a100, [], "bf16", AnalysisOptions(), "kernel names (90% of matmul kernel time)", "kernel names")
    assert c.dtype_source == "kernel names" and "dtype from kernel names (90%" in c.source


def test_overrides() -> None:
    c = P.resolve_peak(H200, [], "bf16", AnalysisOptions(peak_tflops=500))
    assert c.peak_flops == 500e12 and "--peak-tflops" in c.source
    c = P.resolve_peak(H200, [], "bf16", AnalysisOptions(device_name="NVIDIA A100-SXM4-40GB"))
    assert c.peak_flops == pytest.approx(312e12) and c.name == "A100" and "--device-name" in c.source
    c = P.resolve_peak(H200, [], "bf16", AnalysisOptions(device_name="my toaster"))
    assert c.peak_flops is None and "not in the peak table" in c.source


@pytest.mark.parametrize(
    "kernels,arch,key",
    [
        (["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"], "hopper", "H100 SXM"),
        (["nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT"], "hopper", "H100 SXM"),
        (["ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "sm80_xmma_gemm_f16f16"], "ampere", "A100"),
        (["volta_scudnn_128x64_relu_medium_nn_v1", "volta_sgemm_128x64_nn"], "volta", "V100 SXM2"),
        (["Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN_ISA90a_IU1"], "cdna2", "MI250X (per GCD)"),
        (["Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_ISA942"], "cdna3", "MI300X"),
        (["sm100_xmma_gemm_bf16"], "blackwell", "B200"),
    ],
)
def test_inference_from_kernel_names(kernels: list[str], arch: str, key: str) -> None:
    assert P.infer_arch(kernels) == arch
    c = P.resolve_peak(None, kernels, "bf16", AnalysisOptions())
    assert c.inferred and c.name == key and "inferred" in c.source and "--peak-tflops" in c.source


def test_inference_takes_the_newest_architecture() -> None:
    # cuBLAS runs sm80 kernels on Hopper; a sm90 kernel cannot run on Ampere
    kernels = ["ampere_sgemm_128x64_tn", "sm80_xmma_gemm_bf16", "sm90_xmma_gemm_bf16bf16"]
    assert P.infer_arch(kernels) == "hopper"
    assert P.infer_arch(["void at::native::vectorized_elementwise_kernel<4>"]) is None


def test_unknown_name_inferred_with_sm_count() -> None:
    # the AMD fixture: name says nothing, gfx90a with 104 CUs per GCD is an MI250
    props = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "warpSize": 64, "numSms": 104}
    c = P.resolve_peak(props, ["Cijk_Alik_Bljk_SB_MT64x16x32_ISA90a"], "fp32", AnalysisOptions())
    assert c.inferred and c.name == "MI250 (per GCD)"
    c = P.resolve_peak(props, [], "bf16", AnalysisOptions())  # compute capability alone
    assert c.inferred and c.name == "MI250 (per GCD)" and "compute capability" in c.source
    nv = {"name": "NVIDIA Graphics Device", "computeMajor": 9, "computeMinor": 0, "numSms": 114}
    c = P.resolve_peak(nv, [], "bf16", AnalysisOptions())
    assert c.inferred and c.name == "H100 PCIe"


def test_no_peak_at_all() -> None:
    c = P.resolve_peak(None, ["triton_poi_fused_add_0"], "bf16", AnalysisOptions())
    assert c.peak_flops is None and c.inferred and "--peak-tflops" in c.source


def test_rocm_mi250_pair_name_uses_cu_count() -> None:
    props = {"name": "AMD Instinct MI250X / MI250", "numSms": 104, "warpSize": 64}
    assert P.resolve_peak(props, [], "bf16", AnalysisOptions()).name == "MI250 (per GCD)"
    props["numSms"] = 110
    assert P.resolve_peak(props, [], "bf16", AnalysisOptions()).name == "MI250X (per GCD)"


def test_peak_text_says_sparse_halved_only_for_tensor_core_figures() -> None:
    """The table halves the datasheets' sparse tensor-core figures; the fp32 CUDA-core rate has
    no sparse form, so its source line must not say "sparse halved" (issue 23)."""
    fp32 = P.peak_at(H200, [], "fp32", AnalysisOptions())
    bf16 = P.resolve_peak(H200, [], "bf16", AnalysisOptions())
    assert fp32.dtype == "fp32" and "sparse" not in fp32.source and "fp32 CUDA-core 67.0 TFLOP/s" in fp32.source
    assert "bf16 dense 989.4 TFLOP/s" in bf16.source and "sparse halved" in bf16.source
    mi300 = P.peak_at({"name": "AMD Instinct MI300X"}, [], "fp32", AnalysisOptions())
    assert "fp32 dense 163.4 TFLOP/s" in mi300.source  # AMD's fp32 figure is the matrix-core one
