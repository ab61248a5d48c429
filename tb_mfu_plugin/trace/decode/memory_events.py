"""The caching allocator's ``[memory]`` instant events -> a typed columnar ``MemoryTable`` (trace/tables.py).

``torch.profiler.profile(profile_memory=True)`` writes one instant event (``"ph": "i"``, named
``[memory]``) per allocation and per free of the caching allocator, on the thread that made it::

    {"ph": "i", "name": "[memory]", "pid": 512, "tid": 537, "ts": ..., "args": {"Total Reserved":
     1231028224, "Total Allocated": 1108557824, "Bytes": 134217728, "Device Id": 0,
     "Device Type": 1, "Addr": 140625684987904, ...}}

``Bytes`` is positive for an allocation and negative for a free; the totals are the allocator's
after the event, for the whole device. ``[OutOfMemory]`` instants (the allocator's failed
requests) carry the same args and are kept too, with ``kind`` OOM.

Only device memory is kept: host events (``Device Type`` 0, CPU tensors) would multiply the rows
of a trace for a figure no face shows. Values no real trace holds are made unknown here, at the
trace layer, and counted (``MEMORY_NOTES``): totals negative or beyond ``MAX_MEMORY_BYTES``, a
change beyond it, a reserved total below the allocated one, ids beyond 64 bits. The analysis
(``analysis.memory``) can then rely on every known total being a possible one.

The enclosing CPU op of each event is not a column: it is a nesting question, answered in the
analysis from the pid/tid columns (``analysis.memory.timeline``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

import numpy as np

from ..tables import MEMORY, MEMORY_COLUMNS, OOM, UNKNOWN_BYTES, MemoryTable
from . import schema
from .values import MAX_ABS_TS, floats

NAMES = {"[memory]": MEMORY, "[OutOfMemory]": OOM}
HOST_DEVICE_TYPE = 0  # c10::DeviceType::CPU
# A device with more than a pebibyte of memory, or a single change of more, is no real measurement.
MAX_MEMORY_BYTES = 1 << 50

MEMORY_NOTES = {
    "memory_totals": "memory events with a negative or absurd Total Allocated / Total Reserved have it unknown",
    "memory_bytes": "memory events with a non-integer or absurd Bytes have the change unknown",
    "memory_order": "memory events with Total Reserved below Total Allocated have the reserved total unknown",
    "memory_ids": "memory events with a device id or address that is not a 64-bit integer have it unknown",
}


class WithMemory(list[Any]):
    """A chunk's complete events, with its memory instants beside them (``memory``): the decoder's
    loops hand one list per chunk to ``Columns.add``, so the instants travel with it."""

    __slots__ = ("memory",)

    def __init__(self, complete: list[Any], memory: list[Any]) -> None:
        super().__init__(complete)
        self.memory = memory


def with_memory(complete: list[Any], instants: list[Any]) -> list[Any]:
    """``complete``, carrying the ``[memory]`` / ``[OutOfMemory]`` events among ``instants``."""
    memory = [e for e in instants if type(e.name) is str and e.name in NAMES]
    return WithMemory(complete, memory) if memory else complete


def tagged_instants(events: list[Any]) -> list[Any]:
    """The instants of a tagged decode (``schema.Instant``)."""
    return of_type(events, schema.Instant)


def of_type(events: list[Any], cls: type) -> list[Any]:
    """The events of exactly type ``cls``, picked in C (map, compress): a chunk holds ~30,000."""
    return list(compress(events, map(is_, map(type, events), repeat(cls))))


def untagged_instants(events: list[schema.Event]) -> list[schema.Event]:
    """The instants of an untagged decode (``ph`` a plain field)."""
    return [e for e in events if e.ph == "i"]


def memory_of(events: list[Any]) -> list[Any]:
    """The memory events a chunk carries (none for a plain list)."""
    return getattr(events, "memory", None) or []


_get = {k: attrgetter(k) for k in ("name", "ts", "pid", "tid")}
_arg = {
    k: attrgetter(f"args.{k}")
    for k in ("total_allocated", "total_reserved", "bytes_changed", "device_id", "device_type", "addr")
}


def _ints(values: list[Any], lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Integers within ``[lo, hi]`` as int64 (0 elsewhere), and which were; bools and floats are not."""
    try:
        x = np.fromiter(values, np.int64, len(values))
        if all(type(v) is int for v in values):  # np.fromiter takes floats and bools too
            ok = (x >= lo) & (x <= hi)
            return np.where(ok, x, 0), ok
    except (TypeError, ValueError, OverflowError):
        pass
    ok = np.fromiter((type(v) is int and lo <= v <= hi for v in values), bool, len(values))
    x = np.fromiter((v if type(v) is int and lo <= v <= hi else 0 for v in values), np.int64, len(values))
    return x, ok


