"""Listing a zip with ``zipfile`` when a member's name is not what its flags say (archive.py
uses it).

A zip name is UTF-8 when the entry's flag bit 11 is set, and code page 437 otherwise (as
the zip specification says, and ``zipfile`` reads it: every byte string is valid cp437, so
such a name is always read, as written). ``zipfile`` decodes every name of the central
directory while it opens the archive, strictly: one entry flagged UTF-8 whose name is not
valid UTF-8 made the whole archive unreadable (``UnicodeDecodeError``), and so every run
of the listing disappeared. ``open_zip`` opens such an archive again through a view that
clears that flag on the lying entries only; they are then refused by name (their bytes
kept as surrogates, shown as ``\\xNN``), and every other member reads as before.
"""

from __future__ import annotations

import io
import stat
import struct
import zipfile
from typing import IO, Any, cast

_CENTRAL = b"PK\x01\x02"
_CENTRAL_SIZE = 46
_UTF8 = 0x800


_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def entry_refusal(info: zipfile.ZipInfo, lying: bool) -> str | None:
    """Why an entry is never read, from what its headers say it is; None for a file we read."""
    # Unix attributes say what the entry is; writers that set no type bits (Python's own
    # zipfile.writestr) mean a regular file.
    fmt = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
    if lying:
        return "has a name that is not UTF-8, though its entry says it is"
    if fmt == stat.S_IFLNK:
        return "is a symbolic link"
    if fmt not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "is a special file"
    if info.flag_bits & 0x41:  # bit 0: encrypted; bit 6: strong encryption
        return "is encrypted"
    if info.compress_type not in _METHODS:
        return f"is compressed by method {info.compress_type}, which we do not read"
    return None


def open_zip(raw: IO[bytes]) -> tuple[zipfile.ZipFile, dict[str, str]]:
    """The zip, and for each entry whose name lies about being UTF-8: its name as ``zipfile``
    lists it (read as cp437) -> its bytes as a surrogate-escaped string."""
    try:
        return zipfile.ZipFile(raw), {}
    except UnicodeDecodeError:
        pass
    view = _FlagsCleared(raw)
    return zipfile.ZipFile(cast(IO[bytes], view)), view.renamed


class _FlagsCleared(io.RawIOBase):
    """``raw`` as read by ``zipfile``, except that a read of the central directory (one read
    that starts at its first entry) comes back with flag bit 11 cleared on each entry whose
    name is not valid UTF-8."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw
        self.renamed: dict[str, str] = {}

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        return self._raw.seek(pos, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def read(self, n: int | None = -1) -> bytes:
        data = self._raw.read(-1 if n is None else n)
        return self._clear_lies(data) if data[:4] == _CENTRAL else data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def _clear_lies(self, data: bytes) -> bytes:
        out = bytearray(data)
        pos = 0
        while pos + _CENTRAL_SIZE <= len(out) and out[pos : pos + 4] == _CENTRAL:
            (flags,) = struct.unpack_from("<H", out, pos + 8)
            n_name, n_extra, n_comment = struct.unpack_from("<3H", out, pos + 28)
            name = bytes(out[pos + _CENTRAL_SIZE : pos + _CENTRAL_SIZE + n_name])
            if flags & _UTF8:
                try:
                    name.decode("utf-8")
                except UnicodeDecodeError:
                    struct.pack_into("<H", out, pos + 8, flags & ~_UTF8)
                    self.renamed[name.decode("cp437")] = name.decode("utf-8", "surrogateescape")
            pos += _CENTRAL_SIZE + n_name + n_extra + n_comment
        return bytes(out)
