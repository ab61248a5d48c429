"""``tb-mfu annotate TRACE -o OUT``: the trace with the diagnosis added, for Perfetto and
chrome://tracing (docs/timeline.md).

The trace is analysed as ``analyze`` would, then its decompressed bytes are copied to OUT as they
are, with the added events (``annotate_events``) put at the start of its ``traceEvents`` array: no
event is decoded and written again, so every original event is kept byte for byte and the copy
runs at the speed of reading and writing. OUT is the only file written (``.gz``: compressed), and
it may not be the trace itself; nothing is written anywhere else, the logdir included.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
from typing import Protocol

import msgspec

from ..analysis.report import Report, WorkerReport
from ..core.errors import TraceError
from ..trace.decode.stream import Source
from ..trace.limits import Deadline, Limits
from ..trace.locate.locations import Location
from .annotate_events import extra_events

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_KEY_OVERLAP = 256  # bytes of the head searched again when the key may be cut between chunks
MAX_HEAD_BYTES = 256 << 20  # the keys before traceEvents (deviceProperties...) are a few kB
GZIP_LEVEL = 1  # the fastest: a 1 GB trace compresses at about the speed it is read
_header = msgspec.json.Decoder(dict)


class _Sink(Protocol):
    def write(self, data: bytes | bytearray, /) -> int: ...


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    a: argparse.ArgumentParser = sub.add_parser(
        "annotate",
        help="write a copy of one trace with the diagnosis added (counters per step, the findings, the "
        "critical path), for Perfetto or chrome://tracing",
        description="Analyses one trace file and writes it again with tracks added: MFU, SM efficiency, GPU "
        "busy and memory per step as counters, the findings of the representative step as instant events "
        "on their lanes, and its critical path. Every original event is kept as it is.",
    )
    a.add_argument(
        "path", metavar="TRACE", help="one trace file (.json or .json.gz): a local path, a URL or an archive member"
    )
    a.add_argument(
        "-o",
        "--out",
        required=True,
        metavar="OUT",
        help="the file to write (OUT.gz: gzip-compressed; '-': standard output); never the trace itself",
    )
    return a


def annotate(report: Report, where: Location, out: str, limits: Limits) -> int:
    """Write OUT from the analysed ``report`` of the one trace at ``where``; the exit status."""
    workers = [w for r in report.runs for w in r.workers]
    files = {w.file for w in workers}
    if len(files) != 1:
        print(f"tb-mfu annotate: {where.text}: name one trace file ({len(files)} found)", file=sys.stderr)
        return 2
    if where.is_local and os.path.isdir(where.path):  # a folder that holds one trace: that trace
        where = Location.parse(next(iter(files)))
    if where.is_local and out != "-" and os.path.exists(out) and os.path.samefile(out, where.path):
        print(f"tb-mfu annotate: {out}: is the trace itself; name another file", file=sys.stderr)
        return 2
    extra = _encoded(workers)
    try:
        if out == "-":
            _copy(where, sys.stdout.buffer, extra, limits)
        else:
            _write(where, out, extra, limits)
    except TraceError as exc:
        print(f"tb-mfu annotate: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tb-mfu annotate: {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _encoded(workers: list[WorkerReport]) -> bytes:
    """The added events as the inside of a JSON array (b"" for none)."""
    return msgspec.json.encode(extra_events(workers))[1:-1]


def _write(where: Location, out: str, extra: bytes, limits: Limits) -> None:
    """OUT written whole or not at all: into a temporary file beside it, then renamed."""
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as raw:
            if out.endswith(".gz"):
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as z:
                    _copy(where, z, extra, limits)
            else:
                _copy(where, raw, extra, limits)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _copy(where: Location, dst: _Sink, extra: bytes, limits: Limits) -> None:
    """The trace's decompressed bytes to ``dst``, ``extra`` inserted after the ``[`` that opens
    its events (a ``traceEvents`` array, or the document itself when it is a bare array)."""
    with Source(where, limits, Deadline(where.text, limits.max_seconds), inflate_apart=True) as src:
        head = bytearray()
        at = None
        while at is None:
            block = src.block()
            if not block:
                break
            start = max(0, len(head) - _KEY_OVERLAP)
            head += block
            at = _insert_at(head, start)
            if at is None and len(head) > MAX_HEAD_BYTES:
                break
        if at is None:
            raise TraceError(where.text, "no traceEvents array found: not a Chrome trace")
        while not head[at:].strip() and (block := src.block()):  # is the array empty? read on to see
            head += block
        dst.write(head[:at])
        if extra:
            dst.write(extra)
            if not head[at:].lstrip().startswith(b"]"):
                dst.write(b",")
        dst.write(head[at:])
        del head
        while block := src.block():
            dst.write(block)


def _insert_at(head: bytearray, start: int) -> int | None:
    """Where the events array opens in ``head`` (just past its ``[``), None if not yet seen. The
    key is the top-level one only when the keys before it parse as an object."""
    stripped = head.lstrip()
    if stripped.startswith(b"["):
        return len(head) - len(stripped) + 1
    for m in _EVENTS_KEY.finditer(head, start):
        try:
            _header.decode(bytes(head[: m.start()]) + b'"traceEvents":[]}')
        except msgspec.DecodeError:
            continue
        return m.end()
    return None
