"""What an uploaded file may be, judged by its name and its first bytes.

The tab's upload route takes only what the analysis reads: trace files
(``.json``, ``.json.gz``, ``.pt.trace.json[.gz]``), FLOPs sidecars
(``tb_mfu.json``, ``<worker>.tb_mfu.json``) and archives of a logdir (``.zip``,
``.tar.gz``, ``.tgz``). A name alone proves nothing, so the first bytes must
agree with it: a gzip header whose stream starts a JSON document (or, for
``.tar.gz``, a tar header), a JSON document's ``{`` or ``[``, a zip header.
Anything else is refused with one line that names the file and the reason.

A name must be what a browser sends as a file's name: one file name, no
folders (``/``, ``\\``), no drive (``C:``), no NUL, control or format characters,
valid UTF-8, at most ``MAX_CLIENT_NAME_BYTES``, and more than a suffix
(``.json.gz``). Anything else is refused with one line (``check_name``), so an
upload answered "ready" always becomes the run it names.

Stored names are made safe here too: only ``[A-Za-z0-9._-]``, no leading dot, at
most ``MAX_NAME_CHARS``; a trace whose name discovery would not pick up
(``profile.json``) is stored as ``profile.pt.trace.json`` so that it becomes a
worker of its run.
"""

from __future__ import annotations

import re
import zlib

from ..trace.locate.discover import SIDECAR_NAME, TRACE_FILE

TRACE, SIDECAR, ZIP, TAR = "trace", "sidecar", "zip", "tar"
ARCHIVES = (ZIP, TAR)
MAX_NAME_CHARS = 120  # of a stored file or run name: a file system allows 255 bytes
MAX_CLIENT_NAME_BYTES = 255  # of a name as sent: no file system holds a longer one
# Bytes the checks look at: a gzip member header plus enough of its stream for a
# tar header (512 bytes) or a JSON document's first byte after a BOM and blanks.
HEAD_BYTES = 64 * 1024

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_ARCHIVE_SUFFIX = re.compile(r"\.(zip|tar\.gz|tgz)$", re.IGNORECASE)
_TRACE_SUFFIX = re.compile(r"(\.pt\.trace)?\.json(\.gz)?$", re.IGNORECASE)
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a member, or the end record of an empty zip
_JSON_STARTS = (b"{", b"[")  # an object (Kineto), or the bare event array of the Chrome format
_BLANKS = re.compile(rb"^(\xef\xbb\xbf)?[ \t\r\n]*")
_DRIVE = re.compile(r"^[A-Za-z]:")
# werkzeug decodes a query's bytes that are not UTF-8 as U+FFFD; Python keeps lone surrogates
_NOT_UTF8 = re.compile("[\ufffd\ud800-\udfff]")

SUPPORTED = ".json, .json.gz, .pt.trace.json(.gz), tb_mfu.json, .zip, .tar.gz, .tgz"


class RefusedFile(ValueError):
    """An uploaded file the route does not take; ``str()`` is one line naming it."""


def base_name(name: str) -> str:
    """The last part of a client's file name (a browser may send ``C:\\dir\\x.json``)."""
    return re.split(r"[\\/]", name)[-1]


def check_name(name: str) -> None:
    """RefusedFile unless ``name`` is one plain file name as a browser sends it (module docstring)."""
    if not name:
        raise RefusedFile("a file without a name")
    shown_name = shown(name)
    if "/" in name or "\\" in name:
        raise RefusedFile(f"{shown_name}: a file name with a folder in it (send the file's own name)")
    if _DRIVE.match(name):
        raise RefusedFile(f"{shown_name}: a file name with a drive in it (send the file's own name)")
    if _NOT_UTF8.search(name):
        raise RefusedFile(f"{shown_name}: a file name that is not valid UTF-8")
    if not all(c.isprintable() for c in name):
        raise RefusedFile(f"{shown_name}: a file name with control or invisible characters")
    if len(name.encode()) > MAX_CLIENT_NAME_BYTES:
        raise RefusedFile(f"{shown_name}: a file name longer than {MAX_CLIENT_NAME_BYTES} bytes")
    if kind_of(name) != SIDECAR and not _stem(name).strip(" ._-"):
        raise RefusedFile(f"{shown_name}: a file name that is only a suffix")


def kind_of(name: str) -> str:
    """``TRACE``, ``SIDECAR``, ``ZIP`` or ``TAR`` for a file name; RefusedFile for anything else."""
    base = base_name(name)
    low = base.lower()
    if low == SIDECAR_NAME or low.endswith("." + SIDECAR_NAME):
        return SIDECAR
    m = _ARCHIVE_SUFFIX.search(base)
    if m:
        return ZIP if m.group(1).lower() == "zip" else TAR
    if _TRACE_SUFFIX.search(base):
        return TRACE
    raise RefusedFile(f"{shown(base)}: not a trace, sidecar or archive (takes {SUPPORTED})")


