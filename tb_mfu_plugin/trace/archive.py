"""A ``.zip`` or ``.tar(.gz)`` of a logdir, read in place: members listed and streamed,
never extracted onto disk.

API (the CLI, the tab's run discovery and the tab's upload all use it)::

    with Archive.open("team.zip") as arc:          # a path, a URL, or a seekable file object
        for m in arc.traces():                    # members named like traces, in name order
            if m.refusal is None:
                with arc.open_member(m.name) as f:  # a binary stream of the member's bytes
                    ...

    open_member_location("zip://run_a/rank0.1.pt.trace.json.gz::team.zip")  # the same, by location

An archive comes from anyone, so it is checked before any member is read. The
whole archive is refused (``TraceError`` naming it) when it lists more members
than ``Limits.max_archive_members`` or declares more decompressed bytes than
``Limits.max_archive_bytes``; a ``.tar.gz`` is also held to both caps, and to
``max_compression_ratio``, while it is inflated. A *member* is refused, with a
one-line reason naming the archive and the member, when its name is absolute or
climbs out of the archive (zip-slip), it is a symbolic or hard link or a special
file, it is encrypted, its name appears twice, it declares more than
``max_trace_bytes``, or it inflates more than ``max_compression_ratio`` to one.
Refused members are listed (so that each shows its error) but never opened.

A ``.tar.gz`` has no index: listing it inflates it once, and opening a member
inflates it again from the start up to that member. A ``.zip`` (or a plain
``.tar``) seeks straight to the member, also inside a bucket.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import tarfile
import threading
import time
import zipfile
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import IO, Any, cast

from ..errors import TraceError, TraceNotFound
from .archive_streams import Counted, Inflated, Locked, Slice
from .discover import TRACE_FILE
from .files import open_regular
from .limits import DEFAULT_LIMITS, RATIO_GRACE_BYTES, Limits, cap_error, format_size
from .locations import archive_kind, basename, is_url, member_location, parse_member

_ABSOLUTE = re.compile(r"^([\\/]|[A-Za-z]:)")


@dataclass(frozen=True)
class ArchiveMember:
    name: str  # as stored in the archive
    size: int  # decompressed bytes, as declared
    packed: int  # bytes in the archive
    refusal: str | None = None  # why it is never read; None for a readable member

    @property
    def is_trace(self) -> bool:
        return TRACE_FILE.match(self.name.rsplit("/", 1)[-1]) is not None


def is_archive(location: str) -> bool:
    return archive_kind(location) is not None


def _open_raw(location: str) -> IO[bytes]:
    if is_url(location):
        from .remote import open_seekable

        return open_seekable(location)
    return open_regular(location, "archive")


class Archive:
    """The members of one archive, and streams of them."""

    def __init__(self, raw: IO[bytes], label: str, kind: str, limits: Limits, location: str | None) -> None:
        self.label, self.kind, self.limits, self.location = label, kind, limits, location
        self._raw = raw
        self._lock = threading.Lock()  # a file object given to us is shared by every member read
        self._zip: zipfile.ZipFile | None = None
        self._tar_offsets: dict[str, int] = {}
        self._gzipped = False
        self.members = self._list_zip() if kind == "zip" else self._list_tar()
        self._by_name = {m.name: m for m in self.members}

    @classmethod
    def open(
        cls, source: str | IO[bytes], name: str | None = None, limits: Limits | None = None, kind: str | None = None
    ) -> Archive:
        """An archive from a path or URL (``.zip``, ``.tar.gz``, ``.tgz``, ``.tar``), or from a
        seekable binary file object (``name`` then says what it is called in errors, and its
        suffix the kind, unless ``kind`` is ``zip`` or ``tar``)."""
        location = source if isinstance(source, str) else None
        label = name or location or "archive"
        kind = kind or archive_kind(label)
        if kind is None:
            raise TraceError(label, "not an archive we read (.zip, .tar.gz, .tgz, .tar)")
        raw = _open_raw(source) if isinstance(source, str) else source
        try:
            return cls(raw, label, kind, limits or DEFAULT_LIMITS, location)
        except BaseException as exc:
            if location is not None:
                raw.close()
            if isinstance(exc, zipfile.BadZipFile | tarfile.TarError | EOFError | gzip.BadGzipFile | zlib.error):
                raise TraceError(label, f"not a readable {kind} archive ({type(exc).__name__}: {exc})") from None
            raise

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
        if self.location is not None:  # a file object given to us is the caller's to close
            self._raw.close()

    def traces(self) -> list[ArchiveMember]:
        """The members named like traces (``*.pt.trace.json[.gz]``), refused ones included."""
        return sorted((m for m in self.members if m.is_trace), key=lambda m: m.name)

    def member(self, name: str) -> ArchiveMember | None:
        return self._by_name.get(name)

    # -- listing ---------------------------------------------------------
    def _refuse_archive(self, cap: str, detail: str) -> TraceError:
        return cap_error(self.label, cap, detail)

    def _list_zip(self) -> list[ArchiveMember]:
        zf = zipfile.ZipFile(self._raw)
        self._zip = zf
        infos = [i for i in zf.infolist() if not i.is_dir()]
        self._count_cap(len(infos))
        self._bytes_cap(sum(i.file_size for i in infos))
        seen = Counter(i.filename for i in infos)
        return [ArchiveMember(i.filename, i.file_size, i.compress_size, self._zip_refusal(i, seen)) for i in infos]

    def _zip_refusal(self, info: zipfile.ZipInfo, seen: Counter[str]) -> str | None:
        kind = None
        # Unix attributes say what the entry is; writers that set no type bits (Python's own
        # zipfile.writestr) mean a regular file.
        fmt = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
        if fmt == stat.S_IFLNK:
            kind = "a symbolic link"
        elif fmt not in (0, stat.S_IFREG, stat.S_IFDIR):
            kind = "a special file"
        if info.flag_bits & 0x1:
            kind = kind or "encrypted"
        return self._refusal(info.filename, kind, seen[info.filename], info.file_size, info.compress_size)

    def _list_tar(self) -> list[ArchiveMember]:
        with self._lock:
            self._raw.seek(0)
            self._gzipped = self._raw.read(2) == b"\x1f\x8b"
            self._raw.seek(0)
        infos: list[tarfile.TarInfo] = []
        stream = self._stream()
        try:
            tf = tarfile.open(fileobj=stream, mode="r:")
            total = 0
            while (ti := tf.next()) is not None:
                if not ti.isdir():
                    infos.append(ti)
                    total += ti.size
                    self._count_cap(len(infos))
                    self._bytes_cap(total)
        finally:
            stream.close()  # (a view of a file object given to us leaves that object open)
        seen = Counter(i.name for i in infos)
        out = []
        for ti in infos:
            kind = _tar_kind(ti)
            out.append(ArchiveMember(ti.name, ti.size, ti.size, self._refusal(ti.name, kind, seen[ti.name], ti.size)))
            self._tar_offsets[ti.name] = ti.offset_data
        return out

    def _count_cap(self, n: int) -> None:
        if n > self.limits.max_archive_members:
            raise self._refuse_archive("max_archive_members", f"more than {self.limits.max_archive_members:,} members")

    def _bytes_cap(self, n: int) -> None:
        if n > self.limits.max_archive_bytes:
            detail = f"members of more than {format_size(self.limits.max_archive_bytes)} decompressed"
            raise self._refuse_archive("max_archive_bytes", detail)

    def _refusal(self, name: str, kind: str | None, copies: int, size: int, packed: int | None = None) -> str | None:
        reason = _name_refusal(name) or (f"is {kind}" if kind else None)
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
        return f"member {name!r} of {basename(self.label) or self.label} {reason}: refused, not read"

    # -- reading ---------------------------------------------------------
    def open_member(self, name: str) -> IO[bytes]:
        """A stream of one member's bytes; ``TraceError`` when it is refused or absent."""
        m = self._by_name.get(name)
        if m is None:
            raise TraceNotFound(self._where(name), f"no member {name!r} in {basename(self.label)}")
        if m.refusal is not None:
            raise TraceError(self._where(name), m.refusal)
        if self._zip is not None:
            with self._lock:
                inner: IO[bytes] = self._zip.open(name)
        else:
            inner = self._tar_member(name, m.size)
        return cast(IO[bytes], Counted(inner, m, self._where(name), self.limits))

    def _where(self, name: str) -> str:
        return member_location(self.kind, name, self.location or self.label)

    def _stream(self) -> IO[bytes]:
        """The archive's tar bytes (inflated from the start for a .tar.gz), under the caps."""
        if self.location is not None:
            raw = _open_raw(self.location)
        else:
            raw = cast(IO[bytes], Locked(self._raw, self._lock))
        if not self._gzipped:
            return raw
        return cast(IO[bytes], Inflated(raw, self.label, self.limits))

    def _tar_member(self, name: str, size: int) -> IO[bytes]:
        stream = self._stream()
        stream.seek(self._tar_offsets[name])
        return cast(IO[bytes], Slice(stream, size))


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


