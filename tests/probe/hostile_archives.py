"""Builders of hostile archives for the probe (tests/probe/test_archive_probe.py) and the
benchmark (benchmarks/bench_archives.py): small files that declare or expand big, names
that are not UTF-8, headers that ask for gigabytes, structure that costs quadratic time.

Everything is built at test time in a temporary folder, in well under a second each:
the bombs repeat one compressed block (a zip member's deflate stream, or a gzip member
of zeros, which gzip allows to be concatenated) instead of compressing gigabytes.
"""

from __future__ import annotations

import gzip
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

MiB = 1 << 20
STORED, DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
UTF8_FLAG = 0x800


@dataclass(frozen=True)
class ZipEntry:
    """One member as the bytes of a zip say it: nothing is checked or derived."""

    name: bytes
    payload: bytes  # the member's bytes as stored (compressed for DEFLATED)
    crc: int
    size: int  # declared decompressed size
    method: int = DEFLATED
    flags: int = 0
    external_attr: int = 0
    create_system: int = 0  # 3: Unix, so that external_attr holds a mode
    extra: bytes = b""
    version: int = 20  # needed to extract, x10
    local_name: bytes | None = None  # the local header's name, when it differs
    offset: int | None = None  # the local header's offset the central directory gives


def deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def entry(name: str | bytes, data: bytes, method: int = DEFLATED, flags: int = 0) -> ZipEntry:
    raw = name.encode() if isinstance(name, str) else name
    payload = deflate(data) if method == DEFLATED else data
    return ZipEntry(raw, payload, zlib.crc32(data), len(data), method, flags)


@cache
def _zeros_member(size: int) -> tuple[bytes, int]:
    """The deflate stream and CRC of ``size`` zero bytes (built once: the bombs repeat it)."""
    return deflate(bytes(size)), zlib.crc32(bytes(size))


def zeros_entry(name: str, size: int) -> ZipEntry:
    payload, crc = _zeros_member(size)
    return ZipEntry(name.encode(), payload, crc, size)


def write_zip(dest: Path, entries: list[ZipEntry]) -> Path:
    """A zip of exactly ``entries`` (local headers, data, central directory), written by hand
    so that names, flags, methods and sizes can be anything."""
    out, central = bytearray(), bytearray()
    for e in entries:
        offset = len(out)
        local = e.name if e.local_name is None else e.local_name
        out += struct.pack(
            "<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, e.flags, e.method, 0, 0x21, e.crc, len(e.payload), e.size,
            len(local), len(e.extra),
        )  # fmt: skip
        out += local + e.extra + e.payload
        central += struct.pack(
            "<4s4B4HL2L5H2L", b"PK\x01\x02", 20, e.create_system, e.version, 0, e.flags, e.method, 0, 0x21,
            e.crc, len(e.payload), e.size, len(e.name), len(e.extra), 0, 0, 0, e.external_attr,
            offset if e.offset is None else e.offset,
        )  # fmt: skip
        central += e.name + e.extra
    n = len(entries)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(central), len(out), 0)
    dest.write_bytes(bytes(out + central + end))
    return dest


def zip_of_files(dest: Path, files: dict[str, bytes], extra: list[ZipEntry] = ()) -> Path:  # type: ignore[assignment]
    return write_zip(dest, [entry(n, d) for n, d in sorted(files.items())] + list(extra))


# -- tar -------------------------------------------------------------------------------


def tar_members(files: dict[str, bytes]) -> bytes:
    """The headers and data of ``files``, without the end-of-archive blocks (names may hold
    surrogate-escaped bytes: written as those bytes)."""
    out = bytearray()
    for name, data in files.items():
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        out += ti.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") + data + bytes(-len(data) % 512)
    return bytes(out)


def tar_bytes(files: dict[str, bytes]) -> bytes:
    """A whole tar stream of ``files``."""
    return tar_members(files) + bytes(1024)


def tar_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    """One raw 512-byte header, of any type and declared size."""
    ti = tarfile.TarInfo(name)
    ti.type, ti.size = kind, size
    return ti.tobuf(tarfile.GNU_FORMAT)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


