from __future__ import annotations

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.report import Finding
from tb_mfu_plugin.analysis.run.findings_compare import compare_findings, findings_against_baseline
from tb_mfu_plugin.running.pipeline import analyze_path

from .helpers import blank_evidence


def _f(id: str, gain: float, subject: str | None = None) -> Finding:
    return Finding(
        id=id,
        subject=subject,
        title=id.upper(),
        est_gain_us_per_step=gain,
        severity="low",
        evidence=blank_evidence(id),
        est_gain_share=0.0,
        est_mfu_after=None,
        recommendation="",
    )


def test_fixed_new_and_remaining() -> None:
    base = [_f("naive_attention", 100), _f("sync_point", 5, "item"), _f("sync_point", 3, "to")]
    other = [_f("sync_point", 4, "to"), _f("gpu_idle", 50)]
    got = {
        (c.id, c.subject): (c.status, c.baseline_gain_us_per_step, c.gain_us_per_step)
        for c in compare_findings(base, other)
    }
    assert got == {
        ("naive_attention", None): ("fixed", 100, None),
        ("sync_point", "item"): ("fixed", 5, None),
        ("sync_point", "to"): ("remains", 3, 4),
        ("gpu_idle", None): ("new", None, 50),
    }
    assert [c.status for c in compare_findings(base, other)][0] == "new"


def test_sdpa_fixes_what_the_naive_run_had() -> None:
    if not (SAMPLES / "gpt_naive_attention").is_dir():
        pytest.skip("sample traces not available")
    (naive,) = analyze_path(str(SAMPLES / "gpt_naive_attention")).runs[0].workers
    (sdpa,) = analyze_path(str(SAMPLES / "gpt_sdpa_fused")).runs[0].workers
    fixed = {c.id for c in compare_findings(naive.findings, sdpa.findings) if c.status == "fixed"}
    assert {"naive_attention", "unfused_optimizer", "sync_point"} <= fixed


def test_every_pair_of_workers_against_the_baseline_once() -> None:
    """The /compare body carries the changes for every pair of a run's worker and the baseline's
    (the tab looks up the pair it shows; compare.ts used to recompute fixed / new itself)."""
    if not (SAMPLES / "ddp_2gpu").is_dir():
        pytest.skip("sample traces not available")
    naive = analyze_path(str(SAMPLES / "gpt_naive_attention")).runs[0]
    ddp = analyze_path(str(SAMPLES / "ddp_2gpu")).runs[0]
    pairs = findings_against_baseline([naive, ddp, None])
    assert [(p.run, p.worker, p.baseline_worker) for p in pairs] == [("ddp_2gpu", 0, 0), ("ddp_2gpu", 1, 0)]
    for p in pairs:
        assert p.changes == compare_findings(naive.workers[0].findings, ddp.workers[p.worker].findings)
        fixed = [c for c in p.changes if c.status == "fixed"]
        assert fixed and all(c.severity is None and c.baseline_severity is not None for c in fixed)
    assert findings_against_baseline([None, ddp]) == []