def _tar_kind(ti: tarfile.TarInfo) -> str | None:
    if ti.issym():
        return "a symbolic link"
    if ti.islnk():
        return "a hard link"
    if ti.issparse() or not ti.isreg():
        return "a special file (device, FIFO or sparse)"
    return None


# -- by location ------------------------------------------------------------------

_CACHE_SIZE = 8
_REMOTE_TTL_S = 60.0
# (location, caps) -> (identity, when listed, archive): caps other than the listing's would
# refuse other members
_cache: OrderedDict[tuple[str, Limits], tuple[Any, float, Archive]] = OrderedDict()
_cache_lock = threading.Lock()


def _forget_after_fork() -> None:
    """A forked child (``tb-mfu --jobs``) shares its parent's open file descriptions, and so
    their read offsets: two processes reading members of one archive would read each other's
    bytes. The child drops the inherited archives and opens its own."""
    global _cache_lock
    _cache_lock = threading.Lock()
    _cache.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _identity(location: str) -> Any:
    """What says an archive changed: size and mtime of a local file; remote ones expire instead."""
    if is_url(location):
        return None
    st = os.stat(location)
    return (st.st_size, st.st_mtime_ns)


def archive_at(location: str, limits: Limits | None = None) -> Archive:
    """The archive at ``location``, listed once and kept (a few, for a minute when remote)."""
    limits = limits or DEFAULT_LIMITS
    key = (location, limits)
    ident = _identity(location)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == ident and (ident is not None or now - hit[1] < _REMOTE_TTL_S):
            _cache.move_to_end(key)
            return hit[2]
    arc = Archive.open(location, limits=limits)
    with _cache_lock:
        _cache[key] = (ident, now, arc)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)[1][2].close()
    return arc


def open_member_location(location: str, limits: Limits | None = None) -> IO[bytes]:
    """The member named by ``zip://member::archive`` (or ``tar://``), streamed."""
    m = parse_member(location)
    if m is None:
        raise TraceError(location, "not an archive member location")
    stream = cast(io.RawIOBase, archive_at(m.archive, limits).open_member(m.name))
    return cast(IO[bytes], io.BufferedReader(stream, 1 << 20))
