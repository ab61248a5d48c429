"""``MfuMonitor``: MFU over the whole training run, between (and without) profiler windows.

::

    from tb_mfu_plugin.profiling import MfuMonitor

    with MfuMonitor("./logs/run_a", log_every=100) as mon:   # or a torch SummaryWriter
        for batch in loader:
            train_step(batch)
            mon.step()

FLOPs per step are known once, from the first of: ``flops_per_step=``; ``model=``
(``sidecar.ModelDims``: the PaLM formula); ``sidecar=`` (a run directory with a
``tb_mfu.json``); ``count_flops(step_fn)``; otherwise the first step inside the
``with`` block runs under ``FlopCounterMode`` (that step is not timed).

Steps are timed with CUDA events and no synchronisation (``steptimer``); every
``log_every`` steps the steps the GPU has finished are logged: ``tb_mfu/mfu``,
``tb_mfu/achieved_tflops`` and ``tb_mfu/step_time_us`` (the mean over those steps),
at the last of them as the global step. The peak comes from the analyser's table
(``analysis.device.peaks``) for ``torch.cuda.get_device_name()`` and ``dtype``.

Memory (``memory=True``, the default): each log also records the caching allocator's peak,
``torch.cuda.max_memory_allocated()``, as ``tb_mfu/max_memory_allocated_bytes``: a host-side
counter read once per log, with no device sync, so it costs nothing per step. It is the peak since
the process started (or since the training code last reset it), as PyTorch defines it; with
``reset_peak_memory=True`` the monitor resets it after each read, so each log holds its own
window's peak (leave it off if the training code reads the peak itself). Without CUDA, or before
CUDA is initialised, nothing is logged for it.

Distributed (DDP, FSDP): each rank times and logs its own steps. With
``all_reduce_mean=True`` every rank also all-reduces its figures at log time (one small
collective and one host sync every ``log_every`` steps, never per step) and logs
``tb_mfu/mfu_mean_over_ranks`` and ``tb_mfu/step_time_us_mean_over_ranks``; every rank
must then call ``step()`` the same number of times.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..analysis.device.mfu import flop_rate, mfu_for
from ..analysis.device.peaks import resolve_peak
from ..analysis.options import AnalysisOptions
from ..trace.locate.discover import SIDECAR_NAME
from ..trace.locate.locations import Location
from ..trace.locate.sidecar import ModelDims, load_sidecar
from .steptimer import CudaEventTimer, StepTimer, WallClockTimer

PREFIX = "tb_mfu/"


@dataclass(frozen=True)
class MonitorLog:
    """One logged window: the steps the GPU had finished since the previous log."""

    step: int  # the last step of the window (the global step it is logged at)
    steps: int  # steps in the window
    step_time_us: float  # mean step time over the window
    achieved_tflops: float | None  # FLOPs per step x steps / window time
    mfu: float | None  # achieved FLOP/s / peak
    mfu_mean_over_ranks: float | None = None
    step_time_us_mean_over_ranks: float | None = None
    max_memory_allocated_bytes: float | None = None  # torch.cuda.max_memory_allocated() at log time


def _max_memory_allocated(reset: bool) -> float | None:
    """The caching allocator's peak on the current device; None without CUDA or before it is initialised
    (reading it then would initialise CUDA for nothing)."""
    try:
        import torch

        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return None
        peak = float(torch.cuda.max_memory_allocated())
        if reset:
            torch.cuda.reset_peak_memory_stats()
        return peak
    except (RuntimeError, AssertionError, AttributeError):  # a build without the allocator's stats
        return None


def _device_props() -> dict[str, Any] | None:
    import torch

    if not torch.cuda.is_available():
        return None
    idx = torch.cuda.current_device()
    p = torch.cuda.get_device_properties(idx)
    return {
        "name": torch.cuda.get_device_name(idx),
        "numSms": p.multi_processor_count,
        "computeMajor": p.major,
        "computeMinor": p.minor,
    }


class MfuMonitor:
    def __init__(
        self,
        writer: Any = None,
        *,
        log_every: int = 100,
        flops_per_step: float | None = None,
        model: ModelDims | Mapping[str, Any] | None = None,
        sidecar: str | None = None,
        peak_tflops: float | None = None,
        device_name: str | None = None,
        dtype: str = "bf16",
        tf32: bool = False,
        warmup_steps: int = 1,
        start_step: int = 0,
        all_reduce_mean: bool = False,
        process_group: Any = None,
        timer: StepTimer | None = None,
        memory: bool = True,
        reset_peak_memory: bool = False,
    ) -> None:
        """``writer``: a ``SummaryWriter`` (anything with ``add_scalar(tag, value, global_step)``),
        a directory to write a TensorBoard run into, or None to only keep ``logs``.
        ``warmup_steps``: the first steps are not timed (compilation, allocator warm-up); at
        least 1, since a step's time runs from the end of the step before it. ``start_step``: the
        global step of the step before the first ``step()`` call (a resumed run's step count).
        ``memory``: log ``torch.cuda.max_memory_allocated()`` with each window; ``reset_peak_memory``:
        reset it after each read (see the module's doc)."""
        if log_every < 1 or warmup_steps < 1:
            raise ValueError("log_every and warmup_steps must be at least 1")
        self.log_every = log_every
        self.warmup_steps = warmup_steps
        self.all_reduce_mean = all_reduce_mean
        self.process_group = process_group
        self.memory, self.reset_peak_memory = memory, reset_peak_memory
        self.flops_per_step, self.flops_source = self._known_flops(flops_per_step, model, sidecar)
        choice = resolve_peak(
            None if (peak_tflops or device_name) else _device_props(),
            (),
            dtype,
            AnalysisOptions(peak_tflops=peak_tflops, device_name=device_name, tf32=tf32),
        )
        self.peak_flops: float | None = choice.peak_flops
        self.peak_source = choice.source
        self.timer: StepTimer = timer if timer is not None else self._default_timer()
        self._writer, self._owns_writer = self._open_writer(writer)  # last: nothing is created on a bad argument
        self.steps_done = 0  # step() calls
        self._resolved = start_step + warmup_steps  # the global step of the last step whose time is known
        self._closed = False
        self.logs: list[MonitorLog] = []
        self._counter: Any = None

    # ------------------------------------------------------------------ set-up

    @staticmethod
    def _open_writer(writer: Any) -> tuple[Any, bool]:
        if isinstance(writer, str):
            from ..scalars.tbevents import ScalarWriter

            return ScalarWriter(writer), True
        if writer is not None and not callable(getattr(writer, "add_scalar", None)):
            raise TypeError("writer must have add_scalar(tag, value, global_step), or be a directory")
        return writer, False

    @staticmethod
    def _known_flops(
        flops: float | None, model: ModelDims | Mapping[str, Any] | None, sidecar: str | None
    ) -> tuple[float | None, str | None]:
        if flops is not None:
            return float(flops), "flops_per_step"
        if model is not None:
            dims = model if isinstance(model, ModelDims) else ModelDims(**dict(model))
            value = dims.flops_per_step()
            if value is None:
                raise ValueError("model dims need tokens_per_step (or batch_size and seq_len)")
            return value, "6N + 12·L·H·Q·T (PaLM) from model dims"
        if sidecar is not None:
            found = load_sidecar(Location.parse(sidecar))  # the caller's text: parsed here, once
            value = found[0].model_flops_per_step() if found else None
            if value is None:
                raise ValueError(f"{sidecar}: no {SIDECAR_NAME} with FLOPs per step")
            return value, f"sidecar {found[1] if found else sidecar}"
        return None, None

    @staticmethod
    def _default_timer() -> StepTimer:
        import torch

        return CudaEventTimer() if torch.cuda.is_available() else WallClockTimer()

    def count_flops(self, step_fn: Callable[[], Any]) -> float:
        """Run ``step_fn`` once under ``FlopCounterMode`` and use its count (the call is not timed)."""
        from .record import count_step_flops

        self.flops_per_step, self.flops_source = float(count_step_flops(step_fn)), "FlopCounterMode (count_flops)"
        return self.flops_per_step

    def __enter__(self) -> MfuMonitor:
        if self.flops_per_step is None:  # count the first step of the block
            from torch.utils.flop_counter import FlopCounterMode

            self._counter = FlopCounterMode(display=False)
            self._counter.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_counting()
        self.close()

    def _stop_counting(self) -> None:
        counter, self._counter = self._counter, None
        if counter is not None:
            counter.__exit__(None, None, None)
            total = float(counter.get_total_flops())
            if total > 0:
                self.flops_per_step, self.flops_source = total, "FlopCounterMode (first step)"

    # ------------------------------------------------------------------ the loop

    def step(self) -> MonitorLog | None:
        """Call at the end of every training step. Returns the log written, if any."""
        if self._counter is not None:
            self._stop_counting()
        self.steps_done += 1
        if self.steps_done >= self.warmup_steps:
            self.timer.mark()
        if self.steps_done % self.log_every == 0:
            return self.log(self.timer.ready())
        return None

    def log(self, durations_us: list[float]) -> MonitorLog | None:
        """Log a window of step times (µs); with ``all_reduce_mean`` every rank must call it."""
        entry = self._window(durations_us)
        if self.all_reduce_mean:
            entry = self._reduce(entry)
        if entry is None:
            return None
        if self.memory:
            entry = dataclasses.replace(entry, max_memory_allocated_bytes=_max_memory_allocated(self.reset_peak_memory))
        self.logs.append(entry)
        if self._writer is not None:
            for key in (
                "mfu",
                "achieved_tflops",
                "step_time_us",
                "mfu_mean_over_ranks",
                "step_time_us_mean_over_ranks",
                "max_memory_allocated_bytes",
            ):
                value = getattr(entry, key)
                if value is not None and math.isfinite(value):
                    self._writer.add_scalar(PREFIX + key, value, entry.step)
        return entry

    def _window(self, durations_us: list[float]) -> MonitorLog | None:
        if not durations_us:
            return None
        self._resolved += len(durations_us)
        total_us = float(sum(durations_us))
        # the window's FLOPs over its time, as the trace's summary.mfu aggregates its steps
        flops = self.flops_per_step * len(durations_us) if self.flops_per_step else None
        rate = flop_rate(flops, total_us)
        return MonitorLog(
            step=self._resolved,
            steps=len(durations_us),
            step_time_us=total_us / len(durations_us),
            achieved_tflops=None if rate is None else rate / 1e12,
            mfu=mfu_for(flops, total_us, self.peak_flops),
        )

    def _reduce(self, entry: MonitorLog | None) -> MonitorLog | None:
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return entry
        group = self.process_group
        device = (
            torch.device("cuda", torch.cuda.current_device())
            if "nccl" in str(dist.get_backend(group))
            else torch.device("cpu")
        )
        mfu = entry.mfu if entry is not None else None
        values = [
            mfu if mfu is not None else 0.0,
            1.0 if mfu is not None else 0.0,
            entry.step_time_us if entry is not None else 0.0,
            1.0 if entry is not None else 0.0,
        ]
        t = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
        mfu_sum, mfu_n, time_sum, time_n = t.tolist()  # the one host sync, at log time only
        if entry is None:
            return None
        return dataclasses.replace(
            entry,
            mfu_mean_over_ranks=mfu_sum / mfu_n if mfu_n else None,
            step_time_us_mean_over_ranks=time_sum / time_n if time_n else None,
        )

    def close(self) -> None:
        """Wait for the GPU once, log the steps not logged yet, and flush the writer."""
        if self._closed:
            return
        self._closed = True
        self._stop_counting()
        rest = self.timer.drain()
        if rest or self.all_reduce_mean:
            self.log(rest)
        if self._writer is not None:
            if self._owns_writer:
                self._writer.close()
            elif callable(getattr(self._writer, "flush", None)):
                self._writer.flush()
