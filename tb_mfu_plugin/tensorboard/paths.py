"""What the tab says about where files are, and which files it agrees to open.

On a shared server the tab's JSON goes to every user, so server paths are shown
relative to the logdir they were found in (``run_a/worker0.1.pt.trace.json.gz``,
or ``theirs/run_a/...`` for a ``--logdir_spec theirs:/path`` source) unless
``--mfu_show_full_paths`` asks for them whole. This is done on every string of
a response (names, files, errors, notes), as error texts may quote a path too.

Before a file is analysed, :meth:`FileGate.refusal` checks that it is a regular
file (a FIFO named like a trace would block the reader forever) and, under
``--mfu_confine_to_logdir``, that it and its sidecars resolve inside a logdir:
symbolic links are followed by default (as torch-tb-profiler does), and
confinement refuses any that lead out. A link swapped between the check and the
open escapes it; confinement guards against links already in the logdir.
Remote files (URLs) have no server path to hide or confine, but a signed URL's
signature is blanked wherever it shows; a member of a local archive is checked
through its archive's file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence

from ..core.escape import json_bytes
from ..trace.locate.locations import Location
from ..trace.locate.sidecar import sidecar_paths
from ..trace.remote.redact import shown_json
from .runs import Source


class PathView:
    """Rewrites absolute paths under the sources' roots into their displayed form.

    It works on encoded JSON (one regex over the bytes: 4 ms for our 4-GPU report),
    where every path is a JSON string or part of one.
    """

    def __init__(self, sources: Sequence[Source], show_full_paths: bool = False) -> None:
        self.show_full_paths = show_full_paths
        # root, JSON-escaped -> (how the root itself is shown, the prefix that replaces "root/")
        self._shown: dict[bytes, tuple[bytes, bytes]] = {}
        for s in sources:
            if not s.is_remote:
                root = s.path.rstrip(os.sep) or os.sep
                prefix = f"{s.name}/" if s.name else ""
                self._shown[_json_str(root)] = (_json_str(self.root_label(s)), _json_str(prefix))
        self._pattern: re.Pattern[bytes] | None = None
        if self._shown and not show_full_paths:
            # Longest root first, so that a root nested in another wins.
            alternatives = b"|".join(re.escape(r) for r in sorted(self._shown, key=len, reverse=True))
            # A root, then a path below it ("/") or the end of the path.
            self._pattern = re.compile(b"(" + alternatives + rb")(/|(?=$|[\s:'\",)\\]))")

    @staticmethod
    def root_label(source: Source) -> str:
        """How a source's root is shown: its ``--logdir_spec`` name, else the folder's name."""
        return source.name or os.path.basename(source.path.rstrip(os.sep)) or source.path

    def source_path(self, source: Source) -> str:
        """The source's path as ``/runs`` shows it: the folder's name, unless full paths are asked for."""
        if self.show_full_paths or source.is_remote:
            return source.path
        return os.path.basename(source.path.rstrip(os.sep)) or source.path

    def json(self, body: bytes) -> bytes:
        """Encoded JSON with every server path relative to its logdir (unless full paths are
        asked for), and with no signature of a signed URL nor any storage option value in it,
        full paths or not (``trace.remote.redact``)."""
        if self._pattern is not None:
            body = self._pattern.sub(self._relative, body)
        return shown_json(body)

    def _relative(self, m: re.Match[bytes]) -> bytes:
        label, prefix = self._shown[m.group(1)]
        return prefix if m.group(2) else label


def _json_str(text: str) -> bytes:
    """``text`` as it appears inside a JSON string (no quotes), as ``escape.json_bytes`` writes it."""
    return json_bytes(text)[1:-1]


class FileGate:
    """Which discovered files may be opened."""

    def __init__(self, sources: Sequence[Source], confine: bool = False) -> None:
        self.confine = confine
        self._roots = [os.path.realpath(s.path) for s in sources if not s.is_remote]

    def inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in self._roots)

    def refusal(self, location: Location, worker: str) -> str | None:
        """Why ``location`` must not be opened, or None. Never opens anything.

        The analysis reads the run's sidecar too, so a sidecar that would block or
        that leads out of a confined logdir refuses the trace (the pipeline cannot
        be told to skip it); a missing or unreadable one is the pipeline's to report.
        """
        member = location.member
        if member is not None:  # the archive is the file opened; its members are checked as they are read
            archive = member.archive
            return self._check(archive.path, "its archive ", missing_ok=False) if archive.is_local else None
        if not location.is_local:
            return None
        reason = self._check(location.path, "", missing_ok=False)
        if reason is not None:
            return reason
        for side in sidecar_paths(location.parent(), worker):
            if os.path.lexists(side.path):
                reason = self._check(side.path, f"its sidecar {side.basename} ", missing_ok=True)
                if reason is not None:
                    return reason
        return None

    def _check(self, path: str, what: str, missing_ok: bool) -> str | None:
        if self.confine and not self.inside(path):
            return f"{what}refused: a symbolic link leads outside the logdir (--mfu_confine_to_logdir)".strip()
        try:
            st = os.stat(path)
        except OSError as exc:
            return None if missing_ok else f"cannot be read: {exc.strerror or exc}"
        if not stat.S_ISREG(st.st_mode):
            return f"{what}is not a regular file ({_kind(st.st_mode)}): not read".strip()
        return None


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"
