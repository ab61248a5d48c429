"""A finding its rule estimated on the traced step, rebased onto the step the re-timed gains are of
(diagnosis.finding.rebased): every share of a report is of one step (a pipeline rank read "all findings
together: 40.5 % of the step" under a finding of 45.3 %; tests/invariants.py's whatif_problems checks
every report)."""

from __future__ import annotations

from typing import Any

import pytest

from tb_mfu_plugin.analysis.device.mfu import projected_mfu
from tb_mfu_plugin.diagnosis.finding import make_finding, rebased

from .helpers import blank_evidence

TH = dict(high_share=0.25, medium_share=0.05)


def _made(rule: str, gain: float, step: float, **kw: Any) -> Any:
    return make_finding(
        id=rule,
        title="t",
        evidence=blank_evidence(rule),
        cost_us=gain,
        gain_us=gain,
        step_us=step,
        mfu=0.2,
        recommendation="r",
        **TH,
        **kw,
    )


def test_the_share_severity_and_projection_are_of_the_new_step() -> None:
    f = _made("pipeline_bubble", gain=20.0, step=100.0)  # 20 % of the traced step: medium
    assert (f.severity, f.est_gain_share) == ("medium", 0.2)
    g = rebased(f, 60.0, 0.2, **TH)
    assert g.est_gain_us_per_step == 20.0  # the rule's own gain
    assert g.est_gain_share == pytest.approx(20.0 / 60.0, abs=1e-4)
    assert g.severity == "high"  # a third of the step without the profiler
    assert g.est_mfu_after == projected_mfu(0.2, 60.0, 20.0)
    assert g.evidence.cost_share == pytest.approx(20.0 / 60.0, abs=1e-4)  # evidence is rounded (finding._clean)


def test_a_gain_past_the_new_step_is_the_step_and_no_severity_is_lowered() -> None:
    f = _made("pipeline_bubble", gain=80.0, step=100.0)
    g = rebased(f, 50.0, None, **TH)
    assert (g.est_gain_us_per_step, g.est_gain_share, g.est_mfu_after) == (50.0, 1.0, None)
    assert (g.evidence.cost_us_per_step, g.evidence.cost_above_step_us_per_step) == (50.0, 80.0)
    leak = _made("memory_leak", gain=0.0, step=100.0, risk="medium")  # a risk's least severity
    assert leak.severity == "medium"
    assert rebased(leak, 50.0, 0.2, **TH).severity == "medium"
