"""Listing a tar (plain or inside a .tar.gz) with ``tarfile``, under caps that hold while
it is read (archive.py uses it).

``tarfile`` reads a GNU long-name or long-link header, and a pax header, in one piece of
the size the header declares, before any cap could look at it: a 2.5 MB .tar.gz asked
for 2.7 GB. Python before 3.11.10 also parses a pax header in quadratic time
(CVE-2024-6232: 64 KiB of digits cost 25 s), and reads a GNU sparse map into a list
that grows with the archive. So ``CappedTarInfo`` looks at each such header first: one
over ``MAX_TAR_HEADER_BYTES``, or a pax header that is not a well-formed list of records,
is skipped in bounded steps without being read into memory, and the member it describes
is listed refused. Sparse maps are skipped, never kept (sparse members are refused).
Member names keep the bytes that are not UTF-8 as surrogates, as local file names do.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Callable, Iterator
from typing import Any

from ..limits import MAX_TAR_HEADER_BYTES, format_size

_EXTENDED = {
    tarfile.GNUTYPE_LONGNAME: "GNU long-name",
    tarfile.GNUTYPE_LONGLINK: "GNU long-link",
    tarfile.XHDTYPE: "pax",
    tarfile.XGLTYPE: "pax global",
    tarfile.SOLARIS_XHDTYPE: "pax",
}
_PAX_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)
_LONG_DIGITS = re.compile(rb"[0-9]{64}")  # what makes 3.11's hdrcharset search quadratic
_MAX_SPARSE_BLOCKS = MAX_TAR_HEADER_BYTES // tarfile.BLOCKSIZE


# TarInfo's processing methods are private (typeshed leaves them out); they are the hook
# tarfile's own documentation of subclasses points to.
_TarInfo: Any = tarfile.TarInfo


class CappedTarInfo(_TarInfo):  # type: ignore[misc]
    """A member whose extended headers were checked before ``tarfile`` read them."""

    refusal: str | None = None

    def _proc_member(self, tarfile: Any) -> Any:
        if self.size < 0:  # base-256 sizes can be negative: the next header would come before this one
            raise tarfile_mod.ReadError(f"a tar header at offset {self.offset} declares a negative size")
        what = _EXTENDED.get(self.type)
        if what is None:
            return super()._proc_member(tarfile)
        why = None
        if self.size > MAX_TAR_HEADER_BYTES:
            cap = format_size(MAX_TAR_HEADER_BYTES)
            why = f"has a {what} header of {format_size(self.size)}, over the {cap} such a header may hold"
        elif self.type in _PAX_TYPES and not _well_formed_pax(tarfile.fileobj.peek_exact(self._block(self.size))):
            why = f"has a {what} header that is not a well-formed list of records"
        if why is None:
            return super()._proc_member(tarfile)
        # skipped in bounded steps (the stream seeks forward by inflating), never held
        tarfile.fileobj.seek(tarfile.fileobj.tell() + self._block(self.size))
        nxt = self.fromtarfile(tarfile)
        nxt.offset = self.offset
        nxt.refusal = nxt.refusal or why
        return nxt

    def _proc_sparse(self, tarfile: Any) -> Any:
        """The old GNU sparse header: its extension blocks skipped, the map never kept."""
        isextended = bool(self._sparse_structs[1])
        del self._sparse_structs
        for _ in range(_MAX_SPARSE_BLOCKS):
            if not isextended:
                break
            block = tarfile.fileobj.read(tarfile_mod.BLOCKSIZE)
            isextended = len(block) == tarfile_mod.BLOCKSIZE and bool(block[504])
        else:
            raise tarfile_mod.ReadError(f"a GNU sparse map of more than {_MAX_SPARSE_BLOCKS} blocks")
        self.sparse: list[tuple[int, int]] = []  # refused as sparse; its data size stays the stored one
        self.offset_data = tarfile.fileobj.tell()
        tarfile.offset = self.offset_data + self._block(self.size)
        return self

    # pax GNU sparse maps (versions 0.0, 0.1, 1.0): never parsed, the member marked sparse
    def _proc_gnusparse_00(self, next: Any, pax_headers: Any, buf: Any) -> None:
        next.sparse = []

    def _proc_gnusparse_01(self, next: Any, pax_headers: Any) -> None:
        next.sparse = []

    def _proc_gnusparse_10(self, next: Any, pax_headers: Any, tarfile: Any) -> None:
        next.sparse = []

    def _apply_pax_info(self, pax_headers: Any, encoding: Any, errors: Any) -> None:
        sizes = ("GNU.sparse.size", "GNU.sparse.realsize")  # a sparse file's logical size: never read
        super()._apply_pax_info({k: v for k, v in pax_headers.items() if k not in sizes}, encoding, errors)


tarfile_mod = tarfile  # the methods above take tarfile's own parameter name, ``tarfile``


def member_refusal(ti: CappedTarInfo) -> str | None:
    """Why a member is never read, from its headers; None for a regular file we read."""
    if ti.refusal:
        return ti.refusal
    if ti.issym():
        return "is a symbolic link"
    if ti.islnk():
        return "is a hard link"
    if ti.issparse() or not ti.isreg():
        return "is a special file (device, FIFO or sparse)"
    return None


def _well_formed_pax(buf: bytes) -> bool:
    """``buf`` is pax records (``"%d %s=%s\\n"``, each length counting the whole record) then
    NUL padding, with no run of 64 digits: what 3.11's tarfile parses in linear time."""
    if _LONG_DIGITS.search(buf):
        return False
    pos, n = 0, len(buf)
    while pos < n and buf[pos] != 0:
        space = buf.find(b" ", pos, pos + 21)
        if space <= pos or not buf[pos:space].isdigit():
            return False
        length = int(buf[pos:space])
        end = pos + length
        if length < 5 or end > n or buf[end - 1] != 0x0A or buf.find(b"=", space + 2, end) < 0:
            return False
        pos = end
    return not buf[pos:].strip(b"\0")


def members(stream: Any, offer: Callable[[], None]) -> Iterator[CappedTarInfo]:
    """The members of the tar read from ``stream`` (our ``Locked`` view or ``Inflater``: both
    have ``peek_exact``), directories included. ``offer()`` is called at each member's first
    header, the stream there (an index point may be kept)."""
    tf: Any = tarfile.open(fileobj=stream, mode="r:", tarinfo=CappedTarInfo, encoding="utf-8", errors="surrogateescape")
    ti = tf.next()
    while ti is not None:
        tf.members.clear()  # tarfile keeps every member; we keep our own, smaller list
        yield ti
        if tf.offset <= ti.offset:
            raise tarfile.ReadError("a tar header points back into the archive")
        stream.seek(tf.offset)
        offer()
        ti = tf.next()
