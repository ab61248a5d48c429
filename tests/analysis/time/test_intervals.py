"""The interval toolkit: unions, gaps, coverage, and which window holds a point, at its edges."""

from __future__ import annotations

import numpy as np
import pytest

from tb_mfu_plugin.analysis.time import intervals

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


# ---------------------------------------------------------------------------- merge


def test_merge_takes_unsorted_input_and_joins_touching_intervals() -> None:
    lo, hi = intervals.merge(A([20.0, 0, 10, 5]), A([30.0, 5, 12, 8]))
    # [0,5] and [5,8] touch: one segment; [10,12] and [20,30] stay apart
    assert lo.tolist() == [0, 10, 20]
    assert hi.tolist() == [8, 12, 30]


def test_merge_keeps_the_longest_end_of_nested_intervals() -> None:
    lo, hi = intervals.merge(A([0.0, 1, 2]), A([10.0, 3, 4]))
    assert (lo.tolist(), hi.tolist()) == ([0], [10])


def test_merge_of_nothing_is_empty() -> None:
    lo, hi = intervals.merge(A([]), A([]))
    assert len(lo) == len(hi) == 0


# ---------------------------------------------------------------------------- points in windows

STARTS, ENDS = A([0.0, 10, 20]), A([5.0, 15, 25])


def test_window_of_open_end_excludes_the_end_point() -> None:
    pts = A([0.0, 4.9, 5, 7, 10, 15, 24.9, 25, -1])
    got = intervals.window_of(pts, STARTS, ENDS, closed=False)
    assert got.tolist() == [0, 0, -1, -1, 1, -1, 2, -1, -1]


def test_window_of_closed_end_includes_the_end_point() -> None:
    pts = A([0.0, 5, 5.1, 15, 25, 25.1])
    got = intervals.window_of(pts, STARTS, ENDS, closed=True)
    assert got.tolist() == [0, 0, -1, 1, 2, -1]


def test_window_of_tolerances_widen_each_end() -> None:
    pts = A([-0.5, 5.5, 9.5, 15.5])
    assert intervals.window_of(pts, STARTS, ENDS, closed=True).tolist() == [-1, -1, -1, -1]
    widened = intervals.window_of(pts, STARTS, ENDS, closed=True, early=0.5, late=0.5)
    assert widened.tolist() == [0, 0, 1, 1]
    # only the start side widened: a point after the end is still out
    assert intervals.window_of(pts, STARTS, ENDS, closed=True, early=0.5).tolist() == [0, -1, 1, -1]


def test_window_of_empty_windows_and_nan_points() -> None:
    assert intervals.window_of(A([1.0, 2]), A([]), A([]), closed=True).tolist() == [-1, -1]
    assert intervals.window_of(A([np.nan, 1.0]), STARTS, ENDS, closed=True).tolist() == [-1, 0]
    assert intervals.window_of(A([]), STARTS, ENDS, closed=False).tolist() == []


def test_zero_length_window_holds_its_point_only_when_closed() -> None:
    assert intervals.window_of(A([3.0]), A([3.0]), A([3.0]), closed=True).tolist() == [0]
    assert intervals.window_of(A([3.0]), A([3.0]), A([3.0]), closed=False).tolist() == [-1]


def test_window_starting_before_ignores_the_ends() -> None:
    got = intervals.window_starting_before(A([-1.0, 0, 7, 10, 99]), STARTS)
    assert got.tolist() == [-1, 0, 0, 1, 2]


def test_window_of_unsorted_indexes_the_windows_as_given() -> None:
    starts, ends = A([20.0, 0, 10]), A([25.0, 5, 15])
    got = intervals.window_of_unsorted(A([1.0, 12, 22, 5, 25, 30]), starts, ends)
    assert got.tolist() == [1, 2, 0, -1, -1, -1]
    assert intervals.window_of_unsorted(A([1.0]), A([]), A([])).tolist() == [-1]


def test_in_any_takes_overlapping_windows_with_closed_ends() -> None:
    # [0,10] and [5,12] overlap, [20,20] is a single instant
    starts, ends = A([5.0, 0, 20]), A([12.0, 10, 20])
    pts = A([0.0, 11, 12, 13, 20, 19.9])
    assert intervals.in_any(pts, starts, ends).tolist() == [True, True, True, False, True, False]
    assert intervals.in_any(pts, A([]), A([])).tolist() == [False] * 6


def test_points_between_counts_closed_and_open_windows() -> None:
    pts = A([0.0, 5, 5, 10])
    assert intervals.points_between(pts, A([0.0, 5]), A([5.0, 10]), closed=True).tolist() == [3, 3]
    assert intervals.points_between(pts, A([0.0, 5]), A([5.0, 10]), closed=False).tolist() == [0, 0]
    assert int(intervals.points_between(pts, 0.0, 10.0, closed=False)) == 2
    assert intervals.points_between(A([]), A([0.0]), A([1.0]), closed=True).tolist() == [0]


def test_overlap_slice_reaches_back_by_the_longest_row() -> None:
    starts = A([0.0, 10, 20, 30, 40])
    # rows of at most 15 µs: the one at 0 ends by 15 and cannot reach [18, 35); the one at 10 can
    sl = intervals.overlap_slice(starts, 18.0, 35.0, 15.0)
    assert (sl.start, sl.stop) == (1, 4)
    # a row starting exactly at the window's end is out: the window is [lo, hi)
    assert intervals.overlap_slice(starts, 18.0, 30.0, 0.0) == slice(2, 3)


def test_covered_length_within_disjoint_windows() -> None:
    wlo, whi = A([0.0, 10]), A([5.0, 20])
    a, b = A([2.0, 4, 6, 25, 7]), A([3.0, 12, 9, 30, 3])
    # [2,3] inside; [4,12] covers 1 + 2; [6,9] in the hole; [25,30] past the end; reversed -> 0
    assert intervals.covered_length(wlo, whi, a, b).tolist() == [1, 3, 0, 0, 0]
    assert intervals.covered_length(A([]), A([]), a, b).tolist() == [0] * 5


def test_covered_length_agrees_with_a_clipped_union() -> None:
    rng = np.random.default_rng(7)
    s = np.sort(rng.uniform(0, 1000, 40))
    lo, hi = intervals.merge(s, s + rng.uniform(0, 50, 40))
    a = rng.uniform(0, 1000, 30)
    b = a + rng.uniform(0, 200, 30)
    got = intervals.covered_length(lo, hi, a, b)
    want = [intervals.union_length(lo, hi, x, y) for x, y in zip(a, b, strict=True)]
    assert got == pytest.approx(want)
