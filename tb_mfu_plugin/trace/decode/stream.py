"""A trace's bytes read in chunks, under the caps, and cut into lists of complete events.

Kineto writes one event per indented block: ``\\n  {`` opens each event of the
``traceEvents`` array. ``EventStream`` reads into one reused buffer, finds the last
event start in it, and decodes the complete events before it *in place*: the
blank before the first event becomes ``[`` and the comma after the last one ``]``
for the time of the decode, so no chunk is ever copied. What follows the last
boundary moves to the front of the buffer and waits for the next read.

``Source`` reads a whole file (plain or gzip) or a byte range of a plain file (one
worker's share of a parallel decode), and checks the caps as bytes arrive. The file
is a location (locations.py): a local path, or a URL or archive member streamed by
``opener.open_location``; or a binary file object the caller gives (an upload).
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import IO, Any, Protocol, cast

import msgspec

from ..limits import RATIO_GRACE_BYTES, Deadline, Limits, cap_error, format_size
from ..locate.files import open_regular
from ..locate.locations import Location
from ..locate.opener import open_location
from ..remote.remote import declares_no_size
from . import fast, procs, schema
from .memory_events import of_type, tagged_instants, untagged_instants, with_memory

CHUNK_BYTES = 8 << 20
# Smaller gzip files inflate in about the time a child process takes to start.
MIN_APART_GZIP_BYTES = 4 << 20
SEPARATORS = frozenset(b" \t\r\n,")
_OPEN, _CLOSE = 0x5B, 0x5D  # "[" and "]"

_event_list = msgspec.json.Decoder(list[schema.Event])
_tagged_list = msgspec.json.Decoder(list[schema.TaggedEvent])

ProgressFn = Callable[[int], None]


class Source:
    """The decompressed bytes of ``location`` (or of ``[start, stop)`` of a plain local file),
    checked as they come. ``fileobj``, when given, is read instead of opening ``location`` (which
    then only names it), and left open: it is the caller's."""

    def __init__(
        self,
        location: Location,
        limits: Limits,
        deadline: Deadline,
        start: int = 0,
        stop: int | None = None,
        inflate_apart: bool = False,
        fileobj: IO[bytes] | None = None,
    ) -> None:
        self.location, self.limits, self.deadline = location, limits, deadline
        self.path = location.text  # what its errors name
        # Only a local file is read by range or by a child process: both open it again by path.
        self.local = fileobj is None and location.is_local
        self._owned = fileobj is None
        self._wrapper: io.BufferedReader | None = None  # our buffer over a caller's stream
        self.raw: IO[bytes]
        if self.local:
            self.raw = open_regular(location.path)
        elif fileobj is None:
            self.raw = open_location(location, limits=limits, deadline=deadline)
        else:
            self.raw = fileobj
        try:
            if self.local:
                self.gzipped = self.raw.read(2) == b"\x1f\x8b"
                self.raw.seek(start)
            else:  # a stream: look at its first bytes without consuming them
                if not hasattr(self.raw, "peek"):
                    self._wrapper = io.BufferedReader(cast(io.RawIOBase, self.raw))
                    self.raw = cast(IO[bytes], self._wrapper)
                self.gzipped = cast(io.BufferedReader, self.raw).peek(2)[:2] == b"\x1f\x8b"
            # a server that declares no size may never stop sending: held to max_unsized_bytes
            self.unsized = fileobj is None and not self.local and declares_no_size(self.raw)
            if (start or stop is not None) and (self.gzipped or not self.local):
                raise ValueError("only byte ranges of a plain local file can be decoded on their own")
            self.stream: _Stream = self._open(inflate_apart)
        except BaseException:
            if self._owned:
                self.raw.close()
            raise
        self.left = None if stop is None else stop - start
        self.read = 0  # decompressed bytes read so far

    def _open(self, inflate_apart: bool) -> _Stream:
        if not self.gzipped:
            return cast(_Stream, self.raw)  # every binary file has readinto; typing's IO omits it
        if inflate_apart and self.local and os.fstat(self.raw.fileno()).st_size >= MIN_APART_GZIP_BYTES:
            try:
                return Inflater(self.location, self.limits, self.deadline)
            except procs.START_ERRORS:  # no child here: inflate in this process
                pass
        return gzip.GzipFile(fileobj=self.raw, mode="rb")

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owned or self.gzipped:
            self.stream.close()  # (a GzipFile over a caller's file object leaves that object open)
        if self._owned:
            self.raw.close()
        elif self._wrapper is not None:
            self._wrapper.detach()  # else collecting the buffer would close the caller's stream

    def block(self) -> bytes:
        """The next chunk as bytes (b"" at the end)."""
        data = self.stream.read(self._want(CHUNK_BYTES))
        self._count(len(data))
        return data

    def readinto(self, view: memoryview) -> int:
        """Fill ``view`` (up to its length) from the stream; 0 at the end."""
        n = self._want(len(view))
        got = self.stream.readinto(view[:n]) if n else 0
        self._count(got)
        return got

    def _want(self, n: int) -> int:
        return n if self.left is None else min(n, self.left)

    def _count(self, n: int) -> None:
        self.read += n
        if self.left is not None:
            self.left -= n
        if n:
            self._check()

    def _check(self) -> None:
        lim = self.limits
        if self.read > lim.max_trace_bytes:
            raise cap_error(self.path, "max_trace_bytes", f"more than {format_size(lim.max_trace_bytes)} decompressed")
        # (an Inflater's child checks the ratio: it sees the compressed bytes)
        if self.gzipped and self.read > RATIO_GRACE_BYTES and not isinstance(self.stream, Inflater):
            ratio = self.read / max(1, self._raw_read())
            if ratio > lim.max_compression_ratio:
                raise cap_error(
                    self.path,
                    "max_compression_ratio",
                    f"gzip expands {ratio:.0f}:1 (a gzip bomb?); real traces compress 10-30:1",
                )
        # after the ratio: a gzip bomb is named as one
        if self.unsized and self.read > lim.max_unsized_bytes:
            cap = format_size(lim.max_unsized_bytes)
            detail = f"more than {cap} from a server that declares no size (an endless body?)"
            raise cap_error(self.path, "max_unsized_bytes", detail)
        self.deadline.check()

    def _raw_read(self) -> int:
        """Compressed bytes read so far (1 when the stream cannot tell: no ratio check then)."""
        try:
            return self.raw.tell()
        except (OSError, AttributeError, ValueError):
            return max(1, self.read)


