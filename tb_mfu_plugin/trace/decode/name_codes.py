"""The names of one trace as codes, as the decoder meets them: each distinct name gets the next
code, and two facts per code that every chunk reads, whether it is a ``ProfilerStep#`` name (an
annotation whatever its category) and whether ``keep_inputs`` wants its recorded shapes.

A trace of many steps brings one new name per step, so each test runs over a chunk's new names at
once, and ``keep_inputs`` is asked once for every step marker (as ``tables.Names`` asks its
predicates): a name predicate says what kind of event a name is, and every marker is the same kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import filterfalse

import numpy as np

from ..tables import Names, step_markers


class NameCodes:
    def __init__(self, keep_inputs: Callable[[str], bool] | None, max_name_chars: int, problems: Counter[str]):
        self.names: list[str] = []  # by code, each cut at max_name_chars
        self.codes: dict[str, int] = {}  # the names as written -> code
        self.keep_inputs = keep_inputs
        self.max_name_chars = max_name_chars
        self.problems = problems  # the decoder's: a cut name counts under "names"
        # per code, grown with the names (each chunk reads both over all the names)
        self.is_step = np.zeros(0, bool)
        self.wanted = np.zeros(0, bool)
        self._markers: list[int] = []  # codes of the step markers (tables.step_markers)
        self._marker_numbers: list[int] = []  # and their numbers
        self._marker_wanted: bool | None = None  # keep_inputs of every step marker, once asked

    def of(self, names: list[str]) -> np.ndarray:
        """The code of each name, new names coded in first-appearance order."""
        codes = self.codes
        # First-appearance order, not set order: set order follows the per-process string hash,
        # and codes decide tie orders and summation orders, so reports would differ run to run.
        new = list(filterfalse(codes.__contains__, dict.fromkeys(names)))
        if new:
            self._add(new)
        return np.fromiter(map(codes.__getitem__, names), np.int32, len(names))

    def table(self) -> Names:
        return Names(self.names, (self._markers, self._marker_numbers))

    def _add(self, new: list[str]) -> None:
        first = len(self.names)
        self.codes.update(zip(new, range(first, first + len(new)), strict=True))
        cap = self.max_name_chars
        if max(map(len, new)) > cap:
            new = [self._cut(n) if len(n) > cap else n for n in new]
        self.names += new
        prefixed, markers, numbers = step_markers(new, first)
        self.is_step = _grown(self.is_step, len(new), np.array(prefixed, np.int64) - first)
        self._markers += markers
        self._marker_numbers += numbers
        keep = self.keep_inputs
        wanted: list[int] = []
        if keep is not None:
            if self._marker_wanted is None and markers:
                self._marker_wanted = bool(keep(self.names[markers[0]]))
            others = np.ones(len(new), bool)
            others[np.array(markers, np.int64) - first] = False
            wanted = [i for i in np.flatnonzero(others).tolist() if keep(new[i])]
            if self._marker_wanted:
                wanted += [c - first for c in markers]
        self.wanted = _grown(self.wanted, len(new), np.array(wanted, np.int64))

    def _cut(self, name: str) -> str:
        self.problems["names"] += 1
        cut = name[: self.max_name_chars]
        return f"{cut}…[{len(name) - len(cut)} more characters cut]"


def _grown(mask: np.ndarray, n: int, true_at: np.ndarray) -> np.ndarray:
    """``mask`` with ``n`` more entries, True at ``true_at`` (indexes among the new ones)."""
    more = np.zeros(n, bool)
    more[true_at] = True
    return np.concatenate([mask, more])
