"""The callers of host syncs: the innermost and the outermost op enclosing each call on its
thread, checked against the definition itself (a scan of every op) on random nestings."""

from __future__ import annotations

import numpy as np
import pytest

from tb_mfu_plugin.analysis.time.syncs import _callers


def _by_definition(ts, end, t, e):  # type: ignore[no-untyped-def]
    inner, outer = [], []
    for a, b in zip(t, e, strict=True):
        hits = [i for i in range(len(ts)) if ts[i] <= a and end[i] >= b]
        inner.append(hits[-1] if hits else -1)
        outer.append(hits[0] if hits else -1)
    return inner, outer


@pytest.mark.parametrize("seed", range(20))
def test_callers_are_those_of_the_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    # whole microseconds, so that ties of start and end are common (legacy traces)
    ts = np.sort(rng.integers(0, 2000, n)).astype(float)
    end = ts + rng.integers(0, 300, n) * (rng.random(n) < 0.9)
    t = rng.integers(0, 2100, 60).astype(float)
    e = t + rng.integers(0, 50, 60)
    inner, outer = _callers(ts, end, t, e)
    assert (inner.tolist(), outer.tolist()) == _by_definition(ts, end, t, e)


def test_a_call_before_every_op_or_outside_all_has_no_caller() -> None:
    ts, end = np.array([10.0, 20.0]), np.array([15.0, 30.0])
    inner, outer = _callers(ts, end, np.array([5.0, 16.0, 21.0]), np.array([6.0, 17.0, 40.0]))
    assert inner.tolist() == outer.tolist() == [-1, -1, -1]
