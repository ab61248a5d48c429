"""The dtype whose peak MFU uses (shapes -> kernel-name tokens -> bf16 PaLM convention), and
impossible MFU (> 100 %) flagged instead of shown.

The regression: a bf16 GPT trace recorded without shapes, with its FLOPs given by
``--flops-per-step`` or a ``tb_mfu.json`` sidecar, used to be measured against the fp32
CUDA-core peak ("dtype unknown, assumed fp32"): MFU 354 % on ``gpt_sdpa_fused``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import SAMPLES
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.flops.detail import Impossible
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_run
from tb_mfu_plugin.trace.locate.discover import discover_runs

SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def _gpt_without_shapes(dest: Path) -> tuple[Path, dict]:
    """A copy of the real gpt_sdpa_fused trace with every recorded shape removed (as if
    recorded without ``record_shapes=True``), and its ground truth."""
    src_dir = SAMPLES / "gpt_sdpa_fused"
    files = sorted(src_dir.glob("rank0.*.pt.trace.json.gz"))
    if not files:
        pytest.skip("sample trace gpt_sdpa_fused not recorded")
    doc = json.loads(gzip.decompress(files[0].read_bytes()))
    removed = 0
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        for k in SHAPE_ARGS:
            removed += args.pop(k, None) is not None
    assert removed > 1000  # the sample did record shapes
    dest.mkdir(parents=True)
    (dest / "rank0.1.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dest, json.loads((src_dir / "ground_truth.json").read_text())


def _analyse(path: Path, options: AnalysisOptions) -> WorkerReport:
    (found,) = discover_runs(str(path))
    (w,) = analyze_run(found, options).workers
    assert w.error is None and w.summary is not None and w.flops is not None
    return w


def test_bf16_trace_without_shapes_takes_bf16_from_kernel_names(tmp_path: Path) -> None:
    run, truth = _gpt_without_shapes(tmp_path / "gpt_noshapes")
    w = _analyse(run, AnalysisOptions(flops_per_step=truth["flops_per_step"]))
    peak = w.flops.peak
    assert peak.dtype == "bf16" and peak.dtype_source == "kernel names"
    assert peak.peak_flops == pytest.approx(truth["peak_flops_bf16_used_for_mfu"])
    assert peak.source is not None and "dtype from kernel names" in peak.source and "fp32" not in peak.source
    assert w.flops.kernel_dtype == "bf16" and w.flops.kernel_dtype_shares["bf16"] > 0.8
    # the same FLOPs over the same steps as the recorded-shapes trace: ~24 % over the traced steps
    # (ground truth: 24.1 % profiled), not the 354 % the fp32 peak gave
    mfu = w.summary.mfu_traced
    assert mfu is not None and 0.2 < mfu < 0.3
    (orig,) = discover_runs(str(SAMPLES / "gpt_sdpa_fused"))
    (with_shapes,) = analyze_run(orig, AnalysisOptions(flops_per_step=truth["flops_per_step"])).workers
    assert with_shapes.summary is not None and mfu == pytest.approx(with_shapes.summary.mfu_traced, rel=1e-9)
    assert "impossible_mfu" not in w.flags


def test_sidecar_flops_without_shapes_use_the_same_peak(tmp_path: Path) -> None:
    run, truth = _gpt_without_shapes(tmp_path / "gpt_sidecar")
    (run / "tb_mfu.json").write_text(json.dumps({"version": 1, "flops_per_step": truth["flops_per_step"]}))
    w = _analyse(run, AnalysisOptions())
    assert w.flops.peak.dtype == "bf16" and w.flops.peak.dtype_source == "kernel names"
    assert w.summary.mfu_traced is not None and 0.2 < w.summary.mfu_traced < 0.3


def _no_dtype_trace(path: Path, kernel: str, dur: float = 800.0) -> Path:
    """Hand-made: one H100 step of 1 ms whose only GEMM is ``kernel``, no shapes recorded."""
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.launch_kernel(kernel, 10, 20, dur)
    b.step(2, 1000, 1000)
    b.launch_kernel(kernel, 1010, 1020, dur)
    return b.write(path / "w.pt.trace.json.gz").parent


def test_no_dtype_anywhere_assumes_the_bf16_peak_and_says_so(tmp_path: Path) -> None:
    run = _no_dtype_trace(tmp_path / "r", "triton_tem_fused_mm_0")  # a Triton mm: no dtype in the name
    w = _analyse(run, AnalysisOptions(flops_per_step=1e11))
    peak = w.flops.peak
    assert peak.dtype == "bf16" and peak.dtype_source == "assumed"
    assert peak.peak_flops == pytest.approx(989.4e12) and peak.source is not None and "PaLM convention" in peak.source
    assert any("PaLM convention" in n for n in w.notes)
    assert w.summary.mfu_traced == pytest.approx(1e11 / 1e-3 / 989.4e12)


def test_impossible_mfu_is_flagged_with_its_likely_cause() -> None:
    """FLOPs that no H200 can run in the step: MFU is not a figure, the FLOPs are named."""
    if not SAMPLES.joinpath("gpt_sdpa_fused").is_dir():
        pytest.skip("sample trace gpt_sdpa_fused not recorded")
    (found,) = discover_runs(str(SAMPLES / "gpt_sdpa_fused"))
    (w,) = analyze_run(found, AnalysisOptions(flops_per_step=1e15)).workers
    assert w.summary is not None and w.flops is not None
    assert w.summary.mfu is None and all(s.mfu is None for s in w.steps)
    assert w.flops.mfu_user is None
    assert "impossible_mfu" in w.flags
    imp = w.flops.impossible
    assert isinstance(imp, Impossible) and imp.values.mfu is not None and imp.values.steps is not None
    assert imp.values.mfu > 1 and len(imp.values.steps) == len(w.steps) == 2  # the steady state (#4, #5)
    assert imp.likely_cause == "flops" and "--flops-per-step" in imp.explanation
    assert any("impossible" in n and "FLOPs" in n for n in w.notes)


def test_impossible_mfu_against_an_fp32_peak_names_the_peak(tmp_path: Path) -> None:
    """fp32 by kernel names (SGEMM), yet more FLOP/s than the fp32 peak: MFU, against the bf16
    peak (PaLM's convention), is a figure; the second figure, against the fp32 CUDA-core peak, is
    impossible and withheld, and the peak named as the likely cause."""
    run = _no_dtype_trace(tmp_path / "r", "volta_sgemm_128x64_nn")
    w = _analyse(run, AnalysisOptions(flops_per_step=2e11))  # 200 TFLOP/s: > 67 fp32, < 989 bf16
    assert w.flops.peak.dtype == "bf16" and w.summary.mfu is not None and 0 < w.summary.mfu < 1
    assert w.summary.mfu_status is not None and w.summary.mfu_status.state == "known"
    imp = w.flops.impossible
    assert isinstance(imp, Impossible) and imp.values.mfu is None and imp.values.mfu_at_compute_peak is not None
    assert w.flops.mfu_at_compute_peak is None  # withheld, never a figure above 100 %
    assert any(
        n.startswith("MFU against the peak of the units the matmuls ran on came out above 100 %") for n in w.notes
    )
