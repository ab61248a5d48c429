"""Typed errors that carry the file and a one-line reason, so every face can print them."""

from __future__ import annotations

MAX_REASON_CHARS = 500


def reason_line(text: object) -> str:
    """A reason as one short line, whatever a cause said (a parser's message may quote the input)."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 1] + "…"


class TraceError(Exception):
    """A trace file could not be read or analysed.

    Faces print ``str(err)``, which is always one line: ``<path>: <reason>``.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason_line(reason)
        super().__init__(f"{path}: {self.reason}")


class TraceNotFound(TraceError, FileNotFoundError):
    """A file that is not there: a remote object, an archive member. Also a ``FileNotFoundError``,
    so that code that looks for an optional file (the sidecar) treats every location alike."""
