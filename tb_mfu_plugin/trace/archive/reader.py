"""A ``.zip`` or ``.tar(.gz)`` of a logdir, read in place: members listed and streamed,
never extracted onto disk.

API (the CLI, the tab's run discovery and the tab's upload all use it)::

    with Archive.open(Location.parse("team.zip")) as arc:  # a path, a URL, or a seekable file object
        for m in arc.traces():                    # members named like traces, in name order
            if m.refusal is None:
                with arc.open_member(m.name) as f:  # a binary stream of the member's bytes
                    ...

    # by location (by_location.py): listed once, kept a while
    open_member_location(Location.parse("zip://run_a/rank0.1.pt.trace.json.gz::team.zip"))

An archive comes from anyone, so it is checked before any member is read. A listing
over a cap is read up to it, and ``Archive.notes`` holds the one line that says what was
left out (the faces print it, as they print a remote listing's): the members after the
first ``Limits.max_archive_members``, or after those that declare
``Limits.max_archive_bytes`` of decompressed bytes; and, when its members declare more
than ``max_archive_ratio`` times the archive's own size (past a grace of 64 MiB: a bomb of
many members, each under the per-member grace, is still one bomb), the members that
inflate most, until the rest fits: first every member inflating more than
``max_compression_ratio`` (the per-member grace is spent once the archive is a bomb),
then the most compressed others. The good members beside a bomb are read. A
``.tar.gz`` is also held to ``max_archive_bytes`` and to ``max_compression_ratio`` while
it is inflated: over either, the whole archive is refused (``TraceError`` naming it), since
nothing after that point of the stream can be read. A *member* is refused, with a
one-line reason naming the archive and the member, when its name is absolute or climbs
out of the archive (zip-slip), is not valid UTF-8 though its zip entry says so, it is a
symbolic or hard link or a special file, it is encrypted or compressed by a method we
cannot read, its name appears twice, its tar header is too big or malformed
(archive_tar.py), it declares more than ``max_trace_bytes``, or it inflates more than
``max_compression_ratio`` to one. Refused members are listed (so that each shows its error) but never opened.
While members are read, the bytes inflated for them (the most one read of each
has cost, a .tar.gz's bytes skipped to reach it included) are held to
``max_archive_ratio`` as well: a member read past it is refused.

Whatever the archive holds, reading it raises nothing but ``TraceError``: an
exception of ``zipfile``, ``tarfile``, zlib, bz2 or lzma, or of name handling,
becomes one line naming the archive (and the member, when reading one).

A ``.tar.gz`` has no index: listing it inflates it once and keeps index points
(archive_streams.py), so that opening a member inflates it from the last point
before that member. A ``.zip`` (or a plain ``.tar``) seeks straight to the
member, also inside a bucket.
"""

from __future__ import annotations

import functools
import io
import re
import struct
import tarfile
import threading
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import IO, Any, cast

from ...core.errors import TraceError, TraceNotFound
from ...core.escape import escape_surrogates
from ..limits import (
    ARCHIVE_RATIO_GRACE_BYTES,
    DEFAULT_LIMITS,
    RATIO_GRACE_BYTES,
    Limits,
    cap_error,
    format_size,
)
from ..locate.discover import TRACE_FILE
from ..locate.files import open_regular
from ..locate.locations import Location
from ..remote.bounded import is_broken
from . import tar as archive_tar
from .streams import Checkpoints, Counted, Inflater, Locked, Slice, described, member_error
from .zip import entry_refusal, open_zip

_ABSOLUTE = re.compile(r"^([\\/]|[A-Za-z]:)")
# What a malformed archive raises from zipfile, tarfile, gzip/zlib and name handling
_FORMAT_ERRORS = (
    zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, UnicodeError, ValueError, struct.error,
    NotImplementedError, RecursionError, MemoryError, io.UnsupportedOperation,
)  # fmt: skip


@dataclass(frozen=True)
class ArchiveMember:
    name: str  # as stored in the archive (bytes that are not UTF-8 kept as surrogates)
    size: int  # decompressed bytes, as declared
    packed: int  # bytes in the archive
    refusal: str | None = None  # why it is never read; None for a readable member

    @property
    def is_trace(self) -> bool:
        return TRACE_FILE.match(self.name.rsplit("/", 1)[-1]) is not None


