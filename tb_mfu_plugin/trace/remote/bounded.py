"""Calls to a remote store held to a deadline, however the store answers.

A store's client may wait for ever on a server that sends its answer a byte at a time
(aiohttp's read timeout counts the time between bytes, not the whole answer), and fsspec's
random-access files read without any deadline. So each call that may wait runs on a daemon
thread, and the caller waits for it only until the deadline: then it gets the deadline's
one-line error, and the call left waiting holds no thread that the process waits for at exit.

:func:`within` is one such call. :class:`BoundedFile` is a random-access remote file (an
archive's, whose index is at its end) whose every read is one, under the deadline in effect
where it is read: :func:`reads_within` sets it, the listing's while an archive is listed and a
member's ``max_seconds`` while that member is read (``archive.reader``), so that one shared
file serves both. A read that ran past its deadline may still move the file's position, so
the file refuses every read after it (``broken``): its archive is opened afresh for the next.
"""

from __future__ import annotations

import io
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, Any, TypeVar, cast

from ...core.errors import TraceError
from ..limits import DEFAULT_LIMITS, Deadline

T = TypeVar("T")
# How often a caller waiting for a call looks at its deadline.
POLL_S = 0.25

_deadline: ContextVar[Deadline | None] = ContextVar("tb_mfu_read_deadline", default=None)


def wait_s(deadline: Deadline) -> float:
    """Seconds to wait for a call before looking at the deadline again (its error once it passed)."""
    deadline.check()
    return max(0.01, min(POLL_S, deadline.end - time.monotonic()))


def within(deadline: Deadline, fn: Callable[[], T]) -> T:
    """``fn()`` (a call to a store) on a daemon thread, waited for until ``deadline``."""
    box: queue.Queue[tuple[bool, Any]] = queue.Queue(1)

    def run() -> None:
        try:
            box.put((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            box.put((False, exc))

    threading.Thread(target=run, name="mfu-remote-call", daemon=True).start()
    while True:
        try:
            ok, value = box.get(timeout=wait_s(deadline))
            break
        except queue.Empty:
            continue
    if not ok:
        raise value
    return cast(T, value)


@contextmanager
def reads_within(deadline: Deadline | None) -> Iterator[None]:
    """Every read of a ``BoundedFile`` in this block (on this thread) is held to ``deadline``."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def current_deadline(url: str) -> Deadline:
    """The deadline in effect here (``reads_within``), else ``max_seconds`` from now."""
    return _deadline.get() or Deadline(url, DEFAULT_LIMITS.max_seconds)


class Scoped(io.RawIOBase):
    """A stream whose reads run within ``deadline`` (those of the ``BoundedFile`` under it)."""

    def __init__(self, stream: IO[bytes], deadline: Deadline | None) -> None:
        super().__init__()
        self._stream, self._scope = stream, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with reads_within(self._scope):
            return cast(int, self._stream.readinto(buffer))  # type: ignore[attr-defined]

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


class BoundedFile(io.RawIOBase):
    """A remote file for random access, each read within the deadline in effect (else the
    default ``max_seconds``); after a read that ran past it, every read is refused."""

    def __init__(self, f: IO[bytes], url: str) -> None:
        super().__init__()
        self._f, self.url = f, url
        self.broken: str | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        return self._f.seek(pos, whence)  # fsspec's files seek without a request

    def tell(self) -> int:
        return self._f.tell()

    def readinto(self, buffer: Any) -> int:
        if self.broken is not None:
            raise TraceError(self.url, self.broken)
        view = memoryview(buffer).cast("B")
        deadline = current_deadline(self.url)
        n = len(view)
        try:
            data = within(deadline, lambda: self._f.read(n))
        except TraceError as exc:
            self.broken = f"an earlier read of it ran past its deadline ({exc.reason})"
            raise
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._f.close()
            except Exception:  # noqa: BLE001 - a read may still hold it: closing is all we ask
                pass
        super().close()


def is_broken(f: object) -> bool:
    """Whether ``f`` (a ``BoundedFile``, or a buffer over one) refuses reads after a late one."""
    raw = getattr(f, "raw", f)
    return isinstance(raw, BoundedFile) and raw.broken is not None
