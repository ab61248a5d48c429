"""The streams an archive's members are read through (archive.py): a shared file object
with a position per reader, a .tar.gz inflated under the archive caps, the bytes of one
tar member, and a member that may never yield more than it declares."""

from __future__ import annotations

import gzip
import io
import threading
from typing import IO, TYPE_CHECKING, Any

from ..errors import TraceError
from .limits import RATIO_GRACE_BYTES, Limits, cap_error, format_size

if TYPE_CHECKING:
    from .archive import ArchiveMember


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


class Inflated:
    """A .tar.gz's inflated bytes, seekable forward, held to the archive caps as they come."""

    def __init__(self, raw: IO[bytes], label: str, limits: Limits) -> None:
        self._raw, self._label, self._limits = raw, label, limits
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")

    def read(self, n: int = -1) -> bytes:
        data = self._gz.read(n)
        self._check()
        return data

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            pos += self._gz.tell()
        while self._gz.tell() < pos:  # inflate forward in steps, so the caps apply on the way
            step = min(pos - self._gz.tell(), 8 << 20)
            if not self._gz.read(step):
                break
            self._check()
        if pos < self._gz.tell():
            self._gz.seek(pos)
        return self._gz.tell()

    def tell(self) -> int:
        return self._gz.tell()

    def _check(self) -> None:
        done, lim = self._gz.tell(), self._limits
        if done > lim.max_archive_bytes:
            detail = f"more than {format_size(lim.max_archive_bytes)} decompressed"
            raise cap_error(self._label, "max_archive_bytes", detail)
        if done > RATIO_GRACE_BYTES:
            ratio = done / max(1, self._raw.tell())
            if ratio > lim.max_compression_ratio:
                detail = f"gzip expands {ratio:.0f}:1 (a gzip bomb?)"
                raise cap_error(self._label, "max_compression_ratio", detail)

    def close(self) -> None:
        self._gz.close()
        self._raw.close()


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
    """A member's stream that never yields more than the member declared, and tells the
    bytes read (the decoder's gzip ratio check of a ``.json.gz`` member divides by them)."""

    def __init__(self, inner: IO[bytes], member: ArchiveMember, where: str, limits: Limits) -> None:
        super().__init__()
        self._inner, self._member, self._where, self._limits = inner, member, where, limits
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        self._read += len(data)
        if self._read > self._member.size:
            raise TraceError(self._where, f"member {self._member.name!r} holds more bytes than it declares: refused")
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        return self._read

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
        super().close()
