from __future__ import annotations

import json
from typing import Literal

import msgspec
import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.fmt import pct
from tb_mfu_plugin.analysis.report import (
    Distributed,
    Finding,
    MfuStatus,
    Summary,
    WaterfallBar,
    WorkerReport,
    to_json,
)
from tb_mfu_plugin.analysis.run.ranks import compare_ranks
from tb_mfu_plugin.running.pipeline import analyze_path

from ...diagnosis.helpers import blank_evidence


def _worker(rank: int, exposed_us: float, idle: float, step_us: float = 1000.0) -> WorkerReport:
    metrics = dict.fromkeys(
        (
            "gpu_busy_share",
            "kernel_time_share",
            "memcpy_time_share",
            "memset_time_share",
            "host_sync_blocked_share",
            "tensor_core_kernel_share",
            "h2d_bytes_per_step",
            "d2h_bytes_per_step",
            "d2d_bytes_per_step",
            "p2p_bytes_per_step",
            "sync_count_per_step",
            "kernels_per_step",
        ),
        0.0,
    )
    metrics["gpu_busy_share"] = 1 - idle
    summary = Summary(
        steps=3, step_time_us=step_us, idle_share=idle, sm_efficiency=None, achieved_occupancy=None, **metrics
    )
    return WorkerReport(
        name=f"rank{rank}",
        span="",
        file=f"rank{rank}.json",
        summary=summary,
        distributed=Distributed(rank=rank, world_size=3),
        waterfall=[
            WaterfallBar(id="communication", label="", kind="loss", us_per_step=exposed_us, share=exposed_us / step_us)
        ],
    )


def test_the_rank_the_others_wait_for_is_the_straggler() -> None:
    r = compare_ranks([_worker(0, 300, 0.0), _worker(1, 20, 0.4), _worker(2, 310, 0.01)])
    assert r is not None and [row.rank for row in r.ranks] == [0, 1, 2]
    assert r.straggler is not None and r.straggler.worker == "rank1"
    assert r.straggler.others_wait_us_per_step == pytest.approx(285)
    json.loads(to_json(r))


def _finding(id: str, gain: float, title: str) -> Finding:
    return Finding(
        id=id,
        severity="high",
        title=title,
        evidence=blank_evidence(id),
        est_gain_us_per_step=gain,
        est_gain_share=gain / 1000,
        est_mfu_after=None,
        recommendation="fix it",
    )


@pytest.mark.parametrize(
    ("idle", "blamed", "largest"),
    [
        (0.02, "it has more GPU work than the others", "Unfused elementwise chains"),
        (0.60, "its host holds it back (host work, launches, data loading)", "Launch-bound"),
        (0.30, "both its GPU work and its host hold it back", "Launch-bound"),
    ],
)
def test_the_straggler_is_blamed_by_what_its_gpu_does(idle: float, blamed: str, largest: str) -> None:
    """A straggler 98 % busy computes longer than the others: its host is not to blame, and its
    largest finding of GPU work is named (not the launch finding, nor a wait on the others)."""
    slow = _worker(1, 20, idle)
    slow.findings = [
        _finding("exposed_communication", 500, "Exposed communication"),
        _finding("launch_bound", 300, "Launch-bound"),
        _finding("unfused_elementwise", 200, "Unfused elementwise chains"),
    ]
    r = compare_ranks([_worker(0, 300, 0.0), slow, _worker(2, 310, 0.01)])
    assert r is not None and r.straggler is not None and r.straggler.worker == "rank1"
    assert blamed in r.straggler.reason and f"its largest finding: {largest}." in r.straggler.reason
    assert pct(1 - idle) in r.straggler.reason or pct(idle) in r.straggler.reason


def test_no_straggler_when_ranks_wait_alike_or_single_rank() -> None:
    r = compare_ranks([_worker(0, 100, 0.0), _worker(1, 60, 0.0)])  # 40 µs spread < 10 % of 1000 µs
    assert r is not None and r.straggler is None
    assert compare_ranks([_worker(0, 100, 0.0)]) is None