@cache
def _gz_zeros(size: int) -> bytes:
    return gzip.compress(bytes(size), compresslevel=9, mtime=0)


def gz_zeros(size: int, block: int = 64 * MiB) -> bytes:
    """gzip members that inflate to ``size`` zero bytes (one compressed block, repeated)."""
    whole, rest = divmod(size, block)
    return _gz_zeros(block) * whole + (_gz_zeros(rest) if rest else b"")


def long_header_bomb(dest: Path, kind: bytes, declared: int, good: dict[str, bytes]) -> Path:
    """A .tar.gz that starts with the ``good`` members, then a GNU long-name ('L'), long-link
    ('K') or pax ('x') header that declares ``declared`` bytes, and holds them, as zeros: a
    reader that reads such a header in one piece asks for ``declared`` bytes of memory."""
    head = tar_members(good)
    name = "././@LongLink" if kind in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK) else "pax"
    data = gz(head + tar_header(name, declared, kind)) + gz_zeros(declared + (-declared % 512))
    dest.write_bytes(data + gz(bytes(1024)))
    return dest


def reinflation_bomb(dest: Path, members: int, pad: int, good: dict[str, bytes]) -> Path:
    """A .tar.gz of ``pad`` zero bytes (one member), then ``members`` tiny trace members (each
    holds ``{}``), then the ``good`` ones: a reader that inflates the archive from its start for
    every member it opens inflates ``members`` x ``pad`` bytes."""
    head = tar_header("pad/zeros.bin", pad)
    tiny = {f"tiny/rank{i}.1.pt.trace.json": b"{}" for i in range(members)}
    body = tar_bytes({**tiny, **good})
    dest.write_bytes(gz(head) + gz_zeros(pad) + gz(body))
    return dest


def tar_gz(dest: Path, files: dict[str, bytes]) -> Path:
    dest.write_bytes(gz(tar_bytes(files)))
    return dest


def pax_record(key: str, value: bytes) -> bytes:
    body = f" {key}=".encode() + value + b"\n"
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n += 1
    return str(n).encode() + body


def _with_header(kind: bytes, data: bytes) -> bytes:
    return tar_header("pax", len(data), kind) + data + bytes(-len(data) % 512)


def pax_redos(dest: Path, count: int, good: dict[str, bytes], size: int = 60 * 1024) -> Path:
    """A .tar.gz of the ``good`` members, then ``count`` tiny members each behind a pax header
    of ``size`` digits: Python before 3.11.10 searches such a header for ``hdrcharset`` in
    quadratic time (CVE-2024-6232; 60 KiB cost about 20 s)."""
    body = tar_members(good)
    for i in range(count):
        body += _with_header(tarfile.XHDTYPE, b"1" * size) + tar_members({f"redos/rank{i}.1.pt.trace.json": b"{}"})
    dest.write_bytes(gz(body + bytes(1024)))
    return dest


def sparse_map_bomb(dest: Path, entries: int, good: dict[str, bytes]) -> Path:
    """A .tar.gz whose member is a pax GNU sparse file (format 1.0) with a map of ``entries``
    pairs: a reader that parses the map keeps a list of 2 x ``entries`` numbers, from data
    that compresses about 500:1."""
    pax = b"".join(
        pax_record(k, v)
        for k, v in (("GNU.sparse.major", b"1"), ("GNU.sparse.minor", b"0"), ("GNU.sparse.realsize", b"10"),
                     ("GNU.sparse.name", b"sparse/rank0.1.pt.trace.json"))
    )  # fmt: skip
    sparse_map = str(entries).encode() + b"\n" + b"1\n" * (2 * entries)
    member = tar_header("GNUSparseFile.0/rank0.1.pt.trace.json", len(sparse_map)) + sparse_map
    member += bytes(-len(sparse_map) % 512)
    dest.write_bytes(gz(tar_members(good) + _with_header(tarfile.XHDTYPE, pax) + member + bytes(1024)))
    return dest
