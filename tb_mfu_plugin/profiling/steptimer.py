"""Step timers for ``MfuMonitor``: mark the end of each step, read the step times later.

``CudaEventTimer`` records one CUDA event per step on the current stream and never
waits for the GPU: ``ready()`` reads only the events the GPU has already passed
(``Event.query()``), so the host keeps running ahead of the GPU as it does without
the monitor. ``drain()`` waits once, at the end. ``WallClockTimer`` is the same
interface over ``time.perf_counter`` (CPU training, and the tests on CPU torch).

Step k's time is the interval between the marks of steps k-1 and k: on the GPU's
timeline for events (idle gaps included, so it is the step time the GPU sees), on
the host's for the wall clock.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol


class StepTimer(Protocol):
    def mark(self) -> None:
        """The end of a step (and the start of the next)."""

    def ready(self) -> list[float]:
        """Times (µs) of the steps resolved since the last call, oldest first; never blocks."""

    def drain(self) -> list[float]:
        """Like ``ready`` but waits for every marked step (call once, at the end)."""


class WallClockTimer:
    def __init__(self, clock: Any = time.perf_counter) -> None:
        self._clock = clock
        self._last: float | None = None
        self._done: list[float] = []

    def mark(self) -> None:
        now = float(self._clock())
        if self._last is not None:
            self._done.append((now - self._last) * 1e6)
        self._last = now

    def ready(self) -> list[float]:
        out, self._done = self._done, []
        return out

    def drain(self) -> list[float]:
        return self.ready()


class CudaEventTimer:
    """CUDA events recorded on ``stream`` (default: the current stream at each mark).

    Events are reused once read, so a long run creates only as many as the GPU lags
    behind the host by, plus the steps between two reads.
    """

    def __init__(self, stream: Any = None, new_event: Callable[[], Any] | None = None) -> None:
        if new_event is None:
            import torch

            def new_event() -> Any:
                return torch.cuda.Event(enable_timing=True)

        self._new_event = new_event
        self._stream = stream
        self._pending: deque[Any] = deque()
        self._free: list[Any] = []

    def mark(self) -> None:
        ev = self._free.pop() if self._free else self._new_event()
        ev.record(self._stream)  # None: the current stream
        self._pending.append(ev)

    def _read(self, wait: bool) -> list[float]:
        pending, out = self._pending, []
        if wait and pending:
            pending[-1].synchronize()
        # events on one stream complete in order: once the later one is done, both are
        while len(pending) >= 2 and pending[1].query():
            start = pending.popleft()
            out.append(float(start.elapsed_time(pending[0])) * 1e3)  # ms -> µs
            self._free.append(start)
        return out

    def ready(self) -> list[float]:
        return self._read(wait=False)

    def drain(self) -> list[float]:
        return self._read(wait=True)
