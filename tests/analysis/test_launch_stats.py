"""Launch API time: every kernel launch call counts, runtime API and driver API alike (Triton,
cuBLASLt and newer PyTorch launch with cuLaunchKernel / cuLaunchKernelEx, category
``cuda_driver``), and graph launches are counted apart."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, fixture_path
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import LaunchStats
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.trace.locate.discover import single_file_run

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"


def _driver(b: TraceBuilder, name: str, ts: float, dur: float) -> int:
    """A driver-API call as Kineto writes it (category cuda_driver)."""
    corr = b.runtime(name, ts, dur)
    b.events[-1]["cat"] = "cuda_driver"
    return corr


def _launches(path: Path) -> LaunchStats:
    run = single_file_run(str(path))
    # every recorded step, as the reference sums every ProfilerStep window
    (w,) = analyze_file(run.files[0], run.workers[0].name, AnalysisOptions(all_steps=True))
    assert w.error is None and w.launches is not None, w.error
    return w.launches


def test_runtime_driver_and_graph_launches(tmp_path: Path) -> None:
    b = TraceBuilder()
    for s in range(2):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 900)
        b.launch_kernel(ADD, t0 + 10, t0 + 20, 5)  # cudaLaunchKernel, 2 µs
        for k, api in enumerate(("cuLaunchKernel", "cuLaunchKernelEx", "hipModuleLaunchKernel")):
            corr = _driver(b, api, t0 + 100 + 10 * k, 3)
            b.kernel(ADD, t0 + 200 + 10 * k, 5, corr)
        # a runtime launch that shows the driver call it makes inside it: its time once
        corr = b.runtime("cudaLaunchKernelExC", t0 + 300, 4)
        b.kernel(ADD, t0 + 400, 5, corr)
        _driver(b, "cuLaunchKernelEx", t0 + 301, 2)
        b.graph_launch(t0 + 500, [(ADD, t0 + 600, 5)])  # cudaGraphLaunch, 10 µs
    b.launch_kernel(ADD, 5000, 5010, 5)  # outside the steps: not counted
    la = _launches(b.write(tmp_path / "w.pt.trace.json.gz"))
    assert la.launch_api_us_per_step == pytest.approx(2 + 3 * 3 + 4)
    assert la.graph_launch_api_us_per_step == pytest.approx(10)
    assert la.graph_launches_per_step == 1


def _reference(path: Path) -> tuple[float, float]:
    """Launch calls inside ProfilerStep windows, summed from the raw JSON, per step:
    (kernel launches, graph launches)."""
    events: list[dict[str, Any]] = json.loads(gzip.open(path).read())["traceEvents"]
    steps = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    ]
    calls = [
        e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and "Launch" in e["name"]
        and any(a <= e["ts"] <= b for a, b in steps)
    ]
    one = sum(e["dur"] for e in calls if "Graph" not in e["name"])
    graph = sum(e["dur"] for e in calls if "Graph" in e["name"])
    return one / len(steps), graph / len(steps)


@pytest.mark.parametrize("sample", ["gpt_compile", "tiny_mlp_cuda_graph"])
def test_sample_launch_api_time_counts_driver_launches(sample: str) -> None:
    """gpt_compile launches its Triton kernels with cuLaunchKernel / cuLaunchKernelEx (756 of its
    855 launch calls): they were missing from the launch API time."""
    (path,) = sorted((SAMPLES / sample).glob("*.pt.trace.json.gz"))
    one, graph = _reference(path)
    la = _launches(path)
    assert la.launch_api_us_per_step == pytest.approx(one, rel=1e-6)
    assert la.graph_launch_api_us_per_step == pytest.approx(graph, rel=1e-6)
    assert (one > 0) == (sample == "gpt_compile") and (graph > 0) == (sample == "tiny_mlp_cuda_graph")


def test_hta_triton_example_counts_its_cu_launch_kernel() -> None:
    path = fixture_path("hta_test_data", "triton_example", "triton_example.json.gz")
    # its only launch call is a cuLaunchKernel of 48 µs
    assert _launches(path).launch_api_us_per_step > 0
