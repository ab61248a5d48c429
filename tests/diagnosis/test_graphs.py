"""CUDA/HIP graph replays on hand-made traces shaped as CUPTI records them: one graph launch call,
and every kernel of the replay carrying its correlation id. launch_bound must not fire on them
(the host launched one graph, not 100 kernels); tiny_kernels_in_graphs names the real lever."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.diagnosis import DEFAULT
from tb_mfu_plugin.reporting.device import device_report
from tb_mfu_plugin.trace.decode.decode import decode_trace

from .helpers import Builder, analyze, ids, one, rule_gain

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"


def _replays(api: str = "cudaGraphLaunch", steps: int = 3) -> Builder:
    """Per 1000 µs step: one replay of 100 kernels of 2 µs, 6 µs apart, from GPU time +20."""
    b = Builder()
    for s in range(steps):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 1000)
        b.graph_launch(t0 + 10, [(ADD, t0 + 20 + 8 * i, 2) for i in range(100)], api=api)
    return b


def _one_by_one(steps: int = 3) -> Builder:
    """The same kernels at the same GPU times, each launched by the host."""
    b = Builder()
    for s in range(steps):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 1000)
        for i in range(100):
            b.launch(ADD, t0 + 12 + 8 * i, t0 + 20 + 8 * i, 2)
    return b


@pytest.mark.parametrize("api", ["cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch"])
def test_graph_replays_are_counted_and_are_not_launch_bound(tmp_path: Path, api: str) -> None:
    rep, *_ = analyze(_replays(api), tmp_path)
    la = rep.launches
    assert la is not None
    assert (la.graph_launches_per_step, la.graph_kernels_per_step, la.kernels_per_step) == (1, 100, 100)
    assert la.graph_median_kernel_us == 2
    assert "launch_bound" not in ids(rep)
    f = one(rep, "tiny_kernels_in_graphs")
    # 99 gaps of 6 µs inside each replay; the 206 µs between replays are not the graph's
    assert f.evidence.gap_us_per_step == pytest.approx(99 * 6)
    assert rule_gain(f) == pytest.approx(594)
    assert f.evidence.graph_launches_per_step == 1
    assert "torch.compile" in f.recommendation and "already" in f.recommendation
    for g in rep.findings:  # no finding tells a graph-replaying run to start using CUDA Graphs
        assert "capture the step with CUDA Graphs" not in g.recommendation
    idle_graph = next(e for e in rep.waterfall if e.id == "idle_graph")
    assert idle_graph.us_per_step == pytest.approx(594)
    idle_launch = next(e for e in rep.waterfall if e.id == "idle_launch")
    assert idle_launch.us_per_step == pytest.approx(20 / 3, abs=1e-3)  # only the first step's lead-in is short


def test_the_same_kernels_launched_one_by_one_are_launch_bound(tmp_path: Path) -> None:
    rep, *_ = analyze(_one_by_one(), tmp_path)
    assert rep.launches is not None and rep.launches.graph_launches_per_step == 0
    assert "tiny_kernels_in_graphs" not in ids(rep)
    f = one(rep, "launch_bound")
    assert f.evidence.kernels_per_step == 100 and f.evidence.graph_kernels_per_step == 0
    assert "capture the step with CUDA Graphs" in f.recommendation


def test_kernels_outside_the_graph_are_launch_bound_and_told_to_join_it(tmp_path: Path) -> None:
    b = Builder()
    for s in range(3):
        t0 = 2000.0 * s
        b.step(s + 1, t0, 2000)
        b.graph_launch(t0 + 10, [(ADD, t0 + 20 + 8 * i, 2) for i in range(100)])
        for i in range(60):  # then 60 eager kernels, each waiting 13 µs for the host
            b.launch(ADD, t0 + 830 + 15 * i, t0 + 850 + 15 * i, 2)
    rep, *_ = analyze(b, tmp_path)
    f = one(rep, "launch_bound")
    ev = f.evidence
    assert (ev.kernels_per_step, ev.graph_kernels_per_step, ev.graph_launches_per_step) == (60, 100, 1)
    assert "already replays 1 CUDA graph(s)" in f.recommendation
    assert "capture the step with CUDA Graphs" not in f.recommendation
    # short gaps: 59 x 13 µs between the eager kernels + 36 µs from the replay's end to the first of them,
    # + the first step's 20 µs lead-in / 3 steps; the replay's 99 inner gaps are the graph's, not the host's
    assert ev.launch_gap_us_per_step == pytest.approx(59 * 13 + 36 + 20 / 3, abs=0.05)
    assert rule_gain(one(rep, "tiny_kernels_in_graphs")) == pytest.approx(594)


def test_tiny_kernels_in_graphs_threshold_edges(tmp_path: Path) -> None:
    b = _replays()
    assert "tiny_kernels_in_graphs" in ids(analyze(b, tmp_path, replace(DEFAULT, graph_min_kernels_per_step=100))[0])
    above, *_ = analyze(b, tmp_path, replace(DEFAULT, graph_min_kernels_per_step=101))
    assert "tiny_kernels_in_graphs" not in ids(above)
    # unclaimed, the replays' idle goes to gpu_idle, which names it without asking for CUDA Graphs
    g = one(above, "gpu_idle")
    assert g.evidence.graph_gaps_us_per_step == pytest.approx(594)
    assert "CUDA graph replays" in g.recommendation and "reduce-overhead" not in g.recommendation
    assert "tiny_kernels_in_graphs" in ids(analyze(b, tmp_path, replace(DEFAULT, graph_gap_min_share=0.594))[0])
    assert "tiny_kernels_in_graphs" not in ids(analyze(b, tmp_path, replace(DEFAULT, graph_gap_min_share=0.595))[0])
    assert "tiny_kernels_in_graphs" not in ids(
        analyze(b, tmp_path, replace(DEFAULT, graph_short_kernel_us=1.9, graph_short_kernel_share=1.1))[0]
    )


def test_rocm_hip_graph_replays(tmp_path: Path) -> None:
    """A hand-made ROCm trace (no real HIP-graph trace could be had): MI300X properties listed as
    id 0, kernels on HSA agent 2, one hipGraphLaunch a step whose kernels carry its correlation id
    and no grid (Kineto takes ROCm grids from the launch call's arguments, which a graph launch
    does not have)."""
    mi300x = {
        "id": 0,
        "name": "AMD Instinct MI300X VF",
        "computeMajor": 9,
        "computeMinor": 4,
        "warpSize": 64,
        "numSms": 304,
    }
    b = Builder(devices=[mi300x])
    for s in range(3):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 1000)
        b.graph_launch(
            t0 + 10,
            [(ADD, t0 + 20 + 8 * i, 2) for i in range(100)],
            api="hipGraphLaunch",
            device=2,
            blocks_per_sm=None,
            occupancy=None,
        )
    tables = decode_trace(str(b.write(tmp_path / "rocm.pt.trace.json.gz")))
    rep = device_report(tables, 2, AnalysisOptions(), DEFAULT)
    assert rep.device is not None and rep.device.name == "AMD Instinct MI300X VF"
    assert rep.launches is not None and rep.launches.graph_launches_per_step == 1
    assert "launch_bound" not in ids(rep) and "tiny_kernels_in_graphs" in ids(rep)
    assert rep.summary is not None and rep.summary.sm_efficiency is None  # no grid: unknown, not 0
