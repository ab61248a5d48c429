"""The summary over steps is time-weighted (a ratio of sums, as MFU and torch-tb-profiler),
the per-step counts are means, and the per-step spread is kept beside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.analysis.time.aggregate import spread, time_weighted
from tb_mfu_plugin.reporting.trace import trace_reports
from tb_mfu_plugin.trace.decode.decode import decode_trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"  # a tensor-core kernel by name
ADD = "vectorized_elementwise_kernel_add"


def _analyze(b: TraceBuilder, tmp_path: Path) -> WorkerReport:
    t = decode_trace(str(b.write(tmp_path / "w.pt.trace.json.gz")))
    (r,) = trace_reports(t, "w", "", AnalysisOptions())
    return r


def _one_slow_step(tmp_path: Path) -> WorkerReport:
    """Four 1000 µs steps with 830 µs of kernels, then one 2000 µs step with 1480 µs."""
    b = TraceBuilder()
    t = 0.0
    for n, (dur, gemm, add) in enumerate([(1000, 630, 200)] * 4 + [(2000, 1080, 400)]):
        b.step(n + 1, t, dur)
        b.launch_kernel(GEMM, t + 1, t + 10, gemm, blocks_per_sm=2.0, occupancy=25)
        b.launch_kernel(ADD, t + 2, t + 10 + gemm, add, blocks_per_sm=0.5, occupancy=75)
        if n == 0:  # one 1 MiB input copy under the GEMM, in the first step only
            b.memcpy("HtoD (Pinned -> Device)", t + 20, 50, 1 << 20, b.runtime("cudaMemcpyAsync", t + 3, 2))
        t += dur
    return _analyze(b, tmp_path)


def test_one_slow_step_time_weighted_not_median(tmp_path: Path) -> None:
    r = _one_slow_step(tmp_path)
    s = r.summary
    assert s is not None and s.steps == 5
    assert [st.kernel_time_share for st in r.steps] == pytest.approx([0.83] * 4 + [0.74])
    # The example: the median reads 83 %, the tab beside ours 80 % (4800 µs / 6000 µs).
    assert s.kernel_time_share == pytest.approx(4800 / 6000)
    assert s.gpu_busy_share == pytest.approx(4800 / 6000)  # the copy runs under the GEMM
    assert s.idle_share == pytest.approx(1 - 4800 / 6000)
    # torch-tb-profiler's SM efficiency: the GEMM fills the SMs, the add half of them (0.5 blocks per SM).
    covered = 4 * (630 + 0.5 * 200) + (1080 + 0.5 * 400)
    assert s.sm_efficiency_tb == pytest.approx(covered / 6000)
    # The calibrated one is time-weighted the same way, and reads no more than it here.
    per_step = time_weighted([st.sm_efficiency for st in r.steps], [st.dur_us for st in r.steps])
    assert s.sm_efficiency == pytest.approx(per_step) and s.sm_efficiency <= s.sm_efficiency_tb
    # Occupancy weighted by kernel time over all steps' kernels, not a median of step means.
    gemm_us, add_us = 4 * 630 + 1080, 4 * 200 + 400
    assert s.achieved_occupancy == pytest.approx((0.25 * gemm_us + 0.75 * add_us) / (gemm_us + add_us))
    assert s.tensor_core_kernel_share == pytest.approx(gemm_us / (gemm_us + add_us))
    # The breakdown is time-weighted too, and still sums to 1.
    assert s.breakdown["kernel"] == pytest.approx(0.8)
    assert sum(s.breakdown.values()) == pytest.approx(1.0)
    # Counts per step are means: one 1 MiB copy over five steps.
    assert s.h2d_bytes_per_step == pytest.approx((1 << 20) / 5)
    assert s.kernels_per_step == 2


def test_step_time_is_the_mean_step_and_the_median_and_spread_are_kept(tmp_path: Path) -> None:
    """One aggregation per worker (issue 32): the step time is the mean step, the one every share
    applies to; the median is another figure under its own name."""
    s = _one_slow_step(tmp_path).summary
    assert s is not None
    assert s.step_time_us == s.step_time_mean_us == pytest.approx(6000 / 5)
    assert s.step_time_median_us == 1000
    st = s.distribution["step_time_us"]
    assert (st.median, st.min, st.max) == (1000, 1000, 2000)
    assert st.p90 == pytest.approx(1600)  # numpy's linear interpolation: 1000 + 0.6 * 1000
    k = s.distribution["kernel_time_share"]
    assert (k.median, k.min, k.max) == pytest.approx((0.83, 0.74, 0.83))
    assert set(s.distribution) >= {
        "step_time_us",
        "gpu_busy_share",
        "kernel_time_share",
        "idle_share",
        "sm_efficiency",
        "tensor_core_kernel_share",
    }


def test_sm_efficiency_leaves_out_steps_without_blocks(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 100)
    b.launch_kernel(ADD, 1, 10, 50, blocks_per_sm=0.5)  # covered 25 µs of 100
    b.step(2, 100, 300)
    b.launch_kernel(ADD, 101, 110, 100, blocks_per_sm=None)  # no blocks, no grid: unknown
    r = _analyze(b, tmp_path)
    assert [st.sm_efficiency_tb for st in r.steps] == [pytest.approx(0.25), None]
    assert r.summary is not None and r.summary.sm_efficiency_tb == pytest.approx(0.25)  # not 25 / 400
    # the calibrated figure is known where torch-tb-profiler's is, and aggregated the same way
    assert [st.sm_efficiency is None for st in r.steps] == [False, True]
    assert r.summary.sm_efficiency == pytest.approx(r.steps[0].sm_efficiency)


def test_time_weighted_and_spread() -> None:
    assert time_weighted([0.5, None, 1.0], [100, 50, 300]) == pytest.approx((50 + 300) / 400)
    assert time_weighted([None], [10]) is None
    assert spread([]) is None and spread([None]) is None
    sp = spread([3.0, 1.0, 2.0, None])
    assert sp is not None and (sp.median, sp.min, sp.max, sp.p10, sp.p90) == pytest.approx((2, 1, 3, 1.2, 2.8))
