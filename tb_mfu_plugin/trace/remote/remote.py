"""A remote file's bytes, streamed to the decoder while they download.

Object stores (S3, GCS, Azure) answer ranged GETs: :class:`RemoteFile` keeps a
few blocks in flight at once (``DEPTH`` ranges of ``BLOCK_BYTES``), hands them to
the decoder in order, and asks for the next one as each is taken, so the download
of block n+1..n+DEPTH overlaps the decoding of block n and memory stays at
``DEPTH`` blocks. HTTP servers need not honour ranges (Python's own file server
does not), so ``http(s)://`` is read as one stream, by a thread that keeps up to
``DEPTH`` blocks ahead. Nothing touches the disk. Every read is bounded by the
file's deadline (its ``max_seconds``), however the server sends its bytes, the
connection and the answer's headers included; an HTTP read that gets no byte at all
fails sooner, after ``storage.stall_timeout_s()``. A stream whose answer declares no
size (chunked, no ``Content-Length``) says so (``RemoteFile.unsized``): the decoder
holds it to ``max_unsized_bytes``, so an endless body cannot fill memory.

Errors come out of ``read`` as one-line ``TraceError``s with secrets blanked
(``storage.storage_error``), so the decoder reports them as it reports any file.
"""

from __future__ import annotations

import io
import logging
import os
import queue
import struct
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import IO, Any, cast

from ...core.errors import TraceError
from ..limits import DEFAULT_LIMITS, Deadline
from ..locate.locations import Location
from .bounded import BoundedFile, current_deadline, wait_s, within
from .storage import ALLOWED_ORIGINS, missing_extra, options_for, storage_error

# 16 MiB ranges, 3 in flight: 48 MiB held at most. On moto's loopback server a 92 MB
# object read at 34 MB/s in 8 MiB ranges, 42-45 MB/s in 16 MiB ones, 29 MB/s in one GET.
BLOCK_BYTES = 16 << 20
DEPTH = 3
# Protocols read as one stream: a plain HTTP server may ignore ranges.
STREAMED = frozenset({"http", "https"})


class RemoteFile(io.RawIOBase):
    """The bytes of ``url`` in order, from blocks fetched ahead by background threads, all
    within ``deadline`` (the file's ``max_seconds``): a source that trickles or stalls ends in
    the deadline's one-line error, however slowly its bytes come."""

    def __init__(self, location: Location, size: int | None = None, deadline: Deadline | None = None) -> None:
        super().__init__()
        self.url = url = location.text
        self.deadline = deadline or Deadline(url, DEFAULT_LIMITS.max_seconds)
        self._fs, self._path = filesystem(location)
        try:
            streamed = location.scheme in STREAMED
            if size is None and not streamed:
                fs, path = self._fs, self._path
                size = int(within(self.deadline, lambda: fs.size(path)))
        except TraceError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the store is this file's error
            raise storage_error(url, exc) from None
        self.size = size
        self._blocks: _Ranged | _Streamed = (
            _Streamed(self._fs, self._path, url, size)
            if streamed or size is None
            else _Ranged(self._fs, self._path, url, size)
        )
        self._block = memoryview(b"")
        self._pos = 0

    def readable(self) -> bool:
        return True

    @property
    def unsized(self) -> bool:
        """Whether the server declared no size for the bytes it sends (known once the first
        block is in): a chunked answer may never end."""
        return isinstance(self._blocks, _Streamed) and self._blocks.unsized

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not len(self._block):
            block = self._blocks.next(self.deadline)
            if block is None:
                return 0
            self._block = memoryview(block)
        n = min(len(view), len(self._block))
        view[:n] = self._block[:n]
        self._block = self._block[n:]
        self._pos += n
        return n

    def tell(self) -> int:
        """Bytes handed out so far (the gzip ratio check divides by them)."""
        return self._pos

    def close(self) -> None:
        if not self.closed:
            self._blocks.close()  # stops the fetches still queued, and a stream's download
        super().close()


