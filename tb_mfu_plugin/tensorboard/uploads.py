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

No visitor may hold the area for the others: at most ``MAX_OPEN_BATCHES``
uploads arrive at once, at most ``per_client`` of them from one client (its
remote address, see ``share.client_key``), and an upload that receives no byte
for ``idle_s`` (``--mfu_upload_idle_seconds``, default 60 s) is dropped, whether
it was left uncommitted or its body trickles: a body must also keep up an
average of ``min_rate`` bytes a second once its first ``idle_s`` have passed.
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
MAX_OPEN_BATCHES = 16  # uploads arriving at once, from every client; more wait (HTTP 429)
MAX_BATCHES_PER_CLIENT = 4  # of those, from one client: one visitor cannot take them all
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
    ):
        self.root = os.path.join(cache_dir, UPLOADS)
        self.incoming = os.path.join(cache_dir, UPLOADS + "-incoming")
        self.max_bytes = max_bytes
        self.on_commit = on_commit
        self.idle_s = idle_s
        self.per_client = per_client
        self.min_rate = min_rate
        self._lock = threading.Lock()
        self._batches: dict[str, _Batch] = {}
        self._watchdog = Watchdog(max(0.05, min(1.0, idle_s / 4)))

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
        batch = self._open(batch_id, name, kind, length, client)
        metered = Metered(body, name, lambda n: self._count(batch, n), self.idle_s, self.min_rate)
        path = None
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
            return {"file": os.path.basename(path), "bytes": metered.counted}
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
                batch.touched = time.monotonic()

    def _open(self, batch_id: str, name: str, kind: str, length: int | None, client: str) -> _Batch:
        """The batch (made on its first file), with this request counted as writing into it."""
        if not _BATCH_ID.match(batch_id or ""):
            raise UploadError(400, "invalid upload id")
        self._sweep()
        os.makedirs(self.incoming, exist_ok=True)
        if length is not None:
            _check_free_space(self.incoming, length)
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is not None and batch.client != client:
                raise UploadError(404, "no such upload")  # another client's: neither join nor reveal it
            if batch is None:
                self._check_room(client)
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
        return batch

    def _check_room(self, client: str) -> None:
        """429 when a new upload would pass a cap on uploads arriving at once (under the lock)."""
        wait = f"uploads idle for {setting(self.idle_s, 's')} are dropped: try again then"
        if sum(1 for b in self._batches.values() if b.client == client) >= self.per_client:
            raise UploadError(429, f"you have {self.per_client} uploads arriving already: finish one, or {wait}")
        if len(self._batches) >= MAX_OPEN_BATCHES:
            raise UploadError(429, f"too many uploads at once on this server; {wait}")

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
