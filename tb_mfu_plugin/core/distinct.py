"""The distinct values of an integer column, found by sorting: what ``np.unique`` returns, faster.

numpy 2.3+ finds distinct values by hashing when no inverse or index is asked for, and on
columns the size of a big trace's that hashing is slow: with numpy 2.4.6 here, ``np.unique`` took
0.29 s for 377 k distinct ids (the 1 GB benchmark trace's GPU correlation ids) and 0.11 s for
1.9 M pids of two values, where numpy's SIMD sort takes 6 ms and 5 ms. With ``return_inverse``
it argsorts, which is slow on a column of few values (0.22 s for those pids) where a search in
the few sorted values takes 0.02 s. On the 1 GB trace, the analysis' np.unique calls went from
0.96 s to about 0.25 s (cProfile).

Each function returns exactly what ``np.unique`` returns for an integer (or boolean) array;
other dtypes (NaN rules, objects) are handed to ``np.unique`` itself.
"""

from __future__ import annotations

import numpy as np

# Below this many rows per distinct value, the inverse comes from an argsort (np.unique), above
# it from a binary search of each row in the distinct values: the search costs log2(values)
# per row, the argsort of a column of few values costs more.
_SEARCH_ROWS_PER_VALUE = 16


def _integral(a: np.ndarray) -> bool:
    return a.dtype.kind in "iub"


def _heads(s: np.ndarray) -> np.ndarray:
    """For a sorted array: whether each element starts a run of equal values."""
    m = np.empty(len(s), bool)
    if len(s):
        m[0] = True
        np.not_equal(s[1:], s[:-1], out=m[1:])
    return m


def distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (flattened): ``np.unique(a)``."""
    a = np.asarray(a).reshape(-1)
    if not _integral(a):
        return np.unique(a)
    s = np.sort(a)
    out: np.ndarray = s[_heads(s)]
    return out


def distinct_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` for a 1-D array: the sorted distinct values, and for
    each element the index of its value among them."""
    a = np.asarray(a).reshape(-1)
    if not _integral(a):
        uniq, inverse = np.unique(a, return_inverse=True)
        return uniq, inverse.reshape(-1)
    uniq = distinct(a)
    if len(uniq) * _SEARCH_ROWS_PER_VALUE <= len(a):
        return uniq, np.searchsorted(uniq, a).astype(np.intp)
    _, inverse = np.unique(a, return_inverse=True)
    return uniq, inverse.reshape(-1)


def distinct_counts(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_counts=True)``: the sorted distinct values and how often each occurs."""
    a = np.asarray(a).reshape(-1)
    if not _integral(a):
        uniq, counts = np.unique(a, return_counts=True)
        return uniq, counts
    s = np.sort(a)
    starts = np.flatnonzero(_heads(s))
    return s[starts], np.diff(np.append(starts, len(s))).astype(np.intp)


def in_distinct(values: np.ndarray, uniq: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is among ``uniq`` (sorted distinct values, as ``distinct``
    returns them): ``np.isin`` by binary search, without its hashing."""
    if not len(uniq) or not len(values):
        return np.zeros(len(values), bool)
    k = np.minimum(np.searchsorted(uniq, values), len(uniq) - 1)
    found: np.ndarray = uniq[k] == values
    return found


def match_rows(keys: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each of ``values``, the one of ``rows`` whose key (``keys[i]`` for ``rows[i]``)
    equals it, -1 where none does or the value is negative (an unknown id). Of rows with
    equal keys, the first in ``rows`` wins. A sort-merge join of an id column onto another
    (a GPU event's correlation id onto its launch call's, its external id onto its op's)."""
    out = np.full(len(values), -1, np.int64)
    if not len(keys) or not len(values):
        return out
    order = np.argsort(keys, kind="stable")  # stable: the first of equal keys is found first
    sorted_keys = keys[order]
    pos = np.minimum(np.searchsorted(sorted_keys, values), len(sorted_keys) - 1)
    hit = (sorted_keys[pos] == values) & (values >= 0)
    out[hit] = rows[order[pos[hit]]]
    return out
