"""The strategy table of the multi-GPU samples, from the traces alone, against their ground
truth (sample_traces/README.md shows it): the strategy, every rank's FLOPs, median step and MFU,
and the straggler the ranks view names.

The 8-GPU runs of issue 38 (sample_traces/record_large_multi_gpu.py, a 2.09 B-parameter GPT) are
listed too: they skip until their folders exist, and are checked like the others once recorded."""

from __future__ import annotations

import json
import statistics

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.report import RankSummary
from tb_mfu_plugin.analysis.run.ranks import STRAGGLER_MIN_SPREAD
from tb_mfu_plugin.analysis.run.strategies import strategy_row
from tb_mfu_plugin.running.pipeline import analyze_path

RUNS = {
    "ddp_2gpu": ["DDP"],
    "ddp_4gpu": ["DDP"],
    "fsdp2_2gpu": ["FSDP"],
    "fsdp2_4gpu": ["FSDP"],
    "tp_2gpu": ["TP"],
    "tp_4gpu": ["TP"],
    "tpdp_4gpu": ["FSDP", "TP"],
    # issue 38, not recorded yet (no 8-GPU machine lent): record_all.sh PHASES=large NGPU=8
    "ddp_8gpu_gpt2b": ["DDP"],
    "fsdp2_8gpu_gpt2b": ["FSDP"],
    "tp2dp4_8gpu_gpt2b": ["FSDP", "TP"],
}


def _recorded(run: str) -> None:
    if not (SAMPLES / run / "ground_truth.json").is_file():
        pytest.skip(f"sample traces not recorded: {SAMPLES / run}")


@pytest.mark.parametrize("run", sorted(RUNS))
def test_strategy_row_against_the_ground_truth(run: str) -> None:
    _recorded(run)
    report = analyze_path(str(SAMPLES / run)).runs[0]
    gt = json.loads((SAMPLES / run / "ground_truth.json").read_text())
    peak = gt["peak_flops_bf16_used_for_mfu"]  # the H100's and H200's dense bf16 peak, 989.4 TFLOP/s
    truth = {r["rank"]: r for r in gt["per_rank"]}
    row = strategy_row(report)
    assert row.strategy == RUNS[run] and row.ranks == gt["world_size"] == len(report.workers)
    mfus, steps = [], []
    for w in report.workers:
        assert w.distributed is not None
        t = truth[w.distributed.rank]
        s = w.summary
        assert s is not None and s.flops_per_step is not None
        # the strategy is named right on every rank, from its own collectives
        assert w.communication is not None and w.communication.strategy == RUNS[run]
        assert s.flops_per_step == pytest.approx(t["flops_per_step"], rel=1e-3)  # from the recorded shapes
        # the mean of the profiled steps the report analysed (a warm-up step left out is named in
        # summary.basis), timed with CUDA events at the step boundaries while the profiler ran; the
        # trace's step also holds the GPU work it launched that runs past its host end: within 5 %
        assert s.basis is not None
        step = statistics.fmean(t["step_time_us_profiled_steps"][len(s.basis.left_out) :])
        assert s.step_time_us == pytest.approx(step, rel=0.05)
        mfus.append(t["flops_per_step"] / (step * 1e-6) / peak)
        steps.append(step)
        # each rank's MFU of its traced steps, against the same steps' truth (the headline removes the
        # profiler's drag rank by rank, which a rank waiting for a straggler keeps: docs/mfu.md)
        assert s.mfu_traced == pytest.approx(mfus[-1], rel=0.05)
    assert row.step_time_us == pytest.approx(max(steps), rel=0.05)
    assert row.mfu_min == min(w.summary.mfu for w in report.workers if w.summary and w.summary.mfu)
    assert row.mfu_max == max(w.summary.mfu for w in report.workers if w.summary and w.summary.mfu)
    assert row.exposed_communication_us_per_step is not None and row.overlap_ratio is not None
    assert row.busbw_gbps is not None and 0 < row.busbw_gbps < 450  # NVLink 4's one-way peak
    # the job's MFU, the figure the table sorts by, over the step beside it: the ranks' FLOPs together
    # over it and their peaks, at least every rank's own (the ranks run the same FLOPs, bar TP's head)
    ranks = report.ranks
    assert ranks is not None and ranks.job is not None
    assert (row.job_mfu, row.job_step_time_unprofiled_us) == (ranks.job.mfu, ranks.job.step_time_unprofiled_us)
    total = sum(w.summary.flops_per_step or 0.0 for w in report.workers if w.summary)
    assert row.job_mfu == pytest.approx(total / (row.job_step_time_unprofiled_us * 1e-6) / (peak * row.ranks))
    assert row.job_mfu >= 0.97 * row.mfu_max


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_straggler_is_the_rank_that_waits_least(run: str) -> None:
    """Two readings of the trace agree on the straggler: the rank the others spend the most
    exposed communication waiting for (ranks view) is the one that waits least inside collectives
    once the ranks' clocks are aligned (diagnosis.distributed). Without a straggler, no rank's
    collective waits stand out by the same 10 % of the median step."""
    _recorded(run)
    (report,) = analyze_path(str(SAMPLES / run)).runs
    ranks = report.ranks
    assert isinstance(ranks, RankSummary) and len(ranks.ranks) == len(report.workers)
    waits = {r.worker: r.collective_wait_us_per_step for r in ranks.ranks if r.collective_wait_us_per_step is not None}
    assert len(waits) == len(ranks.ranks), ranks.ranks  # every rank's clock aligned
    if ranks.straggler is None:
        median_step = statistics.median(r.step_time_us for r in ranks.ranks)
        assert max(waits.values()) - min(waits.values()) < STRAGGLER_MIN_SPREAD * median_step
    else:
        assert ranks.straggler.worker == min(waits, key=lambda k: waits[k])
        assert ranks.straggler.others_wait_us_per_step > 0


def test_one_gpu_is_its_own_job() -> None:
    """A single-GPU run's row carries its own MFU and the step it is over as the job's, so the
    table sorts every run by one figure."""
    if not (SAMPLES / "gpt_sdpa_fused").is_dir():
        pytest.skip("sample traces not available")
    report = analyze_path(str(SAMPLES / "gpt_sdpa_fused")).runs[0]
    (w,) = report.workers
    row = strategy_row(report)
    assert w.summary is not None and w.summary.mfu is not None and report.ranks is None
    assert (row.job_mfu, row.job_step_time_unprofiled_us) == (w.summary.mfu, w.summary.step_time_unprofiled_us)
