"""The H200 sample runs built to show one rule each (sample_traces/record_samples.py:
dataloader_stall, fp32_no_tensor_cores, low_sm_efficiency, small_copies) give that rule's
finding, and the clean run gpt_sdpa_fused gives none of them."""

from __future__ import annotations

import functools

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.report import Finding, WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_path

# run directory -> the rule it was built to show
BUILT_FOR = {
    "dataloader_stall": "dataloader_stall",
    "fp32_no_tensor_cores": "no_tensor_cores",
    "low_sm_efficiency": "low_sm_efficiency",
    "small_copies": "small_copies",
}
CLEAN = "gpt_sdpa_fused"


@functools.cache
def _worker(run: str) -> WorkerReport:
    d = SAMPLES / run
    if not d.is_dir() or not any(d.glob("rank0.*.pt.trace.json*")):
        pytest.skip(f"sample trace not recorded: {d}")
    report = analyze_path(str(d))
    (run_report,) = report.runs
    (w,) = run_report.workers
    assert w.error is None, w.error
    return w


def _findings(run: str) -> dict[str, Finding]:
    return {f.id: f for f in _worker(run).findings}


@pytest.mark.parametrize("run", sorted(BUILT_FOR))
def test_sample_gives_the_rule_it_was_built_for(run: str) -> None:
    rule = BUILT_FOR[run]
    found = _findings(run)
    assert rule in found, f"{run}: {sorted(found)}"
    f = found[rule]
    assert 0 < f.est_gain_us_per_step <= f.evidence.cost_us_per_step


def test_clean_run_gives_none_of_them() -> None:
    found = set(_findings(CLEAN))
    assert not found & set(BUILT_FOR.values()), sorted(found)


def test_dataloader_stall_evidence() -> None:
    f = _findings("dataloader_stall")["dataloader_stall"]
    ev = f.evidence
    assert ev.single_process is True  # num_workers=0
    assert ev.calls_per_step == 1
    assert any("DataLoader" in op for op in ev.ops)


def test_small_copies_evidence() -> None:
    ev = _findings("small_copies")["small_copies"].evidence
    assert ev.small_copies_per_step == 192  # 192 pinned H2D copies of 1 KiB
    assert ev.cat_ops_per_step == 191  # the torch.cat loop
    assert ev.d2d_copies_per_step == 0


def test_low_sm_efficiency_evidence() -> None:
    ev = _findings("low_sm_efficiency")["low_sm_efficiency"].evidence
    assert ev.num_sms == 132
    # the softmax forward/backward kernels launch one block per row: 8 blocks for 132 SMs
    assert ev.kernels and all(k.mean_blocks_per_sm < 1 for k in ev.kernels)
    assert any("softmax" in k.name.lower() for k in ev.kernels)
