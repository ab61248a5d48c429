"""MfuMonitor's logic on CPU torch: windows, FLOPs sources, peaks, writers, lazy CUDA events, all-reduce."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

from tb_mfu_plugin.analysis.device.peaks import resolve_peak  # noqa: E402
from tb_mfu_plugin.analysis.options import AnalysisOptions  # noqa: E402
from tb_mfu_plugin.profiling import MfuMonitor, count_step_flops, write_sidecar  # noqa: E402
from tb_mfu_plugin.profiling.steptimer import CudaEventTimer, WallClockTimer  # noqa: E402
from tb_mfu_plugin.trace.locate.sidecar import ModelDims, Sidecar  # noqa: E402


class FakeClock:
    """Step k takes durations[k] seconds."""

    def __init__(self, durations: list[float]) -> None:
        self.t = 0.0
        self.durations = list(durations)

    def __call__(self) -> float:
        return self.t

    def run_step(self) -> None:
        self.t += self.durations.pop(0)


def _drive(mon: MfuMonitor, clock: FakeClock, n: int) -> None:
    for _ in range(n):
        clock.run_step()
        mon.step()


def test_windows_are_sums_over_the_resolved_steps() -> None:
    clock = FakeClock([9.0] + [0.1] * 4 + [0.2] * 5 + [0.3] * 2)  # step 1 (warm-up) is slow
    mon = MfuMonitor(log_every=5, flops_per_step=4e12, peak_tflops=100.0, timer=WallClockTimer(clock))
    _drive(mon, clock, 12)
    mon.close()
    first, second, last = mon.logs
    # step 1 is warm-up: its end is the first mark, so steps 2..5 make the first window
    assert (first.step, first.steps) == (5, 4) and first.step_time_us == pytest.approx(1e5)
    assert first.achieved_tflops == pytest.approx(40.0) and first.mfu == pytest.approx(0.4)
    assert (second.step, second.steps) == (10, 5)
    assert second.mfu == pytest.approx(4e12 / 0.2 / 100e12)  # steps 6..10, all 0.2 s
    assert (last.step, last.steps) == (12, 2) and last.mfu == pytest.approx(4e12 / 0.3 / 100e12)


def test_warmup_steps_and_start_step() -> None:
    clock = FakeClock([5.0, 5.0, 5.0] + [0.5] * 4)
    mon = MfuMonitor(
        log_every=7, flops_per_step=1e12, peak_tflops=10.0, warmup_steps=3, start_step=1000, timer=WallClockTimer(clock)
    )
    _drive(mon, clock, 7)
    (log,) = mon.logs
    assert (log.step, log.steps, log.step_time_us) == (1007, 4, pytest.approx(5e5))
    assert log.mfu == pytest.approx(0.2)


def test_unknown_flops_or_peak_still_logs_step_time() -> None:
    clock = FakeClock([0.1] * 4)
    mon = MfuMonitor(log_every=2, timer=WallClockTimer(clock), device_name="no such GPU")
    _drive(mon, clock, 4)
    assert mon.peak_flops is None and all(log.mfu is None for log in mon.logs)
    assert [log.step_time_us for log in mon.logs] == [pytest.approx(1e5)] * 2


def test_peak_comes_from_the_analysers_table() -> None:
    mon = MfuMonitor(device_name="H100 SXM", dtype="bf16")
    assert mon.peak_flops == resolve_peak(None, (), "bf16", AnalysisOptions(device_name="H100 SXM")).peak_flops
    assert mon.peak_flops == pytest.approx(989.4e12)
    # an fp32 (or TF32) run is measured against the 16-bit tensor-core peak too (PaLM's convention, issue 33)
    fp32 = MfuMonitor(device_name="H100 SXM", dtype="fp32", tf32=True)
    assert fp32.peak_flops == pytest.approx(989.4e12, rel=1e-3)
    assert MfuMonitor(device_name="H100 SXM", dtype="fp8").peak_flops == pytest.approx(1978.9e12, rel=1e-3)
    assert MfuMonitor(peak_tflops=312.0).peak_flops == 312e12


def _model() -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    return model, opt, x


def _train_step(model: Any, opt: Any, x: Any) -> None:
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch.compile warns about FlopCounterMode's global module hooks
@pytest.mark.parametrize("compiled", [False, True])
def test_first_step_is_counted_with_flop_counter_mode(compiled: bool) -> None:
    model, opt, x = _model()
    expected = count_step_flops(lambda: _train_step(model, opt, x))
    assert expected > 0
    run = torch.compile(model, backend="aot_eager") if compiled else model
    with MfuMonitor(log_every=3, peak_tflops=1.0) as mon:
        for _ in range(7):
            _train_step(run, opt, x)
            mon.step()
    assert mon.flops_per_step == expected and mon.flops_source == "FlopCounterMode (first step)"
    assert [log.step for log in mon.logs] == [3, 6, 7] and all(log.mfu and log.mfu > 0 for log in mon.logs)


def test_other_flops_sources(tmp_path: Path) -> None:
    model, opt, x = _model()
    mon = MfuMonitor()
    assert mon.count_flops(lambda: _train_step(model, opt, x)) == count_step_flops(lambda: _train_step(model, opt, x))
    dims = ModelDims(n_params=1e6, tokens_per_step=1024)
    assert MfuMonitor(model=dims).flops_per_step == dims.flops_per_step() == 6e6 * 1024
    write_sidecar(str(tmp_path), Sidecar(flops_per_step=3.5e12))
    assert MfuMonitor(sidecar=str(tmp_path)).flops_per_step == 3.5e12
    with pytest.raises(ValueError, match="no tb_mfu.json"):
        MfuMonitor(str(tmp_path / "tb"), sidecar=str(tmp_path / "absent"))
    assert not (tmp_path / "tb").exists()  # a bad argument creates nothing


def _scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    acc = ea.EventAccumulator(str(run_dir), size_guidance={ea.TENSORS: 0, ea.SCALARS: 0})
    acc.Reload()
    out = {
        t: {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in acc.Tensors(t)}
        for t in acc.Tags()["tensors"]
    }
    out.update({t: {e.step: e.value for e in acc.Scalars(t)} for t in acc.Tags()["scalars"]})
    return out


def test_writes_to_a_directory_with_tensorboards_writer(tmp_path: Path) -> None:
    clock = FakeClock([0.05] * 9)
    with MfuMonitor(
        str(tmp_path), log_every=4, flops_per_step=2e12, peak_tflops=100.0, timer=WallClockTimer(clock)
    ) as mon:
        _drive(mon, clock, 9)
    got = _scalars(tmp_path)
    assert got["tb_mfu/mfu"] == pytest.approx({log.step: log.mfu for log in mon.logs}, rel=1e-6)
    assert got["tb_mfu/step_time_us"] == pytest.approx({4: 5e4, 8: 5e4, 9: 5e4}, rel=1e-6)
    assert got["tb_mfu/achieved_tflops"][8] == pytest.approx(40.0, rel=1e-6)


def test_writes_to_a_torch_summary_writer(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    clock = FakeClock([0.02] * 6)
    writer = SummaryWriter(str(tmp_path))
    mon = MfuMonitor(writer, log_every=2, flops_per_step=1e12, peak_tflops=100.0, timer=WallClockTimer(clock))
    _drive(mon, clock, 6)
    mon.close()
    writer.close()
    assert _scalars(tmp_path)["tb_mfu/mfu"] == pytest.approx({2: 0.5, 4: 0.5, 6: 0.5}, rel=1e-6)
    with pytest.raises(TypeError, match="add_scalar"):
        MfuMonitor(writer=object())


class FakeEvent:
    """A CUDA event whose completion the test controls; it fails the test if anything waits on it
    before close()."""

    log: list[str] = []

    def __init__(self, enable_timing: bool = False) -> None:
        self.done = False
        self.t_ms = 0.0

    def record(self, stream: Any = None) -> None:
        self.done = False
        FakeEvent.log.append("record")

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.done and end.done
        return end.t_ms - self.t_ms

    def synchronize(self) -> None:
        FakeEvent.log.append("synchronize")


def test_cuda_event_timer_reads_only_finished_events_and_never_waits_per_step() -> None:
    FakeEvent.log = []
    timer = CudaEventTimer(new_event=FakeEvent)
    mon = MfuMonitor(log_every=3, flops_per_step=1e9, peak_tflops=1.0, timer=timer)
    events: list[FakeEvent] = []
    for k in range(9):
        for ev in events:  # the GPU has passed every mark but the one this step records
            ev.done = True
        mon.step()
        events.append(timer._pending[-1])  # the event this step recorded
        events[-1].t_ms = 10.0 * k
    assert "synchronize" not in FakeEvent.log
    # at step 3 the marks of steps 1 and 2 are done: step 2's time is known, step 3's not yet
    assert [(log.step, log.steps) for log in mon.logs] == [(2, 1), (5, 3), (8, 3)]
    assert all(log.step_time_us == pytest.approx(1e4) for log in mon.logs)
    assert len({id(e) for e in events}) < 9  # events already read are recorded again
    for ev in events:
        ev.done = True
    mon.close()
    assert FakeEvent.log.count("synchronize") == 1  # once, at the end
    assert (mon.logs[-1].step, mon.logs[-1].steps) == (9, 1)


def _ddp_worker(rank: int, init_file: str, results: Any) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    model, _, x = _model()
    plain_flops = count_step_flops(lambda: model(x).square().mean().backward())
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    with MfuMonitor(log_every=4, peak_tflops=1.0, all_reduce_mean=True) as mon:
        for _ in range(9):
            _train_step(ddp, opt, x)
            mon.step()
    # exact figures from a fake clock: rank 0 runs 0.1 s steps (MFU 0.1), rank 1 0.2 s (MFU 0.05)
    clock = FakeClock([0.1 * (rank + 1)] * 5)
    exact = MfuMonitor(
        log_every=4, flops_per_step=1e12, peak_tflops=100.0, all_reduce_mean=True, timer=WallClockTimer(clock)
    )
    _drive(exact, clock, 5)
    exact.close()
    results.put(
        (
            rank,
            plain_flops,
            mon.flops_per_step,
            [(log.step, log.mfu, log.mfu_mean_over_ranks) for log in mon.logs],
            [(log.step, log.mfu, log.mfu_mean_over_ranks, log.step_time_us_mean_over_ranks) for log in exact.logs],
        )
    )
    # both ranks done with every collective, and DDP's reducer gone, before the group goes: gloo's
    # threads still at work when a process exits abort it ("terminate called without an active
    # exception", exit -6), seen once in a full serial run
    del ddp
    dist.barrier()
    dist.destroy_process_group()


def test_ddp_and_the_all_reduced_mean_over_two_ranks(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_ddp_worker, args=(r, str(tmp_path / "init"), results)) for r in (0, 1)]
    for p in procs:
        p.start()
    got = {rank: rest for rank, *rest in (results.get(timeout=180) for _ in procs)}
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for plain, counted, _logs, _exact in got.values():
        assert counted == plain > 0  # one rank's step: DDP's all-reduce adds no FLOPs
    logs0, logs1 = got[0][2], got[1][2]
    assert [s for s, *_ in logs0] == [s for s, *_ in logs1] == [4, 8, 9]
    for (_, mfu0, mean0), (_, mfu1, mean1) in zip(logs0, logs1, strict=True):
        assert mean0 == mean1 == pytest.approx((mfu0 + mfu1) / 2)
    for rank, mfu in ((0, 0.1), (1, 0.05)):
        (step, own, mean, time_mean), (last_step, *_rest) = got[rank][3]
        assert step == 4 and own == pytest.approx(mfu)
        assert mean == pytest.approx(0.075) and time_mean == pytest.approx(1.5e5)
        assert last_step == 5


def test_peak_memory_is_logged_per_window_and_absent_without_cuda(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CPU torch: no CUDA, so no memory figure and no tag; with CUDA (its counters stood in for here,
    the one way to reach that path without a GPU) each log reads max_memory_allocated() once, and
    resets it only when asked."""
    clock = FakeClock([0.1] * 6)
    mon = MfuMonitor(
        str(tmp_path / "cpu"), log_every=2, flops_per_step=1e12, peak_tflops=10.0, timer=WallClockTimer(clock)
    )
    _drive(mon, clock, 6)
    mon.close()
    assert mon.logs and all(log.max_memory_allocated_bytes is None for log in mon.logs)
    acc = ea.EventAccumulator(str(tmp_path / "cpu"))
    acc.Reload()
    assert "tb_mfu/max_memory_allocated_bytes" not in acc.Tags()["tensors"] + acc.Tags()["scalars"]

    peaks = iter([1000, 3000, 2000, 500])
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: calls.append("read") or next(peaks))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: calls.append("reset"))
    for reset, name in ((False, "plain"), (True, "reset")):
        calls.clear()
        clock = FakeClock([0.1] * 4)
        mon = MfuMonitor(
            str(tmp_path / name),
            log_every=2,
            flops_per_step=1e12,
            peak_tflops=10.0,
            timer=WallClockTimer(clock),
            reset_peak_memory=reset,
        )
        _drive(mon, clock, 4)
        mon.close()
        assert calls == (["read", "reset"] * 2 if reset else ["read"] * 2)  # once per log, never per step
    assert [log.max_memory_allocated_bytes for log in mon.logs] == [2000, 500]
    acc = ea.EventAccumulator(str(tmp_path / "reset"), size_guidance={ea.TENSORS: 0})
    acc.Reload()
    events = acc.Tensors("tb_mfu/max_memory_allocated_bytes")
    got = {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in events}
    assert got == {2: 2000.0, 4: 500.0}
    calls.clear()
    clock = FakeClock([0.1] * 2)
    off = MfuMonitor(log_every=1, flops_per_step=1e12, peak_tflops=10.0, timer=WallClockTimer(clock), memory=False)
    _drive(off, clock, 2)
    assert calls == [] and off.logs and off.logs[-1].max_memory_allocated_bytes is None
