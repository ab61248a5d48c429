"""Hand-built traces whose answers are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracegen import H100, TraceBuilder

from tb_mfu_plugin.analysis.kernels import sm_active
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.reporting.trace import trace_reports
from tb_mfu_plugin.trace.decode.decode import decode_trace


def _analyze(b: TraceBuilder, tmp_path: Path) -> list[WorkerReport]:
    t = decode_trace(str(b.write(tmp_path / "w.pt.trace.json.gz")))
    return trace_reports(t, "w", "", AnalysisOptions())


def test_two_streams_overlap_counted_once(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.launch_kernel("gemm_a", 1, 10, 40, stream=7, blocks_per_sm=0.5)  # [10, 50)
    b.launch_kernel("elementwise", 2, 30, 40, stream=8, blocks_per_sm=0.75)  # [30, 70)
    (r,) = _analyze(b, tmp_path)
    (s,) = r.steps
    assert s.dur_us == 100
    assert s.kernel_time_share == pytest.approx(0.60)  # union [10,70)
    assert s.gpu_busy_share == pytest.approx(0.60)
    # torch-tb-profiler's: 0.5*20 + min(1, 1.25)*20 + 0.75*20 = 45
    assert s.sm_efficiency_tb == pytest.approx(0.45)
    # the calibrated one caps the same sum of each kernel's estimate (40 µs kernels: launch overhead only)
    live = 40 / (40 + sm_active.OVERHEAD_US)
    assert s.sm_efficiency == pytest.approx((0.5 * live * 20 + min(1, 1.25 * live) * 20 + 0.75 * live * 20) / 100)
    assert s.achieved_occupancy == pytest.approx(0.5)
    assert s.kernels_per_step == 2
    assert s.breakdown["kernel"] + s.breakdown["idle_other"] == pytest.approx(1.0)


def test_step_extends_to_gpu_work_launched_inside_it(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 50)
    b.launch_kernel("k1", 40, 45, 100)  # launched in step 1, runs until 145
    b.step(2, 60, 50)
    b.launch_kernel("k2", 70, 150, 20)  # [150, 170)
    (r,) = _analyze(b, tmp_path)
    s1, s2 = r.steps
    assert (s1.start_us, s1.dur_us) == (0, 145)
    assert (s2.start_us, s2.dur_us) == (145, 25)  # starts where step 1 ended, ends at 170
    assert s2.kernel_time_share == pytest.approx(20 / 25)
    assert r.summary is not None and r.summary.steps == 2


def test_trailing_step_with_unrecorded_launches_is_dropped(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 50)
    b.launch_kernel("k", 5, 10, 20)
    b.step(2, 60, 50)
    b.runtime("cudaLaunchKernel", 65, 2)  # its kernel never made it into the trace
    (r,) = _analyze(b, tmp_path)
    assert [s.step for s in r.steps] == [1]
    assert any("step 2" in n for n in r.notes)


def test_no_step_markers_becomes_one_flagged_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch_kernel("k", 0, 10, 10)
    b.launch_kernel("k", 20, 30, 10)
    (r,) = _analyze(b, tmp_path)
    assert "no_step_markers" in r.flags
    (s,) = r.steps
    assert (s.start_us, s.dur_us) == (0, 40)
    assert s.kernel_time_share == pytest.approx(0.5)


def test_two_devices_are_never_merged(tmp_path: Path) -> None:
    b = TraceBuilder(devices=[H100, {**H100, "id": 1}])
    b.step(1, 0, 100)
    b.launch_kernel("k", 1, 10, 50, device=0)
    b.launch_kernel("k", 2, 10, 20, device=1)
    r0, r1 = _analyze(b, tmp_path)
    assert (r0.device.index, r1.device.index) == (0, 1)  # type: ignore[union-attr]
    assert r0.steps[0].kernel_time_share == pytest.approx(0.5)
    assert r1.steps[0].kernel_time_share == pytest.approx(0.2)


def test_missing_fields_are_unknown_not_zero(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.launch_kernel("nvjet_hsh_128x256", 1, 0, 50, blocks_per_sm=None, occupancy=0, grid=[264, 1, 1])
    b.launch_kernel("k_no_occupancy", 2, 50, 50, blocks_per_sm=0.5, occupancy=None)
    (r,) = _analyze(b, tmp_path)
    (s,) = r.steps
    # occupancy 0 on a kernel with blocks is the estimator failing: unknown, skipped
    assert s.achieved_occupancy is None
    # blocks per SM derived from the grid: 264 / 132 SMs = 2 -> capped at 1 for 50 µs, then 0.5 for 50 µs
    assert s.sm_efficiency_tb == pytest.approx(0.75)
    assert s.sm_efficiency is not None and 0.7 < s.sm_efficiency < 0.75  # the same, less launch overhead
    assert s.tensor_core_kernel_share == pytest.approx(0.5)  # nvjet is a tensor-core GEMM


def test_sm_efficiency_unknown_when_kernels_have_no_blocks(tmp_path: Path) -> None:
    """A kernel with neither blocks per SM nor a grid would count as covering no SM: past 1 % of
    the kernel time, SM efficiency is not given rather than understated."""
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.launch_kernel("k", 1, 0, 50, blocks_per_sm=2.0)
    b.launch_kernel("k_no_info", 2, 50, 50, blocks_per_sm=None, occupancy=None)
    (r,) = _analyze(b, tmp_path)
    assert r.steps[0].sm_efficiency is None and r.summary.sm_efficiency is None  # type: ignore[union-attr]
    assert any("SM efficiency unknown: 50.0 %" in n for n in r.notes)


def test_copies_by_direction_and_memory_kind(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    for kind, nbytes, dur in (
        ("HtoD (Pageable -> Device)", 64 << 20, 100),
        ("HtoD (Pinned -> Device)", 1024, 1),
        ("DtoH (Device -> Pageable)", 4, 1),
        ("DtoD (Device -> Device)", 1 << 20, 10),
    ):
        corr = b.runtime("cudaMemcpyAsync", 1, 1)
        b.memcpy(kind, 10 + dur, dur, nbytes, corr)
    (r,) = _analyze(b, tmp_path)
    s = r.summary
    assert s is not None
    assert s.h2d_bytes_per_step == (64 << 20) + 1024
    assert s.d2h_bytes_per_step == 4
    assert s.d2d_bytes_per_step == 1 << 20
    by = {(c.direction, c.memory): c for c in r.copies}
    pageable = by[("H2D", "pageable")]
    assert pageable.count_per_step == 1 and pageable.small_count_per_step == 0
    assert pageable.gbps == pytest.approx((64 << 20) / 100 / 1e3)
    assert by[("H2D", "pinned")].small_count_per_step == 1
    assert by[("D2D", "device")].bytes_per_step == 1 << 20


def test_sync_attributed_through_nesting_not_by_name(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    # loss.item() on a GPU tensor: item -> _local_scalar_dense -> memcpy + stream sync
    b.op("aten::item", 100, 60)
    b.op("aten::_local_scalar_dense", 101, 58)
    corr = b.runtime("cudaMemcpyAsync", 102, 5)
    b.memcpy("DtoH (Device -> Pageable)", 140, 1, 4, corr)
    b.runtime("cudaStreamSynchronize", 108, 45)
    # item() on a CPU step counter (AdamW): no runtime call inside, so no sync
    b.op("aten::item", 300, 5)
    b.op("aten::_local_scalar_dense", 301, 3)
    # an explicit torch.cuda.synchronize(): no op around it
    b.runtime("cudaDeviceSynchronize", 500, 20)
    b.launch_kernel("k", 5, 10, 20)
    (r,) = _analyze(b, tmp_path)
    assert r.summary is not None and r.summary.sync_count_per_step == 2
    by_api = {y.api: y for y in r.syncs}
    item = by_api["cudaStreamSynchronize"]
    assert (item.root_op, item.op, item.blocked_us_per_step) == ("aten::item", "aten::_local_scalar_dense", 45)
    assert by_api["cudaDeviceSynchronize"].root_op is None
    assert r.summary.host_sync_blocked_share == pytest.approx(65 / 1000)


def test_host_blocked_in_syncs_and_gpu_idle_after_syncs_are_two_figures(tmp_path: Path) -> None:
    """Issue 23: the host's time blocked in syncs is not GPU idle time. A GPU-bound step whose host
    waits 541 µs in a sync while the GPU runs, then 90 µs of GPU idle until the host's next kernel:
    host blocked 54.1 %, GPU idle 9 %, all of it after the sync. Then an idle stretch no sync explains
    (the old breakdown's "sync wait", the blocked time capped at the idle time, gave it to syncs)."""
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.launch_kernel("k0", 5, 6, 544)  # [6, 550)
    b.runtime("cudaStreamSynchronize", 10, 541)  # returns at 551, in the gap [550, 640)
    b.launch_kernel("k1", 600, 640, 360)  # [640, 1000)
    b.step(2, 1000, 1000)
    b.launch_kernel("k2", 1001, 1002, 500)  # [1002, 1502)
    b.runtime("cudaEventSynchronize", 1010, 90)  # returns at 1100 while k2 runs: explains no idle
    b.launch_kernel("k3", 1700, 1800, 200)  # idle [1502, 1800): host work, no sync
    s1, s2 = _analyze(b, tmp_path)[0].steps
    assert s1.host_sync_blocked_share == pytest.approx(0.541)
    assert s1.idle_share == pytest.approx(0.096) and s1.gpu_idle_after_sync_share == pytest.approx(0.09)
    assert s1.breakdown["idle_after_sync"] == pytest.approx(0.09) and s1.breakdown["idle_other"] == pytest.approx(0.006)
    assert s2.host_sync_blocked_share == pytest.approx(0.09) and s2.gpu_idle_after_sync_share == 0
    assert s2.breakdown["idle_after_sync"] == 0 and s2.breakdown["idle_other"] == pytest.approx(s2.idle_share)
    assert sum(s1.breakdown.values()) == pytest.approx(1) and sum(s2.breakdown.values()) == pytest.approx(1)


def test_launch_stats_and_top_kernels(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 100)
    for i in range(4):
        b.launch_kernel("tiny", i, 10 + 20 * i, 5, blocks_per_sm=0.1)
    b.launch_kernel("big", 5, 90, 10, blocks_per_sm=4)
    (r,) = _analyze(b, tmp_path)
    ln = r.launches
    assert ln is not None
    assert ln.kernels_per_step == 5
    assert ln.short_kernel_share == pytest.approx(4 / 5)  # 5 µs kernels; the 10 µs one is not "under 10"
    assert ln.median_kernel_us == 5
    # gaps: [0,10) then 15 µs between tiny kernels x3, then [75, 90)
    assert ln.idle_gaps.count_per_step == 5
    assert ln.idle_gaps.total_us_per_step == pytest.approx(100 - 30)
    top = {k.name: k for k in r.top_kernels}
    assert top["tiny"].count == 4 and top["tiny"].total_us == 20
    assert top["tiny"].sm_efficiency_tb == pytest.approx(0.1)
    assert top["big"].sm_efficiency_tb == pytest.approx(1.0)
    # calibrated: a 5 µs kernel's launch overhead weighs; 4 full waves stay full
    assert top["tiny"].sm_efficiency == pytest.approx(0.1 * 5 / (5 + sm_active.OVERHEAD_US))
    assert top["big"].sm_efficiency == pytest.approx(10 / (10 + sm_active.OVERHEAD_US))
    assert r.top_kernels[0].name == "tiny"


def test_tensor_core_patterns_are_configurable(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.launch_kernel("my_custom_mma_kernel", 1, 0, 40)
    b.launch_kernel("elementwise", 2, 50, 10)
    t = decode_trace(str(b.write(tmp_path / "w.pt.trace.json.gz")))
    (plain,) = trace_reports(t, "w", "", AnalysisOptions())
    (custom,) = trace_reports(t, "w", "", AnalysisOptions(tensor_core_patterns=(r"custom_mma",)))
    assert plain.summary is not None and plain.summary.tensor_core_kernel_share == 0
    assert custom.summary is not None and custom.summary.tensor_core_kernel_share == pytest.approx(0.8)
