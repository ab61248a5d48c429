"""Typed errors that carry the file and a one-line reason, so every face can print them."""

from __future__ import annotations


class TraceError(Exception):
    """A trace file could not be read or analysed.

    Faces print ``str(err)``, which is always one line: ``<path>: <reason>``.
    """

    MAX_REASON_CHARS = 500

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        # one short line, whatever the cause said (a parser's message may quote the input)
        line = " ".join(str(reason).split())
        if len(line) > self.MAX_REASON_CHARS:
            line = line[: self.MAX_REASON_CHARS - 1] + "…"
        self.reason = line
        super().__init__(f"{path}: {self.reason}")


class NoTracesError(Exception):
    """A path holds no trace files at all."""