class _Stream(Protocol):
    def read(self, n: int, /) -> bytes: ...
    def readinto(self, view: memoryview, /) -> int: ...
    def close(self) -> None: ...


class Inflater:
    """A gzip file's decompressed bytes, inflated by a child process (under the same caps) while
    this one decodes: on two cores, gunzip's ~2 s per GB leave the decoding process."""

    def __init__(self, location: Location, limits: Limits, deadline: Deadline) -> None:
        ctx = procs.context()
        self.conn, theirs = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(
            target=_inflate, args=(location, limits, procs.remaining(deadline), theirs), daemon=True
        )
        try:
            self.proc.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            theirs.close()
        self.msg = memoryview(b"")
        self.done = False

    def _more(self) -> bool:
        if not self.done:
            data = self.conn.recv_bytes()
            if data:
                self.msg = memoryview(data)
                return True
            self.done = True
            procs.receive(self.conn)  # the child's error, if it stopped on one
        return False

    def readinto(self, view: memoryview, /) -> int:
        if not len(self.msg) and not self._more():
            return 0
        n = min(len(view), len(self.msg))
        view[:n] = self.msg[:n]
        self.msg = self.msg[n:]
        return n

    def read(self, n: int, /) -> bytes:
        if not len(self.msg) and not self._more():
            return b""
        data = self.msg[:n].tobytes()
        self.msg = self.msg[n:]
        return data

    def close(self) -> None:
        procs.stop(self.proc, self.conn)


def _inflate(location: Location, limits: Limits, seconds: float, conn: Connection) -> None:
    """The Inflater's child: send the chunks (non-empty), then b"", then the outcome."""

    def work() -> None:
        try:
            with Source(location, limits, Deadline(location.text, seconds)) as src:
                while block := src.block():
                    conn.send_bytes(block)
        finally:
            conn.send_bytes(b"")

    procs.reply(conn, work)


