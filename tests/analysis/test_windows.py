"""The array-wide per-step code gives, bit for bit, what the per-step loops it replaced gave.

Each reference below is the loop as it was (commit 67c6d50), written with the one-window
functions of ``analysis.intervals``; random step windows and GPU rows (float µs near 5e12, as
Kineto writes them, so sums round) are checked against it with Hypothesis. Equality is of the
bytes of the floats: a report must not move by a rounding when a loop becomes an array."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_mfu_plugin.analysis.device_view import DeviceRows
from tb_mfu_plugin.analysis.kernels import families as kernel_families
from tb_mfu_plugin.analysis.kernels import kernels, sm_active
from tb_mfu_plugin.analysis.report import Metrics, Step
from tb_mfu_plugin.analysis.time import aggregate, copies, intervals, step_metrics, windows
from tb_mfu_plugin.analysis.time.idle_gaps import Gaps, sync_us_by_step
from tb_mfu_plugin.analysis.time.steps import Steps
from tb_mfu_plugin.trace.tables import KERNEL, MEMCPY, MEMSET, GpuTable

T0 = 5120648354000.0


def _same(a: Any, b: Any) -> None:
    """Equal floats, None where None, bit for bit (0.0 is not -0.0)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert a.shape == b.shape and a.tobytes() == b.tobytes(), (a, b)
    elif isinstance(a, float) and isinstance(b, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes(), (a, b)
    else:
        assert a == b, (a, b)


@st.composite
def scenes(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sorted disjoint step windows (touching, empty ones too) and GPU rows sorted by start."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(1, 30))
    gaps_between = rng.choice([0.0, 0.0, 1.5, 17.3], n) * rng.random(n)
    lengths = rng.choice([0.0, 3.7, 41.2, 400.0], n) * rng.random(n)
    edges = T0 + np.cumsum(np.stack([gaps_between, lengths], axis=1).reshape(-1))
    lo, hi = edges[0::2], edges[1::2]
    rows = draw(st.integers(0, 400))
    span = float(hi[-1] - lo[0]) + 50.0
    ts = np.sort(T0 - 20.0 + rng.random(rows) * span)
    dur = rng.choice([0.0, 0.9, 5.3, 60.0, 900.0], rows) * rng.random(rows)
    dur[rng.random(rows) < 0.05] = 0.0
    bps = rng.choice([np.nan, 0.25, 0.7, 1.9], rows) * rng.random(rows)
    return lo, hi, ts, dur, bps


@settings(max_examples=150, deadline=None)
@given(scenes())
def test_unions_gaps_and_coverage_per_window_are_the_loops(scene: tuple[np.ndarray, ...]) -> None:
    lo, hi, ts, dur, bps = scene
    end = ts + dur
    longest = float(dur.max()) if len(dur) else 0.0
    first, stop = windows.overlap_bounds(ts, lo, hi, longest)
    rows, win = windows.overlap_pairs(ts, end, lo, hi, first, stop)
    s, e, kept = windows.clipped(ts, end, lo, hi, rows, win)
    segments = windows.merged(s[kept], e[kept], win[kept])
    unions = windows.union_lengths(*segments, len(lo))
    all_gaps, counts = windows.gaps(*segments, lo, hi)
    known = kept & ~np.isnan(bps[rows])
    cover = windows.capped_coverages(s[known], e[known], bps[rows][known], np.bincount(win[known], minlength=len(lo)))
    ref_gaps = []
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        sl = intervals.overlap_slice(ts, a, b, longest)
        assert (sl.start, sl.stop) == (first[i], stop[i])
        t, x, w = ts[sl], end[sl], bps[sl]
        inside = (x > a) & (t < b)
        assert np.flatnonzero(inside).tolist() == (rows[win == i] - sl.start).tolist()
        _same(unions[i], intervals.union_length(t, x, a, b))
        ref_gaps.append(intervals.gaps(t, x, a, b))
        assert counts[i] == len(ref_gaps[-1])
        ok = ~np.isnan(w)
        _same(cover[i], intervals.capped_coverage(t[ok], x[ok], w[ok], a, b))
    _same(all_gaps, np.concatenate(ref_gaps))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=12), st.integers(0, 2**32 - 1))
