"""The waterfall on a trace worked out by hand: every level is what remains after the
losses above it, down to MFU x step time; on real traces its bars add up to the step and
agree with the time-weighted summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES, fixture_path

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.trace.locate.discover import discover_runs

from .helpers import Builder, analyze, check_waterfall_matches_summary

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"


def _trace() -> Builder:
    b = Builder()
    b.step(1, 0, 1000)
    b.copy("HtoD (Pinned -> Device)", 1, 0, 100, 1 << 20)  # [0, 100): a copy, no kernel
    b.launch(GEMM, 2, 100, 400, blocks_per_sm=0.5)  # [100, 500): matmul on half the SMs
    b.launch(ADD, 3, 500, 200)  # [500, 700): non-matmul
    return b  # [700, 1000): idle, and the host launches nothing in it


def _by_id(rep: WorkerReport) -> dict[str, float]:
    return {e.id: e.us_per_step for e in rep.waterfall}


def _flops(flops: float, peak: float = 1e15) -> AnalysisOptions:
    """FLOPs and the peak given as a user gives them: the waterfall reads the summary's MFU."""
    return AnalysisOptions(flops_per_step=flops, peak_tflops=peak / 1e12)


def test_waterfall_by_hand(tmp_path: Path) -> None:
    rep, *_ = analyze(_trace(), tmp_path, options=_flops(1e11))  # 1e11 FLOP at 1e15 FLOP/s: 100 µs
    w = _by_id(rep)
    assert w["step"] == 1000
    assert w["idle_other"] == pytest.approx(300)
    assert w["idle_dataloader"] == w["idle_sync"] == w["idle_launch"] == w["idle_host"] == 0
    assert w["gpu_busy"] == pytest.approx(700)
    assert w["copies"] == pytest.approx(100)
    assert w["kernels"] == pytest.approx(600)
    assert w["communication"] == 0
    assert w["non_matmul"] == pytest.approx(200)
    assert w["matmul"] == pytest.approx(400)
    assert w["low_sm_efficiency"] == pytest.approx(200)  # 400 µs at 0.5 block per SM
    assert w["matmul_covered"] == pytest.approx(200)
    assert w["matmul_efficiency"] == pytest.approx(100)
    last = rep.waterfall[-1]
    assert last.id == "mfu" and last.us_per_step == pytest.approx(100)
    assert last.mfu == pytest.approx(0.1) and last.clamped is False
    kinds = [e.kind for e in rep.waterfall]
    assert kinds[0] == "total" and kinds[-1] == "result"


def test_waterfall_clamps_flops_beyond_matmul_time(tmp_path: Path) -> None:
    rep, *_ = analyze(_trace(), tmp_path, options=_flops(5e11))  # 500 µs at peak > 200 µs covered
    last = rep.waterfall[-1]
    assert last.clamped is True and last.us_per_step == pytest.approx(200)
    assert _by_id(rep)["matmul_efficiency"] == 0


def test_waterfall_without_flops_stops_at_covered_matmul_time(tmp_path: Path) -> None:
    """MFU unknown: the last bar has no value (not the 200 µs of covered matmul time above it, which
    read as an MFU of 20 % while the MFU card said n/a), and the covered time is the last figure."""
    rep, *_ = analyze(_trace(), tmp_path)
    last = rep.waterfall[-1]
    assert last.mfu is None and last.us_per_step is None and last.share is None and "unknown" in last.label
    assert _by_id(rep)["matmul_covered"] == pytest.approx(200)
    assert "matmul_efficiency" not in _by_id(rep)


# Real traces whose steps differ (a slower first step, one long data-loading step), so a
# median of per-step shares would not add up with the waterfall's mean step.
REAL = [
    ("sample", "small_copies"),
    ("sample", "gpt_sdpa_fused"),
    ("sample", "dataloader_stall"),
    ("shared", "torch_tb_profiler_samples/resnet50_num_workers_4"),
]


@pytest.mark.parametrize(("where", "run"), REAL)
def test_waterfall_bars_add_up_to_the_step_on_real_traces(where: str, run: str) -> None:
    d = SAMPLES / run if where == "sample" else fixture_path(*run.split("/"))
    if not d.is_dir():
        pytest.skip(f"sample trace not recorded: {d}")
    span = discover_runs(str(d))[0].workers[0].spans[0]
    # every recorded step, warm-up included: steps that differ, where a median would not add up
    (rep,) = analyze_file(span, "w", AnalysisOptions(all_steps=True))
    s, bars = rep.summary, rep.waterfall
    assert s is not None and s.step_time_mean_us is not None and len(rep.steps) >= 3
    step = bars[0].us_per_step
    assert step == pytest.approx(sum(st.dur_us for st in rep.steps) / len(rep.steps), abs=1e-3)
    # the losses and the result add up to the step, to the rounding of each bar (1 ns)
    losses = sum(e.us_per_step for e in bars if e.kind == "loss")
    assert losses + bars[-1].us_per_step == pytest.approx(step, abs=1e-3 * len(bars))
    assert sum(e.share for e in bars if e.kind == "loss") + bars[-1].share == pytest.approx(1, abs=1e-4)
    check_waterfall_matches_summary(rep)  # and each level is the summary's share of that step
    # the steps really differ, so the old median shares would not have matched
    busy = [st.gpu_busy_share for st in rep.steps]
    assert max(busy) - min(busy) > 0.01
