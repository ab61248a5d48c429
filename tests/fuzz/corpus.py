"""A deterministic corpus of malformed and hostile traces, one run directory per case.

``build_corpus(out_dir)`` writes every case under ``out_dir/<case>/`` and returns
the case directories, so ``out_dir`` itself is a logdir of the whole corpus. Cases
come from two sources:

- mutations of our real H200 sample traces (``sample_traces/``): hostile numbers
  in ids and measures, deep nesting, broken structure, byte-level damage to the
  text and to the gzip stream, all drawn from a seeded ``random.Random``;
- hand-written cases (``hostile.py``) for what mutation cannot reach: FIFOs, links
  to ``/dev/zero``, gzip bombs, huge names, 20,000 devices, hostile sidecars.

The same seed always gives the same bytes (gzip headers carry no timestamp).
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hostile
import msgspec

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
# Small real traces: mutations of them analyse in well under a second each.
BASES = ("low_sm_efficiency", "pageable_copy_loop", "fp32_no_tensor_cores", "dataloader_stall")
TRACE_NAME = "rank0.1.pt.trace.json"
MUTATIONS_PER_BASE = 70

Doc = dict[str, Any]

# Values no real trace holds in a numeric field: beyond int64, Unicode digits that
# str.isdigit() accepts and int() refuses, wrong types, extremes.
HOSTILE_NUMBERS: list[Any] = [
    2**63,
    2**64 + 5,
    -(2**63) - 1,
    10**30,
    -(10**30),
    2**31,
    -(2**31) - 1,
    -1,
    -7,
    0,
    1e308,
    -1e308,
    1.7e19,
    -10.5,
    0.0,
    1e-320,
    "²",
    "١٢٣",
    "12",
    "-5",
    "",
    "nan",
    "inf",
    "stream 7",
    "\u0000",
    "\ud800x",
    None,
    True,
    [],
    [1, 2],
    {},
    {"a": 1},
    [2**70, 3],
    [-4, 5, 6],
    [1e300, 1e300, 1e300],
]
ID_KEYS = ("device", "stream", "correlation", "External id", "external id")
MEASURE_KEYS = ("bytes", "est. achieved occupancy %", "blocks per SM", "warps per SM", "grid", "block")
TOP_KEYS = ("ts", "dur", "pid", "tid", "name", "cat", "ph")


def _raw(base: str) -> bytes:
    (path,) = sorted((SAMPLES / base).glob("rank0.*.pt.trace.json.gz"))
    return gzip.decompress(path.read_bytes())


def _load(base: str) -> Doc:
    doc: Doc = msgspec.json.decode(_raw(base))
    return doc


def kineto_text(doc: Doc) -> bytes:
    """Kineto's layout: the header, then one event per line after ``\\n  {``."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    inner = json.dumps(head, ensure_ascii=False)[1:-1]
    events = doc.get("traceEvents", [])
    body = ",\n".join("  " + _dumps(e) for e in events)
    sep = ",\n  " if inner else "\n  "
    text = "{\n  " + inner + sep + '"traceEvents": [\n' + body + "\n  ]\n}\n"
    return _DEEP.sub(_nested, text.encode("utf-8", "surrogatepass"))


def _dumps(e: Any) -> str:
    try:
        return msgspec.json.encode(e).decode("utf-8", "surrogatepass")
    except (TypeError, UnicodeEncodeError, msgspec.EncodeError):  # lone surrogates, ints beyond 64 bits
        return json.dumps(e, ensure_ascii=False)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def deep(depth: int) -> str:
    """A placeholder that ``kineto_text`` replaces by JSON nested ``depth`` deep.

    (Python's json module cannot write such a value: it recurses.)"""
    return f"@@DEEP{depth}@@"


_DEEP = re.compile(rb'"@@DEEP(\d+)@@"')


def _nested(m: re.Match[bytes]) -> bytes:
    half = int(m.group(1)) // 2
    return b'{"k":[' * half + b"1" + b"]}" * half


