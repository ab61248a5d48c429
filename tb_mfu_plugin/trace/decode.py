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

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
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
_FIRST_EVENT = re.compile(rb"\[(\s*?\n([ \t]*))\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')

_event_list = msgspec.json.Decoder(list[Event])
_header = msgspec.json.Decoder(schema.Header)
_document = msgspec.json.Decoder(schema.Document)
_bare_array = msgspec.json.Decoder(list[Event])

ProgressFn = Callable[[int], None]


def _open(path: str) -> IO[bytes]:
    f = open(path, "rb")
    magic = f.read(2)
    f.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb")  # type: ignore[return-value]
    return f


def _read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    while True:
        block = stream.read(CHUNK_BYTES)
        if not block:
            return
        yield block


class _Columns:
    """Accumulates decoded events into per-chunk numpy columns."""

    def __init__(self, keep_inputs: Callable[[str], bool] | None) -> None:
        self.names: list[str] = []
        self.codes: dict[str, int] = {}
        self.keep_inputs = keep_inputs
        self._keep_cache: dict[int, bool] = {}
        self.cpu_parts: list[dict[str, np.ndarray]] = []
        self.gpu_parts: list[dict[str, np.ndarray]] = []
        self.inputs: dict[int, OpInputs] = {}
        self.cpu_rows = 0

    def code(self, name: str) -> int:
        c = self.codes.get(name)
        if c is None:
            c = self.codes[name] = len(self.names)
            self.names.append(name)
        return c

    def add(self, events: list[Event]) -> None:
        cpu_kind: list[int] = []
        cpu_ev: list[Event] = []
        gpu_kind: list[int] = []
        gpu_ev: list[Event] = []
        for e in events:
            if e.ph != "X" or e.ts is None:
                continue
            cat = e.cat.lower()
            if cat in schema.KERNEL_CATS:
                gpu_kind.append(KERNEL)
                gpu_ev.append(e)
            elif cat in schema.CPU_OP_CATS:
                cpu_kind.append(ANNOTATION if e.name.startswith("ProfilerStep#") else OP)
                cpu_ev.append(e)
            elif cat in schema.RUNTIME_CATS:
                cpu_kind.append(RUNTIME)
                cpu_ev.append(e)
            elif cat in schema.MEMCPY_CATS:
                gpu_kind.append(MEMCPY)
                gpu_ev.append(e)
            elif cat in schema.ANNOTATION_CATS:
                cpu_kind.append(ANNOTATION)
                cpu_ev.append(e)
            elif cat in schema.DRIVER_CATS:
                cpu_kind.append(DRIVER)
                cpu_ev.append(e)
            elif cat in schema.MEMSET_CATS:
                gpu_kind.append(MEMSET)
                gpu_ev.append(e)
            elif not cat:
                kind = _kind_without_category(e)
                if kind is None:
                    continue
                if kind[0] == "gpu":
                    gpu_kind.append(kind[1])
                    gpu_ev.append(e)
                else:
                    cpu_kind.append(kind[1])
                    cpu_ev.append(e)
        if cpu_ev:
            self._add_cpu(cpu_kind, cpu_ev)
        if gpu_ev:
            self._add_gpu(gpu_kind, gpu_ev)

    def _add_cpu(self, kinds: list[int], evs: list[Event]) -> None:
        code = self.code
        n = len(evs)
        ext = np.full(n, -1, np.int64)
        corr = np.full(n, -1, np.int64)
        flops = np.full(n, np.nan)
        keep = self.keep_inputs
        names = np.fromiter((code(e.name) for e in evs), np.int32, n)
        for i, e in enumerate(evs):
            a = e.args
            if a is None:
                continue
            x = a.external_id if a.external_id is not None else a.external_id_legacy
            if type(x) is int:
                ext[i] = x
            if type(a.correlation) is int:
                corr[i] = a.correlation
            if a.flops is not None and type(a.flops) is not str:
                flops[i] = a.flops
            if keep is not None and a.input_dims:
                c = int(names[i])
                k = self._keep_cache.get(c)
                if k is None:
                    k = self._keep_cache[c] = bool(keep(e.name))
                if k:
                    self.inputs[self.cpu_rows + i] = OpInputs(
                        bytes(a.input_dims),
                        bytes(a.input_type) if a.input_type else None,
                        bytes(a.concrete_inputs) if a.concrete_inputs else None,
                    )
        self.cpu_parts.append(
            {
                "kind": np.array(kinds, np.int8),
                "name": names,
                "ts": np.fromiter((e.ts for e in evs), np.float64, n),
                "dur": np.fromiter((e.dur or 0.0 for e in evs), np.float64, n),
                "pid": np.fromiter((_int_id(e.pid) for e in evs), np.int64, n),
                "tid": np.fromiter((_int_id(e.tid) for e in evs), np.int64, n),
                "external_id": ext,
                "correlation": corr,
                "flops": flops,
            }
        )
        self.cpu_rows += n

    def _add_gpu(self, kinds: list[int], evs: list[Event]) -> None:
        n = len(evs)
        dev = np.full(n, -1, np.int32)
        stream = np.full(n, -1, np.int64)
        corr = np.full(n, -1, np.int64)
        ext = np.full(n, -1, np.int64)
        bps = np.full(n, np.nan, np.float32)
        wps = np.full(n, np.nan, np.float32)
        occ = np.full(n, np.nan, np.float32)
        grid = np.full(n, -1, np.int64)
        block = np.full(n, -1, np.int64)
        nbytes = np.full(n, -1, np.int64)
        for i, e in enumerate(evs):
            a = e.args
            if a is None:
                # device is otherwise the pid Kineto uses for the GPU row
                dev[i] = _int_id(e.pid)
                continue
            dev[i] = a.device if type(a.device) is int else _int_id(e.pid)
            if type(a.stream) is int:
                stream[i] = a.stream
            if type(a.correlation) is int:
                corr[i] = a.correlation
            x = a.external_id if a.external_id is not None else a.external_id_legacy
            if type(x) is int:
                ext[i] = x
            v = a.blocks_per_sm
            if v is not None and type(v) is not str:
                bps[i] = v
            v = a.warps_per_sm
            if v is not None and type(v) is not str:
                wps[i] = v
            v = a.occupancy
            if v is not None and type(v) is not str:
                occ[i] = v
            g = a.grid
            if g and type(g) is list:
                grid[i] = _product(g)
            b = a.block
            if b and type(b) is list:
                block[i] = _product(b)
            if type(a.bytes) is int:
                nbytes[i] = a.bytes
        code = self.code
        self.gpu_parts.append(
            {
                "kind": np.array(kinds, np.int8),
                "name": np.fromiter((code(e.name) for e in evs), np.int32, n),
                "ts": np.fromiter((e.ts for e in evs), np.float64, n),
                "dur": np.fromiter((e.dur or 0.0 for e in evs), np.float64, n),
                "device": dev,
                "stream": stream,
                "correlation": corr,
                "external_id": ext,
                "blocks_per_sm": bps,
                "warps_per_sm": wps,
                "occupancy_pct": occ,
                "grid_blocks": grid,
                "block_threads": block,
                "bytes": nbytes,
            }
        )

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


def _kind_without_category(e: Event) -> tuple[str, int] | None:
    """Classify an event that carries no ``cat`` from its name and args."""
    a = e.args
    if a is not None and a.device is not None and a.correlation is not None and a.stream is not None:
        if e.name.startswith("Memcpy"):
            return ("gpu", MEMCPY)
        if e.name.startswith("Memset"):
            return ("gpu", MEMSET)
        return ("gpu", KERNEL)
    if e.name.startswith("ProfilerStep#"):
        return ("cpu", ANNOTATION)
    if a is not None and a.correlation is not None:
        return ("cpu", RUNTIME)
    return ("cpu", OP)


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
            piece = pending[:cut].strip().rstrip(b",")
            pending = pending[cut:]
            if piece:
                try:
                    events = _event_list.decode(b"[" + piece + b"]")
                except msgspec.DecodeError:
                    stream.seek(0)
                    return _decode_whole(path, stream.read(), _Columns(keep_inputs), read)
                cols.add(events)
            if progress is not None:
                progress(read)
        tail = _document.decode(b'{"traceEvents":[' + pending)
        cols.add(tail.traceEvents)
        trailer = tail
    if progress is not None:
        progress(read)
    meta = _meta(path, header, trailer, read)
    return cols.tables(meta)


def _chain_last(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _decode_whole(path: str, data: bytes, cols: _Columns, size: int) -> TraceTables:
    stripped = data.lstrip()
    if stripped.startswith(b"["):
        cols.add(_bare_array.decode(data))
        header = schema.Header()
    elif stripped.startswith(b"{"):
        doc = _document.decode(data)
        if not doc.traceEvents and b"traceEvents" not in data:
            raise TraceError(path, "JSON has no 'traceEvents': not a profiler trace")
        cols.add(doc.traceEvents)
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
