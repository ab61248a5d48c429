"""The critical-path model (analysis.critical_path) on hand-made traces with the answer worked out,
and on every recorded pair: the unchanged re-timing gives back the trace's times, and each step's
critical path adds up to the step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, validation_folder

from tb_mfu_plugin.analysis.critical_path import classes as cls
from tb_mfu_plugin.analysis.critical_path.graph import BY_LAUNCH, BY_STREAM, BY_WAIT
from tb_mfu_plugin.analysis.critical_path.path import walk
from tb_mfu_plugin.analysis.critical_path.timing import Weights
from tb_mfu_plugin.analysis.critical_path.whatif import Change, HostChange, Model, OpChange

from ...diagnosis.helpers import Builder, analyze

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
PAIRS = ROOT / "validation" / "whatif_pairs"  # its traces are in validation/traces.tar.xz


def _model(b: Builder, tmp_path: Path) -> Model:
    _, _, _, view = analyze(b, tmp_path)
    assert view.critical is not None
    return view.critical


def _sync_step() -> Builder:
    """Host [0, 160]: a GEMM launched at 10 runs [15, 65); an add launched at 20 queues behind it,
    [66, 116); a sync from 30 returns at 120, 4 µs after the add ends; the host works until it launches
    a third kernel at 125, which runs [130, 150); the host ends the step at 160."""
    b = Builder()
    b.step(1, 0, 160)
    b.launch(GEMM, 10, 15, 50)
    b.launch(ADD, 20, 66, 50)
    b.sync("cudaStreamSynchronize", 30, 90)
    b.launch(ADD, 125, 130, 20)
    return b


def test_each_op_is_bound_by_the_edge_that_held_it(tmp_path: Path) -> None:
    g = _model(_sync_step(), tmp_path).g
    assert g.ops.bind.tolist() == [BY_LAUNCH, BY_STREAM, BY_LAUNCH]
    assert g.launch_latency_us == pytest.approx(5.0)  # 15 - 10 and 130 - 125 on an idle stream
    assert g.ops.gap[1] == pytest.approx(1.0)  # queued: 1 µs after the GEMM
    (k,) = np.flatnonzero(g.syncs.bound >= 0)
    assert g.syncs.bound[k] == 1 and g.syncs.lat[k] == pytest.approx(4.0)  # waited for the add


def test_the_unchanged_retiming_gives_back_the_trace(tmp_path: Path) -> None:
    m = _model(_sync_step(), tmp_path)
    t = m.retimer.run(Weights.of(m.g))
    assert np.allclose(t.a, m.g.ops.a) and np.allclose(t.t, m.g.host.t)
    assert m.step_us == pytest.approx(160)


def test_the_critical_path_of_a_step_by_class(tmp_path: Path) -> None:
    """From the host's end back: host [126, 160) and [120, 125), the third launch call [125, 126), the
    sync's return [116, 120), the add and the GEMM with the 1 µs gap between them, the GEMM's launch
    latency [10, 15) and the host before it [0, 10)."""
    m = _model(_sync_step(), tmp_path)
    us = walk(m.g).of_step(0)
    want = {cls.HOST: 10 + 5 + 34, cls.LAUNCH: 5 + 1, cls.SYNC: 4, cls.MATMUL: 50, cls.ELEMENTWISE: 50, cls.GPU_GAP: 1}
    assert {k: v for k, v in us.items() if v} == pytest.approx(want)
    assert sum(us.values()) == pytest.approx(160)


def test_a_wait_on_another_stream_is_found(tmp_path: Path) -> None:
    """An op launched at 5 that starts at 61 on stream 9, one µs after stream 7's op ended: its launch
    and its stream allow 10, so it waited for the other stream."""
    b = Builder()
    b.step(1, 0, 12)
    b.launch(GEMM, 2, 10, 50)
    b.launch(ADD, 5, 61, 20, stream=9)
    g = _model(b, tmp_path).g
    waits = np.flatnonzero(g.ops.bind == BY_WAIT)
    assert len(waits) == 1 and g.ops.wait_w[waits[0]] == pytest.approx(1.0)
    us = walk(g).of_step(0)
    assert us[cls.STREAM_WAIT] == pytest.approx(1.0) and sum(us.values()) == pytest.approx(81)


def _host_after_sync() -> Builder:
    """A GEMM [10, 1000) launched at 5; a sync from 10 returns at 1005; then the host launches ten 2 µs
    adds 10 µs apart from 1010 (each runs 5 µs after its launch), and ends the step at 1110: the GPU
    idles while the host launches. Without the sync the adds queue behind the GEMM."""
    b = Builder()
    b.step(1, 0, 1110)
    b.launch(GEMM, 5, 10, 990)
    b.sync("cudaStreamSynchronize", 10, 995)
    for i in range(10):
        b.launch(ADD, 1010 + 10 * i, 1015 + 10 * i, 2)
    return b


def test_removing_a_sync_moves_the_work_behind_it(tmp_path: Path) -> None:
    m = _model(_host_after_sync(), tmp_path)
    rows = m.g.syncs.row
    out = m.simulate([Change("sync removed", syncs=rows)])
    # the host launches the adds at 15..105 and ends at 115; they queue behind the GEMM, 8 µs apart as the
    # trace's queued gap (the median of none: the default 1 µs) allows: the last one ends at 1000 + 10 x 2 + 10 x 1
    assert out.step_us == pytest.approx(1000 + 10 * 2 + 10 * 1)
    assert out.floor_us == pytest.approx(990 + 10 * 2)  # the stream's work: the step cannot be shorter


def test_host_time_hidden_and_ops_made_faster(tmp_path: Path) -> None:
    m = _model(_host_after_sync(), tmp_path)
    # the GEMM twice as fast: the sync returns 495 µs earlier and everything after it moves with it
    rows = np.flatnonzero(m.g.ops.cls[np.argsort(m.g.ops.row)] == cls.CODE[cls.MATMUL])
    faster = m.simulate([Change("GEMM 2x", ops=(OpChange(rows, 0.5),))])
    assert faster.gain_us == pytest.approx(495)
    # the host's 90 µs from 1011 to 1101 (its launch calls in it too) halved: the step ends 45 µs sooner
    window = HostChange(np.array([1011.0]), np.array([1101.0]), 0.5)
    host = m.simulate([Change("host halved", host=(window,))])
    assert host.gain_us == pytest.approx(45)
    both = m.simulate([Change("GEMM 2x", ops=(OpChange(rows, 0.5),)), Change("host halved", host=(window,))])
    assert both.gain_us == pytest.approx(495 + 45)


def _recorded_pairs() -> list[str]:
    truth = PAIRS / "ground_truth.json"
    return sorted(json.loads(truth.read_text())["pairs"]) if truth.is_file() else []


@pytest.mark.parametrize("run", _recorded_pairs())
def test_recorded_pairs_retime_to_themselves_and_add_up(run: str) -> None:
    from tb_mfu_plugin.running.pipeline import analyze_path

    pairs = validation_folder("whatif_pairs")  # unpacked on first use
    for side in ("before", "after"):
        (w,) = [w for r in analyze_path(str(pairs / run / side)).runs for w in r.workers]
        cp = w.critical_path
        assert cp is not None and w.whatif is not None
        for s, step in zip(cp.steps, w.steps, strict=False):
            assert sum(s.us.values()) == pytest.approx(s.dur_us, rel=1e-6) and s.dur_us == pytest.approx(step.dur_us)
        assert w.whatif.step_us == pytest.approx(sum(s.dur_us for s in cp.steps) / len(cp.steps), rel=1e-6)


def _host_bound_step(op_name: str) -> Builder:
    """A host-bound step: five host ops named ``op_name``, 20 µs apart, each launching a 2 µs kernel
    with a launch call of 6 µs; the step is the host's 120 µs."""
    b = Builder()
    b.step(1, 0, 120)
    for i in range(5):
        ts = 10.0 + 20 * i
        b.op(op_name, ts, 8)
        corr = b.runtime("cudaLaunchKernel", ts + 1, 6.0)
        b.kernel(ADD, ts + 12, 2, corr)
    return b


