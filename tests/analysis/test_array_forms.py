"""Per-step and per-name loops that became array operations give what the loops gave.

Each reference is the loop as it was (commit 67c6d50); random inputs come from Hypothesis."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_mfu_plugin.analysis.device import mfu, plausibility
from tb_mfu_plugin.analysis.flops import shapes as flops
from tb_mfu_plugin.analysis.kernels.name_patterns import DATALOADER, name_mask
from tb_mfu_plugin.analysis.report import Step, Summary, WorkerReport
from tb_mfu_plugin.analysis.time import steps
from tb_mfu_plugin.analysis.time.patterns import NEEDLES
from tb_mfu_plugin.analysis.time.step_metrics import METRIC_FIELDS, StepColumns
from tb_mfu_plugin.trace.tables import Names, name_lookup, step_markers


def _old_flop_rate(flops_: float | None, time_us: float | None) -> float | None:
    if not flops_ or not time_us or time_us <= 0:
        return None
    return float(flops_) / (float(time_us) * 1e-6)


def _old_mfu_for(f: float | None, t: float | None, peak: float | None) -> float | None:
    rate = _old_flop_rate(f, t)
    if rate is None or not peak or peak <= 0:
        return None
    return rate / float(peak)


NUMBERS = st.one_of(
    st.sampled_from([0.0, -0.0, -1.0, float("nan"), float("inf"), 1e-300]), st.floats(-1e18, 1e18, allow_nan=False)
)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return np.float64(a).tobytes() == np.float64(b).tobytes()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NUMBERS, NUMBERS), min_size=1, max_size=20), st.one_of(st.none(), NUMBERS))
def test_flop_rates_and_mfus_are_the_scalar_formulas(pairs: list[tuple[float, float]], peak: float | None) -> None:
    f = np.array([p[0] for p in pairs])
    t = np.array([p[1] for p in pairs])
    rate, known = mfu.flop_rates(f, t)
    mfus = mfu.mfus_for(f, t, peak)
    for i, (a, b) in enumerate(pairs):
        if a and b > 0 and b * 1e-6 == 0:  # a time under 1e-317 µs: the scalar raised ZeroDivisionError
            assert not np.isfinite(rate[i])  # now inf (or NaN for NaN FLOPs), as numpy divides
            continue
        old = _old_flop_rate(a, b)
        assert _same(mfu.flop_rate(a, b), old)
        assert _same(float(rate[i]) if known[i] else None, old)
        assert _same(mfus[i], _old_mfu_for(a, b, peak))
        assert _same(mfu.mfu_for(a, b, peak), _old_mfu_for(a, b, peak))
    assert mfu.flop_rate(None, 5.0) is None and mfu.flop_rate(5.0, None) is None


STEP_NAMES = st.one_of(
    st.integers(0, 10**19).map(lambda k: f"ProfilerStep#{k}"),
    st.text(alphabet="0123456789x\n٣ #", max_size=22).map(lambda s: f"ProfilerStep#{s}"),
    st.text(max_size=20),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(STEP_NAMES, max_size=40, unique=True))
def test_step_numbers_are_the_regexs(names: list[str]) -> None:
    got = steps._step_numbers(SimpleNamespace(names=Names(names)))  # type: ignore[arg-type]
    ref = [int(m.group(1)) if (m := steps._STEP_NAME.match(n)) else -1 for n in names]
    assert got.tolist() == ref
    markers, numbers = step_markers(names, 5)[1:]
    assert markers == [5 + i for i, n in enumerate(names) if n.startswith("ProfilerStep#") and n[13:].isascii()
                       and n[13:].isdigit()]  # fmt: skip
    assert numbers == [int(names[c - 5][13:]) if len(names[c - 5]) <= 31 else -1 for c in markers]


@settings(max_examples=200, deadline=None)
@given(st.lists(STEP_NAMES, max_size=40, unique=True), st.sampled_from(["", "Step", "#1", "aten", "2"]))
def test_a_names_table_asks_a_predicate_once_for_its_step_markers(names: list[str], needle: str) -> None:
    # a predicate about the kind of name (one that tells no marker from another) gives what it gave
    # asked of every name; a substring test of "#1" or "2" would not be one, "" and "Step" are
    def predicate(n: str) -> bool:
        return n.startswith("ProfilerStep#") if needle in ("", "Step") else needle in n and "#" not in n

    table = Names(names)
    ref = np.array([predicate(n) for n in names], bool)
    assert name_lookup(table, predicate).tolist() == ref.tolist()
    codes = np.arange(0, len(names), 2)
    picked = np.zeros(len(names), bool)
    picked[codes] = ref[codes]
    assert name_lookup(table, predicate, codes).tolist() == picked.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1e3)), min_size=1, max_size=30))
def test_step_windows_without_overlap_are_the_loop(spans: list[tuple[float, float]]) -> None:
    start = np.array([5e12 + s for s, _ in spans])
    end = start + np.array([d for _, d in spans])
    ref_start, ref_end = start.copy(), end.copy()
    for i in range(1, len(spans)):  # find_steps as it was
        ref_start[i] = max(ref_start[i], ref_end[i - 1])
        ref_end[i] = max(ref_end[i], ref_start[i])
    got_start, got_end = steps._no_overlap(start, end)
    assert got_start.tobytes() == ref_start.tobytes() and got_end.tobytes() == ref_end.tobytes()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"DataLoderIt_nxm().#ptizgrsOS", "DataLoader", "Optimizer.", "enumerate("]), max_size=12
    ).map("".join)
)
def test_each_needle_is_in_every_match_of_its_pattern(text: str) -> None:
    for pattern, needle in NEEDLES.items():
        for s in (text, f"enumerate(DataLoader)#{text}", f"Optimizer.step#{text}.step", f"Optimizer.zero_grad#{text}"):
            if pattern.search(s):
                assert needle in s, (pattern.pattern, s)


def test_a_table_of_some_codes_is_the_full_table_there() -> None:
    names = ["aten::mm", "ProfilerStep#3", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "x"]
    full = name_mask(names, DATALOADER)
    codes = np.array([2, 0])
    some = name_mask(names, DATALOADER, codes=codes)
    assert some[codes].tolist() == full[codes].tolist() and not some[[1, 3]].any()
    assert name_lookup(names, str.isascii, np.array([1])).tolist() == [False, True, False, False]


def test_is_flop_op_is_having_a_formula() -> None:
    for name in [*list(flops.FORMULAS)[:50], "triton_tem_fused_flex_attention_backward_1", "triton_tem_fused_mm_0",
                 "ProfilerStep#7", "aten::relu", ""]:  # fmt: skip
        assert flops.is_flop_op(name) is (flops.formula_of(name) is not None)


def _metric_shares(obj: Any) -> dict[str, float]:
    keys = [f for f in obj.__struct_fields__ if f.endswith("_share") or f in ("sm_efficiency", "achieved_occupancy")]
    return {k: getattr(obj, k) for k in keys if isinstance(getattr(obj, k), float)}


def _old_guard_shares(report: WorkerReport) -> None:
    bad: set[str] = set()
    for obj in [report.summary, *report.steps]:
        if obj is None:
            continue
        for key, v in _metric_shares(obj).items():
            if 1.0 < v <= 1.0 + plausibility._ROUNDING:
                setattr(obj, key, 1.0)
            elif v > 1.0 + plausibility._ROUNDING:
                bad.add(key)
        for key, v in (getattr(obj, "breakdown", None) or {}).items():
            if 1.0 < v <= 1.0 + plausibility._ROUNDING:
                obj.breakdown[key] = 1.0
            elif v > 1.0 + plausibility._ROUNDING:
                bad.add(f"breakdown.{key}")
    if bad and plausibility.IMPOSSIBLE_SHARE not in report.flags:
        report.flags.append(plausibility.IMPOSSIBLE_SHARE)
        report.notes.append(
            f"impossible shares above 100 % ({', '.join(sorted(bad))}): overlapping or malformed events in the "
            "trace; these figures are shown as impossible"
        )


SHARES = st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-9, 1.0 + 1e-6, 1.0 + 2e-6, 1.5, float("nan"), None])


def _metrics(draw: st.DrawFn) -> dict[str, Any]:
    m = {k: draw(SHARES) or 0.0 for k in ("gpu_busy_share", "kernel_time_share", "memcpy_time_share",
                                          "memset_time_share", "idle_share", "host_sync_blocked_share",
                                          "tensor_core_kernel_share")}  # fmt: skip
    m.update(sm_efficiency=draw(SHARES), achieved_occupancy=draw(SHARES), mfu=draw(SHARES))
    m.update({k: 0.0 for k in ("h2d_bytes_per_step", "d2h_bytes_per_step", "d2d_bytes_per_step")})
    m.update(p2p_bytes_per_step=0.0, sync_count_per_step=0.0, kernels_per_step=1.0)
    m["breakdown"] = {k: draw(SHARES) or 0.0 for k in ("kernel", "memcpy", "idle_other")}
    return m


@st.composite
def reports(draw: st.DrawFn) -> WorkerReport:
    summary = Summary(steps=1, step_time_us=1.0, **_metrics(draw))
    rows = [Step(step=i, start_us=float(i), dur_us=1.0, **_metrics(draw)) for i in range(draw(st.integers(0, 12)))]
    return WorkerReport(name="w", span="", file="f", summary=summary, steps=rows)


@settings(max_examples=300, deadline=None)
@given(reports())
def test_share_guard_of_the_columns_is_the_loop_over_the_steps(report: WorkerReport) -> None:
    """The guard clamps and flags the summary and the step columns as the loop over the step structs
    did; an unknown (None) figure holds any number in its column (5.0 here), which never counts."""
    old = copy.deepcopy(report)
    fields = [f for f in METRIC_FIELDS if f not in ("flops_per_step", "mfu", "achieved_flops")]
    values = {f: np.array([5.0 if (v := getattr(s, f)) is None else v for s in report.steps]) for f in fields}
    known = {f: np.array([getattr(s, f) is not None for s in report.steps], bool) for f in fields}
    breakdown = {k: np.array([s.breakdown[k] for s in report.steps]) for k in ("kernel", "memcpy", "idle_other")}
    assert report.summary is not None
    summary, cols, note = plausibility.guard_shares(report.summary, StepColumns(values, known, breakdown, np.zeros(0)))
    _old_guard_shares(old)
    assert repr(summary) == repr(old.summary)  # NaN == NaN by repr
    for i, step in enumerate(old.steps):
        for f in fields:
            want = getattr(step, f)
            assert (repr(float(cols.values[f][i])) if cols.known[f][i] else None) == (
                repr(float(want)) if want is not None else None
            ), (f, i)
        assert {k: repr(float(cols.breakdown[k][i])) for k in cols.breakdown} == {
            k: repr(float(v)) for k, v in step.breakdown.items()
        }
    assert (note is not None) == (plausibility.IMPOSSIBLE_SHARE in old.flags)
    if note is not None:
        assert note == old.notes[-1]
