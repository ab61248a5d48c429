"""The upload area: trace files and archives dropped onto the tab, kept under the cache directory.

Layout, both under the cache directory (never in a logdir)::

    uploads-incoming/<batch>/   files of an upload still arriving (never scanned)
    uploads/<run>/              finished uploads, one folder each: the runs uploads/<run>

An upload is a *batch*: the tab sends each file in its own request under one
random batch id, then commits the batch. Commit renames the batch's folder into
``uploads/`` in one ``os.rename`` (a scan sees the whole upload or none of it),
under a name made from the file's or archive's name and made unique by trying
``name``, ``name-2``, ... (a rename onto a folder that exists fails, so two
commits cannot take one name).

Each request's body is streamed to disk in chunks and counted as it is read:
the batch's bytes may never pass ``max_bytes``, whatever the request's
Content-Length said, and a request over the cap stops there and leaves nothing
behind. Files are checked by name and first bytes (``upload_files``) before
anything is written.

No visitor may hold the area for the others. An upload holds a *slot* while a file of
it arrives, and for ``stall_s`` (a few seconds) after each file it received whole, for its
next file or its commit (the tab sends them back to back); at most ``MAX_OPEN_BATCHES``
slots are held at once, at most ``per_client`` of them by one client (its remote address,
see ``share.client_key``). A request that finds no slot free waits for one in a queue, in
turn, until ``queue_s`` (default ``idle_s``), and its answer says how long it waited
(``queued_s``); a 429 only when its time is up, or when ``MAX_WAITING`` wait already. Behind
a proxy every client has the proxy's address: the queue is what keeps them fair, where a
refusal would send each of them away. A body that stops arriving for ``stall_s`` in its
first ``idle_s`` is dropped (408), and so its slot comes free in seconds, not after
``idle_s``; after that a body must keep up an average of ``min_rate`` bytes a second. An
upload that receives no byte for ``idle_s`` (``--mfu_upload_idle_seconds``, default 60 s)
is dropped, left uncommitted or not; until then one that holds no slot may still be
committed, or take a slot again for its next file. At most ``MAX_BATCHES`` uploads are kept
arriving: past it, the one idle the longest of those holding no slot is dropped.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..analysis.fmt import setting
from ..trace.limits import GiB, MiB, format_size
from .runs import Source
from .upload_body import Body, Metered, UploadError, Watchdog
from .upload_files import (
    ARCHIVES,
    HEAD_BYTES,
    SIDECAR,
    RefusedFile,
    check_head,
    check_name,
    is_gzip,
    kind_of,
    run_label,
    shown,
    stored_name,
)

logger = logging.getLogger(__name__)

UPLOADS = "uploads"  # the folder under the cache directory, and the runs' name prefix
DEFAULT_MAX_BYTES = 1 * GiB
CHUNK_BYTES = 1 * MiB
MAX_OPEN_BATCHES = 16  # slots: uploads arriving at once, from every client; more wait in the queue
MAX_BATCHES_PER_CLIENT = 4  # of those, from one client: one visitor cannot take them all
MAX_WAITING = 64  # requests waiting for a slot; more are refused at once (HTTP 429)
MAX_BATCHES = 64  # uploads kept, slot or not (each may hold max_bytes on disk until idle_s)
# A body that brings no byte this long in its first idle_s is dropped, and an upload keeps its
# slot this long after a file for its next one: a browser sends a body as fast as it can, and
# the tab its files and commit back to back.
STALL_S = 5.0
MAX_FILES = 1024  # files in one upload
# An upload that receives no byte this long is dropped: a closed tab, a client that never
# commits, a body that stalls. The tab sends its files back to back, so a live one never idles.
IDLE_TTL_S = 60.0
# Once its first IDLE_TTL_S have passed, a body must average this much (a trickle of a byte
# every few seconds would otherwise hold its slot forever); any real link is far faster.
MIN_BYTES_PER_S = 16 * 1024
_BATCH_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


@dataclass
class _Batch:
    path: str
    client: str  # who opened it (share.client_key): only they may add to it, and it counts against them
    names: list[str] = field(default_factory=list)  # the client's names, for the run's name
    kinds: set[str] = field(default_factory=set)  # of the files started (to refuse mixes at once)
    kept: set[str] = field(default_factory=set)  # of the files received whole
    bytes: int = 0  # counted as read, by every request of the batch together
    writing: int = 0  # requests still streaming into it
    touched: float = field(default_factory=time.monotonic)
    holds_until: float = 0.0  # after a file received whole, it keeps its slot until then

    def holds_slot(self, now: float) -> bool:
        return self.writing > 0 or now < self.holds_until


class UploadArea:
    """Receives, checks and commits uploads; lists what they add to the scan."""

    def __init__(
        self,
        cache_dir: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_commit: Callable[[], None] | None = None,
        *,
        idle_s: float = IDLE_TTL_S,
        per_client: int = MAX_BATCHES_PER_CLIENT,
        min_rate: float = MIN_BYTES_PER_S,
        stall_s: float | None = None,
        queue_s: float | None = None,
    ):
        self.root = os.path.join(cache_dir, UPLOADS)
        self.incoming = os.path.join(cache_dir, UPLOADS + "-incoming")
        self.max_bytes = max_bytes
        self.on_commit = on_commit
        self.idle_s = idle_s
        self.per_client = per_client
        self.min_rate = min_rate
        # (at most half idle_s: a request waiting for a slot sees a grace end well before its own deadline)
        self.stall_s = stall_s if stall_s is not None else min(STALL_S, idle_s / 2)
        self.queue_s = queue_s if queue_s is not None else idle_s
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)  # a slot may have come free
        self._waiting: list[tuple[object, str]] = []  # the queue: (ticket, client), in turn
        self._batches: dict[str, _Batch] = {}
        self._watchdog = Watchdog(max(0.05, min(1.0, idle_s / 4, self.stall_s / 4)))

    # -- receiving -------------------------------------------------------
    def receive(
        self,
        batch_id: str,
        name: str,
        body: Body,
        length: int | None,
        client: str = "",
        on_stall: Callable[[], None] | None = None,
    ) -> dict[str, object]:
        """Stream one file of ``batch_id`` from ``body`` into the batch's folder.

        A body that stalls or trickles is dropped with a 408 (``upload_body``);
        ``on_stall`` ends a read that waits on such a body (it shuts the socket)."""
        kind = _kind(name)
        batch, queued_s = self._open(batch_id, name, kind, length, client)
        metered = Metered(body, name, lambda n: self._count(batch, n), self.idle_s, self.min_rate, self.stall_s)
        path = None
        whole = False
        try:
            with self._watchdog.watch(metered, on_stall):
                head = metered.read(HEAD_BYTES)
                check_head(name, kind, head)
                path = _claim(batch.path, stored_name(name, kind, is_gzip(head)), kind)
                with open(path, "wb") as out:
                    out.write(head)
                    while chunk := metered.read(CHUNK_BYTES):
                        out.write(chunk)
            if length is not None and metered.counted != length:
                raise UploadError(400, f"{shown(name)}: the upload ended after {metered.counted} of {length} bytes")
            with self._lock:
                batch.names.append(name)
                batch.kept.add(kind)
            whole = True
            return {"file": os.path.basename(path), "bytes": metered.counted, "queued_s": round(queued_s, 3)}
        except BaseException as exc:
            if path is not None:
                _unlink(path)
            with self._lock:  # the file is gone: its bytes no longer count against the cap
                batch.bytes -= metered.counted
            if isinstance(exc, RefusedFile):
                raise UploadError(400, str(exc)) from None
            raise
        finally:
            with self._lock:
                batch.writing -= 1
                batch.touched = now = time.monotonic()
                # a file received whole keeps the slot for the next one; a failed one frees it now
                batch.holds_until = now + self.stall_s if whole else 0.0
                self._freed.notify_all()

    def _open(self, batch_id: str, name: str, kind: str, length: int | None, client: str) -> tuple[_Batch, float]:
        """The batch (made on its first file), with this request counted as writing into it, and
        the seconds it waited in the queue for a slot."""
        if not _BATCH_ID.match(batch_id or ""):
            raise UploadError(400, "invalid upload id")
        self._sweep()
        os.makedirs(self.incoming, exist_ok=True)
        if length is not None:
            _check_free_space(self.incoming, length)
        queued_s = 0.0
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is not None and batch.client != client:
                raise UploadError(404, "no such upload")  # another client's: neither join nor reveal it
            if batch is None or not batch.holds_slot(time.monotonic()):
                queued_s = self._wait_for_slot(client)
                batch = self._batches.get(batch_id)  # (it may have been dropped while we waited)
                if batch is not None and batch.client != client:
                    raise UploadError(404, "no such upload")
            if batch is None:
                self._make_room()
                batch = _Batch(os.path.join(self.incoming, batch_id), client)
                os.makedirs(batch.path, exist_ok=True)
                self._batches[batch_id] = batch
            # Kinds are noted as files start, so two requests sent at once cannot both pass.
            if (kind in ARCHIVES and batch.kinds) or batch.kinds & set(ARCHIVES):
                raise UploadError(400, f"{shown(name)}: an archive is uploaded on its own, not with other files")
            if len(batch.names) + batch.writing >= MAX_FILES:
                raise UploadError(400, f"more than {MAX_FILES} files in one upload")
            if length is not None and batch.bytes + length > self.max_bytes:
                raise UploadError(413, self._too_big(name))
            batch.kinds.add(kind)
            batch.writing += 1
        return batch, queued_s

    def _room(self, client: str, now: float) -> bool:
        """Whether a slot is free for ``client`` (under the lock)."""
        held = [b for b in self._batches.values() if b.holds_slot(now)]
        return len(held) < MAX_OPEN_BATCHES and sum(1 for b in held if b.client == client) < self.per_client

    def _wait_for_slot(self, client: str) -> float:
        """Wait in the queue, in turn, until a slot is free for ``client`` (under the lock, which
        the wait lets go of); the seconds waited. 429 when ``queue_s`` pass first, or when
        ``MAX_WAITING`` requests wait already."""
        start = time.monotonic()
        if self._room(client, start) and not self._waiting:
            return 0.0
        if len(self._waiting) >= MAX_WAITING:
            raise UploadError(429, f"{MAX_WAITING} uploads are waiting for a slot on this server already: try again")
        ticket = object()
        self._waiting.append((ticket, client))
        try:
            while True:
                now = time.monotonic()
                # the first in the queue that a slot is free for goes: one client's wait holds no other
                first = next((t for t, c in self._waiting if self._room(c, now)), None)
                if first is ticket:
                    return now - start
                if now - start >= self.queue_s:
                    waited = setting(round(now - start, 1), "s")
                    mine = sum(1 for b in self._batches.values() if b.client == client and b.holds_slot(now))
                    who = f"you have {mine} uploads arriving" if mine >= self.per_client else "the server is busy"
                    raise UploadError(429, f"waited {waited} for an upload slot ({who}): try again")
                # slots also come free as time passes (an upload's grace ends): look again soon
                self._freed.wait(min(self.queue_s - (now - start), max(0.05, self.stall_s / 4)))
        finally:
            self._waiting.remove((ticket, client))
            self._freed.notify_all()

    def _make_room(self) -> None:
        """Past ``MAX_BATCHES`` uploads kept, drop the one idle longest of those holding no slot."""
        if len(self._batches) < MAX_BATCHES:
            return
        now = time.monotonic()
        parked = [(b.touched, k) for k, b in self._batches.items() if not b.holds_slot(now)]
        if parked:
            _, key = min(parked)
            _rmtree(self._batches.pop(key).path)

    def _count(self, batch: _Batch, n: int) -> None:
        """``n`` more bytes of ``batch`` read: 413 once they pass the cap."""
        with self._lock:
            batch.bytes += n
            batch.touched = time.monotonic()
            over = batch.bytes > self.max_bytes
        if over:
            raise UploadError(413, self._too_big(""))

    def _too_big(self, name: str) -> str:
        what = f"{shown(name)}: " if name else ""
        return f"{what}the upload is over the server's cap of {format_size(self.max_bytes)} (--mfu_upload_max_bytes)"

    # -- finishing -------------------------------------------------------
    def commit(self, batch_id: str, client: str = "") -> dict[str, object]:
        """Move a finished batch into ``uploads/`` as one run; returns its run name and state.

        Only a batch that makes a run is committed: one of trace files (with their
        sidecars, if any) or one archive. Sidecars alone are refused."""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None or batch.client != client:
                idle = setting(self.idle_s, "s")
                raise UploadError(404, f"no such upload (finished already, or dropped after {idle} idle)")
            if batch.writing:
                raise UploadError(409, "files of this upload are still arriving")
            del self._batches[batch_id]
            self._freed.notify_all()
        if not batch.names:
            _rmtree(batch.path)
            raise UploadError(400, "nothing was uploaded")
        if batch.kept == {SIDECAR}:
            _rmtree(batch.path)
            why = "only a sidecar (tb_mfu.json) was uploaded: it makes no run; drop it with the trace files it is for"
            raise UploadError(400, why)
        folder = self._place(batch.path, run_label(batch.names))
        logger.info(
            "MFU plugin: upload of %d file(s), %s, stored as %s", len(batch.names), format_size(batch.bytes), folder
        )
        if self.on_commit is not None:
            self.on_commit()
        return {
            "run": f"{UPLOADS}/{folder}",
            "state": "ready",
            "files": sorted(os.listdir(os.path.join(self.root, folder))),
        }

    def cancel(self, batch_id: str, client: str = "") -> None:
        """Drop an upload the tab gave up on (one of its files was refused)."""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None or batch.client != client or batch.writing:
                return  # a request still writing cleans up after itself; the sweep takes the rest
            del self._batches[batch_id]
            self._freed.notify_all()
        _rmtree(batch.path)

    def _place(self, src: str, label: str) -> str:
        os.makedirs(self.root, exist_ok=True)
        for n in range(1, 10_000):
            name = label if n == 1 else f"{label}-{n}"
            dst = os.path.join(self.root, name)
            if os.path.lexists(dst):
                continue
            try:
                os.rename(src, dst)
                return name
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        raise UploadError(409, f"too many uploads named {label}")

    def _sweep(self) -> None:
        """Remove uploads that received no byte for ``idle_s`` (those still reading time out themselves)."""
        now = time.monotonic()
        with self._lock:
            stale = [k for k, b in self._batches.items() if not b.writing and now - b.touched > self.idle_s]
            for k in stale:
                del self._batches[k]
            live = set(self._batches)
        for k in stale:
            _rmtree(os.path.join(self.incoming, k))
        try:
            names = os.listdir(self.incoming)
        except OSError:
            return
        for k in names:  # folders of a previous server process, or of another sharing the cache dir
            p = os.path.join(self.incoming, k)
            if k not in live and _age_s(p) > self.idle_s:
                _rmtree(p)

    # -- what the scan sees ----------------------------------------------
    def sources(self) -> list[Source]:
        """The upload area as sources of the scan (called on the scan thread, never on a request).

        Folders of trace files are runs of the ``uploads`` source. An uploaded
        archive is a logdir of its own, ``uploads/<run>`` -> the archive file,
        read in place by the trace layer's archive reader (nothing is extracted).
        """
        if not os.path.isdir(self.root):
            return []
        out = [Source(UPLOADS, self.root)]
        for folder in sorted(os.listdir(self.root)):
            for f in _archives_in(os.path.join(self.root, folder)):
                out.append(Source(f"{UPLOADS}/{folder}", os.path.join(self.root, folder, f)))
        return out


def _kind(name: str) -> str:
    try:
        check_name(name)
        return kind_of(name)
    except RefusedFile as exc:
        raise UploadError(400, str(exc)) from None


def _claim(folder: str, stored: str, kind: str) -> str:
    """Create ``stored`` in ``folder`` (``name-2.pt.trace.json`` etc. if taken); its path."""
    stem, dot, rest = stored.partition(".")
    for n in range(1, MAX_FILES + 2):
        name = stored if n == 1 else f"{stem}-{n}{dot}{rest}"
        path = os.path.join(folder, name)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return path
        except FileExistsError:
            if kind == SIDECAR:  # a second tb_mfu.json renamed would no longer be a sidecar
                raise UploadError(400, f"{stored}: two sidecars of one name in one upload") from None
    raise UploadError(400, f"{stored}: too many files of one name in one upload")


def _archives_in(folder: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for n in sorted(names):
        try:
            if kind_of(n) in ARCHIVES:
                out.append(n)
        except RefusedFile:
            continue
    return out


def _check_free_space(folder: str, length: int) -> None:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < length + 64 * MiB:  # keep room for the cache entries the analyses write next
        raise UploadError(507, f"not enough free disk space on the server for {format_size(length)}")


def _age_s(path: str) -> float:
    """Seconds since the folder or any file in it last changed (a file being written is not stale)."""
    try:
        newest = os.stat(path).st_mtime
        with os.scandir(path) as entries:
            for e in entries:
                newest = max(newest, e.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return 0.0
    return time.time() - newest


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _rmtree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
