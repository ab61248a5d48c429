"""Sources in ``--logdir_spec``: ours and TensorBoard's.

TensorBoard's own loader (its multiplexer's reloader thread) reads every entry
of ``--logdir`` / ``--logdir_spec`` too, and one it cannot read kills that
thread for good: an archive is "not a directory" (ValueError), an HTTP folder
recurses without end (RecursionError), and a bucket it has no credentials for
(the tab's are in ``--mfu_storage_options``, which TensorBoard never sees) is a
NoCredentialsError. Its other dashboards then stop loading, the local logdirs'
runs included.

So the tab's own flag, ``--mfu_logdir_spec name:location,...``, names sources
that only the tab reads; and at start-up (``entry.fix_flags``) the entries of
``--logdir`` / ``--logdir_spec`` that TensorBoard's loader cannot read (URLs,
archives, files that are not folders) are moved into it, with a note. TensorBoard
keeps the local folders; when none is left it is given ``NO_TENSORBOARD_LOGDIR``,
a path that cannot exist (below ``/dev/null``), which its loader skips. With
``--mfu_tensorboard_reads_urls`` the object-store URLs (``s3://``, ``gs://``,
...) stay with TensorBoard too, for its dashboards to read event files there.

A leaf module: TensorBoard imports ``entry`` for every command, and
``fix_flags`` imports this at every start.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from urllib.parse import urlsplit, urlunsplit

from ..core.errors import TraceError
from ..trace.locate.locations import Location, scheme

logger = logging.getLogger(__name__)

# A folder below a file: no one can create it, and TensorBoard's loader skips a path that is not there.
NO_TENSORBOARD_LOGDIR = os.path.join(os.devnull, "mfu-tab-sources-only")
_URI = re.compile(r"^[a-zA-Z][0-9a-zA-Z.+-]*://")
# Schemes TensorBoard can never list as a folder (its loader recurses without end on them).
_NEVER_FOR_TENSORBOARD = ("http", "https")


def spec_parts(spec: str | None) -> list[str]:
    """The entries of a ``--logdir_spec``, stripped, empty ones left out."""
    return [p.strip() for p in (spec or "").split(",") if p.strip()]


def split_part(part: str) -> tuple[str | None, str]:
    """``(name, location)`` of one entry, by TensorBoard's rule: an entry whose part before the
    first ``:`` starts with ``/``, or that looks like a URI or a Windows drive, is a bare path."""
    if _URI.match(part) is None and ":" in part and not part.startswith("/") and not os.path.splitdrive(part)[0]:
        name, _, path = part.partition(":")
        return name.strip() or None, path
    return None, part


def tensorboard_cannot_read(location: str, urls_ok: bool = False) -> str | None:
    """What ``location`` is, when TensorBoard's own loader cannot read it; None when it can."""
    try:
        where: Location | None = Location.parse(location)
    except TraceError:  # a password in a URL: the tab's scan refuses it, in one line
        where = None
    if where is not None and where.archive_kind is not None:
        return "an archive"
    if where is None or not where.is_local:
        s = where.scheme if where is not None else scheme(location)
        if s in _NEVER_FOR_TENSORBOARD:
            return "an HTTP folder"
        return None if urls_ok else f"a {s}:// URL"
    path = os.path.expanduser(where.path)
    if os.path.exists(path) and not os.path.isdir(path):
        return "a file, not a folder"
    return None


def move_unreadable_sources(flags: argparse.Namespace) -> list[str]:
    """Move the entries of ``flags``' ``--logdir`` / ``--logdir_spec`` that TensorBoard's loader
    cannot read into ``--mfu_logdir_spec`` (see the module's docstring); one note per entry moved."""
    urls_ok = bool(getattr(flags, "mfu_tensorboard_reads_urls", False))
    logdir = getattr(flags, "logdir", None) or ""
    if logdir:
        what = tensorboard_cannot_read(logdir, urls_ok)
        if what is None:
            return []
        moved = [_absolute(logdir)]
        flags.logdir = ""
        notes = [_note(logdir, what)]
        kept: list[str] = []
    else:
        kept, moved, notes = [], [], []
        for part in spec_parts(getattr(flags, "logdir_spec", None)):
            what = tensorboard_cannot_read(split_part(part)[1], urls_ok)
            if what is None:
                kept.append(part)
            else:
                moved.append(part)
                notes.append(_note(part, what))
        if not moved:
            return []
    flags.logdir_spec = ",".join(kept) or NO_TENSORBOARD_LOGDIR
    ours = spec_parts(getattr(flags, "mfu_logdir_spec", None))
    flags.mfu_logdir_spec = ",".join(ours + moved)
    for note in notes:
        logger.warning(note)
    return notes


def _absolute(location: str) -> str:
    """A local --logdir made absolute, so that as an entry of a spec it cannot read as ``name:path``."""
    return location if _URI.match(location) else os.path.abspath(os.path.expanduser(location))


def _note(part: str, what: str) -> str:
    return (
        f"MFU plugin: {_shown(part)} is {what}, which TensorBoard's own loading cannot read (it would stop "
        "loading every logdir): the MFU tab reads it, TensorBoard's other dashboards do not. "
        "Give such sources as --mfu_logdir_spec to leave out this note."
    )


def _shown(part: str) -> str:
    """An entry as a log line may show it: a URL without its query (a signed URL's signature)."""
    name, location = split_part(part)
    if _URI.match(location):
        u = urlsplit(location)
        location = urlunsplit((u.scheme, u.netloc.rpartition("@")[2], u.path, "", ""))
    return repr(f"{name}:{location}" if name else location)
