"""The one-pass grid/block products (trace/values.py) agree with the per-value check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tb_mfu_plugin.trace.decode.values import MAX_PRODUCT, product, products

DIM = st.one_of(st.integers(0, 4096), st.integers(-5, 2**64), st.sampled_from([2**31, 2**62, MAX_PRODUCT + 1]))
VALUE = st.one_of(
    st.none(), st.text(max_size=3), st.lists(DIM, max_size=4), st.lists(st.integers(1, 64), min_size=3, max_size=3)
)


@pytest.mark.parametrize(
    "values",
    [
        [[128, 1, 1], [4, 2, 1]],  # every kernel of a chunk: one numpy pass
        [None, [128, 1, 1], "x", [4, 5, 6]],  # copies and memsets among kernels
        [[2**31, 2**31, 1], [1, 1, 1]],  # exactly the cap: exact, not a float estimate
        [[2**31, 2**31, 2], [2**62 + 1]],  # over the cap: absurd
        [[-1, 2, 3], [], [2**64, 1]],  # negative, empty, beyond int64
    ],
)
def test_products_known_cases(values: list[Any]) -> None:
    assert products(values).tolist() == [product(v) for v in values]


@given(st.lists(VALUE, max_size=20))
def test_products_equal_the_per_value_check(values: list[Any]) -> None:
    assert products(values).tolist() == [product(v) for v in values]
