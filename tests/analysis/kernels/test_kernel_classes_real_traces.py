"""Every matmul kernel of the real third-party traces gets a sensible class and dtype.

Measured here (matmul kernel time by class; dtype by kernel time):
TraceLens H100 twins: 99.9-100 % tensor-core, bf16 (cuBLASLt/CUTLASS/flash; the rest are bf16
GEMVs); TraceLens MI300X twins: 100 % tensor-core (hipBLASLt ``Cijk_..._MI16x16x1``, MIOpen
``igemm_..._gtcx3`` and Triton ``attn_fwd``), bf16; HTA MI250 trace: Tensile fp32 MFMA; HTA
``trace_filter`` (A100): 81 % TF32 CUTLASS tensor-op, 19 % fp32 ``ampere_sgemm``; the V100
traces (torch-tb-profiler ResNet-50, HTA ``df_index_resolver`` and ``ns_resolution``): 100 %
CUDA-core fp32. No kernel of them is ``unknown``."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import fixture_path

from tb_mfu_plugin.analysis.kernels import families as kf
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.locate.discover import single_file_run
from tb_mfu_plugin.trace.tables import KERNEL

MODELS = [
    "Falconsai_nsfw_image_detection__1016002",
    "Qwen_Qwen1.5-0.5B-Chat__1016005",
    "facebook_timesformer-base-finetuned-k400__1016002",
    "gaunernst_bert-small-uncased__1016001",
    "google_owlv2-large-patch14-ensemble__1016001",
]


@functools.cache
def _classes(*parts: str) -> tuple[dict[str, float], dict[str, float]]:
    """(matmul kernel time share per class, matmul kernel time share per dtype) of one trace."""
    t = decode_trace(str(fixture_path(*parts)))
    g = t.gpu
    k = g.kind == KERNEL
    cls = kf.classify_names(t.names, np.unique(g.name[k]))
    code, dur = cls.core[g.name[k]], g.dur[k]
    mm = code != kf.CODE[kf.NOT_MATMUL]
    total = float(dur[mm].sum())
    by_class = {c: float(dur[code == kf.CODE[c]].sum()) / total for c in (kf.TENSOR_CORE, kf.CUDA_CORE, kf.UNKNOWN)}
    return by_class, kf.dtype_shares(g.name[k].tolist(), dur.tolist(), cls)


@pytest.mark.parametrize("gpu", ["h100", "mi300"])
@pytest.mark.parametrize("model", MODELS)
def test_tracelens_inference_twins_are_tensor_core_bf16(gpu: str, model: str) -> None:
    by_class, dtypes = _classes("tracelens_hf_inference", gpu, f"{model}.json.gz")
    assert by_class[kf.UNKNOWN] == 0
    assert by_class[kf.TENSOR_CORE] > 0.998  # the rest: bf16 GEMVs (H100) by cuBLAS
    assert kf.dominant_dtype(dtypes) == "bf16"


@pytest.mark.parametrize("gpu", ["h100", "mi300"])
def test_tracelens_no_tensor_cores_stays_silent(gpu: str) -> None:
    run = single_file_run(str(fixture_path("tracelens_hf_inference", gpu, f"{MODELS[4]}.json.gz")))
    for w in analyze_file(run.files[0], "r", AnalysisOptions()):
        assert "no_tensor_cores" not in {f.id for f in w.findings}
        assert w.summary is None or w.summary.unknown_core_kernel_share == 0


@pytest.mark.parametrize(
    ("parts", "tc", "cuda", "dtype"),
    [
        (("hta_test_data", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"), 1.0, 0.0, "fp32"),
        (("hta_test_data", "trace_filter", "sampled_rank-0.json.gz"), 0.812, 0.188, "tf32"),
        (("hta_test_data", "nccl_parser_config", "nccl_data.json.gz"), 0.961, 0.039, "tf32"),
        (("hta_test_data", "df_index_resolver", "df_index_resolver.json.gz"), 0.0, 1.0, "fp32"),
        (("hta_test_data", "ns_resolution_trace", "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), 0.0, 1.0, "fp32"),
        (
            ("torch_tb_profiler_samples", "resnet50_num_workers_0", "worker0.1623143089861.pt.trace.json.gz"),
            0.0,
            1.0,
            "fp32",
        ),
    ],
)
def test_hta_and_torch_tb_profiler_traces(parts: tuple[str, ...], tc: float, cuda: float, dtype: str) -> None:
    by_class, dtypes = _classes(*parts)
    assert by_class[kf.UNKNOWN] == 0
    assert by_class[kf.TENSOR_CORE] == pytest.approx(tc, abs=0.002)
    assert by_class[kf.CUDA_CORE] == pytest.approx(cuda, abs=0.002)
    assert kf.dominant_dtype(dtypes) == dtype
