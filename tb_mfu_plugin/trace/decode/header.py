"""The trace's top-level keys -> a ``TraceMeta`` the rest of the code can trust.

``deviceProperties`` and ``distributedInfo`` are free-form JSON that flows into
reports (and from there into JSON, the terminal and the tab). Values no real
trace holds are dropped here with a note: nesting deeper than a few levels (a
1,000-deep value would make every later encoder recurse), non-scalar device
properties, ranks that are not small non-negative integers.
"""

from __future__ import annotations

import math
from typing import Any

from ..tables import TraceMeta
from . import schema

# Real distributedInfo nests 3 deep (pg_config: list of dicts of lists).
MAX_DEPTH = 8
MAX_DEVICE_ENTRIES = 1024
MAX_STRING = 4096
MAX_RANK = 1 << 24
INT64 = 1 << 63


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON value, counted without recursion; stops above ``limit``."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            d += 1
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((x, d) for x in v)
    return deepest


def _scalar(v: Any) -> bool:
    if isinstance(v, bool) or v is None:
        return True
    if isinstance(v, int):
        return -INT64 <= v < INT64
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, str) and len(v) <= MAX_STRING


def _device_properties(raw: Any, notes: list[str]) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        return []
    entries = [p for p in raw if isinstance(p, dict)]
    if len(entries) > MAX_DEVICE_ENTRIES:
        notes.append(f"deviceProperties lists {len(entries)} devices; only the first {MAX_DEVICE_ENTRIES} were read.")
        entries = entries[:MAX_DEVICE_ENTRIES]
    out, dropped = [], 0
    for p in entries:
        clean = {k: v for k, v in p.items() if _scalar(v)}
        dropped += len(p) - len(clean)
        if "id" in clean and type(clean["id"]) is not int:
            del clean["id"]
            dropped += 1
        out.append(clean)
    if dropped:
        notes.append(f"{dropped} deviceProperties values were not plain numbers or strings and were ignored.")
    return out


def _distributed(raw: Any, notes: list[str]) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or depth(raw) > MAX_DEPTH:
        notes.append("distributedInfo is malformed (not an object, or nested too deep) and was ignored.")
        return None
    out = dict(raw)
    for k in ("rank", "world_size"):
        v = out.get(k)
        if v is not None and not (type(v) is int and 0 <= v < MAX_RANK):
            notes.append(f"distributedInfo.{k} is not a small non-negative integer and was ignored.")
            del out[k]
    return out


def _pick(header: schema.Header, trailer: schema.Header | None, attr: str) -> Any:
    v = getattr(header, attr)
    if v is None and trailer is not None:
        v = getattr(trailer, attr)
    return v


def trace_meta(path: str, header: schema.Header, trailer: schema.Header | None, size: int) -> TraceMeta:
    notes: list[str] = []
    base = _pick(header, trailer, "baseTimeNanoseconds")
    name = _pick(header, trailer, "traceName")
    version = _pick(header, trailer, "schemaVersion")
    return TraceMeta(
        path=path,
        device_properties=_device_properties(_pick(header, trailer, "deviceProperties"), notes),
        distributed_info=_distributed(_pick(header, trailer, "distributedInfo"), notes),
        trace_name=name[:MAX_STRING] if isinstance(name, str) else None,
        base_time_ns=base if type(base) is int and -INT64 <= base < INT64 else None,
        schema_version=version if _scalar(version) else None,
        size_bytes=size,
        notes=notes,
    )
