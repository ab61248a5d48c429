"""below_roofline: names the ops far below their roof with the cause for their side of the ridge."""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.report import Finding, Roofline, RooflineOp, WorkerReport
from tb_mfu_plugin.diagnosis import DEFAULT, RULE_IDS
from tb_mfu_plugin.diagnosis.rules.roofline import below_roofline
from tb_mfu_plugin.pipeline import analyze_path

STEP_US = 10_000.0


def op(name: str, bound: str, us: float, share: float, **kw: Any) -> RooflineOp:
    base: dict[str, Any] = dict(
        name=name, op_class="elementwise" if bound == "memory" else "matmul", shapes="[[1024, 1024]]", dtype="bf16",
        exact=True, count_per_step=1.0, us_per_step=us, flops_per_step=1e12 if bound == "compute" else 1e6,
        bytes_per_step=1e9, intensity=1.0, achieved_flops=1.0, achieved_bandwidth=1.0, roof_flops=1.0,
        roof_share=share, bound=bound, roof_us_per_step=us * share, lost_us_per_step=us * (1 - share),
        kernels_per_call=1.0, mean_blocks_per_sm=4.0,
    )
    base.update(kw)
    return RooflineOp(**base)


def ctx_with(*ops: RooflineOp) -> Any:
    roof = Roofline(peak_flops=989.4e12, peak_bandwidth=4.8e12, ridge_intensity=206.0, ops=list(ops))
    return SimpleNamespace(report=SimpleNamespace(roofline=roof), th=DEFAULT, step_us=STEP_US, mfu=0.3)


def test_registered() -> None:
    assert "below_roofline" in RULE_IDS


def test_memory_bound_ops_far_below_bandwidth_are_named_with_their_cause() -> None:
    found = below_roofline(ctx_with(
        op("aten::copy_", "memory", 2000, 0.2),
        op("aten::_softmax", "memory", 1000, 0.1, mean_blocks_per_sm=0.06),
        op("aten::masked_fill", "memory", 800, 0.3, kernels_per_call=2.0),
        op("aten::add", "memory", 600, 0.1, count_per_step=100.0),  # 6 µs a call
        op("aten::mul", "memory", 3000, 0.9),  # near its roof: not named
    ))
    (f,) = found
    assert f.id == "below_roofline" and f.subject == "memory"
    causes = {o["name"]: o["cause"] for o in f.evidence["ops"]}
    assert "aten::mul" not in causes
    assert causes["aten::_softmax"].startswith("too few blocks")
    assert causes["aten::masked_fill"].startswith("2 kernels per call")
    assert causes["aten::add"].startswith("small launches")
    assert causes["aten::copy_"].startswith("uncoalesced")
    lost = 2000 * 0.8 + 1000 * 0.9 + 800 * 0.7 + 600 * 0.9
    assert f.est_gain_us_per_step == pytest.approx(lost, rel=1e-3)
    assert f.evidence["cost_us_per_step"] == pytest.approx(4400)
    assert "torch.compile" in f.recommendation


def test_compute_bound_causes_do_not_recommend_what_the_run_does() -> None:
    found = below_roofline(ctx_with(
        op("aten::mm", "compute", 3000, 0.3, shapes="[[8192, 1000], [1000, 4096]]"),
        op("aten::addmm", "compute", 2000, 0.4, dtype="fp32", shapes="[[4096], [8192, 1024], [1024, 4096]]"),
    ))
    (f,) = found
    assert f.subject == "compute"
    causes = {o["name"]: o["cause"] for o in f.evidence["ops"]}
    assert causes["aten::mm"].startswith("dims [1000]")  # bf16 already: the tile, not the dtype
    assert causes["aten::addmm"].startswith("fp32")


def test_small_losses_and_missing_ceilings_give_nothing() -> None:
    assert below_roofline(ctx_with(op("aten::copy_", "memory", 300, 0.2))) == []  # 2.4 % of the step
    ctx = ctx_with(op("aten::copy_", "memory", 5000, 0.2))
    ctx.report.roofline.peak_bandwidth = None
    assert below_roofline(ctx) == []


@functools.cache
def _worker(run: str) -> WorkerReport:
    d = SAMPLES / run
    if not any(d.glob("rank0.*.pt.trace.json*")):
        pytest.skip(f"sample trace not recorded: {d}")
    (w,) = analyze_path(str(d)).runs[0].workers
    return w


def _roofline_findings(run: str) -> list[Finding]:
    return [f for f in _worker(run).findings if f.id == "below_roofline"]


def test_microbench_at_its_roofs_gives_no_finding() -> None:
    assert _roofline_findings("roofline_microbench") == []


def test_real_samples_name_the_slow_memory_bound_ops() -> None:
    (f,) = _roofline_findings("low_sm_efficiency")
    names = {o["name"]: o for o in f.evidence["ops"]}
    assert names["aten::_softmax"]["cause"].startswith("too few blocks")  # 8 blocks on 132 SMs
    (f,) = _roofline_findings("resnet50_bf16")
    assert f.subject == "memory" and f.evidence["ops"][0]["class"] == "norm"
    for run in ("low_sm_efficiency", "resnet50_bf16", "gpt_naive_attention"):
        for f in _roofline_findings(run):
            assert 0 < f.est_gain_us_per_step <= f.evidence["cost_us_per_step"]
