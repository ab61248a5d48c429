"""The streams an archive's members are read through (archive.py): a shared file object
with a position per reader, a .tar.gz inflated forward from its start or from an index
point, the bytes of one tar member, and a member that may never yield more than it
declares nor raise anything but a one-line ``TraceError``.

A .tar.gz has no index of its own, and zlib cannot jump into the middle of a deflate
stream. So the listing, which inflates the archive once, keeps an index point
(``Checkpoint``: a copy of the decompressor, about 40 KB) at member headers at least
``spacing`` inflated bytes apart, at most ``MAX_CHECKPOINTS`` of them (the spacing
doubles when they would be more). Opening a member resumes from the last point before
it, so reading every member costs the archive's size plus at most ``spacing`` per
member, not the sum of every member's offset (that was quadratic: 400 tiny members
behind 60 MiB of zeros cost 24 GiB of inflation).
"""

from __future__ import annotations

import bisect
import io
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from ...core.errors import TraceError
from ...core.escape import escape_surrogates, one_line
from ..limits import RATIO_GRACE_BYTES, KiB, Limits, MiB, cap_error, format_size

READ_BYTES = 64 * KiB  # compressed bytes read at a time
SKIP_BYTES = 1 * MiB  # inflated bytes held at a time while seeking forward
MIN_SPACING = 64 * KiB
MAX_CHECKPOINTS = 512  # about 20 MB of decompressor copies at most, per archive
_GZIP = 16 + zlib.MAX_WBITS


class Locked(io.RawIOBase):
    """A view of a shared file object with its own position (reads seek under the lock)."""

    def __init__(self, raw: IO[bytes], lock: threading.Lock) -> None:
        super().__init__()
        self._raw, self._lock, self._pos = raw, lock, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with self._lock:
            self._raw.seek(self._pos)
            data = self._raw.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            with self._lock:
                pos += self._raw.seek(0, io.SEEK_END)
        elif whence == io.SEEK_CUR:
            pos += self._pos
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos

    def peek_exact(self, n: int) -> bytes:
        """The next ``n`` bytes, leaving the position where it is."""
        pos = self._pos
        data = self.read(n) or b""
        self._pos = pos
        return data


@dataclass(frozen=True)
class Checkpoint:
    out: int  # inflated offset
    raw: int  # offset in the gzip file of the first byte zlib has not consumed
    z: Any  # the decompressor there (copied again on each resume, so the point stays reusable)
    fresh: bool  # between two gzip members: zero padding may come first


class Inflater:
    """A gzip file's inflated bytes, read forward from its start or from a ``Checkpoint``.
    Concatenated gzip members and zero padding after a member are read as gzip reads them;
    the gzip trailers (CRC, length) are checked by zlib. ``limits`` (the listing's) holds the
    inflated bytes to ``max_archive_bytes`` and their ratio to ``max_compression_ratio`` on
    the way; a resumed stream re-reads bytes the listing checked already."""

    def __init__(self, raw: IO[bytes], label: str, limits: Limits | None = None, at: Checkpoint | None = None) -> None:
        at = at or Checkpoint(0, 0, zlib.decompressobj(_GZIP), True)
        self._raw, self._label, self._limits = raw, label, limits
        raw.seek(at.raw)
        self._z, self._fresh = at.z.copy(), at.fresh
        self._pending = b""  # compressed bytes read, not yet consumed by zlib
        self._raw_pos = at.raw  # offset in the gzip file just past what was read
        self._out = at.out
        self._back = b""  # bytes given back by peek_exact, read again first

    def checkpoint(self) -> Checkpoint:
        assert not self._back
        return Checkpoint(self._out, self._raw_pos - len(self._pending), self._z.copy(), self._fresh)

    def tell(self) -> int:
        return self._out - len(self._back)

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            raise io.UnsupportedOperation("an archive's stream is read in bounded pieces")
        head, self._back = self._back[:n], self._back[n:]
        return head + self._inflate(n - len(head)) if n > len(head) else head

    def peek_exact(self, n: int) -> bytes:
        data = self.read(n)
        self._back = data + self._back
        return data

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            pos += self.tell()
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a .tar.gz is read forward")
        if pos < self.tell():
            raise io.UnsupportedOperation("a .tar.gz is read forward: its tar headers go backwards")
        while self.tell() < pos and self.read(min(pos - self.tell(), SKIP_BYTES)):
            pass
        return self.tell()

    def _inflate(self, want: int) -> bytes:
        parts = []
        while want > 0:
            if not self._pending:
                self._pending = self._raw.read(READ_BYTES)
                self._raw_pos += len(self._pending)
                if not self._pending:
                    if self._fresh:
                        break  # the end, after a whole gzip member
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
            if self._fresh:
                self._pending = self._pending.lstrip(b"\0")  # padding after a member, as gzip allows
                if not self._pending:
                    continue
                self._fresh = False
            data = self._z.decompress(self._pending, want)
            if self._z.eof:  # a gzip member ends; another may follow
                self._pending = self._z.unused_data
                self._z, self._fresh = zlib.decompressobj(_GZIP), True
            else:
                self._pending = self._z.unconsumed_tail
            self._out += len(data)
            want -= len(data)
            parts.append(data)
            self._check()
        return b"".join(parts)

    def _check(self) -> None:
        lim = self._limits
        if lim is None:
            return
        if self._out > lim.max_archive_bytes:
            detail = f"more than {format_size(lim.max_archive_bytes)} decompressed"
            raise cap_error(self._label, "max_archive_bytes", detail)
        if self._out > RATIO_GRACE_BYTES:
            ratio = self._out / max(1, self._raw_pos - len(self._pending))
            if ratio > lim.max_compression_ratio:
                raise cap_error(self._label, "max_compression_ratio", f"gzip expands {ratio:.0f}:1 (a gzip bomb?)")

    def close(self) -> None:
        self._raw.close()


