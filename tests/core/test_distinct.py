"""``tb_mfu_plugin.core.distinct`` returns exactly what ``np.unique`` returns."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tb_mfu_plugin.core.distinct import distinct, distinct_counts, distinct_inverse, in_distinct, match_rows

INTS = hnp.arrays(
    dtype=st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.bool_]),
    shape=st.integers(0, 400),
    elements=None,
)


def _same(a: tuple[np.ndarray, ...] | np.ndarray, b: tuple[np.ndarray, ...] | np.ndarray) -> None:
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,), strict=True):
        assert x.dtype == y.dtype or x.dtype.kind == y.dtype.kind == "i"
        np.testing.assert_array_equal(x, y)


@settings(max_examples=300, deadline=None)
@given(INTS)
def test_integer_columns(a: np.ndarray) -> None:
    _same(distinct(a), np.unique(a))
    _same(distinct_counts(a), np.unique(a, return_counts=True))
    uniq, inverse = np.unique(a, return_inverse=True)
    _same(distinct_inverse(a), (uniq, inverse.reshape(-1)))


def test_both_ways_to_the_inverse() -> None:
    rng = np.random.default_rng(1)
    few = rng.choice(np.array([7, -3, 2**40], np.int64), 10_000)  # searched in the distinct values
    many = rng.integers(-(2**62), 2**62, 10_000)  # argsorted by np.unique
    for a in (few, many):
        uniq, inverse = np.unique(a, return_inverse=True)
        _same(distinct_inverse(a), (uniq, inverse))
        np.testing.assert_array_equal(distinct_inverse(a)[0][distinct_inverse(a)[1]], a)


def test_other_dtypes_are_np_uniques() -> None:
    f = np.array([2.0, np.nan, 1.0, np.nan, 2.0])
    _same(distinct(f), np.unique(f))  # one NaN, as np.unique gives
    s = np.array(["b", "a", "b"], object)
    assert distinct(s).tolist() == ["a", "b"]
    assert distinct_counts(s)[1].tolist() == [1, 2]


def test_match_rows_is_the_first_row_of_equal_key() -> None:
    keys = np.array([7, 3, 7, 5], np.int64)
    rows = np.array([10, 11, 12, 13], np.int64)
    values = np.array([7, 5, 4, -1, 3, 7], np.int64)
    assert match_rows(keys, rows, values).tolist() == [10, 13, -1, -1, 11, 10]
    assert match_rows(keys[:0], rows[:0], values).tolist() == [-1] * 6


def test_in_distinct_is_isin() -> None:
    rng = np.random.default_rng(2)
    values = rng.integers(-5, 50, 1000)
    uniq = distinct(rng.integers(0, 40, 30))
    np.testing.assert_array_equal(in_distinct(values, uniq), np.isin(values, uniq))
    assert in_distinct(values, uniq[:0]).tolist() == [False] * 1000
