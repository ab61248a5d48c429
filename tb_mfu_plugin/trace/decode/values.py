"""Decoded JSON values -> numpy columns, with the bounds of the plausible.

Each conversion tries one C-level pass first (``np.fromiter`` / ``np.array``) and
falls back to a per-value check only when a column holds something else (JSON
null, a string, an integer beyond int64, a grid that is not a list of sane ints).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Bounds of the plausible, with room to spare: |ts| in µs since the epoch (or ns in
# ns-resolution traces) is ~1.8e18 today; one event longer than 1e13 µs (116 days),
# a copy above 16 TiB, or a grid/block product above 2^62 is no real measurement.
MAX_ABS_TS = 1e19
MAX_DUR = 1e13
MAX_COPY_BYTES = 1 << 44
MAX_PER_SM = 1e9
MAX_PRODUCT = 1 << 62
# A product whose float estimate is below this is exact in int64 (with room for rounding).
_SAFE_PRODUCT = float(1 << 61)


def in_int64(v: Any) -> bool:
    return type(v) is int and INT64_MIN <= v <= INT64_MAX


def _as_float(v: Any) -> float:
    if isinstance(v, int | float):
        try:
            return float(v)
        except OverflowError:  # an int beyond float range
            return np.nan
    return np.nan


def floats(items: list[Any], get: Callable[[Any], Any]) -> np.ndarray:
    """``get(item)`` of every item as float64; NaN for a value that is not a number."""
    try:
        return np.fromiter(map(get, items), np.float64, len(items))
    except (TypeError, ValueError, OverflowError):  # None (JSON null), a string, a huge int
        return np.fromiter(map(_as_float, map(get, items)), np.float64, len(items))


def product(v: Any) -> int:
    """Product of a grid/block list; -1 when missing, -2 when not a list of sane ints or absurd."""
    if type(v) is not list or not v:
        return -1
    p = 1
    for x in v:
        if type(x) is not int or x < 0 or x > MAX_PRODUCT:
            return -2
        p *= x
        if p > MAX_PRODUCT:
            return -2
    return p


def _products_at_once(values: list[Any]) -> np.ndarray | None:
    """The products when every value is a list of the same length of sane ints (the usual
    ``grid``/``block`` of a chunk of kernels), in one numpy pass; None otherwise."""
    if not values or type(values[0]) is not list:
        return None
    width = len(values[0])
    try:
        # flattened, not np.array(values): numpy's discovery of nested lists costs ~0.6 µs a kernel
        same = width > 0 and set(map(type, values)) == {list} and set(map(len, values)) == {width}
        flat = np.fromiter(chain.from_iterable(values), np.int64, width * len(values)) if same else None
    except (TypeError, ValueError, OverflowError):  # a float, a string, a huge int
        return None
    if flat is None:  # None, a string, ragged lists
        return None
    dims = flat.reshape(len(values), width)
    if (dims < 0).any() or (dims > MAX_PRODUCT).any():
        return None
    # the running product, as ``product`` tests it: [2**31, 2**31, 0] is absurd, not 0
    if (dims.astype(np.float64).cumprod(axis=1) > _SAFE_PRODUCT).any():
        return None
    return np.asarray(dims.prod(axis=1), np.int64)


def products(values: list[Any]) -> np.ndarray:
    """``product`` of every value (-1 missing, -2 absurd), as int64."""
    fast = _products_at_once(values)
    if fast is not None:
        return fast
    # Copies and memsets have no grid: the lists among the values may still go at once.
    at = [i for i, v in enumerate(values) if type(v) is list]
    out = np.full(len(values), -1, np.int64)
    if at:
        lists = [values[i] for i in at]
        fast = _products_at_once(lists)
        out[at] = fast if fast is not None else np.fromiter(map(product, lists), np.int64, len(lists))
    return out
