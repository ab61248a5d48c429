"""The run-level pass over a distributed run (clocks, arrivals, low_bus_bandwidth) and the
pipeline bubble, on hand-made ranks whose answers are worked out here."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from conftest import SAMPLES
from tracegen import DistBuilder, nccl_args

from tb_mfu_plugin.analysis.distributed.blocks import SyncPoint
from tb_mfu_plugin.analysis.distributed.clock_skew import align, arrivals
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import RunReport, WorkerReport
from tb_mfu_plugin.reporting.run import run_report
from tb_mfu_plugin.reporting.trace import trace_reports
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.decode.decode import decode_trace

GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
SHIFT = 250.0  # rank 1's clock reads 250 µs ahead of rank 0's


def _rank(rank: int, clock: float) -> DistBuilder:
    """Three 1000 µs steps of DDP on 2 ranks. Rank 0 computes 300 µs and joins each step's
    all-reduce at +400; rank 1 computes 450 µs and joins at +500. The all-reduce of 2^20 fp32
    (4 MiB) ends at +700 on both, so it moves 4 MiB in 200 µs once both are there."""
    b = DistBuilder(rank=rank, world_size=2)
    for i in range(3):
        s = i * 1000.0
        b.step(i + 1, s + clock, 1000)
        b.annotation("DistributedDataParallel.forward", s + clock + 1, 50)
        b.launch_kernel(GEMM, s + clock + 2, s + clock, 300 if rank == 0 else 450)
        join = s + (400 if rank == 0 else 500)
        b.collective(s + clock + 3, join + clock, s + 700 - join, nccl_args("allreduce", 1 << 20))
    return b


def _run(tmp_path: Path) -> RunReport:
    d = tmp_path / "ddp"
    for rank, clock in ((0, 0.0), (1, SHIFT)):
        _rank(rank, clock).write(d / f"rank{rank}.1.pt.trace.json.gz")
    (run,) = analyze_path(str(d)).runs
    return run


def test_clocks_are_aligned_on_the_ends_of_collectives(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert run.strategy == ["DDP"]
    r = run.ranks
    assert r is not None and r.clock_reference == "rank0"
    shifts = {row.worker: row.clock_shift_us for row in r.ranks}
    assert shifts["rank0"] == 0.0 and shifts["rank1"] == pytest.approx(-SHIFT)
    assert r.clock_residual_us == pytest.approx(0.0, abs=1e-6)
    assert r.clock_note and "250 µs (rank1)" in r.clock_note
    # rank 0 waits 100 µs in each all-reduce for rank 1, which waits for no one
    waits = {row.worker: row.collective_wait_us_per_step for row in r.ranks}
    assert waits == {"rank0": pytest.approx(100.0), "rank1": pytest.approx(0.0)}


def test_bandwidth_from_the_last_arrival_and_low_bus_bandwidth(tmp_path: Path) -> None:
    run = _run(tmp_path)
    mib4 = 4 * (1 << 20)
    for w in run.workers:
        assert w.communication is not None
        (c,) = w.communication.collectives
        assert c.bandwidth_basis == "last arrival"
        assert c.busbw_gbps == pytest.approx(mib4 / 200e-6 / 1e9)  # 2 ranks: busbw = algbw
        assert c.transfer_us_per_step == pytest.approx(200.0)
        assert c.wait_share == pytest.approx(1 / 3 if w.name == "rank0" else 0.0)  # 100 of its 300 µs
        # rank 0's own kernels take 300 µs: its kernel-time bandwidth is a third lower
        own = mib4 / (300e-6 if w.name == "rank0" else 200e-6) / 1e9
        assert c.kernel_busbw_gbps == pytest.approx(own)
        (f,) = [f for f in w.findings if f.id == "low_bus_bandwidth"]
        assert f.subject == "allreduce default_pg Float"
        assert f.evidence.link_peak_share == pytest.approx(c.busbw_gbps / 450.0, rel=1e-3)
        assert "small messages" in f.evidence.causes[0]
        assert "bucket_cap_mb" in f.recommendation and "bf16_compress_hook" in f.recommendation
        # all of the transfer is exposed; at 70 % of 450 GB/s it would take 4 MiB / 315 GB/s
        target = mib4 / (0.7 * 450e9) * 1e6
        assert f.est_gain_us_per_step == pytest.approx(200.0 - target, abs=0.1)
        gains = [g.est_gain_us_per_step for g in w.findings]
        assert gains == sorted(gains, reverse=True)
        # its time is the all-reduce's exposed time, inside exposed_communication's where that fired: it
        # adds nothing to the engine's combined gain, one re-timing of the others' fixes together
        assert w.combined_gain_us_per_step is not None and w.summary is not None
        assert max(gains) <= w.combined_gain_us_per_step <= (w.summary.step_time_mean_us or 0)
        assert w.whatif is not None and w.whatif.combined is not None
        if "exposed_communication" in {g.id for g in w.findings}:
            assert w.combined_gain_us_per_step == pytest.approx(w.whatif.combined.gain_us_per_step, abs=0.1)


def test_one_rank_alone_never_has_low_bus_bandwidth(tmp_path: Path) -> None:
    """Without the other member's trace the kernel time includes the wait: no finding."""
    tables = decode_trace(str(_rank(0, 0.0).write(tmp_path / "rank0.pt.trace.json.gz")))
    (w,) = trace_reports(tables, "rank0", "", AnalysisOptions())
    assert w.communication is not None
    assert [c.bandwidth_basis for c in w.communication.collectives] == ["kernel time"]
    assert "low_bus_bandwidth" not in {f.id for f in w.findings}