def test_triton_launches_cost_the_profiler_more_than_an_event(tmp_path: Path) -> None:
    """Inductor's ``triton_*`` host ops exist only under the profiler, which costs each of them
    ``PROFILER_TRITON_LAUNCHES`` launch calls more than an event; an eager op of the same shape
    costs only its events."""
    from tb_mfu_plugin.analysis.critical_path import unprofiled

    eager = _model(_host_bound_step("aten::add_"), tmp_path / "eager")
    compiled = _model(_host_bound_step("triton_poi_fused_add_0"), tmp_path / "compiled")
    assert eager.g.host.triton.sum() == 0 and compiled.g.host.triton.sum() == 5
    assert eager.g.host.events.sum() == compiled.g.host.events.sum() == 10  # an op and a launch call each
    assert compiled.g.launch_call_us == pytest.approx(6.0)
    extra = unprofiled.profiler_us(compiled.g).sum() - unprofiled.profiler_us(eager.g).sum()
    assert extra == pytest.approx(5 * unprofiled.PROFILER_TRITON_LAUNCHES * 6.0)
    # the host-bound compiled step loses more of its time to the profiler, never more than it has
    assert 0 < compiled.unprofiled_step_us < eager.unprofiled_step_us < eager.step_us == compiled.step_us


def test_lightning_profilers_record_functions_cost_the_host(tmp_path: Path) -> None:
    """Lightning's PyTorchProfiler opens a ``[pl]…`` record function around each module's forward (from
    hooks it registers) and each step function: Python that a run without the profiler does not run. Each
    costs ``PROFILER_LIGHTNING_LAUNCHES`` launch calls; a user's own annotation costs nothing."""
    from tb_mfu_plugin.analysis.critical_path import unprofiled

    plain, hooked = _host_bound_step("aten::add_"), _host_bound_step("aten::add_")
    for i in range(5):
        plain.annotation("my_block", 9.0 + 20 * i, 10.0)
        hooked.annotation("[pl][module]torch.nn.modules.linear.Linear: model.fc", 9.0 + 20 * i, 10.0)
    mine, pl = _model(plain, tmp_path / "plain"), _model(hooked, tmp_path / "pl")
    assert mine.g.host.lightning.sum() == 0 and pl.g.host.lightning.sum() == 5
    assert mine.g.host.events.sum() == pl.g.host.events.sum() == 10  # annotations are not events
    extra = unprofiled.profiler_us(pl.g).sum() - unprofiled.profiler_us(mine.g).sum()
    assert extra == pytest.approx(5 * unprofiled.PROFILER_LIGHTNING_LAUNCHES * 6.0)
    assert 0 < pl.unprofiled_step_us < mine.unprofiled_step_us < mine.step_us == pl.step_us


