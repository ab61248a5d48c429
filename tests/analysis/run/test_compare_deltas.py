"""Compare's figures, computed once in ``analysis.run.compare``: each figure's change (percentage
points for a share, relative otherwise), its verdict (better / worse past the noise, only for the
figures with a better direction), and the top kernels' change per step. The tab and the CLI show
these; neither computes them (tests/e2e checks the tab, tests/cli/test_compare_changes.py the CLI)."""

from __future__ import annotations

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.definitions import DEFINITIONS
from tb_mfu_plugin.analysis.report import RunReport
from tb_mfu_plugin.analysis.run.compare import (
    COMPARED_FIGURES,
    NO_MEMORY,
    NOISE_PP,
    NOISE_RELATIVE,
    CompareRows,
    compare_all,
    compare_rows,
    compare_runs,
    deltas_against_baseline,
    figure_delta,
    figure_value,
    rows_of_runs,
    worker_deltas,
)
from tb_mfu_plugin.running.pipeline import analyze_path


def test_only_speed_and_memory_figures_have_a_better_direction() -> None:
    """ "Busy is not fast": GPU busy, SM efficiency, idle... explain the step, they are no goal."""
    directed = {name: d.better for name, d in DEFINITIONS.items() if d.better != "none"}
    assert directed == {
        "mfu": "higher",
        "achieved_flops": "higher",
        "step_time_us": "lower",
        "step_time_unprofiled_us": "lower",
        "memory.peak_allocated_bytes": "lower",
        "memory.peak_reserved_bytes": "lower",
        "memory.headroom.batch_factor": "higher",
    }
    assert set(directed) <= set(COMPARED_FIGURES)
    assert all(name in DEFINITIONS for name in COMPARED_FIGURES)


def test_a_share_changes_in_points_anything_else_relative() -> None:
    d = figure_delta("mfu", 0.20, 0.25)
    assert (d.delta_unit, d.delta, d.verdict) == ("pp", pytest.approx(5.0), "better")
    d = figure_delta("step_time_us", 40_000.0, 30_000.0)
    assert (d.delta_unit, d.delta, d.verdict) == ("relative", pytest.approx(-0.25), "better")
    d = figure_delta("step_time_us", 40_000.0, 50_000.0)
    assert d.verdict == "worse"
    # a figure that only explains: its change is shown, never judged
    d = figure_delta("gpu_busy_share", 0.5, 0.9)
    assert (d.delta, d.verdict) == (pytest.approx(40.0), "none")


def test_changes_within_the_noise_are_the_same() -> None:
    pp = NOISE_PP / 100
    assert figure_delta("mfu", 0.30, 0.30 + pp * 0.9).verdict == "same"
    assert figure_delta("mfu", 0.30, 0.30 - pp * 1.1).verdict == "worse"
    assert figure_delta("step_time_us", 1000.0, 1000.0 * (1 + NOISE_RELATIVE * 0.9)).verdict == "same"
    assert figure_delta("step_time_us", 1000.0, 1000.0 * (1 + NOISE_RELATIVE * 1.1)).verdict == "worse"
    assert figure_delta("memory.headroom.batch_factor", 2.0, 2.0).verdict == "same"


def test_unknown_stays_unknown() -> None:
    for base, value in ((None, 0.3), (0.3, None), (None, None)):
        d = figure_delta("mfu", base, value)
        assert (d.delta, d.verdict) == (None, "unknown")
    # a relative change from 0 has no size; its direction is still judged
    d = figure_delta("step_time_us", 0.0, 10.0)
    assert (d.delta, d.verdict) == (None, "worse")
    assert figure_delta("sync_count_per_step", 0.0, 0.0).delta is None


@pytest.fixture(scope="module")
def naive_and_sdpa() -> tuple[RunReport, RunReport]:
    if not (SAMPLES / "gpt_naive_attention").is_dir():
        pytest.skip("sample traces not available")
    return (
        analyze_path(str(SAMPLES / "gpt_naive_attention")).runs[0],
        analyze_path(str(SAMPLES / "gpt_sdpa_fused")).runs[0],
    )


def test_sdpa_against_naive_attention(naive_and_sdpa: tuple[RunReport, RunReport]) -> None:
    naive, sdpa = naive_and_sdpa
    a, b = naive.workers[0], sdpa.workers[0]
    figures, kernels = worker_deltas(a, b)
    assert [d.figure for d in figures] == list(COMPARED_FIGURES)
    by = {d.figure: d for d in figures}
    assert by["mfu"].verdict == by["step_time_us"].verdict == "better"  # the fused run is faster
    assert by["gpu_busy_share"].verdict == "none"
    assert by["memory.peak_allocated_bytes"].verdict == "unknown"  # no profile_memory in these traces
    for d in figures:
        assert (d.baseline, d.value) == (figure_value(a, d.figure), figure_value(b, d.figure))
    s_a, s_b = a.summary, b.summary
    assert s_a is not None and s_b is not None
    assert by["step_time_us"].delta == pytest.approx((s_b.step_time_us - s_a.step_time_us) / s_a.step_time_us)
    assert by["breakdown.memcpy"].baseline == s_a.breakdown["memcpy"]
    assert by["launches.short_kernel_share"].value == (b.launches.short_kernel_share if b.launches else None)
    # kernels: per analysed step, both top lists, a kernel in one list only None in the other
    per_a = {k.name: k.total_us / s_a.steps for k in a.top_kernels}
    per_b = {k.name: k.total_us / s_b.steps for k in b.top_kernels}
    assert {k.name for k in kernels} == set(per_a) | set(per_b)
    for k in kernels:
        assert (k.baseline_us_per_step, k.us_per_step) == (per_a.get(k.name), per_b.get(k.name))
        assert k.delta_us_per_step == pytest.approx((per_b.get(k.name) or 0) - (per_a.get(k.name) or 0))
    sizes = [abs(k.delta_us_per_step) for k in kernels]
    assert sizes == sorted(sizes, reverse=True)
    assert any(k.us_per_step is None for k in kernels) and any(k.baseline_us_per_step is None for k in kernels)