class _Ranged:
    """Blocks of ``[0, size)`` from ranged reads, ``DEPTH`` in flight."""

    def __init__(self, fs: Any, path: str, url: str, size: int) -> None:
        self.url = url
        self._pool = ThreadPoolExecutor(DEPTH, thread_name_prefix="mfu-fetch")
        starts = range(0, size, BLOCK_BYTES)
        self._jobs = iter((fs, path, url, start, min(size, start + BLOCK_BYTES)) for start in starts)
        self._inflight: list[Future[bytes]] = []
        self._fill()

    def _fill(self) -> None:
        while len(self._inflight) < DEPTH and (job := next(self._jobs, None)) is not None:
            self._inflight.append(self._pool.submit(_fetch, *job))

    def next(self, deadline: Deadline) -> bytes | None:
        if not self._inflight:
            self._pool.shutdown(wait=False)
            return None
        fut = self._inflight[0]
        while True:
            try:
                data = fut.result(timeout=wait_s(deadline))
                break
            except FuturesTimeout:
                continue
            except Exception as exc:  # noqa: BLE001
                raise storage_error(self.url, exc) from None
        self._inflight.pop(0)
        self._fill()
        return data

    def close(self) -> None:
        for fut in self._inflight:
            fut.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _fetch(fs: Any, path: str, url: str, start: int, end: int) -> bytes:
    data: bytes = fs.cat_file(path, start=start, end=end)
    if len(data) != end - start:
        raise TraceError(
            url, f"the store returned {len(data):,} bytes for a range of {end - start:,}: changed while read?"
        )
    return data


_END = object()


class _Streamed:
    """Blocks of one streamed GET, read ahead by a thread (up to ``DEPTH`` blocks)."""

    def __init__(self, fs: Any, path: str, url: str, size: int | None) -> None:
        self.url = url
        self._queue: queue.Queue[Any] = queue.Queue(DEPTH)
        self._stop = threading.Event()
        self._file: Any = None
        self._ended = False
        self._lock = threading.Lock()
        # set before the first block is handed out: the answer declared no size (chunked)
        self.unsized = False
        # a size from the listing spares fsspec's HEAD before the GET
        args = (fs, path, size or None)
        threading.Thread(target=self._pump, args=args, name="mfu-stream", daemon=True).start()

    def _pump(self, fs: Any, path: str, size: int | None) -> None:
        try:
            f = fs.open(path, "rb", block_size=0, size=size) if size else fs.open(path, "rb", block_size=0)
            response = getattr(f, "r", None)  # fsspec's HTTPStreamFile: the aiohttp response
            self.unsized = response is not None and response.content_length is None
            with self._lock:
                self._file = f
                stopped = self._stop.is_set()
            with f:
                while not stopped and not self._stop.is_set():
                    block = f.read(BLOCK_BYTES)
                    if not block:
                        break
                    self._put(block)
            self._put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, who raises it
            self._put(exc)

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next(self, deadline: Deadline) -> bytes | None:
        if self._ended:
            return None
        while True:
            try:
                item = self._queue.get(timeout=wait_s(deadline))
                break
            except queue.Empty:
                continue
        if item is _END:
            self._ended = True
            return None
        if isinstance(item, BaseException):
            raise storage_error(self.url, item)
        block: bytes = item
        return block

    def close(self) -> None:
        self._stop.set()
        while not self._queue.empty():  # unblock the pump if it waits on a full queue
            self._queue.get_nowait()
        with self._lock:
            f = self._file
        if f is not None:  # ends a read that waits on a slow server now, not at its next byte
            try:
                f.close()
            except Exception:  # noqa: BLE001 - closing is all we ask of it
                pass


def open_url(url: Location, size: int | None = None, deadline: Deadline | None = None) -> IO[bytes]:
    """``url`` opened for streaming reads (``size`` from the listing saves a request), every
    read within ``deadline``."""
    return cast(IO[bytes], io.BufferedReader(RemoteFile(url, size, deadline), buffer_size=1 << 20))


def declares_no_size(stream: object) -> bool:
    """Whether ``stream`` (``open_url``'s, once its first bytes are in) is an answer that declared
    no size: the decoder then holds it to ``max_unsized_bytes``."""
    raw = getattr(stream, "raw", stream)
    return isinstance(raw, RemoteFile) and raw.unsized


