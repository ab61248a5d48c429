"""Which runs Compare and Strategies start with (tensorboard.pairing), on the real H200 samples.

Alphabetical order put ``dataloader_stall`` beside ``ddp_2gpu``; the suggestion is two runs of
one model, and the runs of one GPU count under different strategies.
"""

from __future__ import annotations

import msgspec
import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.report import RunReport, WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.tensorboard.pairing import suggest_compare, suggest_strategies

RUNS = ("dataloader_stall", "ddp_2gpu", "fsdp2_2gpu", "gpt_naive_attention", "gpt_sdpa_fused", "tp_2gpu")


@pytest.fixture(scope="module")
def samples() -> dict[str, RunReport]:
    if not SAMPLES.is_dir():
        pytest.skip("sample traces not available")
    return {r: analyze_path(str(SAMPLES / r)).runs[0] for r in RUNS}


def test_compare_starts_with_two_runs_of_one_model(samples: dict[str, RunReport]) -> None:
    s = suggest_compare(list(samples.values()))
    # the GPT before and after its attention fix: FLOPs per step within 1.5 %, one GPU each
    assert s.runs == ["gpt_naive_attention", "gpt_sdpa_fused"]
    assert "one model" in s.reason and "FLOPs per step" in s.reason
    # the alphabetical first pair is never suggested: dataloader_stall is another model
    assert "dataloader_stall" not in suggest_compare([samples[r] for r in ("dataloader_stall", "ddp_2gpu")]).runs


def test_compare_prefers_runs_of_one_setup(samples: dict[str, RunReport]) -> None:
    """ddp_2gpu and fsdp2_2gpu run the same FLOPs per GPU as the single-GPU GPT, but Compare puts
    one worker of each side by side: two single-GPU runs of the model go first."""
    s = suggest_compare([samples[r] for r in ("ddp_2gpu", "gpt_sdpa_fused", "fsdp2_2gpu", "gpt_naive_attention")])
    assert s.runs == ["gpt_sdpa_fused", "gpt_naive_attention"]
    s = suggest_compare([samples[r] for r in ("ddp_2gpu", "fsdp2_2gpu", "dataloader_stall")])
    assert s.runs == ["ddp_2gpu", "fsdp2_2gpu"]


def test_nothing_is_picked_when_no_two_runs_match(samples: dict[str, RunReport]) -> None:
    s = suggest_compare([samples["dataloader_stall"], samples["tp_2gpu"]])
    assert s.runs == [] and "pick two or more runs" in s.reason
    assert suggest_compare([samples["ddp_2gpu"]]).runs == []
    assert suggest_strategies([samples["gpt_sdpa_fused"], samples["dataloader_stall"]]).runs == []


def test_without_flop_counts_the_kernels_tell_one_model() -> None:
    """Where a count is missing (a compiled graph), mostly the same top kernels mark one model."""
    run = analyze_path(str(SAMPLES / "low_sm_efficiency")).runs[0]
    (w,) = run.workers
    assert w.summary is not None and w.summary.flops_per_step is None
    twin = RunReport(name="again", workers=[w])
    renamed = [msgspec.structs.replace(k, name=k.name + "_x") for k in w.top_kernels]
    other = RunReport(name="other", workers=[msgspec.structs.replace(w, top_kernels=renamed)])
    assert suggest_compare([run, other, twin]).runs == ["low_sm_efficiency", "again"]
    assert "kernels" in suggest_compare([run, twin]).reason


def test_strategies_start_with_one_gpu_count_under_several_strategies(samples: dict[str, RunReport]) -> None:
    s = suggest_strategies(list(samples.values()))
    assert s.runs == ["ddp_2gpu", "fsdp2_2gpu", "tp_2gpu"]
    assert s.reason == "The 2-GPU runs on NVIDIA H200 under 3 strategies."


def test_runs_with_no_analysed_worker_are_left_out() -> None:
    broken = RunReport(name="broken", workers=[WorkerReport(name="w", span="1", file="f", error="bad")])
    assert suggest_compare([broken, broken]).runs == []
