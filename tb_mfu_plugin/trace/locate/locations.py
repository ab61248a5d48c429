"""Where a trace file is, as one typed value: a local path, a URL, or a member of an archive.

A face (the CLI's arguments, the tab's logdir, ``--logdir_spec`` and uploads, a notebook
call) turns the text it was given into a :class:`Location` with :meth:`Location.parse`,
once; everything below it (discovery, the opener, the decode stream, the archive reader,
the remote storage, the sidecar lookup, ``SpanFile``) takes and returns ``Location`` and
never parses the text again. Its ``text`` is what reports (``file``), logs and cache keys
show, and says everything needed to open the file again, in any process, and nothing secret:

- a local path: ``/logs/run_a/rank0.1.pt.trace.json.gz``;
- a URL that fsspec opens: ``s3://bucket/team/run42/rank0.1.pt.trace.json.gz``,
  ``gs://``, ``az://``/``abfs://``, ``hdfs://``, ``http(s)://`` (``file://`` is
  turned into a local path, so local files keep their local checks);
- a member of a ``.zip``/``.tar.gz``/``.tgz``/``.tar``, in fsspec's chained form
  ``zip://run_a/rank0.1.pt.trace.json.gz::/logs/team.zip`` (``tar://`` for tar),
  whose archive part is itself a path or URL.

Pure value work: nothing here touches a file system.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from ...core.errors import TraceError

_SCHEME = re.compile(r"^(?P<scheme>[a-zA-Z][0-9a-zA-Z.+-]*)://")
_MEMBER = re.compile(r"^(?P<kind>zip|tar)://(?P<member>.*?)::(?P<archive>.+)$", re.DOTALL)
# Suffixes of the archives we read as logdirs, and the reader each takes.
ARCHIVE_SUFFIXES = ((".zip", "zip"), (".tar.gz", "tar"), (".tgz", "tar"), (".tar", "tar"))

Kind = Literal["local", "url", "member"]


def scheme(text: str) -> str | None:
    """The URL scheme of ``text`` (``"s3"``), lower case, or None: for the strings that are not
    locations (a storage options prefix, an HTTP index page's link), and for :meth:`Location.parse`."""
    m = _SCHEME.match(text)
    return m["scheme"].lower() if m else None


@dataclass(frozen=True)
class Member:
    """A member of an archive: ``kind`` is ``zip`` or ``tar``, ``archive`` the archive's location."""

    kind: str
    name: str
    archive: Location


@dataclass(frozen=True, eq=False)
class Location:
    """One parsed location. Build it with :meth:`parse` (text from outside) or, below the faces,
    from another location (:meth:`join`, :meth:`parent`, :meth:`of_member`, :meth:`local`): the
    fields are worked out when it is made, so no method parses its text again.

    Two locations are equal when their ``text`` is: the text is canonical and says the rest.
    """

    text: str  # canonical: what reports, logs and cache keys show
    kind: Kind
    scheme: str | None  # lower case; ``zip``/``tar`` for a member, None for a local path
    member: Member | None = None
    # The path part: a local path, a URL's path without query or fragment (``?sig=`` of a
    # signed URL), a member's name.
    path: str = ""

    @classmethod
    def parse(cls, text: str) -> Location:
        """``text`` from a face, parsed once: ``file://`` URLs become local paths, and a URL that
        carries a password is refused (it would show in every report and log)."""
        return _parse(text)

    @classmethod
    def local(cls, path: str) -> Location:
        """A local path known to be one (a folder walked, a file uploaded): nothing to parse."""
        return cls(path, "local", None, None, path)

    @classmethod
    def of_member(cls, kind: str, name: str, archive: Location) -> Location:
        """The member ``name`` of the ``kind`` archive at ``archive``."""
        return cls(f"{kind}://{name}::{archive.text}", "member", kind, Member(kind, name, archive), name)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Location({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __lt__(self, other: Location) -> bool:  # spans of one worker sort by location
        return self.text < other.text

    @property
    def is_url(self) -> bool:
        """A remote location: a URL other than ``file://``, or a member of an archive that is one."""
        return self.member.archive.is_url if self.member is not None else self.kind == "url"

    @property
    def is_local(self) -> bool:
        """A plain local path (not a URL, not an archive member)."""
        return self.kind == "local"

    @property
    def archive_kind(self) -> str | None:
        """``zip`` or ``tar`` when this names an archive we read as a logdir, else None."""
        if self.member is not None:
            return None
        low = self.path.lower()
        return next((kind for suffix, kind in ARCHIVE_SUFFIXES if low.endswith(suffix)), None)

    @property
    def basename(self) -> str:
        if self.kind == "local":
            return os.path.basename(self.path)
        return posixpath.basename(self.path.rstrip("/"))

    def parent(self) -> Location:
        """The folder holding this location (a run's folder, where its sidecars are)."""
        if self.member is not None:
            m = self.member
            return Location.of_member(m.kind, posixpath.dirname(m.name.rstrip("/")), m.archive)
        if self.kind == "url":
            # a signed URL's query names (and signs) this object only: its folder is the path's
            # (and the query may itself hold "/", as an unencoded X-Amz-Credential does)
            bare = self.text.split("?", 1)[0].split("#", 1)[0]
            head, sep, _ = bare.rstrip("/").rpartition("/")
            return _url(head if sep and not head.endswith(":/") else bare, self.scheme)
        return Location.local(os.path.dirname(self.path) or ".")

    def join(self, name: str) -> Location:
        """``name`` inside this folder (one of ``parent``'s results, or a listed folder)."""
        if self.member is not None:
            m = self.member
            inner = f"{m.name.rstrip('/')}/{name}" if m.name.strip("/") else name
            return Location.of_member(m.kind, inner, m.archive)
        if self.kind == "url":
            return _url(f"{self.text.rstrip('/')}/{name}", self.scheme)
        return Location.local(os.path.join(self.path, name))

    def stripped(self) -> Location:
        """A URL folder without its trailing ``/`` (how a remote run's folder is named)."""
        return _url(self.text.rstrip("/"), self.scheme) if self.kind == "url" else self


def _url(text: str, proto: str | None) -> Location:
    """A URL location of a known scheme; its path part, without query or fragment, for names."""
    return Location(text, "url", proto, None, urlsplit(text).path)


def _parse(text: str) -> Location:
    m = _MEMBER.match(text)
    if m is not None:
        return Location.of_member(m["kind"], m["member"], _parse(m["archive"]))
    s = scheme(text)
    if s is None:
        return Location.local(text)
    parts = urlsplit(text)
    if s == "file":
        return Location.local(unquote(parts.path) or "/")
    if parts.password:
        shown = text.replace(parts.password, "***")
        raise TraceError(
            shown,
            "a password in the URL is not accepted (it would show in reports and logs): "
            "put credentials in a storage options file (--storage-options, docs/security.md)",
        )
    return Location(text, "url", s, None, parts.path)
