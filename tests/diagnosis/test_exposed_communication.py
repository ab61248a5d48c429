"""exposed_communication: collectives with no compute alongside, on hand-made and real traces."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import Finding
from tb_mfu_plugin.reporting.trace import trace_reports
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.decode.decode import decode_trace

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _findings(tmp_path: Path, exposed_us: float) -> dict[str, Finding]:
    """One 1000 µs step: 400 µs of GEMM, then an all-reduce overlapping it by 100 µs and
    running ``exposed_us`` more on its own."""
    b = TraceBuilder()
    b.extra["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 2}
    b.step(1, 0, 1000)
    b.launch_kernel("nvjet_sm90_tst_256x128", 1, 0, 400)
    b.launch_kernel(NCCL, 2, 300, 100 + exposed_us, stream=20, blocks_per_sm=0.1)
    t = decode_trace(str(b.write(tmp_path / "r.pt.trace.json.gz")))
    (w,) = trace_reports(t, "rank0", "", AnalysisOptions())
    return {f.id: f for f in w.findings}


def test_fires_at_the_threshold_and_estimates_no_more_than_the_exposed_time(tmp_path: Path) -> None:
    # the step is 1000 µs; the default threshold is 10 % of it
    assert "exposed_communication" not in _findings(tmp_path, 99)
    f = _findings(tmp_path, 101)["exposed_communication"]
    assert f.evidence.exposed_us_per_step == pytest.approx(101)
    assert f.evidence.communication_us_per_step == pytest.approx(201)
    assert f.est_gain_us_per_step <= f.evidence.exposed_us_per_step + 1e-6
    assert f.evidence.collectives_us_per_step == {"allreduce": pytest.approx(201)}
    assert "bucket_cap_mb" in f.recommendation  # all-reduce without TP ops: DDP's fix


@pytest.mark.parametrize(
    ("run", "strategy", "fix"),
    [("ddp_2gpu", "ddp", "bucket_cap_mb"), ("fsdp2_2gpu", "fsdp", "prefetch"), ("tp_2gpu", "tp", "NVLink")],
)
def test_real_multi_gpu_runs(run: str, strategy: str, fix: str) -> None:
    if not (SAMPLES / run).is_dir():
        pytest.skip("sample traces not available")
    workers = analyze_path(str(SAMPLES / run)).runs[0].workers
    found = [f for w in workers for f in w.findings if f.id == "exposed_communication"]
    # rank 0 waits in the collectives for rank 1, whose GPU idles on host work
    assert found and all(f.evidence.strategy_guess == strategy and fix in f.recommendation for f in found)
    idle = {w.name: {f.id for f in w.findings} for w in workers}
    assert "gpu_idle" in idle["rank1"]


def test_single_gpu_runs_never_have_it() -> None:
    if not (SAMPLES / "gpt_sdpa_fused").is_dir():
        pytest.skip("sample traces not available")
    (w,) = analyze_path(str(SAMPLES / "gpt_sdpa_fused")).runs[0].workers
    assert "exposed_communication" not in {f.id for f in w.findings}
