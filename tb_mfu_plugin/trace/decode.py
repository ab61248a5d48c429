"""Decode a Kineto JSON trace (plain or gzip) into columnar tables, under caps.

Kineto writes one event per indented block: ``\\n  {`` opens each event of the
``traceEvents`` array (other writers use ``\\n{``; we learn the indentation from
the first event). We stream the decompressed bytes in chunks, cut the buffer at
the last event start and decode the complete events with msgspec typed structs.
Peak memory is then one chunk plus the compact columns, not the whole document.
A file laid out any other way (one line, other indentation, a bare array) is
decoded in one piece, which is slower but equally correct, up to the
``max_line_bytes`` cap.

Every file is read under ``trace.limits.Limits``: only regular files are opened
(never blocking on a FIFO), decompressed bytes and the gzip ratio are checked as
they stream, the bytes between event boundaries are bounded, and so are the
event count and the wall time. Each cap gives a one-line ``TraceError``.
"""

from __future__ import annotations

import gc
import gzip
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any

import msgspec

from ..errors import TraceError
from . import schema
from .columns import Columns
from .files import open_regular
from .header import trace_meta
from .limits import DEFAULT_LIMITS, RATIO_GRACE_BYTES, Deadline, Limits, cap_error, format_size
from .schema import Event
from .tables import TraceTables

