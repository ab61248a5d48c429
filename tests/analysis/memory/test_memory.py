"""The report's memory block (analysis/memory) against the ground truth of the four
profile_memory=True samples (sample_traces/README.md, "Memory"), and on hand-built traces whose
answers are worked out here: hostile values, events outside the steps, reused addresses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.memory import block, live
from tb_mfu_plugin.analysis.memory.types import Memory
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_path

RUNS = ("gpt_memory", "gpt_memory_checkpointing", "gpt_memory_batch2x", "memory_leak")
_cache: dict[str, WorkerReport] = {}


def _worker(path: Path) -> WorkerReport:
    if str(path) not in _cache:
        (w,) = analyze_path(str(path)).runs[0].workers
        _cache[str(path)] = w
    return _cache[str(path)]


def _memory(run: str) -> tuple[Memory, dict[str, Any]]:
    w = _worker(SAMPLES / run)
    assert w.memory is not None and w.memory.unavailable is None
    return w.memory, json.loads((SAMPLES / run / "ground_truth.json").read_text())["memory"]


@pytest.mark.parametrize("run", RUNS)
def test_each_steps_peak_is_max_memory_allocated(run: str) -> None:
    """Peak allocated per step within 2 % of torch.cuda.max_memory_allocated() (issue 25); here it is
    exact, as are the step start and the reserved bytes."""
    m, truth = _memory(run)
    profiled = truth["per_step_profiled"]
    assert len(m.steps) == len(profiled) == 3
    for got, want in zip(m.steps, profiled, strict=True):
        assert got.peak_allocated_bytes == pytest.approx(want["peak_allocated"], rel=0.02)
        assert got.peak_allocated_bytes == want["peak_allocated"]
        assert got.allocated_start_bytes == want["allocated_start"]
        assert got.peak_reserved_bytes == want["reserved_end"]
        assert got.peak_phase == want["peak_phase"] == "backward"
        assert got.reserved_minus_allocated_bytes is not None and got.reserved_minus_allocated_bytes >= 0
    unprofiled = truth["unprofiled"]["peak_allocated_bytes_median"]
    if run != "memory_leak":  # (the leak's unprofiled steps come before the profiled ones: lower)
        assert m.peak_allocated_bytes == pytest.approx(unprofiled, rel=0.02)
    assert m.device_total_bytes == truth["device_total_memory_bytes"]
    assert m.device_total_source == "deviceProperties totalGlobalMem"
    assert m.peak_share == pytest.approx(m.peak_allocated_bytes / truth["device_total_memory_bytes"])
    assert m.top_ops and sum(o.bytes for o in m.top_ops) <= m.peak_allocated_bytes


def test_the_leak_is_found_with_its_growth() -> None:
    m, truth = _memory("memory_leak")
    want = truth["unprofiled"]["allocated_start_growth_per_step_bytes_median"]
    assert want == 8388608 and m.growth_per_step_bytes == pytest.approx(want, rel=0.05)
    assert [s.growth_bytes for s in m.steps] == [None, 8388608, 8388608]
    for run in ("gpt_memory", "gpt_memory_checkpointing", "gpt_memory_batch2x"):
        assert _memory(run)[0].growth_per_step_bytes == 0


def test_the_peak_falls_in_the_loss_backward() -> None:
    m, _ = _memory("gpt_memory")
    assert (m.peak_phase, m.peak_op) == ("backward", "aten::nll_loss_backward")
    assert m.peak_root_op == "autograd::engine::evaluate_function: NllLossBackward0"
    assert m.top_ops[0].name == live.BEFORE_STEP and m.top_ops[0].bytes == m.allocated_start_bytes


def test_headroom_against_the_two_batch_sizes() -> None:
    """The one-trace estimate (start = fixed, peak - start = batch-scaled) against the linear fit of
    the 1x and 2x runs (batch_factor 198.95): within 5 %, and below it (the step start misses the
    gradients and autocast copies, which do not scale with the batch)."""
    m1, _ = _memory("gpt_memory")
    m2, truth2 = _memory("gpt_memory_batch2x")
    fit = truth2["vs_gpt_memory"]["headroom_batch_factor_linear"]
    assert m1.headroom is not None and m2.headroom is not None
    assert m1.headroom.batch_factor == pytest.approx(fit, rel=0.05) and m1.headroom.batch_factor < fit
    # the 2x run's own factor, in 1x batches
    assert 2 * m2.headroom.batch_factor == pytest.approx(fit, rel=0.05)
    assert m1.headroom.batch_factor_at_90 is not None and m1.headroom.batch_factor_at_90 < m1.headroom.batch_factor
    assert m1.headroom.fixed_bytes + m1.headroom.batch_scaled_bytes == m1.peak_allocated_bytes


def test_checkpointing_shows_recompute_time_beside_memory_saved() -> None:
    m, truth = _memory("gpt_memory_checkpointing")
    vs = truth["vs_gpt_memory"]
    r = m.recompute
    assert r is not None and r.regions_per_step == 4  # one per checkpointed block
    assert r.saved_bytes is not None
    # an upper bound of the saving the pair measured (326,897,664 B): within 15 %
    assert vs["memory_saved_bytes"] <= r.saved_bytes <= 1.15 * vs["memory_saved_bytes"]
    # the recompute regions are a part of the profiled backward's growth (the unpack hooks are the rest)
    base = json.loads((SAMPLES / "gpt_memory" / "ground_truth.json").read_text())["memory"]
    grew = truth["profiled"]["phase_time_us_median"]["backward"] - base["profiled"]["phase_time_us_median"]["backward"]
    assert 0.4 * grew < r.us_per_step < grew
    assert r.us_per_step == max(r.host_us_per_step, r.gpu_us_per_step)
    assert _memory("gpt_memory")[0].recompute is None


def test_a_trace_without_memory_events_says_why() -> None:
    w = _worker(SAMPLES / "gpt_sdpa_fused")
    assert w.memory is not None and w.memory.unavailable == block.NO_EVENTS
    assert "profile_memory=True" in block.NO_EVENTS
    assert w.memory.peak_allocated_bytes is None and not w.memory.steps and w.memory.timeline is None
    assert not [f for f in w.findings if f.id.startswith(("memory", "near_oom", "allocator"))]


def test_the_timeline_keeps_the_peak() -> None:
    m, _ = _memory("memory_leak")
    t = m.timeline
    assert t is not None and len(t.t_us) == len(t.allocated) == len(t.reserved) <= block.TIMELINE_POINTS
    assert max(t.allocated) == m.peak_allocated_bytes
    assert t.t_us == sorted(t.t_us) and len(t.step_starts_us) == 3


# ---- hand-built traces


def _steps(b: TraceBuilder, n: int = 3) -> None:
    for i in range(n):
        b.step(i + 1, 1000.0 * i, 900.0)
        b.launch_kernel("k", 1000.0 * i + 10, 1000.0 * i + 20, 50.0)


def _analyse(b: TraceBuilder, tmp_path: Path) -> Memory:
    w = analyze_path(str(b.write(tmp_path / "run" / "rank0.1.pt.trace.json.gz"))).runs[0].workers[0]
    assert w.memory is not None and w.device is not None and w.device.index == 0
    return w.memory


def test_phases_and_ops_from_the_ops_around(tmp_path: Path) -> None:
    b = TraceBuilder()
    _steps(b, 1)
    b.op("aten::linear", 100, 50)
    b.op("aten::addmm", 110, 30)
    b.op("aten::empty_strided", 112, 2)
    b.memory(113, 1000, 5000, 8192, addr=1)  # forward: aten::addmm (the primitive is skipped)
    b.op("autograd::engine::evaluate_function: MmBackward0", 300, 100)
    b.op("aten::mm", 310, 20)
    b.memory(315, 2000, 7000, 8192, addr=2)  # backward: the peak
    b.memory(320, -1000, 6000, 8192, addr=1)
    b.annotation("Optimizer.step#AdamW.step", 500, 100)
    b.memory(510, 100, 6100, 8192, addr=3)  # optimizer
    b.memory(700, -2000, 4100, 8192, addr=2)  # after: other
    m = _analyse(b, tmp_path)
    (s,) = m.steps
    assert (s.allocated_start_bytes, s.peak_allocated_bytes, s.allocated_end_bytes) == (4000, 7000, 4100)
    assert (s.peak_phase, s.peak_op) == ("backward", "aten::mm")
    assert s.peak_root_op == "autograd::engine::evaluate_function: MmBackward0"
    assert s.reserved_minus_allocated_bytes == 1192 and s.peak_at_us == 315
    ops = {o.name: o.bytes for o in m.top_ops}
    assert ops == {"aten::mm": 2000, "aten::addmm": 1000, live.BEFORE_STEP: 4000}
    from tb_mfu_plugin.analysis.memory.timeline import PHASES

    assert PHASES == ("forward", "backward", "optimizer", "other")


def test_hostile_values_never_give_a_negative_or_impossible_figure(tmp_path: Path) -> None:
    b = TraceBuilder()
    _steps(b)
    b.memory(-500, 10, 100, 200)  # before every step
    b.memory(5000, 10, 100, 200)  # after every step
    for i in range(3):
        t = 1000.0 * i
        b.memory(t + 100, 512, -7, 1 << 62)  # negative total, absurd reserved
        b.memory(t + 110, 2**70, 2**80, "x")  # beyond int64
        b.memory(t + 120, 64, 64 + i, 32, addr=5)  # reserved below allocated
        b.memory(t + 130, 64, 128 + i, 4096, addr=5)  # the same address again, never freed in between
        b.memory(t + 140, -64, 64 + i, 4096, addr=5)
        b.memory(t + 150, None, None, None, addr=None, device=None)
    m = _analyse(b, tmp_path)
    assert m.events_outside_steps == 2
    for s in m.steps:
        for k in (
            "peak_allocated_bytes",
            "peak_reserved_bytes",
            "allocated_start_bytes",
            "allocated_end_bytes",
            "reserved_minus_allocated_bytes",
        ):
            v = getattr(s, k)
            assert v is None or 0 <= v < 1 << 50, (k, v)
        assert s.peak_allocated_bytes == 128 + s.step - 1
    assert all(o.bytes >= 0 for o in m.top_ops)
    assert m.peak_share is not None and 0 <= m.peak_share <= 1
    assert m.headroom is None or (m.headroom.batch_factor or 0) >= 0


def test_no_event_in_a_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    _steps(b)
    b.memory(5000, 10, 100, 200)
    m = _analyse(b, tmp_path)
    assert m.unavailable is not None and "analysed step" in m.unavailable and m.steps == []


def test_another_devices_events_are_not_this_ones(tmp_path: Path) -> None:
    b = TraceBuilder()
    _steps(b, 1)
    b.launch_kernel("k1", 10, 30, 5, device=1)
    b.memory(100, 10, 100, 200, device=3)
    m = _analyse(b, tmp_path)
    assert m.unavailable is not None and "device 0" in m.unavailable


def test_a_lone_device_is_matched_with_a_note(tmp_path: Path) -> None:
    b = TraceBuilder()
    _steps(b, 1)
    b.memory(100, 10, 100, 200, device=2)
    m = _analyse(b, tmp_path)
    assert m.unavailable is None and m.peak_allocated_bytes == 100
    assert any("taken as the same GPU" in n for n in m.notes)


def test_an_unknown_device_size_leaves_share_and_headroom_unknown(tmp_path: Path) -> None:
    b = TraceBuilder(devices=[{"id": 0, "name": "Some GPU"}])
    _steps(b, 1)
    b.memory(100, 10, 100, 200)
    m = _analyse(b, tmp_path)
    assert m.device_total_bytes is None and m.peak_share is None and m.headroom is None
    assert m.peak_allocated_bytes == 100 and any("Device memory unknown" in n for n in m.notes)


def test_the_datasheet_size_when_the_trace_has_none(tmp_path: Path) -> None:
    from tb_mfu_plugin.analysis.memory.capacity import device_memory

    assert device_memory({"name": "NVIDIA H100 80GB HBM3"}, None).bytes == 80 << 30
    assert device_memory(None, "NVIDIA A100-SXM4-40GB").bytes == 40 << 30
    assert device_memory(None, "NVIDIA A100-SXM4").bytes is None  # 40 or 80: never guessed
    assert device_memory({"totalGlobalMem": -5, "name": "NVIDIA L4"}, None).bytes == 24 << 30
    assert device_memory({"totalGlobalMem": 2**80}, "x").bytes is None


def test_oom_events_are_counted(tmp_path: Path) -> None:
    b = TraceBuilder()
    _steps(b, 1)
    b.memory(100, 10, 100, 200)
    b.memory(200, 1 << 40, 100, 200, name="[OutOfMemory]")
    m = _analyse(b, tmp_path)
    assert m.oom_events == 1 and m.peak_allocated_bytes == 100


def test_timeline_downsampling_keeps_each_buckets_highest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(block, "TIMELINE_POINTS", 10)
    b = TraceBuilder()
    _steps(b, 1)
    for i in range(100):
        b.memory(1 + i * 8, 1, 1000 + (i * 37) % 101, 5000, addr=i)
    m = _analyse(b, tmp_path)
    assert m.timeline is not None and len(m.timeline.allocated) == 10
    assert max(m.timeline.allocated) == m.peak_allocated_bytes == 1100