def _events(doc: Doc, rng: random.Random, pred: Callable[[Doc], bool], n: int) -> list[Doc]:
    pool = [e for e in doc["traceEvents"] if isinstance(e, dict) and pred(e)]
    return rng.sample(pool, min(n, len(pool))) if pool else []


def _is_gpu(e: Doc) -> bool:
    return e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")


def _m_args(doc: Doc, rng: random.Random) -> str:
    key = rng.choice(ID_KEYS + MEASURE_KEYS)
    value = rng.choice(HOSTILE_NUMBERS)
    for e in _events(doc, rng, _is_gpu, rng.choice((1, 5, 50))):
        e.setdefault("args", {})[key] = value
    return f"gpu args[{key}]={value!r}"[:80]


def _m_top(doc: Doc, rng: random.Random) -> str:
    key = rng.choice(TOP_KEYS)
    value = rng.choice(HOSTILE_NUMBERS)
    for e in _events(doc, rng, lambda e: e.get("ph") == "X", rng.choice((1, 10, 100))):
        e[key] = value
    return f"event[{key}]={value!r}"[:80]


def _m_input_dims(doc: Doc, rng: random.Random) -> str:
    dims = rng.choice(
        [
            [[-4, 8], [8, 16]],
            [[2**40, 2**40], [2**40, 2**40]],
            [[2**70, 3], [3, 4]],
            [["a"], [1]],
            [[1e300, 2], [2, 3]],
            deep(900),
            [[]],
            [[0, 0], [0, 0]],
            [[-1, -1], [-1, -1]],
        ]
    )
    for e in _events(doc, rng, lambda e: "Input Dims" in e.get("args", {}), rng.choice((1, 20, 1000))):
        e["args"]["Input Dims"] = dims
    return "Input Dims hostile"


def _m_deep(doc: Doc, rng: random.Random) -> str:
    where = rng.choice(("args", "header", "deviceProperties", "distributedInfo", "event"))
    nest = deep(rng.choice((999, 1000, 5000)))
    if where == "args":
        for e in _events(doc, rng, lambda e: e.get("ph") == "X", 3):
            e.setdefault("args", {})["nested"] = nest
    elif where == "header":
        doc["extra"] = nest
    elif where == "deviceProperties":
        doc.setdefault("deviceProperties", [{}])[0]["name"] = nest
    elif where == "distributedInfo":
        doc["distributedInfo"] = {"rank": 0, "world_size": 2, "pg_config": nest}
    else:
        doc["traceEvents"].insert(rng.randrange(len(doc["traceEvents"]) + 1), nest)
    return f"nested 1000+ deep in {where}"


def _m_steps(doc: Doc, rng: random.Random) -> str:
    n = rng.choice(("99999999999999999999999", "18446744073709551616", "-1", "²", "1e5", "00", "٣"))
    for e in _events(doc, rng, lambda e: str(e.get("name", "")).startswith("ProfilerStep#"), 2):
        e["name"] = f"ProfilerStep#{n}"
    return f"ProfilerStep#{n}"


def _m_drop(doc: Doc, rng: random.Random) -> str:
    what = rng.choice(("cpu", "gpu", "steps", "launches", "meta", "all"))
    keep: dict[str, Callable[[Doc], bool]] = {
        "cpu": lambda e: _is_gpu(e) or e.get("ph") != "X",
        "gpu": lambda e: not _is_gpu(e),
        "steps": lambda e: not str(e.get("name", "")).startswith("ProfilerStep#"),
        "launches": lambda e: e.get("cat") != "cuda_runtime",
        "meta": lambda e: e.get("ph") == "X",
        "all": lambda e: False,
    }
    doc["traceEvents"] = [e for e in doc["traceEvents"] if keep[what](e)]
    if what == "all" and rng.random() < 0.5:
        doc.pop("deviceProperties", None)
    return f"without {what} events"