def test_a_lightning_trace_counts_its_profilers_record_functions() -> None:
    """The recorded Lightning run (HF Llama, 4 layers): 57 hooked module forwards and 31 step functions a
    step, each a ``[pl]`` record function; the GPU's copies of them (``gpu_user_annotation``) are not the
    host's."""
    from tb_mfu_plugin.analysis.options import AnalysisOptions
    from tb_mfu_plugin.analysis.per_device import analyze_device
    from tb_mfu_plugin.trace.decode.decode import decode_trace

    lightning = validation_folder("mfu_truth") / "lightning_llama_bf16"  # unpacked on first use
    if not lightning.exists():
        pytest.skip("the Lightning truth run is not in this checkout")
    tables = decode_trace(str(next(lightning.glob("*.pt.trace.json.gz"))))
    view = analyze_device(tables, 0, AnalysisOptions()).view
    assert view is not None and view.critical is not None
    g = view.critical.g
    assert g.host.lightning.sum() == pytest.approx(88 * g.steps, abs=g.steps)
    assert g.host.triton.sum() == 0


def test_the_step_without_the_profiler_comes_with_its_likely_range(tmp_path: Path) -> None:
    """The estimate's range is the step re-timed with the profiler's cost at each end of
    ``PROFILER_COST_RANGE``: on a host-bound step of five ops, each an op and a 6 µs launch call
    (2.4 µs an event, 0.4 of the launch call), the host gives back 24 µs at the estimate, and at the
    ends 0.30 and 0.75 of the launch call an event: 18 and 45 µs."""
    from tb_mfu_plugin.analysis.critical_path import unprofiled

    m = _model(_host_bound_step("aten::add_"), tmp_path)
    assert unprofiled.profiler_us(m.g).sum() == pytest.approx(24.0)
    assert m.unprofiled_step_us == pytest.approx(m.step_us - 24.0)
    short, long = m.unprofiled_step_range_us
    assert short == pytest.approx(m.step_us - 45.0) and long == pytest.approx(m.step_us - 18.0)