def _open_raw(location: Location) -> IO[bytes]:
    if location.is_url:
        from ..remote.remote import open_seekable

        return open_seekable(location)
    return open_regular(location.path, "archive")


def quoted(name: str) -> str:
    """A member name in a message: ``repr``, with the bytes that are not UTF-8 as ``\\xNN``."""
    return repr(name) if name == escape_surrogates(name) else f"'{escape_surrogates(name)}'"


class Archive:
    """The members of one archive, and streams of them."""

    def __init__(self, raw: IO[bytes], label: str, kind: str, limits: Limits, location: Location | None) -> None:
        self.label, self.kind, self.limits, self.location = label, kind, limits, location
        # what its members' locations hang from: the archive's location, else the name it was given
        self._base = location if location is not None else Location.local(label)
        self._raw = raw
        self._lock = threading.Lock()  # a file object given to us is shared by every member read
        self._zip: zipfile.ZipFile | None = None
        self._tar_offsets: dict[str, tuple[int, int]] = {}  # member -> (first header, data)
        self._index: Checkpoints | None = None  # a .tar.gz's index points
        self._work: dict[str, int] = {}  # member -> the most bytes one read of it has inflated
        self._worked = 0
        self.notes: list[str] = []  # what a cap left out of the listing, one line each
        with self._lock:
            self.packed = raw.seek(0, io.SEEK_END)  # the archive's own bytes
            raw.seek(0)
        members = self._list_zip() if kind == "zip" else self._list_tar()
        self.members = self._fit_ratio(members)
        self._by_name = {m.name: m for m in self.members}

    @classmethod
    def open(
        cls,
        source: Location | IO[bytes],
        name: str | None = None,
        limits: Limits | None = None,
        kind: str | None = None,
    ) -> Archive:
        """An archive from a path or URL (``.zip``, ``.tar.gz``, ``.tgz``, ``.tar``), or from a
        seekable binary file object (``name`` then says what it is called in errors, and its
        suffix the kind, unless ``kind`` is ``zip`` or ``tar``)."""
        location = source if isinstance(source, Location) else None
        label = name or (location.text if location is not None else "archive")
        # the kind from the name it is given, else from its location's path (a URL's, without query)
        named = location if location is not None and not name else Location.local(label)
        kind = kind or named.archive_kind
        if kind is None:
            raise TraceError(label, "not an archive we read (.zip, .tar.gz, .tgz, .tar)")
        raw = _open_raw(source) if isinstance(source, Location) else source
        try:
            return cls(raw, label, kind, limits or DEFAULT_LIMITS, location)
        except BaseException as exc:
            if location is not None:
                raw.close()
            if isinstance(exc, TraceError) or not isinstance(exc, Exception):
                raise
            raise _unreadable(label, kind, exc, location is not None and location.is_url) from None

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        if self.location is not None:  # a file object given to us is the caller's to close
            self._raw.close()

    @property
    def broken(self) -> bool:
        """A read of this (remote) archive ran past its deadline: its file refuses every read now."""
        return is_broken(self._raw)

    def traces(self) -> list[ArchiveMember]:
        """The members named like traces (``*.pt.trace.json[.gz]``), refused ones included."""
        return sorted((m for m in self.members if m.is_trace), key=lambda m: m.name)

    def member(self, name: str) -> ArchiveMember | None:
        return self._by_name.get(name)

    @property
    def inflated(self) -> int:
        """Bytes inflated to read members so far: of each member, its costliest read (for a
        .tar.gz, the bytes skipped from the index point to the member included)."""
        return self._worked

    # -- listing ---------------------------------------------------------
    def _list_zip(self) -> list[ArchiveMember]:
        zf, renamed = open_zip(self._raw)
        self._zip = zf
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if len(infos) > self.limits.max_archive_members:
            self._left_out(
                self._count_cap(), len(infos) - self.limits.max_archive_members, self.limits.max_archive_members
            )
            infos = infos[: self.limits.max_archive_members]
        total, kept = 0, 0
        for i in infos:
            if total + i.file_size > self.limits.max_archive_bytes:
                self._left_out(self._bytes_cap(), len(infos) - kept, kept)
                infos = infos[:kept]
                break
            total += i.file_size
            kept += 1
        names = [renamed.get(i.filename, i.filename) if not i.flag_bits & 0x800 else i.filename for i in infos]
        seen = Counter(names)
        return [
            ArchiveMember(
                name,
                i.file_size,
                i.compress_size,
                self._refusal(name, entry_refusal(i, name != i.filename), seen[name], i.file_size, i.compress_size),
            )
            for i, name in zip(infos, names, strict=True)
        ]

    def _list_tar(self) -> list[ArchiveMember]:
        with self._lock:
            gzipped = self._raw.read(2) == b"\x1f\x8b"
            self._raw.seek(0)
        view = cast(IO[bytes], Locked(self._raw, self._lock))
        stream: Any = Inflater(view, self.label, self.limits) if gzipped else view
        index = self._index = Checkpoints() if gzipped else None
        offer = (lambda: index.offer(stream)) if index is not None else (lambda: None)
        infos: list[archive_tar.CappedTarInfo] = []
        total = 0
        for ti in archive_tar.members(stream, offer):
            if ti.isdir():
                continue
            if len(infos) == self.limits.max_archive_members:  # no count of the rest: never listed
                self._left_out(self._count_cap(), None, len(infos))
                break
            if total + ti.size > self.limits.max_archive_bytes:
                self._left_out(self._bytes_cap(), None, len(infos))
                break
            infos.append(ti)
            total += ti.size
        seen = Counter(i.name for i in infos)
        out = []
        for ti in infos:
            why = archive_tar.member_refusal(ti)
            out.append(ArchiveMember(ti.name, ti.size, ti.size, self._refusal(ti.name, why, seen[ti.name], ti.size)))
            self._tar_offsets[ti.name] = (ti.offset, ti.offset_data)
        return out

    def _count_cap(self) -> TraceError:
        return cap_error(self.label, "max_archive_members", f"more than {self.limits.max_archive_members:,} members")

    def _bytes_cap(self) -> TraceError:
        detail = f"members of more than {format_size(self.limits.max_archive_bytes)} decompressed"
        return cap_error(self.label, "max_archive_bytes", detail)

    def _left_out(self, cap: TraceError, count: int | None, kept: int) -> None:
        """One line of ``notes``: the cap passed, and the members it left out of the listing
        (``count`` of them, None when they were never listed), after the first ``kept``."""
        if count is None:
            self.notes.append(f"{cap}: the members after the first {kept:,} left out")
        else:
            self.notes.append(f"{cap}: {count:,} members left out, the first {kept:,} read")

    def _fit_ratio(self, members: list[ArchiveMember]) -> list[ArchiveMember]:
        """``members`` less those that make the archive a bomb (see the module's docstring)."""
        readable = [m for m in members if m.refusal is None]
        total = sum(m.size for m in readable)
        if self._ratio_ok(total):
            return members
        declared = self._ratio_error(total, "its members declare")
        ratio = self.limits.max_compression_ratio
        # above the cap of one member first (a bomb's members), then by how much each inflates
        order = sorted(readable, key=lambda m: (m.size <= ratio * max(1, m.packed), -m.size / max(1, m.packed)))
        out: set[int] = set()
        for m in order:
            if self._ratio_ok(total) and m.size <= ratio * max(1, m.packed):
                break
            total -= m.size
            out.add(id(m))
        self.notes.append(f"{declared}: {len(out):,} members left out, those that inflate most; the others read")
        return [m for m in members if id(m) not in out]

    def _ratio_ok(self, n: int) -> bool:
        return n <= ARCHIVE_RATIO_GRACE_BYTES or n / max(1, self.packed) <= self.limits.max_archive_ratio

    def _ratio_error(self, n: int, what: str, where: str | None = None) -> TraceError:
        ratio = n / max(1, self.packed)
        detail = f"{what} {format_size(n)}, {ratio:.0f}:1 of its {format_size(self.packed)} (an archive bomb?)"
        return cap_error(where or self.label, "max_archive_ratio", detail)

    def _refusal(self, name: str, why: str | None, copies: int, size: int, packed: int | None = None) -> str | None:
        reason = _name_refusal(name) or why
        if reason is None and copies > 1:
            reason = f"appears {copies} times"
        if reason is None and size > self.limits.max_trace_bytes:
            reason = f"declares {format_size(size)}: over the max_trace_bytes cap (--max-trace-bytes)"
        if reason is None and packed is not None and size > RATIO_GRACE_BYTES:
            ratio = size / max(1, packed)
            if ratio > self.limits.max_compression_ratio:
                reason = f"inflates {ratio:.0f}:1 (a zip bomb?): over the max_compression_ratio cap"
        if reason is None:
            return None
        return f"member {quoted(name)} of {self._shown()} {reason}: refused, not read"

    def _shown(self) -> str:
        return self._base.basename or self.label

    # -- reading ---------------------------------------------------------
    def open_member(self, name: str) -> IO[bytes]:
        """A stream of one member's bytes; ``TraceError`` (one line) when it is refused, absent
        or unreadable."""
        m = self._by_name.get(name)
        where = self._where(name)
        if m is None:
            raise TraceNotFound(where, f"no member {quoted(name)} in {self._shown()}")
        if m.refusal is not None:
            raise TraceError(where, m.refusal)
        what = f"member {quoted(name)} of {self._shown()}"

        def error(exc: Exception) -> TraceError:
            if self.location is not None and self.location.is_url and not isinstance(exc, _FORMAT_ERRORS):
                from ..remote.storage import (
                    storage_error,  # a remote read's: worded as listings word them, secrets blanked
                )

                return storage_error(where, exc)
            return member_error(where, what, exc)

        try:
            inner, skipped = self._open_inner(m)
        except TraceError:
            raise
        except Exception as exc:  # noqa: BLE001 - zipfile, zlib, a remote read: one line
            raise error(exc) from None
        charge = functools.partial(self._charge, m)
        return cast(IO[bytes], Counted(inner, m.size, where, what, charge, skipped, error))

    def _open_inner(self, m: ArchiveMember) -> tuple[IO[bytes], int]:
        if self._zip is not None:
            with self._lock:
                return self._zip.open(m.name), 0
        header, data = self._tar_offsets[m.name]
        raw = _open_raw(self.location) if self.location is not None else cast(IO[bytes], Locked(self._raw, self._lock))
        if self._index is None:
            raw.seek(data)
            return cast(IO[bytes], Slice(raw, m.size)), 0
        at = self._index.before(header)
        self._charge(m, data - at.out)  # before inflating what lies between the point and the member
        stream = Inflater(raw, self.label, at=at)
        stream.seek(data)
        return cast(IO[bytes], Slice(stream, m.size)), data - at.out

    def _charge(self, m: ArchiveMember, n: int) -> None:
        """Count ``n`` bytes inflated by a read of ``m`` (the most of any of its reads) against
        the archive's ratio cap; past the cap the read is refused, and not counted."""
        with self._lock:
            before = self._work.get(m.name, 0)
            if n <= before:
                return
            worked = self._worked + n - before
            if not self._ratio_ok(worked):
                raise self._ratio_error(worked, "reading its members would inflate", self._where(m.name))
            self._work[m.name] = n
            self._worked = worked

    def _where(self, name: str) -> str:
        return Location.of_member(self.kind, name, self._base).text


def _unreadable(label: str, kind: str, exc: Exception, remote: bool) -> TraceError:
    """Any exception met while listing an archive, as one line naming it. A remote archive's
    error that is not one of its format is a read's: worded as the storage layer words those,
    secrets blanked."""
    if remote and not isinstance(exc, _FORMAT_ERRORS):
        from ..remote.storage import storage_error

        return storage_error(label, exc)
    return TraceError(label, f"not a readable {kind} archive ({described(exc)})")


def _name_refusal(name: str) -> str | None:
    if "\x00" in name:
        return "has a NUL byte in its name"
    if _ABSOLUTE.match(name):
        return "is an absolute path"
    if ".." in re.split(r"[\\/]", name):
        return "climbs out of the archive with '..' (zip-slip)"
    if "::" in name:
        return "has '::' in its name"
    return None
