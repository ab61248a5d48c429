"""The timeline block (issue 36, analysis/timeline/): a hand-made step whose lanes are worked out
here, a step of 12,000 kernels merged into bins that keep their count and time, the samples'
findings pinned where their time lies, and the marks of the run-level finding low_bus_bandwidth.
(tests/invariants.py checks every report's block against its step's figures.)"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pytest
from conftest import SAMPLES
from tracegen import DistBuilder, TraceBuilder, nccl_args

from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.analysis.time.steps import Steps
from tb_mfu_plugin.analysis.timeline import block
from tb_mfu_plugin.analysis.timeline.block import choose_step
from tb_mfu_plugin.analysis.timeline.types import Timeline
from tb_mfu_plugin.running.pipeline import analyze_path

GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)"


def _worker(path: Path) -> WorkerReport:
    """The first analysed worker of the one run at ``path`` (rank 0)."""
    (run,) = analyze_path(str(path)).runs
    return next(w for w in run.workers if w.error is None)


def _timeline(w: WorkerReport) -> Timeline:
    assert w.timeline is not None
    return w.timeline


def _of_lane(t: Timeline, name: str) -> list[int]:
    j = [ln.name for ln in t.lanes].index(name)
    return [k for k, lane in enumerate(t.intervals.lane) if lane == j]


def test_choose_step_takes_the_step_nearest_the_median_among_the_modelled() -> None:
    start = np.array([0.0, 1000.0, 3000.0, 4000.0, 5000.0])
    dur = np.array([900.0, 1500.0, 950.0, 1000.0, 990.0])  # median 990
    steps = Steps(np.arange(5, 10), start, start + dur, start, start + dur)
    assert choose_step(steps, 0)[0] == 4
    i, why = choose_step(steps, 3)  # only the first three are modelled: 950 is the nearest of those
    assert i == 2 and "ProfilerStep#7" in why and "first 3" in why


def _hand_made(tmp_path: Path) -> Path:
    """Three steps of 1000 µs on thread 100: a GEMM launched at +10 runs at +50 for 400 µs with half
    the SMs busy (0.5 blocks per SM); .item() at +500 blocks the host 200 µs in
    cudaStreamSynchronize; step 2 is 1100 µs (the median is 1000: step 1 or 3 is drawn)."""
    b = TraceBuilder()
    for i, (t0, dur) in enumerate(((1000.0, 1000.0), (2000.0, 1100.0), (3100.0, 1000.0))):
        b.step(i + 1, t0, dur)
        ext = b.op("aten::mm", t0 + 5, 20)
        corr = b.runtime("cudaLaunchKernel", t0 + 10, 5, ext=ext)
        b.kernel(GEMM, t0 + 50, 400, corr, blocks_per_sm=0.5, ext=ext)
        b.op("aten::item", t0 + 495, 210)
        b.runtime("cudaStreamSynchronize", t0 + 500, 200)
    return b.write(tmp_path / "run" / "w.1.pt.trace.json.gz")


def test_the_lanes_of_a_hand_made_step(tmp_path: Path) -> None:
    w = _worker(_hand_made(tmp_path))
    t = _timeline(w)
    assert t.step == 1 and t.dur_us == pytest.approx(1000.0) and "closest to their median" in t.why
    assert [(ln.name, ln.kind, ln.pid, ln.tid) for ln in t.lanes] == [
        ("thread 100", "host", 100, 100),
        ("stream 7", "stream", 0, 7),
        ("GPU idle", "idle", None, None),
    ]
    iv = t.intervals
    (k,) = _of_lane(t, "stream 7")
    assert (iv.start_us[k], iv.dur_us[k], t.classes[iv.cls[k]]) == (50.0, 400.0, "matmul")
    assert (t.names[iv.name[k]], t.names[iv.op[k]], iv.sm_efficiency[k]) == (GEMM, "aten::mm", 0.5)
    host = [
        (iv.start_us[j], iv.dur_us[j], t.classes[iv.cls[j]], t.names[iv.name[j]]) for j in _of_lane(t, "thread 100")
    ]
    assert host == [
        (5.0, 5.0, "host_op", "aten::mm"),
        (10.0, 5.0, "launch", "cudaLaunchKernel"),
        (15.0, 10.0, "host_op", "aten::mm"),
        (495.0, 5.0, "host_op", "aten::item"),
        (500.0, 200.0, "sync_wait", "cudaStreamSynchronize"),
        (700.0, 5.0, "host_op", "aten::item"),
    ]
    assert all(t.names[iv.op[j]] == ("aten::mm" if j < 3 else "aten::item") for j in _of_lane(t, "thread 100"))
    idle = [(iv.start_us[j], iv.dur_us[j]) for j in _of_lane(t, "GPU idle")]
    assert idle == [(0.0, 50.0), (450.0, 550.0)]
    assert sum(d for _, d in idle) == pytest.approx(w.steps[0].idle_share * 1000.0)
    assert t.bin_us is None and t.events == len(iv.lane) == 9
    # the path ends at the step's end on the host, and adds up to the step
    assert t.critical_path is not None and sum(t.critical_path.dur_us) == pytest.approx(1000.0)


def test_a_step_of_12000_kernels_is_binned_within_a_megabyte(tmp_path: Path) -> None:
    """12,000 kernels of 1 µs a step (the held-out KV-cache decode has 7,296), each launched 2 µs
    after the one before: 36,000 events with the launches and the gaps, more than the block keeps."""
    b = TraceBuilder()
    n = 12_000
    for s in range(3):
        t0 = 1000.0 + s * 30_000
        b.step(s + 1, t0, 25_000)
        for i in range(n):
            corr = b.runtime("cudaLaunchKernel", t0 + 2 * i, 1.5)
            b.kernel(ADD, t0 + 2 * i + 0.5, 1.0, corr)
    w = _worker(b.write(tmp_path / "run" / "w.1.pt.trace.json.gz"))
    t = _timeline(w)
    iv = t.intervals
    assert t.bin_us is not None and t.events > 3 * n and len(iv.lane) <= block.MAX_INTERVALS
    assert len(msgspec.json.encode(t)) <= block.MAX_BYTES
    stream = [ln.name for ln in t.lanes].index("stream 7")
    bins = dict(zip(iv.bins, zip(iv.bin_count, iv.bin_busy_us, strict=True), strict=True))
    count = sum(bins.get(k, (1, 0.0))[0] for k, lane in enumerate(iv.lane) if lane == stream)
    busy = sum(bins[k][1] if k in bins else iv.dur_us[k] for k, lane in enumerate(iv.lane) if lane == stream)
    assert count == n == t.lanes[stream].events  # every kernel counted once
    assert busy == pytest.approx(n * 1.0, abs=n * 1e-3)  # and its time kept
    assert {t.classes[iv.cls[k]] for k, lane in enumerate(iv.lane) if lane == stream} == {"elementwise"}


def _sample(run: str) -> WorkerReport:
    if not any((SAMPLES / run).glob("*.pt.trace.json*")):
        pytest.skip(f"sample trace not recorded: {run}")
    return _worker(SAMPLES / run)


def test_the_item_sync_its_drain_and_the_naive_attention_chains_on_gpt_naive_attention() -> None:
    w = _sample("gpt_naive_attention")
    t = _timeline(w)
    kinds = {j: ln.kind for j, ln in enumerate(t.lanes)}
    item = [m for m in t.marks if m.id == "sync_point" and m.subject == "tensor.item()"]
    host = [m for m in item if m.lane is not None and kinds[m.lane] == "host"]
    assert host and all("cudaStreamSynchronize" in m.what and "aten::item" in m.what for m in host)
    assert any(m.lane is not None and kinds[m.lane] == "idle" for m in item)  # the idle after it
    drain = [m for m in item if "drains" in m.what]
    assert drain and all(m.start_us == host[0].start_us for m in drain)
    attention = [m for m in t.marks if m.id == "naive_attention"]
    assert attention and all(m.lane is not None and kinds[m.lane] == "stream" for m in attention)
    # the host lanes' sync waits are the step's host time blocked in syncs
    step = next(s for s in w.steps if s.step == t.step)
    iv = t.intervals
    sync = sum(d for lane, c, d in zip(iv.lane, iv.cls, iv.dur_us, strict=True) if t.classes[c] == "sync_wait")
    assert sync == pytest.approx(step.host_sync_blocked_share * step.dur_us, abs=1e-3 * len(iv.lane))


def test_the_pageable_copy_and_the_exposed_collective_are_marked() -> None:
    t = _timeline(_sample("pageable_copy_loop"))
    copies = [m for m in t.marks if m.id == "pageable_memcpy"]
    assert copies and all(m.lane is not None and t.lanes[m.lane].kind == "copies" for m in copies)
    t = _timeline(_sample("ddp_2gpu"))
    exposed = [m for m in t.marks if m.id == "exposed_communication"]
    assert exposed and all(m.lane is not None and t.lanes[m.lane].kind == "communication" for m in exposed)


def _rank(rank: int) -> DistBuilder:
    """Two ranks of DDP (tests/diagnosis/test_distributed_rules.py's): rank 1 joins each step's
    all-reduce 100 µs after rank 0, so the run's pass finds low_bus_bandwidth on both."""
    b = DistBuilder(rank=rank, world_size=2)
    for i in range(3):
        s = i * 1000.0
        b.step(i + 1, s, 1000)
        b.launch_kernel(GEMM, s + 2, s, 300 if rank == 0 else 450)
        join = s + (400 if rank == 0 else 500)
        b.collective(s + 3, join, s + 700 - join, nccl_args("allreduce", 1 << 20))
    return b


def test_a_finding_of_the_run_level_pass_is_pinned_to_its_collectives(tmp_path: Path) -> None:
    for rank in (0, 1):
        _rank(rank).write(tmp_path / "ddp" / f"rank{rank}.1.pt.trace.json.gz")
    (run,) = analyze_path(str(tmp_path / "ddp")).runs
    for w in run.workers:
        t = _timeline(w)
        marks = [m for m in t.marks if m.id == "low_bus_bandwidth"]
        assert marks and all(m.lane is not None and t.lanes[m.lane].kind == "communication" for m in marks)
        assert {(m.id, m.subject) for m in t.marks} == {(f.id, f.subject) for f in w.findings}
