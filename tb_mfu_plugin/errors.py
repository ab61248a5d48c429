"""Typed errors that carry the file and a one-line reason, so every face can print them."""

from __future__ import annotations


class TraceError(Exception):
    """A trace file could not be read or analysed.

    Faces print ``str(err)``, which is always one line: ``<path>: <reason>``.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = " ".join(str(reason).split())  # one line, whatever the cause said
        super().__init__(f"{path}: {self.reason}")


class NoTracesError(Exception):
    """A path holds no trace files at all."""