def line_cap(path: str, n: int, limits: Limits) -> None:
    if n > limits.max_line_bytes:
        raise cap_error(
            path,
            "max_line_bytes",
            f"more than {format_size(limits.max_line_bytes)} without an event boundary "
            "(one event, or a one-line document)",
        )


def event_cap(path: str, rows: int, limits: Limits) -> None:
    if rows > limits.max_events:
        raise cap_error(path, "max_events", f"more than {limits.max_events:,} complete events")


def complete_events(piece: Any) -> list[Any]:
    """The complete events of a JSON array of events (bytes or a buffer)."""
    try:
        events = _tagged_list.decode(piece)
    except msgspec.ValidationError:
        # an event without "ph", or an unknown phase: the untagged schema takes anything
        return only_complete(_event_list.decode(piece))
    return with_memory(of_type(events, schema.Complete), tagged_instants(events))


def only_complete(events: list[schema.Event]) -> list[schema.Event]:
    """The complete events, with the memory instants beside them (``memory_events.with_memory``)."""
    return with_memory([e for e in events if e.ph == "X"], untagged_instants(events))


def content_end(buf: bytes | bytearray, end: int) -> int:
    """``end`` moved back over the comma and blanks before it."""
    while end > 0 and buf[end - 1] in SEPARATORS:
        end -= 1
    return end


class EventStream:
    """Lists of complete events from ``src``, cut at ``event_start``.

    ``pending`` is what was read before (it must start with a blank, as the text
    after ``[`` or before an event start does). After the iteration, ``tail`` holds
    the text after the last boundary (the last event and whatever closes the
    document), and ``failed`` says whether a block of events did not decode on its
    own (the caller then decodes the file whole).
    """

    def __init__(
        self, src: Source, pending: bytes | bytearray, event_start: bytes, progress: ProgressFn | None = None
    ) -> None:
        self.src, self.event_start, self.progress = src, event_start, progress
        self.pending = pending
        self.tail = b""
        self.failed = False

    def __iter__(self) -> Iterator[list[Any] | fast.Block]:
        src, sep = self.src, self.event_start
        buf = bytearray(len(self.pending) + CHUNK_BYTES)
        filled = len(self.pending)
        buf[:filled] = self.pending
        self.pending = b""
        while True:
            if len(buf) < filled + CHUNK_BYTES:  # a long event: the buffer grows (up to the line cap)
                buf += bytes(filled + CHUNK_BYTES - len(buf))
            with memoryview(buf) as view:
                got = src.readinto(view[filled : filled + CHUNK_BYTES])
            if not got:
                break
            scan_from = max(0, filled - len(sep) + 1)  # search only where the buffer grew
            filled += got
            cut = buf.rfind(sep, scan_from, filled)
            if cut <= 0:
                line_cap(src.path, filled, src.limits)
                continue
            end = content_end(buf, cut)
            if end > 0:
                events = _decode_in_place(buf, end)
                if events is None:
                    self.failed = True
                    return
                yield events
                del events  # the Raw fields point into buf: none may outlive this chunk
            buf[: filled - cut] = buf[cut:filled]
            filled -= cut
            if self.progress is not None:
                self.progress(src.read)
        self.tail = bytes(buf[:filled])


def _decode_in_place(buf: bytearray, end: int) -> list[Any] | fast.Block | None:
    """The events of ``buf[:end]`` (a blank, then events separated by commas), None if they do not
    decode: as columns where the compiled parser reads them (fast.py), else as msgspec structs."""
    first, after = buf[0], buf[end]
    buf[0], buf[end] = _OPEN, _CLOSE
    try:
        # The view stays alive while Raw fields refer to it, so buf cannot be resized under them.
        view = memoryview(buf)[: end + 1]
        block = fast.decode(view)
        return block if block is not None else complete_events(view)
    except msgspec.DecodeError:
        return None
    finally:
        buf[0], buf[end] = first, after


def tail_events(tail: bytes) -> list[Any]:
    """The complete events of a range's tail: events with a trailing comma, not a document end."""
    end = content_end(tail, len(tail))
    return complete_events(b"[" + tail[:end] + b"]") if end else []