def test_real_ddp_run_names_its_straggler() -> None:
    if not (SAMPLES / "ddp_4gpu").is_dir():
        pytest.skip("sample traces not available")
    (run,) = analyze_path(str(SAMPLES / "ddp_4gpu")).runs
    assert run.ranks is not None and len(run.ranks.ranks) == 4
    s = run.ranks.straggler
    # rank 1's GPU idles on host work (47 % busy) while ranks 0, 2, 3 sit ~20 ms a step in the all-reduce
    assert s is not None and s.worker == "rank1" and s.others_wait_us_per_step > 10_000


@pytest.mark.parametrize("run", ["ddp_2gpu", "tp_2gpu"])
def test_real_stragglers_are_blamed_by_what_their_gpu_does(run: str) -> None:
    """ddp_2gpu's rank 1 is 53 % busy and 47 % idle (both sides), tp_2gpu's is 85 % idle on DTensor
    dispatch (its host): the reason says which, with the straggler's own largest finding."""
    if not (SAMPLES / run).is_dir():
        pytest.skip("sample traces not available")
    (report,) = analyze_path(str(SAMPLES / run)).runs
    assert report.ranks is not None and report.ranks.straggler is not None
    s = report.ranks.straggler
    row = next(r for r in report.ranks.ranks if r.worker == s.worker)
    if row.idle_share >= 0.5:
        assert "its host holds it back" in s.reason
    elif row.gpu_busy_share >= 0.8:
        assert "it has more GPU work than the others" in s.reason
    else:
        assert "both its GPU work and its host hold it back" in s.reason
    slow = next(w for w in report.workers if w.name == s.worker)
    assert f"its largest finding: {slow.findings[0].title}." in s.reason  # gpu_idle on both samples


def test_ranks_whose_mfus_differ_say_why_and_name_the_straggler_s() -> None:
    """ddp_2gpu: one synchronous job, yet rank 0 reads 16 % and rank 1 (the straggler) 25 %: rank 0's
    step without the profiler keeps rank 1's profiled lateness in its all-reduce (its truth: 28 %)."""
    if not (SAMPLES / "ddp_2gpu").is_dir():
        pytest.skip("sample traces not available")
    (run,) = analyze_path(str(SAMPLES / "ddp_2gpu")).runs
    r = run.ranks
    assert r is not None and r.straggler is not None and r.mfu_note is not None
    mfus = [row.mfu for row in r.ranks if row.mfu is not None]
    assert max(mfus) / min(mfus) > 1.05
    assert f"range {pct(min(mfus))}–{pct(max(mfus))}" in r.mfu_note
    slow = next(row for row in r.ranks if row.worker == r.straggler.worker)
    assert f"The straggler, {slow.worker}, waits for none: its {pct(slow.mfu)}" in r.mfu_note


def _with_mfu(w: WorkerReport, mfu: float, basis: Literal["without_profiler", "traced"]) -> WorkerReport:
    assert w.summary is not None
    status = MfuStatus(state="known", basis=basis, reason="")
    return msgspec.structs.replace(w, summary=msgspec.structs.replace(w.summary, mfu=mfu, mfu_status=status))


@pytest.mark.parametrize(
    ("mfus", "basis", "said"),
    [
        ((0.20, 0.25), "without_profiler", True),
        ((0.20, 0.209), "without_profiler", False),  # within 5 %: the estimates agree
        ((0.20, 0.25), "traced", False),  # the traced steps' MFU: no estimate to explain
    ],
)
def test_the_mfu_note_only_where_the_estimates_differ(
    mfus: tuple[float, float], basis: Literal["without_profiler", "traced"], said: bool
) -> None:
    workers = [_with_mfu(_worker(i, e, 0.0), m, basis) for i, (e, m) in enumerate(zip((100, 300), mfus, strict=True))]
    r = compare_ranks(workers)
    assert r is not None and (r.mfu_note is not None) is said
    if said:
        assert r.straggler is not None and r.straggler.worker == "rank0"
        assert r.mfu_note is not None and "The straggler, rank0, waits for none: its 20.0 %" in r.mfu_note
    assert compare_ranks([_worker(0, 100, 0.0), _worker(1, 60, 0.0)]).mfu_note is None  # no MFU at all