def _m_devices(doc: Doc, rng: random.Random) -> str:
    ids = rng.choice(([2**31, 2**32, -(2**31) - 1], [-3], [2**63 - 1], list(range(200))))
    for i, e in enumerate(_events(doc, rng, _is_gpu, 400)):
        e.setdefault("args", {})["device"] = ids[i % len(ids)]
    doc["deviceProperties"] = [{"id": d, "name": "NVIDIA H200", "numSms": 132} for d in ids]
    return f"device ids {ids[:3]}"


def _m_props(doc: Doc, rng: random.Random) -> str:
    value = rng.choice(HOSTILE_NUMBERS)
    key = rng.choice(("numSms", "computeMajor", "name", "id", "maxThreadsPerMultiprocessor"))
    props = doc.get("deviceProperties") or [{}]
    if isinstance(props, list) and props and isinstance(props[0], dict):
        props[0][key] = value
    if rng.random() < 0.2:
        doc["deviceProperties"] = rng.choice(({}, "x", [1, 2], [None], None))
    if rng.random() < 0.2:
        doc["distributedInfo"] = rng.choice(({"rank": value, "world_size": value}, [], "x", {"rank": 2**80}))
    return f"deviceProperties[{key}]={value!r}"[:80]


def _m_shuffle(doc: Doc, rng: random.Random) -> str:
    events = doc["traceEvents"]
    rng.shuffle(events)
    for e in _events(doc, rng, lambda e: e.get("ph") == "X", 20):
        e["ph"] = rng.choice(("B", "E", "i", "Q", "", 5, None))
    return "shuffled, some phases changed"


STRUCTURED: tuple[Callable[[Doc, random.Random], str], ...] = (
    _m_args,
    _m_args,
    _m_args,
    _m_top,
    _m_top,
    _m_input_dims,
    _m_deep,
    _m_steps,
    _m_drop,
    _m_devices,
    _m_props,
    _m_shuffle,
)


def _b_truncate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    cut = rng.randrange(len(data))
    return data[:cut], f"text cut at {cut}"