CHUNK_BYTES = 8 << 20
_SEPARATORS = frozenset(b" \t\r\n,")
_FIRST_EVENT = re.compile(rb"\[(\s*?\n([ \t]*))\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_LEADING_BLANKS = re.compile(rb"\s*")
_KEY_OVERLAP = 256  # bytes of the previous chunk searched again for a key cut in two

_event_list = msgspec.json.Decoder(list[Event])
_tagged_list = msgspec.json.Decoder(list[schema.TaggedEvent])
_header = msgspec.json.Decoder(schema.Header)
_document = msgspec.json.Decoder(schema.Document)

ProgressFn = Callable[[int], None]


class _Source:
    """A file's decompressed bytes in chunks, checked against the caps as they come."""

    def __init__(self, path: str, limits: Limits, deadline: Deadline) -> None:
        self.path, self.limits, self.deadline = path, limits, deadline
        self.raw = open_regular(path)
        self.gzipped = self.raw.read(2) == b"\x1f\x8b"
        self.raw.seek(0)
        self.stream: IO[bytes] = (
            gzip.GzipFile(fileobj=self.raw, mode="rb") if self.gzipped else self.raw  # type: ignore[assignment]
        )
        self.read = 0

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.close()
        self.raw.close()

    def chunks(self) -> Iterator[bytes]:
        while True:
            block = self.stream.read(CHUNK_BYTES)
            if not block:
                return
            self.read += len(block)
            self._check()
            yield block

    def _check(self) -> None:
        lim = self.limits
        if self.read > lim.max_trace_bytes:
            raise cap_error(self.path, "max_trace_bytes", f"more than {format_size(lim.max_trace_bytes)} decompressed")
        if self.gzipped and self.read > RATIO_GRACE_BYTES:
            ratio = self.read / max(1, self.raw.tell())
            if ratio > lim.max_compression_ratio:
                raise cap_error(
                    self.path,
                    "max_compression_ratio",
                    f"gzip expands {ratio:.0f}:1 (a gzip bomb?); real traces compress 10-30:1",
                )
        self.deadline.check()


def uncompressed_size(path: str, size: int) -> int:
    """The size the decoder will read: gzip's ISIZE trailer (size mod 2^32) or the file size.

    Never blocks: a FIFO or device (or anything unreadable) gives ``size`` back.
    """
    try:
        with open_regular(path) as f:
            if f.read(2) != b"\x1f\x8b" or size < 18:
                return size
            f.seek(-4, os.SEEK_END)
            isize = struct.unpack("<I", f.read(4))[0]
    except (OSError, TraceError, struct.error):
        return size
    # ISIZE is the size mod 4 GiB: a trace is never smaller than its gzip file.
    while isize < size:
        isize += 1 << 32
    return isize


def decode_trace(
    path: str,
    keep_inputs: Callable[[str], bool] | None = None,
    progress: ProgressFn | None = None,
    limits: Limits | None = None,
    deadline: Deadline | None = None,
) -> TraceTables:
    """Decode ``path`` into columnar tables.

    ``keep_inputs(op_name)`` selects the ops whose recorded shapes are kept (for
    FLOP formulas); ``progress(n)`` is called with uncompressed bytes read so far.
    Raises ``TraceError`` with a one-line reason on any unreadable input, and on
    any input over one of the ``limits``.
    """
    limits = limits or DEFAULT_LIMITS
    deadline = deadline or Deadline(path, limits.max_seconds)
    gc_was_enabled = gc.isenabled()
    # Decoding allocates millions of objects that form no cycles; the cyclic GC
    # would walk them over and over for nothing.
    gc.disable()
    try:
        return _decode(path, keep_inputs, progress, limits, deadline)
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
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply (about 1,000 levels): not a profiler trace") from None
    except MemoryError:
        raise TraceError(path, "out of memory while decoding") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read file ({exc.strerror or exc})") from None
    except Exception as exc:  # noqa: BLE001 - a decoder bug on odd input is still one file's error
        raise TraceError(path, f"cannot decode ({type(exc).__name__}: {exc})") from None
    finally:
        if gc_was_enabled:
            gc.enable()


def _line_cap(path: str, n: int, limits: Limits) -> None:
    if n > limits.max_line_bytes:
        raise cap_error(
            path,
            "max_line_bytes",
            f"more than {format_size(limits.max_line_bytes)} without an event boundary "
            "(one event, or a one-line document)",
        )


def _decode(
    path: str,
    keep_inputs: Callable[[str], bool] | None,
    progress: ProgressFn | None,
    limits: Limits,
    deadline: Deadline,
) -> TraceTables:
    cols = Columns(keep_inputs, limits.max_name_chars)
    with _Source(path, limits, deadline) as src:
        chunks = src.chunks()
        head = bytearray()
        m = None
        for block in chunks:
            start = max(0, len(head) - _KEY_OVERLAP)
            head += block
            m = _EVENTS_KEY.search(head, start)
            if m:
                break
            _line_cap(path, len(head), limits)
        if not _first_byte(head):
            raise TraceError(path, "empty file")
        if m is None:
            # Not the Kineto layout (bare array, or no traceEvents key): decode whole.
            _line_cap(path, len(head), limits)
            return _decode_whole(path, head, cols, src.read, limits)
        if not head[m.end() :].strip():  # the first event is in the next chunk
            head += next(chunks, b"")
        header = _header.decode(bytes(head[: m.start()]) + b'"traceEvents":[]}')
        # Learn how events open ("\n  {" for Kineto) from the first one; a document
        # with the first event on the "[" line has no such boundary and decodes whole.
        first = _FIRST_EVENT.match(head, m.end() - 1)
        if first is None:
            for block in chunks:
                head += block
            _line_cap(path, len(head), limits)
            return _decode_whole(path, head, cols, src.read, limits)
        event_start = b"\n" + first.group(2) + b"{"
        pending = head[m.end() :]
        del head
        if not _stream_events(path, pending, chunks, event_start, cols, limits, progress, src):
            # a chunk did not decode on its own: decode the document in one piece
            return _decode_file_whole(path, keep_inputs, limits, deadline)
        tail = _document.decode(b'{"traceEvents":[' + pending)
        cols.add(_only_complete(tail.traceEvents))
        _event_cap(path, cols, limits)
        read = src.read
    if progress is not None:
        progress(read)
    return cols.tables(trace_meta(path, header, tail, read))


def _stream_events(
    path: str,
    pending: bytearray,
    chunks: Iterator[bytes],
    event_start: bytes,
    cols: Columns,
    limits: Limits,
    progress: ProgressFn | None,
    src: _Source,
) -> bool:
    """Decode every complete event of the stream; ``pending`` keeps the unfinished tail.

    The buffer grows by appending and is searched only where it grew, so a file
    with no boundary costs linear time up to the line cap. False when a chunk of
    events does not decode on its own.
    """
    scan_from = 0
    for block in _chain_first(b"", chunks):
        if block:
            scan_from = max(0, len(pending) - len(event_start) + 1)
            pending += block
        cut = pending.rfind(event_start, scan_from)
        if cut <= 0:
            _line_cap(path, len(pending), limits)
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
                return False
            del piece
            cols.add(events)
            del events
            _event_cap(path, cols, limits)
        del pending[:cut]
        if progress is not None:
            progress(src.read)
    return True


def _event_cap(path: str, cols: Columns, limits: Limits) -> None:
    if cols.rows > limits.max_events:
        raise cap_error(path, "max_events", f"more than {limits.max_events:,} complete events")


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


def _chain_first(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _decode_file_whole(
    path: str, keep_inputs: Callable[[str], bool] | None, limits: Limits, deadline: Deadline
) -> TraceTables:
    with _Source(path, limits, deadline) as src:
        data = bytearray()
        for block in src.chunks():
            data += block
            _line_cap(path, len(data), limits)
        return _decode_whole(path, data, Columns(keep_inputs, limits.max_name_chars), src.read, limits)


def _first_byte(data: bytes | bytearray) -> bytes:
    """The first non-blank byte (b"" if none), without copying a large buffer."""
    i = _LEADING_BLANKS.match(data).end()  # type: ignore[union-attr]  # \s* always matches
    return bytes(data[i : i + 1])


def _decode_whole(path: str, data: bytes | bytearray, cols: Columns, size: int, limits: Limits) -> TraceTables:
    first = _first_byte(data)
    if first == b"[":
        cols.add(_only_complete(_event_list.decode(data)))
        header = schema.Header()
    elif first == b"{":
        doc = _document.decode(data)
        if not doc.traceEvents and b"traceEvents" not in data:
            raise TraceError(path, "JSON has no 'traceEvents': not a profiler trace")
        cols.add(_only_complete(doc.traceEvents))
        header = doc
    elif not first:
        raise TraceError(path, "empty file")
    else:
        raise TraceError(path, "not a JSON trace (does not start with '{' or '[')")
    _event_cap(path, cols, limits)
    return cols.tables(trace_meta(path, header, None, max(size, len(data))))


def decode_bytes(data: bytes, name: str = "<memory>", limits: Limits | None = None) -> TraceTables:
    """Decode an in-memory trace document (tests, files fetched from elsewhere)."""
    limits = limits or DEFAULT_LIMITS
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if not data.strip():
        raise TraceError(name, "empty file")
    _line_cap(name, len(data), limits)
    return _decode_whole(name, data, Columns(None, limits.max_name_chars), len(data), limits)
