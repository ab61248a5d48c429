"""Decode one large plain trace with several processes, each taking a range of the file.

Kineto writes one event per indented block, so the file can be cut at event
starts (``\\n  {``; a JSON string cannot hold a raw newline, so the pattern never
occurs inside a value). The parent finds a boundary near each k/n of the event
array, starts n-1 workers on the later ranges and decodes the first range itself.
Each worker sends back its columns (``columns.Part``: numpy arrays, its names and
its recorded shapes), never events; the parent appends them in file order,
renumbering name codes, so the tables equal those of a serial decode.

Gzip files are decoded serially: a deflate stream cannot be entered in the middle.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from io import BufferedReader
from multiprocessing.connection import Connection
from typing import Any

from ...core.small_pages import prefer_small_pages
from ..limits import Deadline, Limits, MiB, cap_error, format_size
from ..locate.files import open_regular
from ..locate.locations import Location
from . import procs
from .columns import Columns, Part
from .stream import EventStream, ProgressFn, Source, event_cap, tail_events

# Below this, starting a process costs more than decoding the rest of the file.
MIN_RANGE_BYTES = 32 * MiB
_SCAN_BYTES = 1 * MiB  # read at a time while looking for a boundary


@dataclass(frozen=True)
class Job:
    """What every range of one file shares."""

    path: str  # a local file's path: ranges are only read of a plain local file
    first: int  # file offset just after the "[" of traceEvents
    event_start: bytes
    keep_inputs: Callable[[str], bool] | None
    limits: Limits


@dataclass(frozen=True)
class Done:
    tail: bytes  # the text after the last event boundary: the last event and the document's end
    size: int  # bytes decoded (the file size)
    failed: bool  # a range did not decode on its own (the caller decodes the file whole)


@dataclass
class _Result:
    part: Part | None  # None when the range did not decode on its own
    tail: bytes


def split_points(job: Job, size: int, n: int) -> list[int]:
    """Range bounds: the first event, an event start near each k/n of the events, and the end."""
    bounds = [job.first]
    with open_regular(job.path) as f:
        for k in range(1, n):
            target = job.first + (size - job.first) * k // n
            at = _next_boundary(f, max(target, bounds[-1] + 1), size, job)
            if at is None:
                break
            bounds.append(at)
    return [*bounds, size]


def _next_boundary(f: BufferedReader, start: int, size: int, job: Job) -> int | None:
    """File offset of the first event start at or after ``start``; None if there is none within
    the line cap (the ranges then stay as they are and the decode enforces the cap)."""
    sep, overlap = job.event_start, len(job.event_start) - 1
    f.seek(start)
    scanned, carry = 0, b""
    while scanned < job.limits.max_line_bytes and start + scanned < size:
        block = f.read(_SCAN_BYTES)
        if not block:
            return None
        text = carry + block
        at = text.find(sep)
        if at >= 0:
            return start + scanned - len(carry) + at
        carry = text[-overlap:] if overlap else b""
        scanned += len(block)
    return None


def _decode_range(
    job: Job, start: int, stop: int, last: bool, cols: Columns, deadline: Deadline, progress: ProgressFn | None
) -> bytes | None:
    """Add the events of ``[start, stop)`` to ``cols``. The last range's tail (its last event and
    the document's end) is returned for the caller; None when a chunk did not decode on its own."""
    with Source(Location.local(job.path), job.limits, deadline, start, stop) as src:
        stream = EventStream(src, b"", job.event_start, progress)
        for events in stream:
            cols.add(events)
            del events
            event_cap(job.path, cols.rows, job.limits)
        if stream.failed:
            return None
    if last:
        return stream.tail
    cols.add(tail_events(stream.tail))
    event_cap(job.path, cols.rows, job.limits)
    return b""


def _worker(job: Job, start: int, stop: int, last: bool, seconds: float, conn: Connection) -> None:
    """A worker process: decode one range and send back its columns, or the error."""
    prefer_small_pages()

    def work() -> _Result:
        cols = Columns(job.keep_inputs, job.limits.max_name_chars)
        tail = _decode_range(job, start, stop, last, cols, Deadline(job.path, seconds), None)
        return _Result(None if tail is None else cols.part(), tail or b"")

    procs.reply(conn, work)


def _start(job: Job, bounds: list[int], deadline: Deadline) -> list[tuple[Any, Connection]] | None:
    """One worker per range after the first; None when processes cannot be started here."""
    ctx = procs.context()
    workers: list[tuple[Any, Connection]] = []
    try:
        for k in range(1, len(bounds) - 1):
            mine, theirs = ctx.Pipe(duplex=False)
            last = k == len(bounds) - 2
            args = (job, bounds[k], bounds[k + 1], last, procs.remaining(deadline), theirs)
            p = ctx.Process(target=_worker, args=args, daemon=True)
            workers.append((p, mine))
            p.start()
            theirs.close()
    except procs.START_ERRORS:  # e.g. a keep_inputs that spawn cannot pickle: decode serially
        _stop(workers)
        return None
    return workers


def _stop(workers: list[tuple[Any, Connection]]) -> None:
    for p, conn in workers:
        procs.stop(p, conn)


def decode_ranges(
    job: Job, processes: int, cols: Columns, deadline: Deadline, progress: ProgressFn | None
) -> Done | None:
    """Decode the file's events with up to ``processes`` processes into ``cols``.

    None when the file is too small to gain from it, has no boundary to split at, or
    processes cannot be started; the caller then decodes serially.
    """
    size = os.stat(job.path).st_size
    n = min(processes, (size - job.first) // MIN_RANGE_BYTES)
    if n < 2:
        return None
    if size > job.limits.max_trace_bytes:  # what a serial decode would find after reading that much
        too_big = f"more than {format_size(job.limits.max_trace_bytes)} decompressed"
        raise cap_error(job.path, "max_trace_bytes", too_big)
    bounds = split_points(job, size, n)
    if len(bounds) < 3:
        return None
    workers = _start(job, bounds, deadline)
    if workers is None:
        return None
    try:
        scale = size / max(1, bounds[1] - bounds[0])  # the first range's progress stands for all
        mine = _decode_range(
            job,
            bounds[0],
            bounds[1],
            False,
            cols,
            deadline,
            None if progress is None else (lambda n: progress(min(size, int(n * scale)))),
        )
        if mine is None:
            return Done(b"", size, True)
        tail = b""
        for _, conn in workers:
            result: _Result = procs.receive(conn)
            if result.part is None:
                return Done(b"", size, True)
            cols.absorb(result.part)
            del result.part
            event_cap(job.path, cols.rows, job.limits)
            tail = result.tail
        return Done(tail, size, False)
    finally:
        _stop(workers)
