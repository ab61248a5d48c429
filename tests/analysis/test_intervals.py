from __future__ import annotations

import numpy as np
import pytest

from tb_mfu_plugin.analysis import intervals

A = np.array


def test_union_of_overlapping_and_disjoint_intervals() -> None:
    # [0,10) ∪ [5,15) ∪ [20,30) = 25
    assert intervals.union_length(A([0.0, 5, 20]), A([10.0, 15, 30])) == 25


def test_union_clipped_to_window() -> None:
    assert intervals.union_length(A([0.0, 20]), A([10.0, 30]), lo=5, hi=25) == 10


def test_nested_interval_counts_once() -> None:
    assert intervals.union_length(A([0.0, 2]), A([10.0, 3])) == 10


def test_gaps_include_window_edges() -> None:
    g = intervals.gaps(A([10.0, 40]), A([20.0, 50]), 0, 60)
    assert g.tolist() == [10, 20, 10]
    assert intervals.gaps(A([]), A([]), 0, 5).tolist() == [5]


def test_capped_coverage_adds_concurrent_kernels_up_to_one() -> None:
    # stream A: [0,10) at 0.5 blocks/SM; stream B: [5,15) at 0.75 -> overlap capped at 1
    cov = intervals.capped_coverage(A([0.0, 5]), A([10.0, 15]), A([0.5, 0.75]), 0, 20)
    assert cov == pytest.approx(0.5 * 5 + 1.0 * 5 + 0.75 * 5)


def test_capped_coverage_clips_to_window() -> None:
    assert intervals.capped_coverage(A([0.0]), A([10.0]), A([2.0]), 5, 8) == pytest.approx(3)