def safe_part(text: str, fallback: str = "upload") -> str:
    """``text`` reduced to ``[A-Za-z0-9._-]``, neither starting nor ending with ``.``, ``_`` or ``-``
    (no hidden files, no option-like names), at most MAX_NAME_CHARS."""
    cleaned = _UNSAFE.sub("_", text).strip("._-")[:MAX_NAME_CHARS].rstrip("._-")
    return cleaned or fallback


def stored_name(name: str, kind: str, gzipped: bool = False) -> str:
    """The name a file is kept under in its upload's folder (see the module's docstring).

    A trace's ``.gz`` follows its bytes (``gzipped``), not its name: the decoder
    goes by the bytes, and a name that says otherwise would mislead whoever reads
    the upload area."""
    base = base_name(name)
    if kind == SIDECAR:
        worker = base[: -len(SIDECAR_NAME)].rstrip(".")
        return f"{safe_part(worker)}.{SIDECAR_NAME}" if worker else SIDECAR_NAME
    if kind == TRACE:
        # A profiler's own name (worker0.1700000000000.pt.trace.json.gz) comes out unchanged.
        return safe_part(_TRACE_SUFFIX.sub("", base), "trace") + ".pt.trace.json" + (".gz" if gzipped else "")
    suffix = _ARCHIVE_SUFFIX.search(base)
    assert suffix is not None  # kind_of said it is an archive
    return safe_part(base[: suffix.start()], "archive") + suffix.group(0).lower()


def is_gzip(head: bytes) -> bool:
    return head.startswith(_GZIP_MAGIC)


def run_label(names: list[str]) -> str:
    """The run's name (under ``uploads/``) for one upload: its file's or archive's name,
    or the longest common start of its files' names (``worker``), else ``upload``."""
    stems = [_stem(base_name(n)) for n in names]
    if len(stems) == 1:
        return safe_part(stems[0])
    common = stems[0] if stems else ""
    for s in stems[1:]:
        while not s.startswith(common):
            common = common[:-1]
    return safe_part(common.rstrip("._-"))


def _stem(base: str) -> str:
    m = _ARCHIVE_SUFFIX.search(base) or _TRACE_SUFFIX.search(base)
    stem = base[: m.start()] if m else base
    t = TRACE_FILE.match(base)
    return t["worker"] if t and t["worker"] else stem  # worker0.1700000000000 -> worker0


def check_head(name: str, kind: str, head: bytes) -> None:
    """RefusedFile unless ``head`` (the file's first bytes, up to HEAD_BYTES) fits ``kind``."""
    base = shown(base_name(name))
    if not head:
        raise RefusedFile(f"{base}: empty file")
    if kind in (TRACE, SIDECAR):
        body = _gunzip_head(base, head) if head.startswith(_GZIP_MAGIC) else head
        if kind == SIDECAR and body is not head:
            raise RefusedFile(f"{base}: a sidecar is plain JSON, not gzip")
        if not _json_start(body):
            raise RefusedFile(f"{base}: does not start like a JSON trace (gzip or JSON expected)")
    elif kind == ZIP:
        if not head.startswith(_ZIP_MAGICS):
            raise RefusedFile(f"{base}: not a zip archive (no zip header)")
    elif kind == TAR:
        if not head.startswith(_GZIP_MAGIC):
            raise RefusedFile(f"{base}: not a .tar.gz archive (no gzip header)")
        body = _gunzip_head(base, head)
        if len(body) >= 262 and body[257:262] != b"ustar":
            raise RefusedFile(f"{base}: not a .tar.gz archive (no tar header inside the gzip)")


def _gunzip_head(base: str, head: bytes) -> bytes:
    """The first bytes of a gzip stream (at most 1 KiB: all the checks read)."""
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1024)
    except zlib.error:
        raise RefusedFile(f"{base}: corrupt gzip header") from None


def _json_start(body: bytes) -> bool:
    m = _BLANKS.match(body)
    i = m.end() if m else 0
    if i >= len(body):
        return False  # only blanks in the first bytes: no real trace starts that way
    return body[i : i + 1] in _JSON_STARTS


def shown(name: str) -> str:
    """A client's file name as an error quotes it: one line, at most 200 characters."""
    line = "".join(c if c.isprintable() else "?" for c in name)
    return line if len(line) <= 200 else line[:199] + "…"
