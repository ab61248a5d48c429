"""Record traces that are ready for MFU (optional: needs ``torch``).

::

    from tb_mfu_plugin.profiling import mfu_profile

    with mfu_profile("./logs/run_a") as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

It records CPU and (when available) CUDA activity with ``record_shapes=True``
(FLOPs come from the shapes), writes gzipped traces with
``tensorboard_trace_handler``, uses ``schedule(wait=1, warmup=1, active=3)``, and
writes the ``tb_mfu.json`` sidecar with the model FLOPs per step, from the first
of these that is given:

1. ``flops_per_step=`` (a number you trust);
2. ``step_fn=``: a callable running one step, run once under ``FlopCounterMode``
   *before* profiling (it really runs: pass a step without side effects you mind);
3. ``model=``: ``sidecar.ModelDims`` (or a dict of them), the PaLM formula;
4. otherwise the first step inside the ``with`` block is counted with
   ``FlopCounterMode``. It is a *wait* step of the schedule, never recorded, so
   the counter's overhead does not reach the trace.

``MfuMonitor`` (``profiling/monitor.py``) logs MFU every N steps of the whole
run, with no profiler. torch is imported inside the functions, so importing this
module never needs it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..trace.locate.discover import SIDECAR_NAME
from ..trace.locate.sidecar import ModelDims, Sidecar, encode_sidecar


def count_step_flops(step_fn: Callable[[], Any]) -> int:
    """FLOPs of one call of ``step_fn`` as ``torch.utils.flop_counter.FlopCounterMode`` counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        step_fn()
    return int(fc.get_total_flops())


def _tf32_enabled() -> bool:
    import torch

    try:
        if torch.get_float32_matmul_precision() != "highest":
            return True
    except AttributeError:  # pragma: no cover - very old torch
        pass
    return bool(torch.backends.cuda.matmul.allow_tf32)


def _rank_info() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def write_sidecar(run_dir: str, sidecar: Sidecar, worker_name: str | None = None) -> str:
    """Write ``tb_mfu.json`` (or ``<worker>.tb_mfu.json``) atomically into ``run_dir``."""
    os.makedirs(run_dir, exist_ok=True)
    name = f"{worker_name}.{SIDECAR_NAME}" if worker_name else SIDECAR_NAME
    path = os.path.join(run_dir, name)
    fd, tmp = tempfile.mkstemp(prefix=".tb_mfu.", dir=run_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(encode_sidecar(sidecar))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; logdirs are shared
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


class MfuProfiler:
    """The object ``mfu_profile`` yields: call ``step()`` once per training step.

    Anything else is forwarded to the underlying ``torch.profiler.profile``.
    """

    def __init__(self, profiler: Any, logdir: str, worker_name: str | None, write: bool, tf32: bool) -> None:
        self.profiler = profiler
        self.logdir = logdir
        self.worker_name = worker_name
        self.flops_per_step: float | None = None
        self.flops_source: str | None = None
        self.sidecar_path: str | None = None
        self._write = write
        self._tf32 = tf32
        self._counter: Any = None
        self._steps = 0

    def _start_counting(self) -> None:
        from torch.utils.flop_counter import FlopCounterMode

        self._counter = FlopCounterMode(display=False)
        self._counter.__enter__()

    def _stop_counting(self) -> None:
        if self._counter is None:
            return
        counter, self._counter = self._counter, None
        counter.__exit__(None, None, None)
        total = counter.get_total_flops()
        if total > 0:
            self._set(float(total), "FlopCounterMode (first step, not recorded)")

    def _set(self, flops: float | None, source: str, model: ModelDims | None = None) -> None:
        self.flops_per_step = flops
        self.flops_source = source
        if self._write and (flops or model is not None):
            sc = Sidecar(
                flops_per_step=flops if model is None else None,
                model=model,
                tf32=self._tf32,
                source=source,
                note="FLOPs per step of one GPU (one trace), written by tb_mfu_plugin.profiling",
            )
            self.sidecar_path = write_sidecar(self.logdir, sc, self.worker_name)

    def step(self) -> None:
        if self._counter is not None:
            self._stop_counting()
        self._steps += 1
        self.profiler.step()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.profiler, name)


def _activities(cuda: bool | None) -> list[Any]:
    """CPU always; CUDA when asked, or when ``cuda=None`` and a GPU is there."""
    import torch
    from torch.profiler import ProfilerActivity

    if cuda is None:
        cuda = torch.cuda.is_available()
    return [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]


def _model_dims(model: ModelDims | Mapping[str, Any] | None) -> ModelDims | None:
    if model is None:
        return None
    dims = model if isinstance(model, ModelDims) else ModelDims(**dict(model))
    if dims.tokens is None:
        raise ValueError("model dims need tokens_per_step (or batch_size and seq_len)")
    return dims


def _given_flops(flops_per_step: float | None, step_fn: Callable[[], Any] | None) -> tuple[float, str] | None:
    """FLOPs per step known before profiling starts, and where they come from."""
    if flops_per_step is not None:
        return float(flops_per_step), "user-supplied flops_per_step"
    if step_fn is not None:
        return float(count_step_flops(step_fn)), "FlopCounterMode (step_fn, before profiling)"
    return None


@contextmanager
def mfu_profile(
    logdir: str,
    *,
    flops_per_step: float | None = None,
    step_fn: Callable[[], Any] | None = None,
    model: ModelDims | Mapping[str, Any] | None = None,
    worker_name: str | None = None,
    wait: int = 1,
    warmup: int = 1,
    active: int = 3,
    repeat: int = 1,
    cuda: bool | None = None,
    use_gzip: bool = True,
    count_first_step: bool = True,
    **profile_kwargs: Any,
) -> Iterator[MfuProfiler]:
    """Profile with MFU-ready settings into ``logdir`` and write its ``tb_mfu.json``.

    ``cuda=None`` records CUDA activity when ``torch.cuda.is_available()``. Extra
    keyword arguments go to ``torch.profiler.profile`` (``with_stack=True``...).
    In a distributed job the sidecar is written by rank 0 only (ranks are assumed
    to do the same work), unless ``worker_name`` is given, in which case every rank
    writes ``<worker_name>.tb_mfu.json``.
    """
    from torch.profiler import profile, schedule, tensorboard_trace_handler

    rank, _ = _rank_info()
    write = worker_name is not None or rank == 0
    os.makedirs(logdir, exist_ok=True)
    dims = _model_dims(model)
    known = _given_flops(flops_per_step, step_fn)

    profile_kwargs.setdefault("record_shapes", True)
    prof = profile(
        activities=_activities(cuda),
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
        on_trace_ready=tensorboard_trace_handler(logdir, worker_name=worker_name, use_gzip=use_gzip),
        **profile_kwargs,
    )
    wrapper = MfuProfiler(prof, logdir, worker_name, write, _tf32_enabled())
    if known is not None:
        wrapper._set(*known)
    elif dims is not None:
        wrapper._set(dims.flops_per_step(), "6N + 12·L·H·Q·T (PaLM) from model dims", model=dims)
    elif count_first_step:
        if wait < 1:
            raise ValueError("count_first_step needs wait >= 1: the counted step must not be recorded")
        wrapper._start_counting()
    with prof:
        try:
            yield wrapper
        finally:
            wrapper._stop_counting()