def test_the_likely_ranges_short_end_reaches_the_fastest_step(tmp_path: Path) -> None:
    """The profiler's cost only adds time, and not the same in every step: where the modelled steps
    ran 120 and 180 µs, the shortest likely step is the one re-timed at the profiler's higher cost,
    scaled from their mean (150 µs) to the fastest (120 µs). The estimate and the long end are the
    re-timed mean's, as with steps of one length."""
    from tb_mfu_plugin.analysis.critical_path import unprofiled

    b = _host_bound_step("aten::add_")
    b.step(2, 120, 180)  # the same five ops, and 60 µs more on the host
    for i in range(5):
        ts = 130.0 + 20 * i
        b.op("aten::add_", ts, 8)
        b.kernel(ADD, ts + 12, 2, b.runtime("cudaLaunchKernel", ts + 1, 6.0))
    m = _model(b, tmp_path)
    assert m.g.steps == 2 and m.step_us == pytest.approx(150.0)
    assert unprofiled.profiler_us(m.g).sum() == pytest.approx(48.0)  # 24 µs a step at the estimate
    short, long = m.unprofiled_step_range_us
    assert m.unprofiled_step_us == pytest.approx(150.0 - 24.0)
    assert long == pytest.approx(150.0 - 18.0)
    assert short == pytest.approx((150.0 - 45.0) * 120.0 / 150.0)


def _carried_step() -> Builder:
    """Two host-bound steps of [0, 100] and [100, 200], each launching two 20 µs adds, 40 µs apart; the
    trace begins with the GPU still running two 30 µs adds an earlier step launched (no launch call in
    the trace: the profiler was not recording yet), which hold the first step's adds back."""
    b = Builder()
    b.step(1, 0, 100)
    b.step(2, 100, 100)
    b.kernel(ADD, 1, 30, corr=9001)  # carried in: launched before the trace
    b.kernel(ADD, 32, 30, corr=9002)
    b.launch(ADD, 10, 63, 20)
    b.launch(ADD, 50, 84, 20)
    b.launch(ADD, 110, 115, 20)
    b.launch(ADD, 150, 155, 20)
    return b


def test_work_an_earlier_step_left_in_the_queue_is_not_the_steps_own(tmp_path: Path) -> None:
    """The first step's run of kernels launched before the trace is flagged as carried in, and the
    step without the profiler does not count it: in the steady state the last step leaves as much
    to the next one, which no re-timing counts."""
    from tb_mfu_plugin.analysis.critical_path.unprofiled import unprofiled

    m = _model(_carried_step(), tmp_path)
    g = m.g
    assert g.ops.carried.tolist() == [True, True, False, False, False, False]
    w = unprofiled(g)
    assert np.all(w.d[g.ops.carried] == 0.0) and np.all(w.d[~g.ops.carried] == g.ops.d[~g.ops.carried])
    # the traced re-timing keeps them (it gives back the trace), the one without the profiler does not
    assert np.allclose(m.retimer.run(Weights.of(g)).a, g.ops.a)
    assert m.unprofiled_base.a[2] < g.ops.a[2]  # the first step's first add no longer waits for them
