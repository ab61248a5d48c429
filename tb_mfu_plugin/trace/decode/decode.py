"""Decode a Kineto JSON trace (plain or gzip) into columnar tables, under caps.

Kineto writes one event per indented block: ``\\n  {`` opens each event of the
``traceEvents`` array (other writers use ``\\n{``; we learn the indentation from
the first event). We stream the decompressed bytes in chunks, cut the buffer at
the last event start and decode the complete events in place with msgspec typed
structs (stream.py). Peak memory is then one chunk plus the compact columns, not
the whole document. A file laid out any other way (one line, other indentation,
a bare array) is decoded in one piece, which is slower but equally correct, up
to the ``max_line_bytes`` cap.

A large plain file can be decoded by several processes at once, each taking a
range of it between event boundaries (parallel.py): ``processes`` or
``$TB_MFU_DECODE_PROCESSES``, 1 by default. The tables are the same either way.

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
import zlib
from collections.abc import Callable
from typing import IO

import msgspec

from ...core.errors import TraceError
from ..limits import DEFAULT_LIMITS, Deadline, Limits
from ..locate.locations import Location
from ..tables import TraceTables
from . import parallel, schema
from .columns import Columns
from .header import trace_meta
from .stream import EventStream, ProgressFn, Source, event_cap, line_cap, only_complete

_FIRST_EVENT = re.compile(rb"\[(\s*?\n([ \t]*))\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_LEADING_BLANKS = re.compile(rb"\s*")
_KEY_OVERLAP = 256  # bytes of the previous chunk searched again for a key cut in two
PROCESSES_ENV = "TB_MFU_DECODE_PROCESSES"

_event_list = msgspec.json.Decoder(list[schema.Event])
_header = msgspec.json.Decoder(schema.Header)
_document = msgspec.json.Decoder(schema.Document)


def decode_processes() -> int:
    """Processes one file's decode may use: ``$TB_MFU_DECODE_PROCESSES`` (a positive integer), else 1."""
    text = os.environ.get(PROCESSES_ENV, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else 1


def decode_trace(
    location: Location | str,
    keep_inputs: Callable[[str], bool] | None = None,
    progress: ProgressFn | None = None,
    limits: Limits | None = None,
    deadline: Deadline | None = None,
    processes: int | None = None,
    fileobj: IO[bytes] | None = None,
) -> TraceTables:
    """Decode ``path`` into columnar tables.

    ``location`` (``locations.py``) is a local path, a URL or an archive member, streamed
    while it downloads; text (a script's, a test's) is parsed here, once. ``fileobj``, when
    given, is read instead (``location`` then only names it in errors and reports); it is
    left open, and read once unless the trace must be decoded whole after all, which needs
    it seekable.

    ``keep_inputs(op_name)`` selects the ops whose recorded shapes are kept (for
    FLOP formulas); ``progress(n)`` is called with uncompressed bytes read so far;
    ``processes`` (default: ``decode_processes()``) may decode ranges of a large
    plain file in parallel. Raises ``TraceError`` with a one-line reason on any
    unreadable input, and on any input over one of the ``limits``.
    """
    where = location if isinstance(location, Location) else Location.parse(location)
    path = where.text  # what errors and the tables' meta name it by
    limits = limits or DEFAULT_LIMITS
    deadline = deadline or Deadline(path, limits.max_seconds)
    gc_was_enabled = gc.isenabled()
    # Decoding allocates millions of objects that form no cycles; the cyclic GC
    # would walk them over and over for nothing.
    gc.disable()
    try:
        return _decode(where, keep_inputs, progress, limits, deadline, processes or decode_processes(), fileobj)
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


def _read_head(src: Source) -> tuple[bytearray, re.Match[bytes] | None]:
    """The bytes up to the ``"traceEvents": [`` key (and a chunk past it), and the key's match."""
    head = bytearray()
    while block := src.block():
        start = max(0, len(head) - _KEY_OVERLAP)
        head += block
        m = _EVENTS_KEY.search(head, start)
        if m:
            # the first event is in the next chunk (matched in place: a slice would copy the chunk)
            if _LEADING_BLANKS.match(head, m.end()).end() == len(head):  # type: ignore[union-attr]
                head += src.block()
            return head, m
        line_cap(src.path, len(head), src.limits)
    return head, None


def _decode(
    where: Location,
    keep_inputs: Callable[[str], bool] | None,
    progress: ProgressFn | None,
    limits: Limits,
    deadline: Deadline,
    processes: int,
    fileobj: IO[bytes] | None = None,
) -> TraceTables:
    path = where.text
    cols = Columns(keep_inputs, limits.max_name_chars)
    with Source(where, limits, deadline, inflate_apart=processes > 1, fileobj=fileobj) as src:
        head, m = _read_head(src)
        if not _first_byte(head):
            raise TraceError(path, "empty file")
        if m is None:
            # Not the Kineto layout (bare array, or no traceEvents key): decode whole.
            line_cap(path, len(head), limits)
            return _decode_whole(path, head, cols, src.read, limits)
        header = _header.decode(bytes(head[: m.start()]) + b'"traceEvents":[]}')
        # Learn how events open ("\n  {" for Kineto) from the first one; a document
        # with the first event on the "[" line has no such boundary and decodes whole.
        first = _FIRST_EVENT.match(head, m.end() - 1)
        if first is None:
            while block := src.block():
                line_cap(path, len(head), limits)
                head += block
            line_cap(path, len(head), limits)
            return _decode_whole(path, head, cols, src.read, limits)
        event_start = b"\n" + first.group(2) + b"{"
        if processes > 1 and not src.gzipped and src.local:
            job = parallel.Job(where.path, m.end(), event_start, keep_inputs, limits)
            done = parallel.decode_ranges(job, processes, cols, deadline, progress)
            if done is not None:
                if done.failed:  # a range did not decode on its own: decode the document in one piece
                    return _decode_file_whole(where, keep_inputs, limits, deadline, None)
                return _finish(path, cols, header, done.tail, done.size, progress, limits)
        stream = EventStream(src, head[m.end() :], event_start, progress)
        del head
        for events in stream:
            cols.add(events)
            del events
            event_cap(path, cols.rows, limits)
        if stream.failed:  # a chunk did not decode on its own: decode the document in one piece
            return _decode_file_whole(where, keep_inputs, limits, deadline, fileobj)
        read = src.read
    return _finish(path, cols, header, stream.tail, read, progress, limits)


def _finish(
    path: str,
    cols: Columns,
    header: schema.Header,
    tail_text: bytes,
    size: int,
    progress: ProgressFn | None,
    limits: Limits,
) -> TraceTables:
    """Add the last event(s) and the keys after ``traceEvents``, and build the tables."""
    tail = _document.decode(b'{"traceEvents":[' + tail_text)
    cols.add(only_complete(tail.traceEvents))
    event_cap(path, cols.rows, limits)
    if progress is not None:
        progress(size)
    return cols.tables(trace_meta(path, header, tail, size))


def _decode_file_whole(
    where: Location,
    keep_inputs: Callable[[str], bool] | None,
    limits: Limits,
    deadline: Deadline,
    fileobj: IO[bytes] | None,
) -> TraceTables:
    """The file read again and decoded in one piece (a location is opened again; a caller's
    stream is rewound, if it can be)."""
    path = where.text
    if fileobj is not None:
        if not fileobj.seekable():
            raise TraceError(path, "must be decoded whole, and the stream given cannot be read a second time")
        fileobj.seek(0)
    with Source(where, limits, deadline, fileobj=fileobj) as src:
        data = bytearray()
        while block := src.block():
            data += block
            line_cap(path, len(data), limits)
        return _decode_whole(path, data, Columns(keep_inputs, limits.max_name_chars), src.read, limits)


def _first_byte(data: bytes | bytearray) -> bytes:
    """The first non-blank byte (b"" if none), without copying a large buffer."""
    i = _LEADING_BLANKS.match(data).end()  # type: ignore[union-attr]  # \s* always matches
    return bytes(data[i : i + 1])


def _decode_whole(path: str, data: bytes | bytearray, cols: Columns, size: int, limits: Limits) -> TraceTables:
    first = _first_byte(data)
    header: schema.Header
    if first == b"[":
        cols.add(only_complete(_event_list.decode(data)))
        header = schema.Header()
    elif first == b"{":
        doc = _document.decode(data)
        if not doc.traceEvents and b"traceEvents" not in data:
            raise TraceError(path, "JSON has no 'traceEvents': not a profiler trace")
        cols.add(only_complete(doc.traceEvents))
        header = doc
    elif not first:
        raise TraceError(path, "empty file")
    else:
        raise TraceError(path, "not a JSON trace (does not start with '{' or '[')")
    event_cap(path, cols.rows, limits)
    return cols.tables(trace_meta(path, header, None, max(size, len(data))))


def decode_bytes(data: bytes, name: str = "<memory>", limits: Limits | None = None) -> TraceTables:
    """Decode an in-memory trace document (tests, files fetched from elsewhere)."""
    limits = limits or DEFAULT_LIMITS
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if not data.strip():
        raise TraceError(name, "empty file")
    line_cap(name, len(data), limits)
    return _decode_whole(name, data, Columns(None, limits.max_name_chars), len(data), limits)