def _b_flip(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    b = bytearray(data)
    for _ in range(rng.choice((1, 10, 100))):
        b[rng.randrange(len(b))] = rng.choice(b'{}[],:"\\\x00\xff\n 0123456789eE-+.')
    return bytes(b), "bytes flipped"


def _b_splice(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    at = rng.randrange(len(data))
    junk = rng.choice((b"\n  {", b"\n  {\n  {", b"\xff\xfe", b"\x00", b'"\\ud800"', b"]}", b"\xc3\x28", b"[" * 2000))
    return data[:at] + junk + data[at:], f"spliced {junk[:10]!r} at {at}"


def _b_one_line(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    # JSON strings hold no raw newline, so this keeps the document valid
    return data.replace(b"\n", b" "), "one-line document"


BYTE_LEVEL: tuple[Callable[[bytes, random.Random], tuple[bytes, str]], ...] = (
    _b_truncate,
    _b_flip,
    _b_splice,
    _b_one_line,
)


def _gz_damage(blob: bytes, rng: random.Random) -> tuple[bytes, str]:
    how = rng.choice(("truncate", "flip", "trailer"))
    b = bytearray(blob)
    if how == "truncate":
        return bytes(b[: rng.randrange(2, len(b))]), "gzip truncated"
    if how == "flip":
        for _ in range(5):
            b[rng.randrange(10, len(b))] ^= 0xFF
        return bytes(b), "gzip bytes flipped"
    b[-4:] = (2**32 - 1).to_bytes(4, "little")  # ISIZE that lies
    return bytes(b), "gzip ISIZE lies"


def write_case(out_dir: Path, name: str, data: bytes, file_name: str = TRACE_NAME + ".gz") -> Path:
    d = out_dir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / file_name).write_bytes(data)
    return d


def mutated_cases(out_dir: Path, seed: int = 15, per_base: int = MUTATIONS_PER_BASE) -> list[Path]:
    rng = random.Random(seed)
    cases: list[Path] = []
    for base in BASES:
        original = _raw(base)
        for i in range(per_base):
            doc: Doc = msgspec.json.decode(original)  # a fresh copy, 20x faster than deepcopy
            what = [f(doc, rng) for f in rng.sample(STRUCTURED, rng.choice((1, 1, 2, 3)))]
            data = kineto_text(doc)
            roll = rng.random()
            if roll < 0.25:
                data, how = rng.choice(BYTE_LEVEL)(data, rng)
                what.append(how)
            blob = gz(data) if rng.random() < 0.8 else data
            if blob is not data and rng.random() < 0.1:
                blob, how = _gz_damage(blob, rng)
                what.append(how)
            name = f"m_{base}_{i:03d}"
            fname = TRACE_NAME + (".gz" if blob is not data else "")
            cases.append(write_case(out_dir, name, blob, fname))
            (out_dir / f"{name}.what").write_text("; ".join(what) + "\n")  # beside, not inside, the run
    return cases


# The profile_memory=True sample: its [memory] events (issue 25) get hostile values.
MEMORY_BASE = "gpt_memory"
MEMORY_MUTATIONS = 24
MEMORY_KEYS = ("Total Allocated", "Total Reserved", "Bytes", "Device Id", "Device Type", "Addr")


def _is_memory(e: Doc) -> bool:
    return e.get("name") == "[memory]"


def _m_memory_args(doc: Doc, rng: random.Random) -> str:
    key = rng.choice(MEMORY_KEYS)
    value = rng.choice(HOSTILE_NUMBERS)
    for e in _events(doc, rng, _is_memory, rng.choice((1, 20, 500))):
        e.setdefault("args", {})[key] = value
    return f"memory args[{key}]={value!r}"[:80]


def _m_memory_shape(doc: Doc, rng: random.Random) -> str:
    """Events moved in time, addresses made to collide, frees lost, or events duplicated."""
    what = rng.choice(("shift", "addr", "drop_frees", "duplicate", "top"))
    mem = _events(doc, rng, _is_memory, rng.choice((10, 200, 2000)))
    for e in mem:
        if what == "shift":
            e["ts"] = e["ts"] + rng.choice((-1e7, 1e7, 0.5))
        elif what == "addr":
            e["args"]["Addr"] = 4096
        elif what == "drop_frees" and e["args"].get("Bytes", 0) < 0:
            e["name"] = "[memory gone]"
        elif what == "top":
            e[rng.choice(TOP_KEYS)] = rng.choice(HOSTILE_NUMBERS)
    if what == "duplicate":
        doc["traceEvents"] += [dict(e) for e in mem]
    return f"memory events: {what}"


def memory_cases(out_dir: Path, seed: int = 25, per_base: int = MEMORY_MUTATIONS) -> list[Path]:
    """Mutations of the profile_memory=True sample's memory events (and sometimes of the rest)."""
    rng = random.Random(seed)
    original = _raw(MEMORY_BASE)
    cases = []
    for i in range(per_base):
        doc: Doc = msgspec.json.decode(original)
        what = [f(doc, rng) for f in rng.sample((_m_memory_args, _m_memory_args, _m_memory_shape), rng.choice((1, 2)))]
        if rng.random() < 0.25:
            what.append(rng.choice(STRUCTURED)(doc, rng))
        name = f"m_{MEMORY_BASE}_{i:03d}"
        cases.append(write_case(out_dir, name, gz(kineto_text(doc))))
        (out_dir / f"{name}.what").write_text("; ".join(what) + "\n")
    return cases


def build_corpus(out_dir: Path, seed: int = 15, per_base: int = MUTATIONS_PER_BASE) -> list[Path]:
    """Write the whole corpus under ``out_dir``; one run directory per case."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = mutated_cases(out_dir, seed, per_base)
    cases += memory_cases(out_dir)
    cases += hostile.hand_written_cases(out_dir, _load("low_sm_efficiency"))
    return cases
