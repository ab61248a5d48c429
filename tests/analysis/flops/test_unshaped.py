"""Why FLOPs from shapes are missing, and what works: a run recorded with record_shapes=True whose
matmuls ran in CUDA graph replays or compiled graphs is not told to record shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_path

RECORD_ADVICE = "no FLOPs from shapes: record with record_shapes=True"
TRITON_MM = "triton_tem_fused_mm_0"


def _worker(path: Path) -> WorkerReport:
    (run,) = analyze_path(str(path)).runs
    (w,) = run.workers
    assert w.error is None and w.flops is not None, w.error
    return w


def _sample(name: str) -> Path:
    d = SAMPLES / name
    if not d.is_dir() or not any(d.glob("*.pt.trace.json*")):
        pytest.skip(f"sample trace not recorded: {d}")
    return d


def test_cuda_graph_replays_are_named_not_record_shapes() -> None:
    """tiny_mlp_cuda_graph was recorded with record_shapes=True; its whole step is one graph replay."""
    w = _worker(_sample("tiny_mlp_cuda_graph"))
    assert w.summary is not None and w.summary.flops_per_step is None
    (note,) = [n for n in w.flops.notes if "FLOPs from shapes" in n]
    assert "100.0 % of the steps' kernel time ran in CUDA graph replays" in note
    assert not note.startswith(RECORD_ADVICE)
    assert "--flops-per-step" in note and "tb_mfu.json" in note and "MfuMonitor" in note


def test_default_compile_counts_its_flops_and_needs_no_note() -> None:
    """gpt_compile (default mode) keeps its matmuls as aten::mm/addmm: exact FLOPs, no note."""
    w = _worker(_sample("gpt_compile"))
    truth = json.loads((SAMPLES / "gpt_compile" / "ground_truth.json").read_text())
    assert w.summary is not None and w.summary.flops_per_step == truth["flops_per_step"]
    assert not [n for n in w.flops.notes if "FLOPs from shapes" in n]


def test_reduce_overhead_compile_says_what_happened() -> None:
    """torch.compile(mode="reduce-overhead") with record_shapes=True: the forward and backward are
    CUDA graph replays, so FLOPs from shapes are missing or partial, and the note says why."""
    w = _worker(_sample("gpt_compile_reduce_overhead"))
    notes = [n for n in w.flops.notes if "FLOPs from shapes" in n]
    assert notes and all(not n.startswith(RECORD_ADVICE) for n in notes), w.flops.notes
    assert "CUDA graph replays" in notes[0] and "MfuMonitor" in notes[0]


def _compiled_trace(path: Path, region: bool) -> Path:
    """Three steps of one Triton GEMM (Inductor's template, no aten::mm around it) and an eager
    aten::add whose shapes were recorded; inside a compiled region when ``region``."""
    b = TraceBuilder()
    for i in range(3):
        t0 = 1000.0 * i
        b.step(i + 1, t0, 900)
        if region:
            b.annotation("Torch-Compiled Region: 0/0", t0 + 1, 300)
        b.launch_kernel(TRITON_MM, t0 + 10, t0 + 20, 200)
        b.op("aten::add", t0 + 400, 20, **{"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]})
        b.launch_kernel("void at::native::vectorized_elementwise_kernel<4>(int)", t0 + 405, t0 + 420, 10)
    return b.write(path / "w.pt.trace.json.gz")


def test_compiled_regions_are_named_with_the_shapes_the_trace_does_record(tmp_path: Path) -> None:
    w = _worker(_compiled_trace(tmp_path, region=True).parent)
    (note,) = [n for n in w.flops.notes if "FLOPs from shapes" in n]
    assert "torch.compile'd graphs (Torch-Compiled Region)" in note
    assert "the trace does record shapes: 3 ops carry them" in note and "MfuMonitor" in note


def test_without_graphs_or_compiled_regions_the_advice_is_to_record_shapes(tmp_path: Path) -> None:
    w = _worker(_compiled_trace(tmp_path, region=False).parent)
    assert [n for n in w.flops.notes if "FLOPs from shapes" in n] == [
        RECORD_ADVICE + ", or give --flops-per-step / a tb_mfu.json sidecar"
    ]
