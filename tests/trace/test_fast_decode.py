"""The compiled fast path of the decoder (trace/decode/_kineto.c, fast.py) against the msgspec path:
the same tables, the same errors, on real traces, on the hostile corpus and on random events.

Each comparison decodes one input twice, with ``$TB_MFU_FAST_DECODE`` off and on, in chunks small
enough that even the samples go through the chunked path, and checks that the fast path read
chunks (else the comparison would compare the msgspec path with itself).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.running.pipeline import _keep_inputs
from tb_mfu_plugin.trace.decode import fast, stream
from tb_mfu_plugin.trace.decode.columns import Columns
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.tables import TraceTables

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures"
SAMPLES = sorted((ROOT / "sample_traces").glob("*/*.pt.trace.json*"))

pytestmark = pytest.mark.skipif(fast._kineto is None, reason="the compiled decoder is not built (no C compiler)")


class Counted:
    """Counts the chunks the compiled parser read and those it left to msgspec."""

    def __init__(self) -> None:
        self.fast = self.fallback = 0

    def __call__(self, view: memoryview) -> fast.Block | None:
        got = _decode(view)
        if got is None:
            self.fallback += 1
        else:
            self.fast += 1
        return got


_decode = fast.decode


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counted]:
    c = Counted()
    monkeypatch.setattr(fast, "decode", c)
    monkeypatch.setattr(stream.fast, "decode", c)
    yield c


def assert_same(a: TraceTables, b: TraceTables) -> None:
    assert a.names == b.names
    for ta, tb in ((a.cpu, b.cpu), (a.gpu, b.gpu), (a.memory, b.memory)):
        for k in ta.__dataclass_fields__:
            va, vb = getattr(ta, k), getattr(tb, k)
            if isinstance(va, np.ndarray):
                assert va.dtype == vb.dtype, k
                np.testing.assert_array_equal(va, vb, err_msg=k)
            else:
                assert va == vb, k
    assert a.comm_args == b.comm_args
    assert a.meta == b.meta


def both(path: str | Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, Any]:
    """The tables (or the error) of the msgspec path, then of the fast path."""
    out = []
    for on in ("0", "1"):
        monkeypatch.setenv(fast.ENV, on)
        try:
            out.append(decode_trace(str(path), keep_inputs=_keep_inputs, processes=1, **kw))
        except TraceError as exc:
            out.append(exc)
    return out[0], out[1]


def check(path: str | Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = both(path, monkeypatch)
    if isinstance(a, TraceError) or isinstance(b, TraceError):
        assert str(a) == str(b)
    else:
        assert_same(a, b)


def _inflated_size(path: Path) -> int:
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as f:
        return len(f.read())


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name + "/" + p.name[:6])
def test_samples_same_tables(path: Path, monkeypatch: pytest.MonkeyPatch, counted: Counted) -> None:
    monkeypatch.setattr(stream, "CHUNK_BYTES", max(4096, _inflated_size(path) // 8))  # about 8 chunks
    check(path, monkeypatch)
    assert counted.fast > 0  # the compiled parser read this real trace's chunks


def test_fixtures_same_tables(monkeypatch: pytest.MonkeyPatch, counted: Counted) -> None:
    """Third-party traces (2021 traces, ROCm, ns timestamps, HTA's and TraceLens' samples): most of
    their chunks fall back, and whatever the fast path reads must agree."""
    paths = sorted(p for p in FIXTURES.rglob("*.json*") if "trace" in p.name or p.suffix == ".gz")
    if not paths:
        pytest.skip("../shared/fixtures is absent")
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1 << 18)
    for p in paths:
        check(p, monkeypatch)
    assert counted.fast > 0 and counted.fallback > 0


def test_hostile_corpus_same_outcome(
    hostile_corpus: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch, counted: Counted
) -> None:
    """A third of the hostile corpus (tests/fuzz; every kind of case) decodes to the same tables or
    the same error either way."""
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1 << 12)
    for case in hostile_corpus[1][::3]:
        for f in sorted(p for p in case.rglob("*") if p.is_file()):
            check(f, monkeypatch)
    assert counted.fast > 0 and counted.fallback > 0


# -- random events ------------------------------------------------------------------------

_ids = st.one_of(
    st.integers(-5, 10**6),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**70),
    st.none(),
    st.sampled_from(["7", "stream 7", "", "Spans"]),
    st.floats(allow_nan=False, allow_infinity=False),
)
_measures = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**20), 10**20),
    st.none(),
    st.just("x"),
    st.sampled_from([-1.0, 0.0, 55.5, 100.0, 100.5, 1e9, 2e9]),
)
_times = st.one_of(
    st.floats(-2e19, 2e19, allow_nan=False),
    st.decimals(-(10**16), 10**16, places=3, allow_nan=False, allow_infinity=False).map(float),
    st.integers(-(10**19), 10**19),
    st.none(),
    st.just("12"),
)
_dims = st.one_of(
    st.none(),
    st.just("1,2"),
    st.lists(st.integers(-3, 2**63), max_size=4),
    st.lists(st.one_of(st.integers(0, 99), st.just(1.5)), max_size=3),
)
_names = st.one_of(
    st.sampled_from(["aten::mm", "aten::addmm", "ProfilerStep#4", "k", "ncclKernel_AllReduce", ""]),
    st.text(max_size=12),
)
_cats = st.sampled_from(
    ["cpu_op", "kernel", "Kernel", "gpu_memcpy", "cuda_runtime", "user_annotation", "python_function", "", "Trace"]
)


@st.composite
def _event(draw: st.DrawFn) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key, values in (
        ("External id", _ids),
        ("external id", _ids),
        ("correlation", _ids),
        ("device", _ids),
        ("stream", _ids),
        ("bytes", _ids),
        ("blocks per SM", _measures),
        ("est. achieved occupancy %", _measures),
        ("flops", _measures),
        ("grid", _dims),
        ("block", _dims),
        ("Input Dims", st.sampled_from([[[2, 3], [3, 4]], [[8]], [], "x"])),
        ("Input type", st.sampled_from([["float", "float"], ["c10::BFloat16"]])),
        ("Concrete Inputs", st.sampled_from([["", "1"], [""]])),
        ("Collective name", st.sampled_from(["allreduce", 3, None, "all_gather"])),
        ("Group size", st.one_of(st.integers(0, 8), st.just("2"))),
        ("dtype", st.sampled_from(["Float", 1])),
        ("Process Group Name", st.sampled_from(["0", 0])),
        ("Ev Idx", st.integers(0, 5)),
    ):
        if draw(st.booleans()):
            args[key] = draw(values)
    e: dict[str, Any] = {"ph": draw(st.sampled_from(["X", "X", "X", "i", "M", "f", "s"]))}
    for key, values in (
        ("cat", _cats),
        ("name", _names),
        ("pid", _ids),
        ("tid", _ids),
        ("ts", _times),
        ("dur", _times),
    ):
        if draw(st.integers(0, 5)):
            e[key] = draw(values)
    if draw(st.integers(0, 4)):
        e["args"] = args
    if draw(st.integers(0, 6)) == 0:  # "ph" elsewhere than first, as metadata rows have it
        e = dict(reversed(list(e.items())))
    return e


def _columns(view: memoryview, on: bool, monkeypatch: pytest.MonkeyPatch) -> Columns | str:
    monkeypatch.setenv(fast.ENV, "1" if on else "0")
    cols = Columns(_keep_inputs, 40)
    try:
        block = fast.decode(view) if on else None
        cols.add(block if block is not None else stream.complete_events(view))
    except Exception as exc:  # noqa: BLE001 - compared, not swallowed
        return type(exc).__name__
    return cols


def _same_columns(a: Columns, b: Columns) -> None:
    pa, pb = a.part(), b.part()
    assert pa.names == pb.names and pa.labels == pb.labels
    assert pa.records == pb.records and pa.comm_args == pb.comm_args and pa.problems == pb.problems
    for ca, cb in ((pa.cpu, pb.cpu), (pa.gpu, pb.gpu)):
        assert (ca is None) == (cb is None)
        for k in ca or {}:
            assert ca[k].dtype == cb[k].dtype, k  # type: ignore[index]
            np.testing.assert_array_equal(ca[k], cb[k], err_msg=k)  # type: ignore[index]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event(), min_size=1, max_size=12), indent=st.booleans())
def test_random_events_same_columns(
    events: list[dict[str, Any]], indent: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the compiled parser accepts, it reads as msgspec does; what it refuses, msgspec reads."""
    sep = ",\n  " if indent else ","
    text = ("[" + sep.join(json.dumps(e, indent=2 if indent else None) for e in events) + "]").encode()
    view = memoryview(bytearray(text))
    a, b = _columns(view, False, monkeypatch), _columns(view, True, monkeypatch)
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        _same_columns(a, b)


