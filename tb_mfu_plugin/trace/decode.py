"""Decode a Kineto JSON trace (plain or gzip) into columnar tables.

Kineto writes one event per indented block: ``\\n  {`` opens each event of the
``traceEvents`` array (other writers use ``\\n{``; we learn the indentation from
the first event). We stream the decompressed bytes in chunks, cut each
chunk at the last event start and decode the complete events with msgspec
typed structs. Peak memory is then one chunk plus the compact columns, not the
whole document. A file laid out any other way (one line, other indentation, a
bare array) is decoded in one piece, which is slower but equally correct.
"""

from __future__ import annotations

import gc
import gzip
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import IO, Any

import msgspec
import numpy as np

from ..errors import TraceError
from . import schema
from .schema import Event
from .tables import (
    ANNOTATION,
    DRIVER,
    KERNEL,
    MEMCPY,
    MEMSET,
    OP,
    RUNTIME,
    CpuTable,
    GpuTable,
    OpInputs,
    TraceMeta,
    TraceTables,
)

CHUNK_BYTES = 8 << 20
_SEPARATORS = frozenset(b" \t\r\n,")
_FIRST_EVENT = re.compile(rb"\[(\s*?\n([ \t]*))\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')

_event_list = msgspec.json.Decoder(list[Event])
_tagged_list = msgspec.json.Decoder(list[schema.TaggedEvent])
_header = msgspec.json.Decoder(schema.Header)
_document = msgspec.json.Decoder(schema.Document)

ProgressFn = Callable[[int], None]


def _open(path: str) -> IO[bytes]:
    f = open(path, "rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb")  # type: ignore[return-value]
    return f


def uncompressed_size(path: str, size: int) -> int:
    """The size the decoder will read: gzip's ISIZE trailer (size mod 2^32) or the file size."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b" or size < 18:
                return size
            f.seek(-4, os.SEEK_END)
            isize = struct.unpack("<I", f.read(4))[0]
    except OSError:
        return size
    # ISIZE is the size mod 4 GiB: a trace is never smaller than its gzip file.
    while isize < size:
        isize += 1 << 32
    return isize


def _read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    while True:
        block = stream.read(CHUNK_BYTES)
        if not block:
            return
        yield block


# Column extraction runs in C: map(attrgetter) over the decoded structs, then one
# numpy conversion; None becomes NaN. A column holding something else (a ROCm
# stream id written as a string) falls back to a per-event loop.
_get = {k: attrgetter(k) for k in ("ph", "cat", "name", "ts", "dur", "pid", "tid", "args")}
_arg = {
    k: attrgetter(k)
    for k in (
        "external_id", "external_id_legacy", "correlation", "device", "stream", "blocks_per_sm",
        "warps_per_sm", "occupancy", "bytes", "flops", "grid", "block", "input_dims",
    )
}

# cat as written -> table * 8 + kind; table 0 = skip, 1 = cpu, 2 = gpu, 3 = no cat
_CPU, _GPU, _NO_CAT = 1, 2, 3
_CAT_CLASS: dict[str, int] = {
    **{c: _GPU * 8 + KERNEL for c in schema.KERNEL_CATS},
    **{c: _GPU * 8 + MEMCPY for c in schema.MEMCPY_CATS},
    **{c: _GPU * 8 + MEMSET for c in schema.MEMSET_CATS},
    **{c: _CPU * 8 + OP for c in schema.CPU_OP_CATS},
    **{c: _CPU * 8 + ANNOTATION for c in schema.ANNOTATION_CATS},
    **{c: _CPU * 8 + RUNTIME for c in schema.RUNTIME_CATS},
    **{c: _CPU * 8 + DRIVER for c in schema.DRIVER_CATS},
}


def _floats(values: list[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, np.float64, len(values))
    except (TypeError, ValueError):  # None (JSON null) or a non-numeric string
        return np.array([v if isinstance(v, int | float) else np.nan for v in values], dtype=np.float64)


def _ints(values: list[Any]) -> np.ndarray:
    """Ids as int64, -1 where missing."""
    try:
        return np.fromiter(values, np.int64, len(values))
    except (TypeError, ValueError, OverflowError):
        return np.array([v if type(v) is int else -1 for v in values], dtype=np.int64)


def _int_ids(values: list[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, np.int64, len(values))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter(map(_int_id, values), np.int64, len(values))


def _product_or_missing(v: Any) -> int:
    return _product(v) if type(v) is list and v else -1


class _Columns:
    """Accumulates decoded events into per-chunk numpy columns."""

    def __init__(self, keep_inputs: Callable[[str], bool] | None) -> None:
        self.names: list[str] = []
        self.codes: dict[str, int] = {}
        self.keep_inputs = keep_inputs
        self._keep: dict[int, bool] = {}
        self.cpu_parts: list[dict[str, np.ndarray]] = []
        self.gpu_parts: list[dict[str, np.ndarray]] = []
        self.inputs: dict[int, OpInputs] = {}
        self.cpu_rows = 0
        self._cats = dict(_CAT_CLASS)

    def _name_codes(self, names: list[str]) -> np.ndarray:
        codes = self.codes
        for n in set(names).difference(codes):
            codes[n] = len(self.names)
            self.names.append(n)
        return np.fromiter(map(codes.__getitem__, names), np.int32, len(names))

    def _classify(self, events: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        cats = list(map(_get["cat"], events))
        table = self._cats
        for c in set(cats).difference(table):
            table[c] = table.get(c.lower(), 0) if c else _NO_CAT * 8
        cls = np.fromiter(map(table.__getitem__, cats), np.int8, len(cats))
        which, kind = cls >> 3, cls & 7
        for i in np.flatnonzero(which == _NO_CAT):  # decide from name and args
            got = _kind_without_category(events[i])
            which[i], kind[i] = got if got is not None else (0, 0)
        return which, kind

    def add(self, events: list[Any]) -> None:
        """Add complete ("X") events: ``Complete`` structs, or ``Event`` structs already filtered."""
        if not events:
            return
        which, kind = self._classify(events)
        ts = _floats(list(map(_get["ts"], events)))
        keep = ~np.isnan(ts)
        for table, add in ((_CPU, self._add_cpu), (_GPU, self._add_gpu)):
            rows = np.flatnonzero(keep & (which == table))
            if len(rows):
                evs = [events[i] for i in rows]
                add(kind[rows], evs, list(map(_get["args"], evs)), ts[rows])

    def _common(self, evs: list[Event], ts: np.ndarray) -> dict[str, np.ndarray]:
        dur = _floats(list(map(_get["dur"], evs)))
        return {
            "name": self._name_codes(list(map(_get["name"], evs))),
            "ts": ts,
            "dur": np.nan_to_num(dur, nan=0.0),
        }

    @staticmethod
    def _args(args: list[schema.Args], key: str) -> list[Any]:
        return list(map(_arg[key], args))

    def _external_ids(self, args: list[schema.Args]) -> np.ndarray:
        ext = _ints(self._args(args, "external_id"))
        legacy = _ints(self._args(args, "external_id_legacy"))
        return np.where(ext >= 0, ext, legacy)

    def _add_cpu(self, kind: np.ndarray, evs: list[Event], args: list[schema.Args], ts: np.ndarray) -> None:
        cols = self._common(evs, ts)
        names = cols["name"]
        # ProfilerStep#N is an annotation even where the 2021 schema files it as an operator
        is_step = np.fromiter((n.startswith("ProfilerStep#") for n in self.names), bool, len(self.names))
        kind = np.where(is_step[names], ANNOTATION, kind).astype(np.int8)
        cols.update(
            kind=kind,
            pid=_int_ids(list(map(_get["pid"], evs))),
            tid=_int_ids(list(map(_get["tid"], evs))),
            external_id=self._external_ids(args),
            correlation=_ints(self._args(args, "correlation")),
            flops=_floats(self._args(args, "flops")),
        )
        if self.keep_inputs is not None:
            self._keep_inputs(evs, names)
        self.cpu_parts.append(cols)
        self.cpu_rows += len(evs)

    def _keep_inputs(self, evs: list[Event], names: np.ndarray) -> None:
        assert self.keep_inputs is not None
        for c in np.unique(names):
            if int(c) not in self._keep:
                self._keep[int(c)] = bool(self.keep_inputs(self.names[c]))
        wanted = np.fromiter((self._keep.get(i, False) for i in range(len(self.names))), bool, len(self.names))
        for i in np.flatnonzero(wanted[names]):
            a = evs[i].args
            if a.input_dims:
                self.inputs[self.cpu_rows + int(i)] = OpInputs(
                    bytes(a.input_dims),
                    bytes(a.input_type) if a.input_type else None,
                    bytes(a.concrete_inputs) if a.concrete_inputs else None,
                )

    def _add_gpu(self, kind: np.ndarray, evs: list[Event], args: list[schema.Args], ts: np.ndarray) -> None:
        cols = self._common(evs, ts)
        device = _ints(self._args(args, "device"))
        missing = device < 0
        if missing.any():  # Kineto's GPU rows use the device as pid
            device[missing] = _int_ids([evs[i].pid for i in np.flatnonzero(missing)])
        cols.update(
            kind=kind,
            device=device.astype(np.int32),
            stream=_ints(self._args(args, "stream")),
            correlation=_ints(self._args(args, "correlation")),
            external_id=self._external_ids(args),
            blocks_per_sm=_floats(self._args(args, "blocks_per_sm")).astype(np.float32),
            warps_per_sm=_floats(self._args(args, "warps_per_sm")).astype(np.float32),
            occupancy_pct=_floats(self._args(args, "occupancy")).astype(np.float32),
            grid_blocks=np.fromiter(map(_product_or_missing, self._args(args, "grid")), np.int64, len(evs)),
            block_threads=np.fromiter(map(_product_or_missing, self._args(args, "block")), np.int64, len(evs)),
            bytes=_ints(self._args(args, "bytes")),
        )
        self.gpu_parts.append(cols)

    def tables(self, meta: TraceMeta) -> TraceTables:
        cpu = _concat(self.cpu_parts, _CPU_EMPTY)
        gpu = _concat(self.gpu_parts, _GPU_EMPTY)
        # Sort by start time: queries (unions, nesting, step windows) assume it.
        cpu_order = np.argsort(cpu["ts"], kind="stable")
        remap = np.empty_like(cpu_order)
        remap[cpu_order] = np.arange(len(cpu_order))
        inputs = {int(remap[i]): v for i, v in self.inputs.items()}
        cpu_table = CpuTable(**{k: v[cpu_order] for k, v in cpu.items()}, inputs=inputs)
        gpu_order = np.argsort(gpu["ts"], kind="stable")
        gpu_table = GpuTable(**{k: v[gpu_order] for k, v in gpu.items()})
        return TraceTables(meta=meta, names=self.names, cpu=cpu_table, gpu=gpu_table)


_CPU_EMPTY: dict[str, Any] = {
    "kind": np.int8,
    "name": np.int32,
    "ts": np.float64,
    "dur": np.float64,
    "pid": np.int64,
    "tid": np.int64,
    "external_id": np.int64,
    "correlation": np.int64,
    "flops": np.float64,
}
_GPU_EMPTY: dict[str, Any] = {
    "kind": np.int8,
    "name": np.int32,
    "ts": np.float64,
    "dur": np.float64,
    "device": np.int32,
    "stream": np.int64,
    "correlation": np.int64,
    "external_id": np.int64,
    "blocks_per_sm": np.float32,
    "warps_per_sm": np.float32,
    "occupancy_pct": np.float32,
    "grid_blocks": np.int64,
    "block_threads": np.int64,
    "bytes": np.int64,
}


def _concat(parts: list[dict[str, np.ndarray]], dtypes: dict[str, Any]) -> dict[str, np.ndarray]:
    if not parts:
        return {k: np.empty(0, dt) for k, dt in dtypes.items()}
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in dtypes}


def _product(xs: list[int]) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


_ids: dict[str, int] = {}


def _int_id(v: int | str | None) -> int:
    """pid/tid as an int: 2021 traces write thread ids as strings ("25738", "stream 7")."""
    if isinstance(v, int):
        return v
    if v is None or v == "":
        return -1
    if v.isdigit():
        return int(v)
    # Non-numeric labels ("Spans", "stream 7") get a stable negative id of their own.
    got = _ids.get(v)
    if got is None:
        got = _ids[v] = -2 - len(_ids)
    return got


def _is_id(v: Any) -> bool:
    return type(v) is int and v >= 0


def _kind_without_category(e: Event) -> tuple[int, int] | None:
    """Classify an event that carries no ``cat`` from its name and args: (table, kind)."""
    a = e.args
    if _is_id(a.device) and _is_id(a.correlation) and _is_id(a.stream):
        if e.name.startswith("Memcpy"):
            return (_GPU, MEMCPY)
        if e.name.startswith("Memset"):
            return (_GPU, MEMSET)
        return (_GPU, KERNEL)
    if e.name.startswith("ProfilerStep#"):
        return (_CPU, ANNOTATION)
    if _is_id(a.correlation):
        return (_CPU, RUNTIME)
    return (_CPU, OP)


def decode_trace(
    path: str,
    keep_inputs: Callable[[str], bool] | None = None,
    progress: ProgressFn | None = None,
) -> TraceTables:
    """Decode ``path`` into columnar tables.

    ``keep_inputs(op_name)`` selects the ops whose recorded shapes are kept (for
    FLOP formulas); ``progress(n)`` is called with uncompressed bytes read so far.
    Raises ``TraceError`` with a one-line reason on any unreadable input.
    """
    gc_was_enabled = gc.isenabled()
    # Decoding allocates millions of objects that form no cycles; the cyclic GC
    # would walk them over and over for nothing.
    gc.disable()
    try:
        return _decode(path, keep_inputs, progress)
    except TraceError:
        raise
    except FileNotFoundError:
        raise TraceError(path, "file not found") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(path, f"corrupt or truncated gzip data ({exc})") from None
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"JSON of the wrong shape for a profiler trace: {exc}") from None
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from None
    except MemoryError:
        raise TraceError(path, "out of memory while decoding") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read file ({exc.strerror or exc})") from None
    finally:
        if gc_was_enabled:
            gc.enable()


def _decode(path: str, keep_inputs: Callable[[str], bool] | None, progress: ProgressFn | None) -> TraceTables:
    cols = _Columns(keep_inputs)
    read = 0
    with _open(path) as stream:
        head = b""
        chunks = _read_chunks(stream)
        body_start = -1
        for block in chunks:
            read += len(block)
            head += block
            m = _EVENTS_KEY.search(head)
            if m:
                body_start = m.end()
                break
            if len(head) > 64 * CHUNK_BYTES:
                break
        if not head.strip():
            raise TraceError(path, "empty file")
        if body_start < 0:
            # Not the Kineto layout (bare array, or no traceEvents key): decode whole.
            return _decode_whole(path, head + b"".join(chunks), cols, read)
        header = _header.decode(head[: m.start()] + b'"traceEvents":[]}')  # type: ignore[union-attr]
        pending = head[body_start:]
        # Learn how events open ("\n  {" for Kineto) from the first one; a document
        # with the first event on the "[" line has no such boundary and decodes whole.
        first = _FIRST_EVENT.match(head, body_start - 1)
        event_start = b"\n" + first.group(2) + b"{" if first else None
        trailer: schema.Header | None = None
        for block in _chain_last(pending, chunks):
            if block is not pending:
                read += len(block)
                pending = pending + block
            cut = pending.rfind(event_start) if event_start else -1
            if cut <= 0:
                continue
            end = cut
            while end > 0 and pending[end - 1] in _SEPARATORS:  # the "," (and blanks) before the cut
                end -= 1
            if end > 0:
                # one copy: "[" + the complete events + "]"
                piece = bytearray(end + 2)
                piece[0] = 0x5B
                piece[1 : end + 1] = memoryview(pending)[:end]
                piece[end + 1] = 0x5D
                try:
                    events = _complete_events(piece)
                except msgspec.DecodeError:
                    stream.seek(0)
                    return _decode_whole(path, stream.read(), _Columns(keep_inputs), read)
                del piece
                cols.add(events)
                del events
            pending = pending[cut:]
            if progress is not None:
                progress(read)
        tail = _document.decode(b'{"traceEvents":[' + pending)
        cols.add(_only_complete(tail.traceEvents))
        trailer = tail
    if progress is not None:
        progress(read)
    meta = _meta(path, header, trailer, read)
    return cols.tables(meta)


def _complete_events(piece: bytes | bytearray) -> list[Any]:
    """The complete events of a JSON array of events."""
    try:
        events = _tagged_list.decode(piece)
    except msgspec.ValidationError:
        # an event without "ph", or an unknown phase: the untagged schema takes anything
        return _only_complete(_event_list.decode(piece))
    complete = schema.Complete
    return [e for e in events if type(e) is complete]


def _only_complete(events: list[Event]) -> list[Event]:
    return [e for e in events if e.ph == "X"]


def _chain_last(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _decode_whole(path: str, data: bytes, cols: _Columns, size: int) -> TraceTables:
    stripped = data.lstrip()
    if stripped.startswith(b"["):
        cols.add(_only_complete(_event_list.decode(data)))
        header = schema.Header()
    elif stripped.startswith(b"{"):
        doc = _document.decode(data)
        if not doc.traceEvents and b"traceEvents" not in data:
            raise TraceError(path, "JSON has no 'traceEvents': not a profiler trace")
        cols.add(_only_complete(doc.traceEvents))
        header = doc
    else:
        raise TraceError(path, "not a JSON trace (does not start with '{' or '[')")
    return cols.tables(_meta(path, header, None, max(size, len(data))))


def _meta(path: str, header: schema.Header, trailer: schema.Header | None, size: int) -> TraceMeta:
    def pick(attr: str):  # type: ignore[no-untyped-def]
        v = getattr(header, attr)
        if v is None and trailer is not None:
            v = getattr(trailer, attr)
        return v

    return TraceMeta(
        path=path,
        device_properties=list(pick("deviceProperties") or []),
        distributed_info=pick("distributedInfo"),
        trace_name=pick("traceName"),
        base_time_ns=pick("baseTimeNanoseconds"),
        schema_version=pick("schemaVersion"),
        size_bytes=size,
    )


def decode_bytes(data: bytes, name: str = "<memory>") -> TraceTables:
    """Decode an in-memory trace document (tests, files fetched from elsewhere)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if not data.strip():
        raise TraceError(name, "empty file")
    return _decode_whole(name, data, _Columns(None), len(data))
