"""A remote file's bytes, streamed to the decoder while they download.

Object stores (S3, GCS, Azure) answer ranged GETs: :class:`RemoteFile` keeps a
few blocks in flight at once (``DEPTH`` ranges of ``BLOCK_BYTES``), hands them to
the decoder in order, and asks for the next one as each is taken, so the download
of block n+1..n+DEPTH overlaps the decoding of block n and memory stays at
``DEPTH`` blocks. HTTP servers need not honour ranges (Python's own file server
does not), so ``http(s)://`` is read as one stream, by a thread that keeps up to
``DEPTH`` blocks ahead. Nothing touches the disk.

Errors come out of ``read`` as one-line ``TraceError``s with secrets blanked
(``storage.storage_error``), so the decoder reports them as it reports any file.
"""

from __future__ import annotations

import io
import queue
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, cast

from ..errors import TraceError
from .locations import scheme
from .storage import filesystem, storage_error

# 16 MiB ranges, 3 in flight: 48 MiB held at most. On moto's loopback server a 92 MB
# object read at 34 MB/s in 8 MiB ranges, 42-45 MB/s in 16 MiB ones, 29 MB/s in one GET.
BLOCK_BYTES = 16 << 20
DEPTH = 3
# Protocols read as one stream: a plain HTTP server may ignore ranges.
STREAMED = frozenset({"http", "https"})


class RemoteFile(io.RawIOBase):
    """The bytes of ``url`` in order, from blocks fetched ahead by background threads."""

    def __init__(self, url: str, size: int | None = None) -> None:
        super().__init__()
        self.url = url
        self._fs, self._path = filesystem(url)
        try:
            streamed = scheme(url) in STREAMED
            if size is None and not streamed:
                size = int(self._fs.size(self._path))
        except Exception as exc:  # noqa: BLE001 - any failure of the store is this file's error
            raise storage_error(url, exc) from None
        self.size = size
        self._blocks = (
            _ranged(self._fs, self._path, url, size) if size is not None else _streamed(self._fs, self._path, url)
        )
        self._block = memoryview(b"")
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not len(self._block):
            block = next(self._blocks, None)
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
            close = getattr(self._blocks, "close", None)
            if close is not None:
                close()  # stops the fetches still queued
        super().close()


def _ranged(fs: Any, path: str, url: str, size: int) -> Iterator[bytes]:
    """Blocks of ``[0, size)`` from ranged reads, ``DEPTH`` in flight."""
    starts = iter(range(0, size, BLOCK_BYTES))
    with ThreadPoolExecutor(DEPTH, thread_name_prefix="mfu-fetch") as pool:
        inflight: list[tuple[int, Future[bytes]]] = []
        try:
            for start in starts:
                inflight.append((start, pool.submit(_fetch, fs, path, url, start, min(size, start + BLOCK_BYTES))))
                if len(inflight) >= DEPTH:
                    yield _result(url, inflight.pop(0)[1])
            while inflight:
                yield _result(url, inflight.pop(0)[1])
        finally:
            for _, fut in inflight:
                fut.cancel()


def _fetch(fs: Any, path: str, url: str, start: int, end: int) -> bytes:
    data: bytes = fs.cat_file(path, start=start, end=end)
    if len(data) != end - start:
        raise TraceError(
            url, f"the store returned {len(data):,} bytes for a range of {end - start:,}: changed while read?"
        )
    return data


def _result(url: str, fut: Future[bytes]) -> bytes:
    try:
        return fut.result()
    except Exception as exc:  # noqa: BLE001
        raise storage_error(url, exc) from None


_END = object()


def _streamed(fs: Any, path: str, url: str) -> Iterator[bytes]:
    """Blocks of one streamed GET, read ahead by a thread (up to ``DEPTH`` blocks)."""
    blocks: queue.Queue[Any] = queue.Queue(DEPTH)
    stop = threading.Event()

    def pump() -> None:
        try:
            with fs.open(path, "rb", block_size=0) as f:
                while not stop.is_set():
                    block = f.read(BLOCK_BYTES)
                    if not block:
                        break
                    _put(blocks, block, stop)
            _put(blocks, _END, stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, who raises it
            _put(blocks, exc, stop)

    threading.Thread(target=pump, name="mfu-stream", daemon=True).start()
    try:
        while True:
            item = blocks.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise storage_error(url, item)
            yield item
    finally:
        stop.set()
        while not blocks.empty():  # unblock the pump if it waits on a full queue
            blocks.get_nowait()


def _put(blocks: queue.Queue[Any], item: object, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            blocks.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def open_url(url: str, size: int | None = None) -> IO[bytes]:
    """``url`` opened for streaming reads (``size`` from the listing saves a request)."""
    return cast(IO[bytes], io.BufferedReader(RemoteFile(url, size), buffer_size=1 << 20))


def open_seekable(url: str) -> IO[bytes]:
    """``url`` opened for random access (an archive's index is at its end), in cached blocks."""
    fs, path = filesystem(url)
    try:
        f: IO[bytes] = fs.open(path, "rb", block_size=BLOCK_BYTES, cache_type="readahead")
    except Exception as exc:  # noqa: BLE001
        raise storage_error(url, exc) from None
    return f


def remote_uncompressed_size(url: str, size: int) -> int:
    """The decoded size of a remote file for the progress bar: a gzip file's ISIZE trailer
    (one ranged read of 4 bytes where the store takes ranges), else ``size``."""
    if size < 18 or not url.lower().split("?")[0].endswith(".gz") or scheme(url) in STREAMED:
        return size
    try:
        fs, path = filesystem(url)
        isize: int = struct.unpack("<I", fs.cat_file(path, start=size - 4, end=size))[0]
    except Exception:  # noqa: BLE001 - only a progress estimate
        return size
    while isize < size:
        isize += 1 << 32
    return isize