def test_the_run_level_pass_leaves_the_reports_it_is_given_unchanged(tmp_path: Path) -> None:
    """The tab's cache hands the same report objects to every request."""
    workers = _run(tmp_path).workers
    files = [msgspec.structs.replace(w) for w in workers]
    before = [msgspec.json.encode(w) for w in files]
    first = run_report("r", files)
    second = run_report("r", files)
    assert [msgspec.json.encode(w) for w in files] == before
    assert [msgspec.json.encode(w) for w in first.workers] == [msgspec.json.encode(w) for w in second.workers]


def test_align_chains_offsets_through_shared_groups() -> None:
    """Ranks 0-1 share group a, 1-2 share group b: rank 2 is aligned through rank 1."""

    def p(group: str, i: int, start: float, end: float) -> SyncPoint:
        return SyncPoint(
            group=group, step=1, index=i, kind="allreduce", dtype="Float", nbytes=8, start_us=start, end_us=end
        )

    r0 = [p("a[0, 1]", 0, 0.0, 100.0)]
    r1 = [p("a[0, 1]", 0, 1030.0, 1100.0), p("b[1, 2]", 0, 1200.0, 1300.0)]
    r2 = [p("b[1, 2]", 0, -400.0, -300.0)]
    al = align([r0, r1, r2])
    assert al.shift_us == [0.0, pytest.approx(-1000.0), pytest.approx(600.0)]
    arr = arrivals([r0, r1, r2], al.shift_us)
    assert arr.wait_us == [pytest.approx(30.0), 0.0, 0.0]  # rank 0 started 30 µs before rank 1
    lone = align([r0, [p("c[1, 2]", 0, 0.0, 1.0)]])
    assert lone.shift_us == [0.0, None]


# ------------------------------------------------------------------------------- pipelines


def _stage0(tmp_path: Path, annotations: list[str], host_p2p: bool = False, interleaved: bool = False) -> WorkerReport:
    """Stage 0 of 2 over one 2000 µs step with 4 micro-batches: four 100 µs forwards [0, 400),
    each followed by a 20 µs activation send (the first three overlap the next forward, the last
    runs alone [400, 420)); a gradient receive waiting [420, 1000) with nothing to compute; four
    200 µs backwards [1000, 1800). Bubble: 20 + 580 = 600 µs, 30 % of the step."""
    b = DistBuilder(rank=0, world_size=2)
    b.step(1, 0, 2000)
    for k, name in enumerate(annotations):
        b.annotation(name, 1 + k, 1)
    for i in range(4):
        b.launch_kernel(GEMM, 10 + i, i * 100, 100)
        b.collective(20 + i, i * 100 + 100, 20, nccl_args("send", 1 << 16, ranks=(0, 1)))
        if host_p2p:  # the ops torch's send/recv record on the host, one per activation and gradient
            b.op("c10d::send", 50 + 2 * i if interleaved else 50 + i, 1)
            b.op("c10d::recv_", 51 + 2 * i if interleaved else 60 + i, 1)
    b.collective(30, 420, 580, nccl_args("recv", 1 << 16, ranks=(0, 1)))
    for i in range(4):
        b.launch_kernel(GEMM, 40 + i, 1000 + i * 200, 200)
    tables = decode_trace(str(b.write(tmp_path / "rank0.pt.trace.json.gz")))
    (w,) = trace_reports(tables, "rank0", "", AnalysisOptions())
    return w


