"""The findings' invariants, on every sample trace, every ../shared fixture and mutations of the
fuzz corpus (issue 23):

- no time is reported under two findings as two causes: the stretches of the step that two
  findings' costs cover (``Hit.time``, diagnosis.cost_time) overlap by no more than a rounding
  tolerance;
- the combined gain of all findings is at least the largest single gain and at most the step, the
  sum of the gains and the time the findings cover;
- a finding's time lies within the steps and is at most its cost (it is the time the cost counts);
- each modelled step's critical path (analysis.critical_path) adds up to the step within 1 %;
- no re-timing of the what-if (diagnosis.whatif_gains) is shorter than the work its changes leave on
  the busiest chain, none projects an MFU above 100 %, and the fixes together gain at least as much
  as any of them alone (issue 26).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, SHARED

from tb_mfu_plugin.analysis.report import Finding, WorkerReport
from tb_mfu_plugin.diagnosis import engine
from tb_mfu_plugin.diagnosis.cost_time import TimeSet, union
from tb_mfu_plugin.running.pipeline import analyze_path

# Two findings may both claim a sliver of time where the trace rounds to whole microseconds (a
# copy that ends where a gap laid from its start begins): 0.1 % of the step, and 1 µs per step.
OVERLAP_SHARE, OVERLAP_US = 0.001, 1.0

Claimed = tuple[WorkerReport, int, float, list[tuple[Finding, TimeSet | None]]]


def _inputs() -> list[Path]:
    found = sorted(p for p in SAMPLES.iterdir() if p.is_dir())
    if SHARED.is_dir():
        found += sorted(d for d in (SHARED / "pipeline_parallel_h200").glob("gpt_pp2_*") if d.is_dir())
        found += sorted(p for p in SHARED.rglob("*.json.gz") if "pipeline_parallel_h200" not in p.parts)
    return found


def _fuzz_cases(tmp: Path) -> list[Path]:
    sys.path.append(str(Path(__file__).resolve().parents[1] / "fuzz"))
    import corpus  # the fuzz corpus' mutations of real traces (tests/fuzz/corpus.py)

    return corpus.mutated_cases(tmp, per_base=12) + corpus.memory_cases(tmp, per_base=6)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Claimed]]]:
    """Every input analysed once, each worker with the times of its findings."""
    out: dict[str, list[Claimed]] = {}
    with pytest.MonkeyPatch.context() as mp:
        got: list[tuple[tuple[str, str, int | None], int, float, list[tuple[Finding, TimeSet | None]]]] = []
        real = engine.run_claims

        def capture(ctx: Any, notes: Any) -> Any:
            claims = real(ctx, notes)
            got.append((_key(ctx.report), ctx.n, ctx.step_us, claims))
            return claims

        mp.setattr(engine, "run_claims", capture)
        for path in [*_inputs(), *_fuzz_cases(tmp_path_factory.mktemp("fuzz"))]:
            got.clear()
            workers = [w for r in analyze_path(str(path)).runs for w in r.workers]
            by_report = {key: (n, step, claims) for key, n, step, claims in got}
            out[str(path)] = [(w, *by_report[_key(w)]) for w in workers if _key(w) in by_report]
    yield out


def _key(w: WorkerReport) -> tuple[str, str, int | None]:
    """A worker report's identity (the ranks' view copies the reports it extends)."""
    return (w.file, w.span, w.device.index if w.device is not None else None)


def _claimed(analysed: dict[str, list[Claimed]]) -> Iterator[tuple[str, Claimed]]:
    for path, workers in analysed.items():
        for c in workers:
            yield f"{Path(path).name} {c[0].name}", c


def test_every_input_was_diagnosed(analysed: dict[str, list[Claimed]]) -> None:
    samples = [p for p in analysed if Path(p).parent == SAMPLES]
    assert len(samples) == len([p for p in SAMPLES.iterdir() if p.is_dir()])
    assert sum(1 for _ in _claimed(analysed)) >= 40
    fired = {f.id for _, (_, _, _, claims) in _claimed(analysed) for f, _ in claims}
    assert len(fired) >= 12  # most rules fire somewhere, so the pairs below are really tested


def test_no_time_is_reported_under_two_findings(analysed: dict[str, list[Claimed]]) -> None:
    twice = []
    for where, (_, n, step, claims) in _claimed(analysed):
        tolerance = max(OVERLAP_SHARE * step, OVERLAP_US)
        for i, (a, ta) in enumerate(claims):
            for b, tb in claims[i + 1 :]:
                if ta is None or tb is None:
                    continue
                both = ta.intersect(tb).us / n
                if both > tolerance:
                    twice.append(f"{where}: {a.id}/{a.subject} and {b.id}/{b.subject} share {both:.1f} µs per step")
    assert not twice, "\n".join(twice)


def test_every_finding_says_when_its_cost_runs(analysed: dict[str, list[Claimed]]) -> None:
    """Every rule that runs on one trace gives its time (low_bus_bandwidth runs on the ranks'
    reports alone, diagnosis.distributed), within the steps and at most its cost."""
    for where, (_, n, step, claims) in _claimed(analysed):
        for f, t in claims:
            assert t is not None, (where, f.id)
            assert t.us / n <= f.evidence.cost_us_per_step * 1.001 + OVERLAP_US, (where, f.id, t.us / n)
            assert t.us / n <= step * 1.001, (where, f.id)


def test_the_combined_gain_is_between_the_largest_gain_and_the_step(analysed: dict[str, list[Claimed]]) -> None:
    """With the step re-timed (diagnosis.whatif_gains) the combined gain is one re-timing of every fix:
    at least each gain alone (weights only shrink), at most the step. Without a model it combines the
    rules' own gains, which never add past the time the findings cover."""
    for where, (w, n, step, claims) in _claimed(analysed):
        gains = [f.est_gain_us_per_step for f in w.findings if f.id != "low_bus_bandwidth"]
        combined = w.combined_gain_us_per_step
        assert combined is not None and w.combined_gain_share is not None, where
        if not gains:
            assert combined == 0.0
            continue
        rounding = 0.05 * len(gains) + 1e-6  # the gains are rounded to 0.1 µs (finding._round)
        assert max(gains) - rounding <= combined <= step + rounding, where
        if w.whatif is None or w.whatif.combined is None:
            covered = union(t for _, t in claims if t is not None).us / n
            assert combined <= min(sum(gains), max(covered, max(gains))) + rounding, where
        # a share of the step the findings' gains are of: without the profiler where the model re-timed them
        of = w.whatif.unprofiled_step_us if w.whatif is not None else step
        assert w.combined_gain_share == pytest.approx(combined / of)


