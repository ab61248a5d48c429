"""The memory rules (diagnosis/rules/memory.py) at their edges, on hand-made traces, and on the
profile_memory=True samples: the leak found with its growth and the op that keeps the memory, the
headroom beside launch_bound, checkpointing's trade; no memory finding without memory events."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.evidence.memory import MemoryOpRow
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.diagnosis import DEFAULT
from tb_mfu_plugin.running.pipeline import analyze_path

from .helpers import Builder, analyze, ids, one

MEMORY_RULES = {"memory_leak", "near_oom", "allocator_fragmentation", "memory_headroom", "activation_checkpointing"}
GIB = 1 << 30
H200 = [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 100 * GIB, "numSms": 132}]


def _steps(b: Builder, n: int = 3, launches: int = 0) -> None:
    """``n`` steps of 1 ms with a long kernel (the GPU busy: no launch-bound idle) unless ``launches``."""
    for i in range(n):
        t = 1000.0 * i
        b.step(i + 1, t, 990.0)
        if launches:
            for k in range(launches):
                b.launch("tiny", t + 5 + 9 * k, t + 6 + 9 * k, 2.0)
        else:
            b.launch("gemm_kernel", t + 1, t + 2, 980.0)


def _starts(b: Builder, starts: list[int], peak_above: int, reserved_above: int = 0) -> None:
    """Per step: the allocation at start, one allocation of ``peak_above`` and its free."""
    for i, s in enumerate(starts):
        t = 1000.0 * i
        b.memory(t + 100, peak_above, s + peak_above, s + peak_above + reserved_above, addr=1)
        b.memory(t + 500, -peak_above, s, s + peak_above + reserved_above, addr=1)
        if i + 1 < len(starts) and starts[i + 1] != s:  # what the step keeps
            b.memory(t + 600, starts[i + 1] - s, starts[i + 1], s + peak_above + reserved_above, addr=100 + i)


def test_a_leak_fires_with_its_growth_and_the_steps_left(tmp_path: Path) -> None:
    b = Builder(devices=H200)
    _steps(b, 4)
    _starts(b, [GIB, GIB + 4 * 2**20, GIB + 8 * 2**20, GIB + 12 * 2**20], GIB)
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "memory_leak")
    assert f.evidence.growth_per_step_bytes == 4 * 2**20
    assert f.evidence.steps_until_full == pytest.approx((100 * GIB - (2 * GIB + 12 * 2**20)) / (4 * 2**20), rel=1e-3)
    assert f.severity == "medium" and f.est_gain_us_per_step == 0  # ~24,000 steps left: not high
    assert "4.19 MB a step" in f.title


@pytest.mark.parametrize(
    ("starts", "why"),
    [
        ([GIB, GIB + 2**19, GIB + 2**20], "under 1 MiB a step"),
        ([GIB, GIB + 4 * 2**20, GIB + 4 * 2**20], "no growth in one step"),
        ([GIB, GIB + 4 * 2**20], "two steps only"),
    ],
)
def test_no_leak_below_the_thresholds(tmp_path: Path, starts: list[int], why: str) -> None:
    b = Builder(devices=H200)
    _steps(b, len(starts))
    _starts(b, starts, GIB)
    rep, *_ = analyze(b, tmp_path)
    assert "memory_leak" not in ids(rep), why


def test_a_fast_leak_is_high(tmp_path: Path) -> None:
    b = Builder(devices=H200)
    _steps(b)
    _starts(b, [GIB, 2 * GIB, 3 * GIB], GIB)
    rep, *_ = analyze(b, tmp_path)
    assert one(rep, "memory_leak").severity == "high"


def test_near_oom_at_90_percent(tmp_path: Path) -> None:
    for peak, fires in ((89 * GIB, False), (91 * GIB, True)):
        b = Builder(devices=H200)
        _steps(b, 1)
        b.memory(100, peak - GIB, peak, peak + GIB // 2, addr=1)
        rep, *_ = analyze(b, tmp_path, name=f"p{peak}")
        assert ("near_oom" in ids(rep)) is fires, peak
    f = one(rep, "near_oom")
    assert f.severity == "high" and f.est_gain_us_per_step == 0
    assert "checkpoint activations" in f.recommendation  # the run does not checkpoint
    assert "expandable_segments" not in f.recommendation  # its allocator caches little


def test_near_oom_from_the_allocators_oom_events(tmp_path: Path) -> None:
    b = Builder(devices=H200)
    _steps(b, 1)
    b.memory(100, GIB, GIB, 2 * GIB, addr=1)
    b.memory(200, 200 * GIB, GIB, 2 * GIB, name="[OutOfMemory]")
    rep, *_ = analyze(b, tmp_path)
    assert "failed 1 request" in one(rep, "near_oom").title


def test_fragmentation_at_its_edges(tmp_path: Path) -> None:
    cases = ((GIB, GIB, True), (3 * GIB, GIB, False), (GIB // 2, GIB // 2, False))  # (allocated, cached, fires)
    for allocated, cached, fires in cases:
        b = Builder(devices=H200)
        _steps(b, 1)
        b.memory(100, allocated, allocated, allocated + cached, addr=1)
        rep, *_ = analyze(b, tmp_path, name=f"f{allocated}_{cached}")
        assert ("allocator_fragmentation" in ids(rep)) is fires, (allocated, cached)


def test_headroom_fires_only_beside_launch_bound(tmp_path: Path) -> None:
    for launches, fires in ((0, False), (90, True)):
        b = Builder(devices=H200)
        _steps(b, 3, launches=launches)
        _starts(b, [GIB] * 3, GIB)
        rep, *_ = analyze(b, tmp_path, name=f"h{launches}")
        assert ("launch_bound" in ids(rep)) is fires
        assert ("memory_headroom" in ids(rep)) is fires
    f = one(rep, "memory_headroom")
    assert f.evidence.batch_factor_at_90 == pytest.approx((90 * GIB - GIB) / GIB)
    assert f.evidence.suggested_batch_factor == DEFAULT.headroom_max_suggested == 8
    assert f.severity == one(rep, "launch_bound").severity and f.est_gain_us_per_step == 0


def test_a_full_device_has_no_headroom_finding(tmp_path: Path) -> None:
    b = Builder(devices=H200)
    _steps(b, 3, launches=90)
    _starts(b, [40 * GIB] * 3, 40 * GIB)  # the batch could not double within 90 %
    rep, *_ = analyze(b, tmp_path)
    assert "launch_bound" in ids(rep) and "memory_headroom" not in ids(rep)


# ---- the samples

_cache: dict[str, WorkerReport] = {}


def _sample(run: str) -> WorkerReport:
    if run not in _cache:
        _cache[run] = analyze_path(str(SAMPLES / run)).runs[0].workers[0]
    return _cache[run]


def test_the_leak_sample() -> None:
    w = _sample("memory_leak")
    f = one(w, "memory_leak")
    assert f.evidence.growth_per_step_bytes == 8388608
    assert f.evidence.kept_ops[0] == MemoryOpRow(op="aten::_to_copy", root_op="aten::to", bytes=8388608, count=1)
    assert "`aten::_to_copy`" in f.recommendation


def test_the_headroom_samples() -> None:
    for run in ("gpt_memory", "gpt_memory_batch2x", "gpt_memory_checkpointing", "memory_leak"):
        w = _sample(run)
        assert "launch_bound" in ids(w) and "memory_headroom" in ids(w), run
        assert not {"near_oom", "allocator_fragmentation"} & set(ids(w)), run
    assert "memory_leak" not in ids(_sample("gpt_memory"))


def test_the_checkpointing_sample_shows_its_trade() -> None:
    f = one(_sample("gpt_memory_checkpointing"), "activation_checkpointing")
    ev = f.evidence
    assert ev.recompute_flops_per_step == 85899345920  # the ground truth's recompute FLOPs
    assert ev.saved_bytes_at_most >= 326897664  # the pair's measured saving
    assert ev.recompute_us_per_step == f.evidence.cost_us_per_step > 0
    assert (
        f.title.startswith("Activation checkpointing re-runs forward ops")
        and "turn checkpointing off" in f.recommendation
    )
    assert "activation_checkpointing" not in ids(_sample("gpt_memory"))


def test_compare_gives_the_checkpointing_pairs_deltas() -> None:
    """tb-mfu compare's memory rows on the pair: the peak it saves, the headroom it buys, the recompute it costs."""
    from tb_mfu_plugin.cli.render_memory import compared_rows

    base, ckpt = (_sample(r).memory for r in ("gpt_memory", "gpt_memory_checkpointing"))
    assert base is not None and ckpt is not None
    a, b = base.brief(), ckpt.brief()
    assert a is not None and b is not None
    rows = {name: (x, y, change) for name, x, y, change in compared_rows(a, b)}
    assert b.peak_allocated_bytes is not None and a.peak_allocated_bytes is not None
    assert a.peak_allocated_bytes - b.peak_allocated_bytes == 326897664  # the pair's measured saving
    peak = next(v for k, v in rows.items() if "peak allocated" in k.lower())
    assert peak == ("1.11 GB", "782 MB", "\u2212327 MB")
    headroom = next(v for k, v in rows.items() if "headroom" in k.lower())
    assert headroom[2] == "+136.8×", headroom
    recompute = next(v for k, v in rows.items() if "recompute" in k.lower())
    assert recompute == ("n/a", "7.85 ms", "+7.85 ms")


@pytest.mark.parametrize("run", ["gpt_sdpa_fused", "gpt_checkpointing", "tiny_mlp_launch_bound"])
def test_no_memory_finding_without_memory_events(run: str) -> None:
    w = _sample(run)
    assert w.memory is not None and w.memory.unavailable is not None
    assert not MEMORY_RULES & set(ids(w))
