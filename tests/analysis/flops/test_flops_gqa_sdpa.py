"""Hugging Face Llama's ``sdpa`` attention path with GQA (16 query heads, 4 KV heads; transformers passes
``enable_gqa=True``), counted from a real trace (validation/mfu_truth, recorded with record_shapes=True)
against FlopCounterMode's count on the same model with eager attention.

The trace records the cuDNN attention ops with K and V at 4 heads. Counted with the query's 16 heads,
the model FLOPs equal the eager count exactly. The headline count (FlopCounterMode's convention for
fused attention) adds the backward's recomputed Q·Kᵀ, 0.5× the forward attention, and says so. That
is the whole of the +3 % over the eager count, and torch 2.13's FlopCounterMode counts the same on
the SDPA model itself (validation/flops_as_run.py; torch 2.11's, on the GPU machine, rejects GQA shapes)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import validation_folder

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.trace.locate.discover import single_file_run

VALIDATION = Path(__file__).resolve().parents[3] / "validation"


def _truth() -> Path:
    """The H200 set's MFU truth runs, unpacked on first use (kept as validation/traces.tar.xz)."""
    return validation_folder("mfu_truth")


def _run(name: str) -> tuple[Any, dict[str, Any], Path]:
    files = sorted((_truth() / name).glob("*.pt.trace.json.gz"))
    if not files:
        pytest.skip(f"validation/mfu_truth/{name} not recorded")
    run = single_file_run(str(files[0]))
    (w,) = analyze_file(run.files[0], run.workers[0].name, AnalysisOptions())
    truth = json.loads((VALIDATION / "mfu_truth" / "ground_truth.json").read_text())["runs"][name]
    return w, truth, files[0]


def test_the_trace_records_gqa_shapes() -> None:
    *_, path = _run("hf_llama_sdpa_gqa")
    ops = [e for e in json.loads(gzip.open(path).read())["traceEvents"] if e.get("cat") == "cpu_op"]
    fwd = [e["args"]["Input Dims"] for e in ops if e["name"] == "aten::_scaled_dot_product_cudnn_attention"]
    bwd = [e["args"]["Input Dims"] for e in ops if e["name"] == "aten::_scaled_dot_product_cudnn_attention_backward"]
    assert fwd and all(d[:3] == [[4, 16, 2048, 64], [4, 4, 2048, 64], [4, 4, 2048, 64]] for d in fwd)
    assert bwd and all(d[1:4] == [[4, 16, 2048, 64], [4, 4, 2048, 64], [4, 4, 2048, 64]] for d in bwd)


def test_sdpa_with_gqa_counts_the_eager_models_flops_exactly() -> None:
    w, truth, _ = _run("hf_llama_sdpa_gqa")
    eager = truth["flops_per_step"]  # FlopCounterMode on an eager-attention twin (repeat_kv, bmm)
    assert "AssertionError" in truth["flop_counter_on_sdpa_model"]["error"]  # torch 2.11 cannot count it
    f = w.flops
    assert f is not None and f.model_flops_per_step == eager
    m = truth["model"]
    b, h, s, d, layers = m["batch"], m["heads"], m["seq"], m["d"] // m["heads"], m["n_layers"]
    recompute = 2 * b * h * s * s * d * layers  # the backward's Q·Kᵀ again, at the query's 16 heads
    assert f.attention_recompute_flops_per_step == recompute
    assert f.flops_per_step == eager + recompute  # FlopCounterMode's fused-attention convention


def test_the_eager_path_is_exact() -> None:
    w, truth, _ = _run("hf_llama_eager")
    assert w.flops is not None and w.flops.flops_per_step == truth["flops_per_step"]
    assert w.flops.attention_recompute_flops_per_step == 0


def test_flop_counter_on_the_model_as_it_ran_counts_the_same() -> None:
    """validation/flops_as_run.json: FlopCounterMode (torch 2.13) on the recorded configuration, SDPA as the
    cuDNN attention op the trace shows, meta tensors. The trace's count is within 1e-6 of it."""
    w, truth, _ = _run("hf_llama_sdpa_gqa")
    path = VALIDATION / "flops_as_run.json"
    if not path.is_file():
        pytest.skip("validation/flops_as_run.json not written")
    (entry,) = [c for c in json.loads(path.read_text())["configs"].values() if "hf_llama_sdpa_gqa" in c["runs"]]
    assert entry["model"]["n_params"] == truth["model"]["n_params"] and entry["model"]["kv"] == truth["model"]["kv"]
    assert any("cudnn_attention_backward" in op for op in entry["flops_by_op"])
    assert w.flops is not None and w.flops.flops_per_step == pytest.approx(entry["flops_per_step"], rel=1e-6)