def test_every_pair_once_and_every_worker_against_itself(naive_and_sdpa: tuple[RunReport, RunReport]) -> None:
    naive, _ = naive_and_sdpa
    ddp = analyze_path(str(SAMPLES / "ddp_2gpu")).runs[0]
    pairs = deltas_against_baseline([naive, ddp, None])
    keys = [(p.run, p.worker, p.baseline_run, p.baseline_worker) for p in pairs]
    assert keys == [
        ("gpt_naive_attention", 0, "gpt_naive_attention", 0),
        ("ddp_2gpu", 0, "ddp_2gpu", 0),
        ("ddp_2gpu", 1, "ddp_2gpu", 1),
        ("ddp_2gpu", 0, "gpt_naive_attention", 0),
        ("ddp_2gpu", 1, "gpt_naive_attention", 0),
    ]
    for p in pairs:
        run = naive if p.run == naive.name else ddp
        base = naive if p.baseline_run == naive.name else ddp
        assert (p.figures, p.kernels) == worker_deltas(base.workers[p.baseline_worker], run.workers[p.worker])
        if p.run == p.baseline_run:  # its own figures: nothing changed
            assert {d.verdict for d in p.figures} <= {"same", "none", "unknown"}
    # the baseline not loaded yet: each loaded run's own figures only
    assert [(p.run, p.baseline_run) for p in deltas_against_baseline([None, ddp])] == [("ddp_2gpu",) * 2] * 2


def test_the_cli_compares_with_the_same_function(naive_and_sdpa: tuple[RunReport, RunReport]) -> None:
    from tb_mfu_plugin.analysis.report import Report

    naive, sdpa = naive_and_sdpa
    (rank,) = compare_runs(Report(runs=[naive], tool_version="t"), Report(runs=[sdpa], tool_version="t")).ranks
    assert (rank.figures, rank.kernels) == worker_deltas(naive.workers[0], sdpa.workers[0])


def check_rows(rows: CompareRows, workers: list) -> None:
    """The rows' rule, whatever the workers: every figure shown or left out, once, in
    COMPARED_FIGURES' order; only a memory figure left out, and only one that no worker has; none
    while a run loads (None); the one reason given exactly when every memory row is left out."""
    assert sorted(rows.shown + rows.left_out) == sorted(COMPARED_FIGURES)
    assert rows.shown == [n for n in COMPARED_FIGURES if n in rows.shown]
    memory = [n for n in COMPARED_FIGURES if n.startswith("memory.")]
    for n in COMPARED_FIGURES:
        unknown = bool(workers) and None not in workers and all(figure_value(w, n) is None for w in workers)
        assert (n in rows.left_out) == (n in memory and unknown), n
    assert (rows.why == NO_MEMORY) == (rows.left_out == memory)


def test_memory_rows_are_left_out_where_no_worker_has_them(naive_and_sdpa: tuple[RunReport, RunReport]) -> None:
    naive, sdpa = naive_and_sdpa
    memory = analyze_path(str(SAMPLES / "gpt_memory")).runs[0]  # recorded with profile_memory=True
    cases = {
        "no memory events": [naive, sdpa],
        "one run with them": [naive, memory],
        "a run still loading": [naive, None],
        "one run": [memory],
    }
    got = {}
    for name, runs in cases.items():
        workers = [w for r in runs for w in (r.workers if r is not None else [None])]
        got[name] = rows_of_runs(runs)
        check_rows(got[name], workers)
    assert got["no memory events"].why == NO_MEMORY and got["no memory events"].left_out
    assert "memory.peak_allocated_bytes" in got["one run with them"].shown
    assert got["a run still loading"].left_out == []
    # the CLI's comparison carries the same rows for the same runs
    from tb_mfu_plugin.analysis.report import Report

    def report(r: RunReport) -> Report:
        return Report(runs=[r], tool_version="t")

    assert compare_all(report(naive), [report(sdpa)]).rows == got["no memory events"]
    assert compare_all(report(naive), [report(sdpa), report(memory)]).rows == got["one run with them"]
    assert compare_rows([]) == CompareRows(shown=list(COMPARED_FIGURES), left_out=[])
