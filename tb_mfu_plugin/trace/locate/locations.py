"""Where a trace file is, as one string: a local path, a URL, or a member of an archive.

Every face and every worker names a file by this string (``SpanFile.path``, the
cache key, the report's ``file``), so it must say everything needed to open the
file again, in any process, and nothing secret:

- a local path: ``/logs/run_a/rank0.1.pt.trace.json.gz``;
- a URL that fsspec opens: ``s3://bucket/team/run42/rank0.1.pt.trace.json.gz``,
  ``gs://``, ``az://``/``abfs://``, ``hdfs://``, ``http(s)://`` (``file://`` is
  turned into a local path, so local files keep their local checks);
- a member of a ``.zip``/``.tar.gz``/``.tgz``/``.tar``, in fsspec's chained form
  ``zip://run_a/rank0.1.pt.trace.json.gz::/logs/team.zip`` (``tar://`` for tar),
  whose archive part is itself a path or URL.

Pure string work: nothing here touches a file system.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ...core.errors import TraceError

_SCHEME = re.compile(r"^(?P<scheme>[a-zA-Z][0-9a-zA-Z.+-]*)://")
_MEMBER = re.compile(r"^(?P<kind>zip|tar)://(?P<member>.*?)::(?P<archive>.+)$", re.DOTALL)
# Suffixes of the archives we read as logdirs, and the reader each takes.
ARCHIVE_SUFFIXES = ((".zip", "zip"), (".tar.gz", "tar"), (".tgz", "tar"), (".tar", "tar"))


def scheme(location: str) -> str | None:
    """The URL scheme (``"s3"``), lower case, or None for a local path."""
    m = _SCHEME.match(location)
    return m["scheme"].lower() if m else None


def is_url(location: str) -> bool:
    """A remote location: a URL other than ``file://``, or a member of an archive that is one."""
    member = parse_member(location)
    if member is not None:
        return is_url(member.archive)
    return scheme(location) not in (None, "file")


def is_local(location: str) -> bool:
    """A plain local path (not a URL, not an archive member)."""
    return scheme(location) is None


def normalize(location: str) -> str:
    """``location`` as the rest of the code expects it: ``file://`` URLs become local paths,
    and a URL that carries a password is refused (it would show in every report and log)."""
    s = scheme(location)
    if s == "file":
        return unquote(urlsplit(location).path) or "/"
    if s is not None and parse_member(location) is None:
        parts = urlsplit(location)
        if parts.password:
            shown = location.replace(parts.password, "***")
            raise TraceError(
                shown,
                "a password in the URL is not accepted (it would show in reports and logs): "
                "put credentials in a storage options file (--storage-options, docs/security.md)",
            )
    return location


@dataclass(frozen=True)
class Member:
    """A member of an archive: ``kind`` is ``zip`` or ``tar``, ``archive`` the archive's location."""

    kind: str
    name: str
    archive: str

    @property
    def location(self) -> str:
        return f"{self.kind}://{self.name}::{self.archive}"


def member_location(kind: str, name: str, archive: str) -> str:
    return Member(kind, name, archive).location


def parse_member(location: str) -> Member | None:
    """The archive member named by ``location``, or None when it names no member."""
    m = _MEMBER.match(location)
    return Member(m["kind"], m["member"], m["archive"]) if m else None


def archive_kind(location: str) -> str | None:
    """``zip`` or ``tar`` when ``location`` names an archive we read as a logdir, else None."""
    if parse_member(location) is not None:
        return None
    low = _path_part(location).lower()
    return next((kind for suffix, kind in ARCHIVE_SUFFIXES if low.endswith(suffix)), None)


def _path_part(location: str) -> str:
    """The path of a URL without its query or fragment (``?sig=...`` of a signed URL)."""
    return urlsplit(location).path if scheme(location) else location


def basename(location: str) -> str:
    member = parse_member(location)
    if member is not None:
        return posixpath.basename(member.name.rstrip("/"))
    if scheme(location):
        return posixpath.basename(_path_part(location).rstrip("/"))
    return os.path.basename(location)


def parent(location: str) -> str:
    """The folder holding ``location`` (a run's folder, where its sidecars are)."""
    member = parse_member(location)
    if member is not None:
        return member_location(member.kind, posixpath.dirname(member.name.rstrip("/")), member.archive)
    if scheme(location):
        # a signed URL's query names (and signs) this object only: its folder is the path's
        # (and the query may itself hold "/", as an unencoded X-Amz-Credential does)
        location = location.split("?", 1)[0].split("#", 1)[0]
        head, sep, _ = location.rstrip("/").rpartition("/")
        return head if sep and not head.endswith(":/") else location
    return os.path.dirname(location) or "."


def join(folder: str, name: str) -> str:
    """``name`` inside ``folder`` (one of ``parent``'s results)."""
    member = parse_member(folder)
    if member is not None:
        inner = f"{member.name.rstrip('/')}/{name}" if member.name.strip("/") else name
        return member_location(member.kind, inner, member.archive)
    if scheme(folder):
        return f"{folder.rstrip('/')}/{name}"
    return os.path.join(folder, name)