GPIPE = [f"Forward {i}" for i in range(4)] + [f"Backward {i}" for i in range(4)]


def test_pipeline_bubble_of_a_gpipe_stage(tmp_path: Path) -> None:
    w = _stage0(tmp_path, GPIPE)
    assert w.communication is not None and w.communication.strategy == ["PP"]
    pp = w.pipeline
    assert pp is not None
    assert (pp.stage, pp.pipeline_size, pp.microbatches, pp.schedule) == (0, 2, 4, "GPipe")
    assert pp.bubble_us_per_step == pytest.approx(600.0) and pp.bubble_share == pytest.approx(0.3)
    assert pp.analytic_bubble_share == pytest.approx(1 / 5)  # (p-1)/(m+p-1)
    assert pp.p2p_us_per_step == pytest.approx(660.0)  # 4 x 20 + 580: the sends overlap only compute
    (f,) = [f for f in w.findings if f.id == "pipeline_bubble"]
    # the excess over the analytic bubble (0.1 x 2000) plus its drop at m = 8 ((1/5 - 1/9) x 2000)
    assert f.est_gain_us_per_step == pytest.approx(200 + (1 / 5 - 1 / 9) * 2000, abs=0.1)
    text = f.recommendation
    assert "n_microbatches" in text and "ScheduleInterleaved1F1B" in text and "Balance the stages" in text


def test_pipeline_bubble_of_an_interleaved_stage(tmp_path: Path) -> None:
    """The runtime schedules' actions name the stage: rank 0 running stages 0 and 2 is interleaved."""
    actions = [f"PP:{s}F{i}" for s in (0, 2) for i in range(4)] + [f"PP:{s}B{i}" for s in (0, 2) for i in range(4)]
    pp = _stage0(tmp_path, actions).pipeline
    assert pp is not None and pp.stages == [0, 2] and pp.schedule == "interleaved 1F1B"
    assert pp.analytic_bubble_share == pytest.approx(1 / (2 * 4 + 1))


def test_microbatches_of_a_1f1b_stage_from_its_send_recv_ops(tmp_path: Path) -> None:
    """torch's Schedule1F1B records no annotation: 4 sends and 4 receives a step at the end of a
    2-stage pipeline are 4 micro-batches."""
    pp = _stage0(tmp_path, [], host_p2p=True).pipeline
    assert pp is not None and pp.stage == 0 and pp.stages == []
    assert (pp.microbatches, pp.microbatches_source) == (4, "send/recv count")
    assert pp.analytic_bubble_share == pytest.approx(1 / 5)
    # the first stage sends its 4 activations before it receives a gradient: all forwards first
    assert (pp.schedule, pp.schedule_source) == ("GPipe", "send/recv order")
    alternate = _stage0(tmp_path, [], host_p2p=True, interleaved=True).pipeline
    assert alternate is not None and (alternate.schedule, alternate.schedule_source) == ("1F1B", "send/recv order")
    bare = _stage0(tmp_path, []).pipeline
    assert bare is not None and bare.microbatches is None and bare.analytic_bubble_share is None
    assert bare.schedule is None and bare.schedule_source is None


def test_no_pipeline_block_without_pipeline_parallelism() -> None:
    if not (SAMPLES / "ddp_2gpu").is_dir():
        pytest.skip("sample traces not available")
    assert [w.pipeline for w in analyze_path(str(SAMPLES / "ddp_2gpu")).runs[0].workers] == [None, None]