def test_the_critical_path_adds_up_to_each_step(analysed: dict[str, list[Claimed]]) -> None:
    modelled = 0
    for where, (w, *_) in _claimed(analysed):
        cp = w.critical_path
        if cp is None:
            continue
        modelled += 1
        assert cp.steps and len(cp.steps) == cp.steps_modelled <= len(w.steps), where
        for s in cp.steps:
            assert all(v >= -1e-6 * s.dur_us for v in s.us.values()), (where, s.step, s.us)
            assert abs(sum(s.us.values()) - s.dur_us) <= 0.01 * s.dur_us + 1e-6, (where, s.step, s.us, s.dur_us)
        assert abs(sum(cp.share.values()) - 1.0) <= 0.01, (where, cp.share)
    assert modelled >= 40


def test_no_retiming_is_shorter_than_the_work_it_leaves(analysed: dict[str, list[Claimed]]) -> None:
    retimed = 0
    for where, (w, *_) in _claimed(analysed):
        wi = w.whatif
        if wi is None or wi.combined is None:
            continue
        retimed += 1
        for case in [*wi.cases, wi.combined]:
            assert case.step_us >= case.floor_us * (1 - 1e-9) - 1e-6, (where, case)
            assert case.mfu is None or case.mfu <= 1.0, (where, case)
            assert case.gain_us_per_step <= wi.step_us + 1e-6, (where, case)
        singles = [c for c in wi.cases if c.mask & (c.mask - 1) == 0]
        assert all(c.gain_us_per_step <= wi.combined.gain_us_per_step + 1e-6 for c in singles), where
        for f in w.findings:
            assert f.est_mfu_after is None or f.est_mfu_after <= 1.0, (where, f.id)
    assert retimed >= 20