class Checkpoints:
    """The index points of one .tar.gz, taken at member headers during its listing."""

    def __init__(self) -> None:
        self.points = [Checkpoint(0, 0, zlib.decompressobj(_GZIP), True)]
        self.spacing = MIN_SPACING

    def offer(self, stream: Inflater) -> None:
        """Keep a point here (a member's first header) if it is far enough from the last."""
        if stream.tell() - self.points[-1].out < self.spacing:
            return
        self.points.append(stream.checkpoint())
        while len(self.points) > MAX_CHECKPOINTS:
            self.spacing *= 2
            kept = [self.points[0]]
            for p in self.points[1:]:
                if p.out - kept[-1].out >= self.spacing:
                    kept.append(p)
            self.points = kept

    def before(self, offset: int) -> Checkpoint:
        """The last point at or before inflated ``offset``."""
        i = bisect.bisect_right([p.out for p in self.points], offset) - 1
        return self.points[max(0, i)]


class Slice(io.RawIOBase):
    """The next ``size`` bytes of a stream."""

    def __init__(self, stream: Any, size: int) -> None:
        super().__init__()
        self._stream, self._left = stream, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self._left)
        data = self._stream.read(want) if want else b""
        memoryview(buffer)[: len(data)] = data
        self._left -= len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


class Counted(io.RawIOBase):
    """A member's stream that never yields more than the member declared, tells the bytes
    read (the decoder's gzip ratio check of a ``.json.gz`` member divides by them), reports
    what the read has cost (``charge``: bytes inflated, those skipped to reach the member
    included), and raises nothing but a one-line ``TraceError`` (``error`` words it; by
    default ``what`` names the member: ``member 'x' of team.zip cannot be read (...)``)."""

    def __init__(
        self,
        inner: IO[bytes],
        size: int,
        where: str,
        what: str,
        charge: Callable[[int], None],
        skipped: int = 0,
        error: Callable[[Exception], TraceError] | None = None,
    ) -> None:
        super().__init__()
        self._inner, self._size, self._where, self._what = inner, size, where, what
        self._charge, self._skipped = charge, skipped
        self._error = error or (lambda exc: member_error(where, what, exc))
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._inner.read(len(buffer))
        except TraceError:
            raise
        except Exception as exc:  # noqa: BLE001 - zlib, bz2, lzma, zipfile, a remote read: all one line
            raise self._error(exc) from None
        self._read += len(data)
        if self._read > self._size:
            raise TraceError(self._where, f"{self._what} holds more bytes than it declares: refused")
        self._charge(self._skipped + self._read)
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        return self._read

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            except Exception:  # noqa: BLE001 - closing what was read can only fail the way reading did
                pass
        super().close()


def member_error(where: str, what: str, exc: BaseException) -> TraceError:
    """An exception met reading a member, as one line naming it (``what``)."""
    return TraceError(where, f"{what} cannot be read ({described(exc)})")


def described(exc: BaseException) -> str:
    """``Type: message`` in one line (``zlib.error``, not a bare ``error``)."""
    name = type(exc).__name__
    if name == "error":
        name = f"{type(exc).__module__}.error"
    text = one_line(escape_surrogates(str(exc)))
    return f"{name}: {text}" if text else name