@pytest.mark.parametrize(
    "text",
    [
        b'[{"ph":"X","cat":"kernel","name":"a\xff","ts":1}]',  # not UTF-8 in a name: msgspec's error
        b'[{"ph":"X","cat":"kernel","name":"k","ts":1,"zz":"\\ud800"}]',  # a lone surrogate
        b'[{"ph":"X","cat":"kernel","name":"k","ts":1e400}]',  # out of range
        b'[{"ph":"X","cat":"kernel","name":"k","ts":1,}]',  # a trailing comma
        b'[{"ph":"X","ph":"M"}]',  # two phases
        b'[{"ph":"X","cat":"kernel","name":"k\\n\\"q\\"","ts":1.5}]',  # escapes in a name: read here
        b'[{"ph":"X","cat":"kernel","name":"caf\xc3\xa9","ts":-0.0,"dur":-0}]',  # UTF-8, signed zeros
        b'[{"ph":"X","cat":"kernel","name":"k","ts":1,"args":{"grid":[4611686018427387904,2]}}]',
        b'[{"ph":"X","cat":"kernel","name":"k","ts":1,"args":{"grid":[1,2.0]}}]',
        b'[{"ph":"i","name":"[memory]","ts":1,"args":{"Bytes":4,"Device Type":1}}]',
        b'[{"ph":"X","cat":"kernel","name":"k","ts":1,"args":{"device":99999999999999999999}}]',
        b'[{"ph":"X","cat":"kernel","name":"k","ts":1,"args":{"Collective name":"allreduce","Group size":2}}]',
        b'[{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"args":{"Input Dims": [[2, 3], [3, 4]] }}]',
        b'[{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"pid":"Spans"}]',
        b'[{"ph":"Q","cat":"cpu_op","name":"a","ts":1}]',
        b'[{"ph":"X","cat":"cpu_op","name":"a","ts":01}]',
        b"[]",
    ],
)
def test_edge_cases_same_columns(text: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    view = memoryview(bytearray(text))
    a, b = _columns(view, False, monkeypatch), _columns(view, True, monkeypatch)
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        _same_columns(a, b)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.integers(0, 10**19).flatmap(lambda m: st.integers(-30, 30).map(lambda e: f"{m}e{e}")),
        st.integers(0, 10**19).flatmap(lambda m: st.integers(0, 22).map(lambda k: f"{m / 10**k:.{k}f}")),
        st.from_regex(r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    )
)
def test_numbers_correctly_rounded(text: str) -> None:
    """A timestamp reads as Python's float() reads it (correctly rounded), or falls back."""
    doc = f'[{{"ph":"X","cat":"kernel","name":"k","ts":{text}}}]'.encode()
    got = fast._kineto.decode(doc, fast._CATS)
    want = float(text)
    if got is None:
        assert math.isinf(want) or len(text.lstrip("-").split(".")[0].split("e")[0].split("E")[0]) > 18
        return
    rows, bad_ts = got[0], got[1]
    if not abs(want) <= 1e19:
        assert rows == 0 and bad_ts == 1
        return
    ts = np.frombuffer(got[2][1], np.float64)[0]
    assert ts == want
    if want == 0:  # msgspec reads "-0" as the int 0 (+0.0), "-0.0" and "-0e0" as -0.0
        negative = text.startswith("-") and any(c in text for c in ".eE")
        assert math.copysign(1, ts) == (-1 if negative else 1)
