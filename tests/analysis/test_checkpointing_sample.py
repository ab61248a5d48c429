"""The real H200 activation-checkpointing sample (sample_traces/gpt_checkpointing) against its ground truth.

The ground truth has two FlopCounterMode counts of the same step: with checkpointing
(``flops_per_step``: the recomputed block forwards included, hardware FLOPs) and without it
(``model_flops_per_step``). The analyzer derives both from the trace's shapes alone.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_run
from tb_mfu_plugin.trace.locate.discover import discover_runs

RUN = SAMPLES / "gpt_checkpointing"

pytestmark = pytest.mark.skipif(
    not (RUN / "ground_truth.json").is_file() or not any(RUN.glob("rank0.*.pt.trace.json*")),
    reason="sample_traces/gpt_checkpointing not recorded",
)


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RUN / "ground_truth.json").read_text())
    return data


@pytest.fixture(scope="module")
def worker() -> WorkerReport:
    (found,) = discover_runs(str(RUN))
    (w,) = analyze_run(found, AnalysisOptions()).workers
    assert w.error is None, w.error
    return w


def test_mfu_counts_the_model_and_hfu_the_recompute(worker: WorkerReport, truth: dict[str, Any]) -> None:
    # MFU's FLOPs: FlopCounterMode over the same step *without* checkpointing (exact: the
    # checkpoint re-runs are whole forward ops, recognised and left out)
    assert worker.summary is not None and worker.summary.flops_per_step is not None
    assert worker.summary.flops_per_step == pytest.approx(truth["model_flops_per_step"], rel=1e-6)
    # HFU's FLOPs: FlopCounterMode over the checkpointed step, the re-run block forwards included
    assert worker.flops is not None
    assert worker.flops.executed_flops_per_step == pytest.approx(truth["flops_per_step"], rel=1e-6)
    # both over the same step at the H200's 989.4 TFLOP/s bf16 peak: the headline's, without the
    # profiler's host cost; over the traced steps' time the MFU is mfu_traced
    per_flop = len(worker.steps) / (sum(s.dur_us for s in worker.steps) * 1e-6) / 989.4e12
    assert worker.summary.mfu_traced == pytest.approx(truth["model_flops_per_step"] * per_flop)
    assert worker.flops.hfu / worker.summary.mfu == pytest.approx(
        truth["flops_per_step"] / truth["model_flops_per_step"]
    )


def test_model_flops_leave_the_recompute_out(worker: WorkerReport, truth: dict[str, Any]) -> None:
    # PaLM's model FLOPs also leave out the fused attention backward's Q.K^T recompute,
    # which FlopCounterMode counts: 1.5 % under its count of the unchecked step
    assert worker.flops is not None
    assert worker.flops.model_flops_per_step == pytest.approx(truth["model_flops_per_step"], rel=0.02)
    assert worker.flops.checkpoint_recompute_flops_per_step > 0


def test_hfu_above_model_mfu(worker: WorkerReport, truth: dict[str, Any]) -> None:
    assert worker.flops is not None
    assert worker.flops.hfu is not None and worker.flops.mfu_model is not None
    assert worker.flops.hfu > worker.flops.mfu_model
    assert truth["hfu_profiled"] > truth["mfu_profiled"]