def memory_columns(
    events: list[Any], int_ids: Callable[[list[Any], Callable[[Any], Any]], np.ndarray], problems: Counter[str]
) -> dict[str, np.ndarray] | None:
    """The columns of the device memory events among ``events`` (None if there are none).

    ``int_ids`` turns pid/tid values into ids as the cpu table's are (``Columns.int_ids``), so the
    analysis can put each event on its thread; repairs are counted into ``problems``."""
    ts = floats(events, _get["ts"])
    dtype, dtype_ok = _ints(list(map(_arg["device_type"], events)), 0, np.iinfo(np.int16).max)
    # host memory is left out; an unknown device type is kept (device figures will say unknown)
    keep = (np.abs(ts) <= MAX_ABS_TS) & ~(dtype_ok & (dtype == HOST_DEVICE_TYPE))
    if not keep.any():
        return None
    if not keep.all():
        events = [events[i] for i in np.flatnonzero(keep).tolist()]
        ts, dtype, dtype_ok = ts[keep], dtype[keep], dtype_ok[keep]
    alloc, alloc_ok = _ints(list(map(_arg["total_allocated"], events)), 0, MAX_MEMORY_BYTES)
    reserved, reserved_ok = _ints(list(map(_arg["total_reserved"], events)), 0, MAX_MEMORY_BYTES)
    change, change_ok = _ints(list(map(_arg["bytes_changed"], events)), -MAX_MEMORY_BYTES, MAX_MEMORY_BYTES)
    device, device_ok = _ints(list(map(_arg["device_id"], events)), 0, np.iinfo(np.int64).max)
    addrs = list(map(_arg["addr"], events))
    addr, addr_ok = _ints(addrs, 0, np.iinfo(np.int64).max)
    present = {k: np.fromiter((v is not None for v in map(_arg[k], events)), bool, len(events)) for k in _arg}
    problems["memory_totals"] += int((~alloc_ok & present["total_allocated"]).sum())
    problems["memory_totals"] += int((~reserved_ok & present["total_reserved"]).sum())
    problems["memory_bytes"] += int((~change_ok & present["bytes_changed"]).sum())
    problems["memory_ids"] += int((~device_ok & present["device_id"]).sum() + (~addr_ok & present["addr"]).sum())
    below = alloc_ok & reserved_ok & (reserved < alloc)
    problems["memory_order"] += int(below.sum())
    reserved_ok &= ~below
    names = list(map(_get["name"], events))
    return {
        "kind": np.fromiter((NAMES[n] for n in names), np.int8, len(names)),
        "ts": ts,
        "pid": int_ids(events, _get["pid"]),
        "tid": int_ids(events, _get["tid"]),
        "device_type": np.where(dtype_ok, dtype, -1).astype(np.int16),
        "device": np.where(device_ok, device, -1),
        "bytes": np.where(change_ok, change, UNKNOWN_BYTES),
        "total_allocated": np.where(alloc_ok, alloc, -1),
        "total_reserved": np.where(reserved_ok, reserved, -1),
        "addr": np.where(addr_ok, addr, -1),
    }


def memory_table(parts: list[dict[str, np.ndarray]]) -> MemoryTable:
    """The parts end to end, sorted by time (a stable sort keeps the allocator's order at a tie)."""
    if not parts:
        return MemoryTable.empty()
    cols = {k: np.concatenate([p[k] for p in parts]) for k in MEMORY_COLUMNS}
    order = np.argsort(cols["ts"], kind="stable")
    return MemoryTable(**{k: v[order] for k, v in cols.items()})
