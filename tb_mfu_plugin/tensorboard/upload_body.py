"""One upload request's body: counted against the cap as it is read, and timed.

A body may not hold its upload's slot by arriving slowly. Three deadlines, from the
upload area's ``idle_s``, ``stall_s`` and ``min_rate``:

- *idle*: no byte for ``idle_s``. The server's socket has that timeout while the
  body is read (``share``), so a read that waits longer raises ``TimeoutError``.
- *stall at the start*: in its first ``idle_s``, no byte for ``stall_s`` (a few
  seconds). A browser sends a body as fast as it can; a client that sends 20 bytes and
  then nothing would otherwise hold its slot for the whole ``idle_s``.
- *rate*: once its first ``idle_s`` have passed, the body must have brought
  ``min_rate`` bytes for every second since. A buffered read waits for all the
  bytes it asked for, so a body that trickles a byte at a time would keep one
  read waiting for ever without tripping the socket's timeout: a ``Watchdog``
  thread checks the rule on every body being read and, when one is late, calls
  its ``on_stall`` (``share`` shuts the socket's reading side, which ends the
  read at once; the answer, a 408, can still be written).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from ..analysis.fmt import setting
from ..trace.limits import format_size
from .upload_files import shown

READ_BYTES = 64 * 1024  # one read of the body: the rate is checked at least this often


class Body(Protocol):
    def read(self, size: int, /) -> bytes: ...


class UploadError(Exception):
    """An upload refused or failed: an HTTP status and one line for the user."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class Metered:
    """A body read through ``read``; ``count(n)`` is told of every chunk before it is kept
    (it raises the 413 of a cap), and the deadlines above are checked as it goes."""

    def __init__(
        self,
        body: Body,
        name: str,
        count: Callable[[int], None],
        idle_s: float,
        min_rate: float,
        stall_s: float | None = None,
    ) -> None:
        self.body, self.name, self.count = body, name, count
        self.idle_s, self.min_rate = idle_s, min_rate
        self.stall_s = idle_s if stall_s is None else stall_s
        self.counted = 0
        self.started = self.last = time.monotonic()
        self.stalled: str | None = None  # why the watchdog ended it

    def overdue(self, now: float) -> str | None:
        """Why the body is too slow at ``now`` (it stalled at its start, or it is under the
        least rate), or None."""
        if now - self.started < self.idle_s and now - self.last > self.stall_s:
            return f"no byte arrived for {setting(self.stall_s, 's')} at its start"
        late = now - self.started - self.idle_s
        if late > 0 and self.counted < self.min_rate * late:
            return f"it arrives slower than {format_size(int(self.min_rate))}/s"
        return None

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes (fewer only at the end of the body)."""
        data = bytearray()
        while len(data) < size:
            try:
                chunk = self.body.read(min(size - len(data), READ_BYTES))
            except TimeoutError:
                raise UploadError(408, self._dropped(f"no byte arrived for {setting(self.idle_s, 's')}")) from None
            except ConnectionError:
                if self.stalled:
                    raise UploadError(408, self._dropped(self.stalled)) from None
                raise UploadError(400, f"{shown(self.name)}: the connection ended after {self.counted} bytes") from None
            if self.stalled:  # the watchdog ended the read: what it returned is not the body's end
                raise UploadError(408, self._dropped(self.stalled))
            if not chunk:
                break
            self.last = time.monotonic()
            self.counted += len(chunk)
            self.count(len(chunk))
            why = self.overdue(time.monotonic())
            if why:
                raise UploadError(408, self._dropped(why))
            data += chunk
        return bytes(data)

    def _dropped(self, why: str) -> str:
        return f"{shown(self.name)}: upload dropped: {why}"


class Watchdog:
    """One daemon thread, running while bodies are read, that ends those too slow to keep up."""

    def __init__(self, tick_s: float) -> None:
        self.tick_s = tick_s
        self._lock = threading.Lock()
        self._watched: dict[Metered, Callable[[], None]] = {}
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, body: Metered, on_stall: Callable[[], None] | None) -> Iterator[Metered]:
        if on_stall is None:  # nothing could end a waiting read: the checks in read() still hold
            yield body
            return
        with self._lock:
            self._watched[body] = on_stall
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mfu-upload-watchdog", daemon=True)
                self._thread.start()
        try:
            yield body
        finally:
            with self._lock:
                self._watched.pop(body, None)

    def _run(self) -> None:
        while True:
            time.sleep(self.tick_s)
            now = time.monotonic()
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
                late = [(b, stall) for b, stall in self._watched.items() if not b.stalled and b.overdue(now)]
                for b, _ in late:
                    b.stalled = b.overdue(now)
            for _, stall in late:
                try:
                    stall()
                except OSError:  # the connection is gone already: its read ends by itself
                    pass