def test_group_sums_are_numpys_and_pythons(sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = np.array(sizes, np.int64)
    values = T0 * rng.random(int(counts.sum())) + rng.random(int(counts.sum()))
    ints = rng.integers(0, 2**40, int(counts.sum()))
    parts = np.split(values, np.cumsum(counts)[:-1]) if len(sizes) else []
    int_parts = np.split(ints, np.cumsum(counts)[:-1]) if len(sizes) else []
    _same(windows.sums(values, counts), np.array([p.sum() for p in parts]))
    _same(windows.sums(ints, counts, np.float64), np.array([p.sum(dtype=np.float64) for p in int_parts]))

    def loop(p: np.ndarray) -> float:
        total = 0.0
        for v in p.tolist():
            total += v
        return total

    _same(windows.running_sums(values, counts), np.array([loop(p) for p in parts]))
    _same(windows.running_total(values), loop(values))


# ---------------------------------------------------------------------------- the step metrics


def _old_step_metrics(
    view: DeviceRows,
    index: int,
    lo: float,
    hi: float,
    classes: step_metrics.KernelClasses,
    host_sync_us: float,
    sync_count: int,
    idle_after_sync_us: float,
) -> tuple[dict[str, Any], dict[str, float], np.ndarray]:
    """``per_device.step_metrics`` as it was, a step at a time."""

    def share(x: float, d: float) -> float:
        return x / d if d > 0 else 0.0

    g = view.gpu
    sl = intervals.overlap_slice(g.ts, lo, hi, view.max_dur)
    kind, ts, end = g.kind[sl], g.ts[sl], g.end[sl]
    dur = hi - lo
    is_k, is_c, is_s = kind == KERNEL, kind == MEMCPY, kind == MEMSET
    busy = intervals.union_length(ts, end, lo, hi)
    k_union = intervals.union_length(ts[is_k], end[is_k], lo, hi)
    kc = is_k | is_c
    kc_union = intervals.union_length(ts[kc], end[kc], lo, hi)
    idle = max(0.0, 1.0 - share(busy, dur))
    after_sync = min(share(idle_after_sync_us, dur), idle)
    breakdown = {
        "kernel": share(k_union, dur),
        "memcpy": share(kc_union - k_union, dur),
        "memset": share(busy - kc_union, dur),
        "idle_after_sync": after_sync,
        "idle_other": idle - after_sync,
    }
    # SM efficiency
    bps = view.bps[sl]
    k_in = is_k & (end > lo) & (ts < hi)
    known = k_in & ~np.isnan(bps)
    k_time = float(g.dur[sl][k_in].sum())
    ok = bool(known.any()) and float(g.dur[sl][k_in & ~known].sum()) <= step_metrics.SM_EFFICIENCY_MAX_UNKNOWN * k_time
    sm = sm_tb = None
    if ok:
        rows = np.flatnonzero(known)
        active = sm_active.sm_active(bps[rows], g.occupancy_pct[sl][rows], g.block_threads[sl][rows], g.dur[sl][rows])
        sm = share(intervals.capped_coverage(ts[known], end[known], active, lo, hi), dur)
        sm_tb = share(intervals.capped_coverage(ts[known], end[known], bps[known], lo, hi), dur)
    # launched counts
    own = view.step[sl] == index
    codes, kdur = g.name[sl], g.dur[sl]
    ko = is_k & own
    kt = float(kdur[ko].sum())
    kcore = classes.core[codes] if classes.core is not None else None

    def core_time(cls: str) -> float:
        return float(kdur[ko & (kcore == kernel_families.CODE[cls])].sum()) if kcore is not None else 0.0

    co = is_c & own
    nbytes = np.maximum(g.bytes[sl][co], 0)
    dirs = classes.direction[codes[co]]
    per_dir = [float(nbytes[dirs == i].sum(dtype=np.float64)) for i in range(len(copies.DIRECTIONS))]
    m = {
        "gpu_busy_share": share(busy, dur),
        "kernel_time_share": share(k_union, dur),
        "memcpy_time_share": share(intervals.union_length(ts[is_c], end[is_c], lo, hi), dur),
        "memset_time_share": share(intervals.union_length(ts[is_s], end[is_s], lo, hi), dur),
        "idle_share": idle,
        "gpu_idle_after_sync_share": after_sync,
        "host_sync_blocked_share": share(host_sync_us, dur),
        "sm_efficiency": sm,
        "sm_efficiency_tb": sm_tb,
        "sync_count_per_step": float(sync_count),
        "achieved_occupancy": kernels.weighted_mean(view.occ[sl][ko], kdur[ko]),
        "tensor_core_kernel_share": share(float(kdur[ko & classes.tensor_core[codes]].sum()), kt),
        "unknown_core_kernel_share": share(core_time(kernel_families.UNKNOWN), kt),
        "cuda_core_matmul_kernel_share": share(core_time(kernel_families.CUDA_CORE), kt),
        "h2d_bytes_per_step": per_dir[0],
        "d2h_bytes_per_step": per_dir[1],
        "d2d_bytes_per_step": per_dir[2],
        "p2p_bytes_per_step": per_dir[3],
        "kernels_per_step": float(ko.sum()),
    }
    return m, breakdown, intervals.gaps(ts, end, lo, hi)


def _view(scene: tuple[np.ndarray, ...], seed: int) -> tuple[DeviceRows, Steps, step_metrics.KernelClasses]:
    lo, hi, ts, dur, bps = scene
    rng = np.random.default_rng(seed)
    n, rows = len(lo), len(ts)
    gpu = GpuTable(
        kind=rng.choice([KERNEL, KERNEL, MEMCPY, MEMSET], rows).astype(np.int8),
        name=rng.integers(0, 4, rows).astype(np.int32),
        ts=ts,
        dur=dur,
        device=np.zeros(rows, np.int64),
        stream=rng.integers(0, 3, rows),
        correlation=np.arange(rows),
        external_id=np.arange(rows),
        blocks_per_sm=bps.astype(np.float32),
        occupancy_pct=(rng.random(rows) * 100).astype(np.float32),
        grid_blocks=np.full(rows, -1),
        block_threads=np.full(rows, -1),
        bytes=rng.choice([-1, 0, 4096, 10**9], rows) * rng.integers(1, 7, rows),
        comm=np.full(rows, -1, np.int32),
    )
    occ = np.where(rng.random(rows) < 0.2, np.nan, rng.random(rows))
    step = rng.integers(-1, n, rows)  # any step, as a launch time would give, or none
    steps = Steps(np.arange(n) + 3, lo, hi, lo.copy(), hi.copy())
    view = DeviceRows(gpu, bps, occ, step, float(dur.max()) if rows else 0.0, np.full(rows, -1, np.int64))
    kf = kernel_families
    core = [kf.CODE[c] for c in (kf.TENSOR_CORE, kf.UNKNOWN, kf.CUDA_CORE, kf.NOT_MATMUL)]
    classes = step_metrics.KernelClasses(
        np.array([True, False, False, True]), np.array([0, 1, 2, 3], np.int8), np.array(core, np.int8)
    )
    return view, steps, classes


@settings(max_examples=120, deadline=None)
@given(scenes(), st.integers(0, 2**32 - 1))
def test_step_columns_are_the_per_step_loop(scene: tuple[np.ndarray, ...], seed: int) -> None:
    view, steps, classes = _view(scene, seed)
    n = len(steps)
    rng = np.random.default_rng(seed + 1)
    sync_us = np.where(rng.random(n) < 0.5, 0.0, rng.random(n) * 30)
    sync_count = rng.integers(0, 3, n)
    after = np.minimum(rng.random(n) * 20, steps.end - steps.start)
    cols = step_metrics.step_columns(view, steps, classes, sync_us, sync_count, after)
    built = step_metrics.build_steps(steps, cols)
    ref_gaps = []
    for i in range(n):
        lo, hi = float(steps.start[i]), float(steps.end[i])
        m, bd, g = _old_step_metrics(view, i, lo, hi, classes, float(sync_us[i]), int(sync_count[i]), float(after[i]))
        ref_gaps.append(g)
        for k, v in m.items():
            _same(getattr(built[i], k), v)
        for k, v in bd.items():
            _same(built[i].breakdown[k], v)
        assert list(built[i].breakdown) == list(bd)
        _same(built[i].dur_us, hi - lo)
        # the parts as time in the step: each share of this step's duration, together the step
        assert list(built[i].breakdown_us) == list(bd)
        for k, v in bd.items():
            _same(built[i].breakdown_us[k], v * (hi - lo))
        assert abs(sum(built[i].breakdown_us.values()) - (hi - lo)) <= 1e-6 * max(1.0, hi - lo)
    _same(cols.gaps, np.concatenate(ref_gaps))


def _old_summarize(steps: list[Step], kt: aggregate.KernelTotals) -> Any:
    """``aggregate.summarize`` as it was: Python sums and loops over the structs."""
    n = len(steps)
    dur = [s.dur_us for s in steps]
    total = float(sum(dur))
    shares = {k: aggregate.time_weighted([getattr(s, k) for s in steps], dur) or 0.0 for k in aggregate.TIME_SHARES}
    counts = {k: float(sum(getattr(s, k) for s in steps)) / n for k in aggregate.PER_STEP_COUNTS}
    breakdown = {
        k: aggregate.time_weighted([s.breakdown.get(k, 0.0) for s in steps], dur) or 0.0
        for k in aggregate.BREAKDOWN_KEYS
    }
    distribution = {"step_time_us": aggregate.spread(dur)}
    distribution.update({k: aggregate.spread(getattr(s, k) for s in steps) for k in aggregate.DISTRIBUTION_KEYS})
    return dict(
        total=total / n,
        median=float(np.median(dur)),
        shares=shares,
        counts=counts,
        breakdown=breakdown,
        sm=aggregate.time_weighted([s.sm_efficiency for s in steps], dur),
        sm_tb=aggregate.time_weighted([s.sm_efficiency_tb for s in steps], dur),
        distribution={k: v for k, v in distribution.items() if v is not None},
    )


@settings(max_examples=80, deadline=None)
@given(scenes(), st.integers(0, 2**32 - 1))
def test_summary_of_columns_is_the_summary_of_the_structs(scene: tuple[np.ndarray, ...], seed: int) -> None:
    view, steps, classes = _view(scene, seed)
    n = len(steps)
    cols = step_metrics.step_columns(view, steps, classes, np.zeros(n), np.zeros(n, np.int64), np.zeros(n))
    built = step_metrics.build_steps(steps, cols)
    kt = aggregate.KernelTotals(kernel_us=1.0, tensor_core_us=0.5, occupancy=None)
    got = aggregate.summarize_columns(steps.end - steps.start, cols.values, cols.known, cols.breakdown, kt)
    ref = _old_summarize(built, kt)
    _same(got.step_time_mean_us, ref["total"])
    _same(got.step_time_us, ref["total"])  # the mean step (issue 32); the median under its own name
    _same(got.step_time_median_us, ref["median"])
    for k, v in {**ref["shares"], **ref["counts"]}.items():
        _same(getattr(got, k), v)
    for k, v in ref["breakdown"].items():
        _same(got.breakdown[k], v)
    _same(got.sm_efficiency, ref["sm"])
    _same(got.sm_efficiency_tb, ref["sm_tb"])
    assert got.distribution == ref["distribution"]
    assert aggregate.summarize(built, kt) == got  # from the structs, as before


def _old_sync_us_by_step(gaps: Gaps, steps: Steps) -> np.ndarray:
    out = np.zeros(len(steps))
    for k in np.flatnonzero(gaps.sync_us > 0).tolist():
        left = float(gaps.sync_us[k])
        lo, hi = float(gaps.start[k]), float(gaps.end[k])
        j = int(np.searchsorted(steps.end, lo, side="right"))
        while left > 0 and j < len(steps) and steps.start[j] < hi:
            take = min(left, min(float(steps.end[j]), hi) - max(float(steps.start[j]), lo))
            if take > 0:
                out[j] += take
                left -= take
            j += 1
    return out


@settings(max_examples=150, deadline=None)
@given(scenes(), st.integers(0, 2**32 - 1))
def test_sync_time_laid_over_the_steps_is_the_loop(scene: tuple[np.ndarray, ...], seed: int) -> None:
    lo, hi, ts, dur, _ = scene
    rng = np.random.default_rng(seed)
    k = len(ts)
    start, end = np.sort(ts), np.sort(ts) + dur  # gaps may cross steps and overlap each other
    sync = np.where(rng.random(k) < 0.3, 0.0, rng.random(k) * rng.choice([1.0, 50.0, 2000.0], k))
    z = np.zeros(k)
    gaps = Gaps(start, end, z, z, sync, z, np.zeros(k, np.int8), {})
    steps = Steps(np.arange(len(lo)), lo, hi, lo, hi)
    _same(sync_us_by_step(gaps, steps), _old_sync_us_by_step(gaps, steps))


def test_step_structs_hold_every_field() -> None:
    fields = set(Step.__struct_fields__) - {"flops_per_step", "mfu", "achieved_flops"}
    assert fields == {"step", "start_us", "dur_us", "breakdown", "breakdown_us", *step_metrics.METRIC_FIELDS}
    assert set(step_metrics.METRIC_FIELDS) < set(Metrics.__struct_fields__)
