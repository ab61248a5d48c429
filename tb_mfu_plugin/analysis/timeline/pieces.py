"""What the lanes are built of before they become the report's columns: intervals on the trace's
clock, each with its lane, class, name and op, and the names they point at.

A name is either a name code of the trace (``TraceTables.names``) or a label this package writes
("GPU idle: after a host-device sync"); ``Labels`` keeps the labels and ``name_table`` turns both
into the block's one list of names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .types import CLASSES, LaneKind

CLASS = {c: i for i, c in enumerate(CLASSES)}
MAX_NAME_CHARS = 300  # a C++ template kernel name runs to thousands of characters


@dataclass
class Labels:
    """Names this package writes, each once; a label's code is ``-2 - index`` (codes >= 0 are the
    trace's, -1 is none)."""

    texts: list[str] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)

    def code(self, text: str) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.texts)
            self.texts.append(text)
        return -2 - i


@dataclass(frozen=True)
class Lane:
    name: str
    kind: LaneKind
    pid: int | None = None
    tid: int | None = None


@dataclass(frozen=True)
class Pieces:
    """Intervals ``[start, end)`` on the trace's clock, one entry per interval in each array."""

    lane: np.ndarray  # int64, index into the lanes they were made with
    start: np.ndarray
    end: np.ndarray
    cls: np.ndarray  # int64, index into CLASSES
    name: np.ndarray  # int64 name code (Labels)
    op: np.ndarray  # int64 name code, -1 none
    sm: np.ndarray  # float64 min(1, blocks per SM), NaN unknown
    count: np.ndarray  # int64 events in it
    busy: np.ndarray  # float64 time of its events

    def __len__(self) -> int:
        return len(self.start)

    @staticmethod
    def of(
        lane: np.ndarray | int,
        start: np.ndarray,
        end: np.ndarray,
        cls: np.ndarray | int,
        name: np.ndarray | int,
        op: np.ndarray | int = -1,
        sm: np.ndarray | float = np.nan,
    ) -> Pieces:
        n = len(start)

        def col(x: np.ndarray | float, dtype: type) -> np.ndarray:
            return np.broadcast_to(np.asarray(x, dtype), (n,)).copy()

        s, e = np.asarray(start, np.float64), np.asarray(end, np.float64)
        return Pieces(
            col(lane, np.int64),
            s,
            e,
            col(cls, np.int64),
            col(name, np.int64),
            col(op, np.int64),
            col(sm, np.float64),
            np.ones(n, np.int64),
            e - s,
        )

    @staticmethod
    def join(parts: list[Pieces]) -> Pieces:
        if not parts:
            return Pieces.of(0, np.empty(0), np.empty(0), 0, 0)
        return Pieces(*(np.concatenate([getattr(p, f) for p in parts]) for f in Pieces.__dataclass_fields__))

    def take(self, index: np.ndarray) -> Pieces:
        return Pieces(*(getattr(self, f)[index] for f in Pieces.__dataclass_fields__))

    def sorted(self) -> Pieces:
        """By lane, then start (then end, so that the order never depends on the input's)."""
        return self.take(np.lexsort((self.end, self.start, self.lane)))


def name_table(codes: np.ndarray, trace_names: list[str], labels: Labels) -> tuple[list[str], np.ndarray]:
    """The names the codes point at, each once, in order of first use; and each code's index in
    that list (-1 for -1). Long names are cut to MAX_NAME_CHARS."""
    out = np.full(len(codes), -1, np.int64)
    used = codes != -1
    if not used.any():
        return [], out
    uniq, first, inverse = np.unique(codes[used], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    out[used] = rank[inverse.reshape(-1)]
    names = []
    for c in uniq[order].tolist():
        text = trace_names[c] if c >= 0 else labels.texts[-2 - c]
        names.append(text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…")
    return names, out
