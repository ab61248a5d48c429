"""below_roofline: names the ops far below their roof with the cause for their side of the ridge."""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import SAMPLES, fixture_path

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import Finding, Roofline, RooflineOp, WorkerReport
from tb_mfu_plugin.diagnosis import DEFAULT, RULE_IDS
from tb_mfu_plugin.diagnosis.rules import roofline as roofline_rule
from tb_mfu_plugin.diagnosis.rules.roofline import below_roofline
from tb_mfu_plugin.running.pipeline import analyze_file, analyze_path
from tb_mfu_plugin.trace.locate.discover import single_file_run

STEP_US = 10_000.0


def op(name: str, bound: str, us: float, share: float, **kw: Any) -> RooflineOp:
    base: dict[str, Any] = dict(
        name=name,
        op_class="elementwise" if bound == "memory" else "matmul",
        shapes="[[1024, 1024]]",
        dtype="bf16",
        exact=True,
        count_per_step=1.0,
        us_per_step=us,
        flops_per_step=1e12 if bound == "compute" else 1e6,
        bytes_per_step=1e9,
        intensity=1.0,
        achieved_flops=1.0,
        achieved_bandwidth=1.0,
        roof_flops=1.0,
        roof_share=share,
        bound=bound,
        roof_us_per_step=us * share,
        lost_us_per_step=us * (1 - share),
        kernels_per_call=1.0,
        mean_blocks_per_sm=4.0,
    )
    base.update(kw)
    return RooflineOp(**base)


def ctx_with(*ops: RooflineOp) -> Any:
    roof = Roofline(peak_flops=989.4e12, peak_bandwidth=4.8e12, ridge_intensity=206.0, ops=list(ops))
    return SimpleNamespace(report=SimpleNamespace(roofline=roof), th=DEFAULT, step_us=STEP_US, mfu=0.3)


@pytest.fixture
def no_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule on a report alone: no trace to say when the named ops' kernels ran, nor whether
    the run was compiled (it was not)."""
    monkeypatch.setattr(roofline_rule, "_ops_time", lambda *_: None)
    monkeypatch.setattr(roofline_rule, "compiled", lambda _: False)


def test_registered() -> None:
    assert "below_roofline" in RULE_IDS


@pytest.mark.usefixtures("no_trace")
def test_memory_bound_ops_far_below_bandwidth_are_named_with_their_cause() -> None:
    found = below_roofline(
        ctx_with(
            op("aten::copy_", "memory", 2000, 0.2),
            op("aten::_softmax", "memory", 1000, 0.1, mean_blocks_per_sm=0.06),
            op("aten::masked_fill", "memory", 800, 0.3, kernels_per_call=2.0),
            op("aten::add", "memory", 600, 0.1, count_per_step=100.0),  # 6 µs a call
            op("aten::mul", "memory", 3000, 0.9),  # near its roof: not named
        )
    )
    (f,) = found
    assert f.id == "below_roofline" and f.subject == "memory"
    causes = {o.name: o.cause for o in f.evidence.ops}
    assert "aten::mul" not in causes
    assert causes["aten::_softmax"].startswith("too few blocks")
    assert causes["aten::masked_fill"].startswith("2 kernels per call")
    assert causes["aten::add"].startswith("small launches")
    assert causes["aten::copy_"].startswith("uncoalesced")
    lost = 2000 * 0.8 + 1000 * 0.9 + 800 * 0.7 + 600 * 0.9
    assert f.est_gain_us_per_step == pytest.approx(lost, rel=1e-3)
    assert f.evidence.cost_us_per_step == pytest.approx(4400)
    assert "torch.compile" in f.recommendation


@pytest.mark.usefixtures("no_trace")
def test_compute_bound_causes_do_not_recommend_what_the_run_does() -> None:
    found = below_roofline(
        ctx_with(
            op("aten::mm", "compute", 3000, 0.3, shapes="[[8192, 1000], [1000, 4096]]"),
            op("aten::addmm", "compute", 2000, 0.4, dtype="fp32", shapes="[[4096], [8192, 1024], [1024, 4096]]"),
        )
    )
    (f,) = found
    assert f.subject == "compute"
    causes = {o.name: o.cause for o in f.evidence.ops}
    assert causes["aten::mm"].startswith("dims [1000]")  # bf16 already: the tile, not the dtype
    assert causes["aten::addmm"].startswith("fp32")


@pytest.mark.usefixtures("no_trace")
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


def test_real_samples_leave_the_kernels_other_findings_name_to_them() -> None:
    """One cause, one finding: the softmax kernels of low_sm_efficiency (8 blocks on 132 SMs) are
    low_sm_efficiency's, resnet50's norm and ReLU kernels are its unfused elementwise chains', and
    gpt_naive_attention's softmax and masking are its attention chains': the roofline names none
    of them again (each took 26-89 % of the step twice before)."""
    assert "low_sm_efficiency" in {f.id for f in _worker("low_sm_efficiency").findings}
    for run in ("low_sm_efficiency", "resnet50_bf16", "gpt_naive_attention"):
        assert [f.subject for f in _roofline_findings(run)] == []


def test_real_trace_names_its_slow_memory_bound_ops() -> None:
    path = fixture_path("tracelens_hf_inference", "h100", "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    run = single_file_run(str(path))
    (w,) = analyze_file(run.files[0], run.workers[0].name, AnalysisOptions())
    (f,) = [f for f in w.findings if f.id == "below_roofline"]
    assert f.subject == "memory" and {o.name for o in f.evidence.ops} >= {"aten::copy_"}
    assert 0 < f.est_gain_us_per_step <= f.evidence.cost_us_per_step
