"""The strategy table of the multi-GPU samples, from the traces alone, against their ground
truth (sample_traces/README.md shows it): the strategy, every rank's FLOPs, median step and MFU."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.run.strategies import strategy_row
from tb_mfu_plugin.running.pipeline import analyze_path

PEAK = 989.4e12  # the H200's dense bf16 peak, which the ground truth's MFU uses too
RUNS = {
    "ddp_2gpu": ["DDP"],
    "ddp_4gpu": ["DDP"],
    "fsdp2_2gpu": ["FSDP"],
    "fsdp2_4gpu": ["FSDP"],
    "tp_2gpu": ["TP"],
    "tp_4gpu": ["TP"],
    "tpdp_4gpu": ["FSDP", "TP"],
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_strategy_row_against_the_ground_truth(run: str) -> None:
    if not (SAMPLES / run).is_dir():
        pytest.skip("sample traces not available")
    report = analyze_path(str(SAMPLES / run)).runs[0]
    gt = json.loads((SAMPLES / run / "ground_truth.json").read_text())
    truth = {r["rank"]: r for r in gt["per_rank"]}
    row = strategy_row(report)
    assert row.strategy == RUNS[run] and row.ranks == gt["world_size"] == len(report.workers)
    mfus, steps = [], []
    for w in report.workers:
        assert w.distributed is not None
        t = truth[w.distributed.rank]
        s = w.summary
        assert s is not None and s.flops_per_step is not None
        assert s.flops_per_step == pytest.approx(t["flops_per_step"], rel=1e-3)  # from the recorded shapes
        # the mean of the profiled steps the report analysed (a warm-up step left out is named in
        # summary.basis), timed with CUDA events at the step boundaries while the profiler ran; the
        # trace's step also holds the GPU work it launched that runs past its host end: within 5 %
        assert s.basis is not None
        step = statistics.fmean(t["step_time_us_profiled_steps"][len(s.basis.left_out) :])
        assert s.step_time_us == pytest.approx(step, rel=0.05)
        mfus.append(t["flops_per_step"] / (step * 1e-6) / PEAK)
        steps.append(step)
    assert row.step_time_us == pytest.approx(max(steps), rel=0.05)
    assert row.mfu_min == pytest.approx(min(mfus), rel=0.05) and row.mfu_max == pytest.approx(max(mfus), rel=0.05)
    assert row.exposed_communication_us_per_step is not None and row.overlap_ratio is not None
    assert row.busbw_gbps is not None and 0 < row.busbw_gbps < 450  # NVLink 4's one-way peak