def open_seekable(url: Location, deadline: Deadline | None = None) -> IO[bytes]:
    """``url`` opened for random access (an archive's index is at its end), in cached blocks;
    opened within ``deadline`` (default: the one in effect, else ``max_seconds``), and each read
    within the deadline in effect where it is read (``bounded.reads_within``)."""
    fs, path = filesystem(url)
    try:
        f: IO[bytes] = within(
            deadline or current_deadline(url.text),
            lambda: fs.open(path, "rb", block_size=BLOCK_BYTES, cache_type="readahead"),
        )
    except TraceError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise storage_error(url.text, exc) from None
    return cast(IO[bytes], io.BufferedReader(BoundedFile(f, url.text), buffer_size=1 << 20))


def remote_uncompressed_size(url: Location, size: int) -> int:
    """The decoded size of a remote file for the progress bar: a gzip file's ISIZE trailer
    (one ranged read of 4 bytes where the store takes ranges), else ``size``."""
    if size < 18 or not url.path.lower().endswith(".gz") or url.scheme in STREAMED:
        return size
    try:
        fs, path = filesystem(url)
        isize: int = struct.unpack("<I", fs.cat_file(path, start=size - 4, end=size))[0]
    except Exception:  # noqa: BLE001 - only a progress estimate
        return size
    while isize < size:
        isize += 1 << 32
    return isize


def filesystem(location: Location, is_folder: bool = False) -> tuple[Any, str]:
    """The fsspec file system of ``url`` (with its storage options) and the path inside it.

    An http(s) file system is held to the origin of ``url`` and to its folder (``url``
    itself when ``is_folder``, a logdir; else the folder of the file), see ``http_fs``.
    Raises ``TraceError`` with one line: the extra to install when the protocol's
    package is missing, or why the URL cannot be used.
    """
    import fsspec.core

    url = location.text
    proto = location.scheme or "file"
    options = options_for(url)
    allowed = options.pop(ALLOWED_ORIGINS, None)  # ours: no file system takes it
    try:
        if proto in ("http", "https"):
            from .http_fs import http_filesystem

            return http_filesystem(url, {**options, ALLOWED_ORIGINS: allowed}, is_folder), url
        if proto in ("gs", "gcs"):
            return _gcs(url, options)
        fs, path = fsspec.core.url_to_fs(url, **options)
        return fs, str(path)
    except ImportError:
        raise missing_extra(url, proto) from None
    except ValueError as exc:
        if "Protocol not known" in str(exc):
            raise TraceError(url, f"unknown protocol {proto}:// (fsspec knows no such file system)") from None
        raise storage_error(url, exc) from None
    except Exception as exc:  # noqa: BLE001 - a file system's own setup error (bad options)
        raise storage_error(url, exc) from None


def _gcs(url: str, options: dict[str, Any]) -> tuple[Any, str]:
    """gcsfs's file system of a ``gs://`` URL.

    gcsfs (2025.x on) registers an extended class for ``gs://`` that asks Google's
    Storage Control gRPC API for each bucket's layout, retrying for 60 s before it
    falls back, and again on every call, since it does not keep a failed answer. A
    server at another endpoint (an emulator, a gateway; ``endpoint_url`` or
    ``$STORAGE_EMULATOR_HOST``) has no such API, so there we take the plain JSON-API class,
    which is all that reading objects needs.
    """
    import fsspec.core
    import gcsfs.core

    # gcsfs logs its last retry with a traceback; without a handler of its own, Python
    # prints that to stderr (logging.lastResort) beside our one-line error. A NullHandler,
    # as libraries should have, keeps it out while an application's root handlers still get it.
    gcs_log = logging.getLogger("gcsfs")
    if not any(isinstance(h, logging.NullHandler) for h in gcs_log.handlers):
        gcs_log.addHandler(logging.NullHandler())
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "") not in ("", "default")
    if options.get("endpoint_url") or emulator:
        cls = gcsfs.core.GCSFileSystem
        return cls(**options), str(cls._strip_protocol(url))
    fs, path = fsspec.core.url_to_fs(url, **options)
    return fs, str(path)
