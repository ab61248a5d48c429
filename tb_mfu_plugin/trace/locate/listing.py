"""Runs under any location: a local folder, a URL of a remote folder or file, or an archive.

:func:`discover` is the one entry point of the faces (``tb-mfu``, the tab's scan).
A local folder is walked by ``discover.discover_runs``. A remote folder is listed
with one recursive ``find`` (S3, GCS and Azure list a whole prefix in pages of
1,000 keys, without a request per folder), bounded by ``list_timeout_s()``; an
HTTP logdir is walked page by page under the caps of ``http_fs`` (its folder,
its origin, bytes and links), and cancelled at the deadline. The files whose
listing lacks a size or an identity (an HTTP server's index pages) are then asked
for them by up to ``INFO_THREADS`` concurrent requests under the same deadline; a
file whose answer fails or is late stays listed, and its read tells why. An
archive is listed by ``archive.Archive``. Each file keeps its
store's identity (ETag, version id, GCS's md5Hash or generation) in ``SpanFile.ident``, so an
unchanged object keeps its cache entry when it is listed again.
"""

from __future__ import annotations

import os
import posixpath
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ...core.errors import TraceError, TraceNotFound
from ..archive.by_location import archive_at
from ..archive.reader import Archive, ArchiveMember
from ..limits import DEFAULT_LIMITS, Deadline, Limits, cap_error
from ..remote.bounded import reads_within
from ..remote.redact import redacting_logger
from ..remote.remote import filesystem
from ..remote.storage import storage_error
from .discover import SIDECAR_NAME, RunFiles, SpanFile, WorkerFiles, discover_runs, is_trace_name, run_of, single_name
from .locations import Location

if TYPE_CHECKING:  # http_fs needs aiohttp, imported only for an http(s) logdir
    from ..remote.http_fs import Warn

logger = redacting_logger(__name__)  # URLs in its lines: signatures blanked

LIST_TIMEOUT_ENV = "TB_MFU_LIST_TIMEOUT"
DEFAULT_LIST_TIMEOUT_S = 120.0
INFO_THREADS = 16
# Keys of an fsspec info dict that identify an object's content, best first. GCS's md5Hash
# (a hash of the bytes) comes before its generation and etag, which change whenever the same
# bytes are uploaded again (or, for etag, the metadata is patched); composite objects have
# no md5Hash and fall back to the generation.
_IDENTITY_KEYS = ("md5Hash", "VersionId", "version_id", "generation", "ETag", "etag", "content_md5", "checksum")
# Keys that only date it (an HTTP server without ETags): used when there is nothing better.
_DATE_KEYS = ("Last-Modified", "LastModified", "last_modified", "mtime", "updated")

Sidecars = tuple[tuple[str, int, int | str], ...]


def log_warning(line: str) -> None:
    """Where a listing's one-line warnings go when its caller collects none: the log (the CLI
    and the tab pass their own ``warn``)."""
    logger.warning("tb-mfu: %s", line)


def list_timeout_s() -> float:
    """Seconds a remote listing may take: ``$TB_MFU_LIST_TIMEOUT``, else 120."""
    try:
        value = float(os.environ.get(LIST_TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_LIST_TIMEOUT_S
    return value if value > 0 else DEFAULT_LIST_TIMEOUT_S


def discover(
    path: Location,
    name: str | None = None,
    limits: Limits | None = None,
    warn: Warn | None = None,
    identify: bool = True,
) -> list[RunFiles]:
    """All runs under ``path``, sorted by name. Raises ``TraceError`` (one line) when a remote
    location or an archive cannot be listed; a missing local path gives no runs. What a
    listing left out (a remote sub-folder it could not read, a page or an archive over a cap,
    read up to it) is one line to ``warn`` (default: logged).

    ``identify``: ask an HTTP server for the size and identity of each file its index pages
    list without them (a HEAD each, which the tab's cache keys need); a face that keeps no
    cache (the CLI) leaves it off, and each file then costs only its own read. Such a request
    is held to the file's ``max_seconds`` as well as to the listing's deadline."""
    if path.archive_kind is not None:
        return discover_archive(path, name, limits, warn)
    if path.is_url:
        return discover_remote(path, name, warn, limits, identify)
    if path.member is not None:  # a member named directly is no logdir (its archive is)
        return []
    return discover_runs(path.path, name)


def identity(info: dict[str, Any]) -> str:
    """An object's identity from its fsspec info: a version or content hash, else its date."""
    for keys in (_IDENTITY_KEYS, _DATE_KEYS):
        for k in keys:
            v = info.get(k)
            if v not in (None, ""):
                return f"{k}:{str(v).strip(chr(34))}"
    return ""


def _size(info: dict[str, Any]) -> int | None:
    size = info.get("size")
    return int(size) if isinstance(size, int | float) and size >= 0 else None


def discover_remote(
    where: Location,
    name: str | None = None,
    warn: Warn | None = None,
    limits: Limits | None = None,
    identify: bool = True,
) -> list[RunFiles]:
    url = where.text
    single = is_trace_name(where.basename)
    fs, root = filesystem(where, is_folder=not single)
    start = time.monotonic()
    deadline = start + list_timeout_s()
    seconds = (limits or DEFAULT_LIMITS).max_seconds
    per_file = min(deadline, start + seconds) if seconds > 0 else deadline  # a file's own requests
    if single:  # one file, named directly: asked for, so that a missing one is the source's error
        info = _call(url, per_file, lambda: fs.info(root), seconds if per_file < deadline else None)
        worker, span = single_name(where.basename)
        f = SpanFile(span, where, _size(info) or 0, 0.0, identity(info))
        return [RunFiles(name or where.basename, where, [WorkerFiles(worker, [f])])]
    found = _find(fs, url, root, deadline, warn, seconds if identify else None)
    root_path = root.rstrip("/")
    base = name or where.basename or url
    by_dir: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for path, info in found.items():
        rel = path[len(root_path) :].lstrip("/") if path.startswith(root_path) else path
        folder, _, fname = rel.rpartition("/")
        by_dir[folder].append((fname, info))
    runs = []
    for folder, files in sorted(by_dir.items()):
        run_name = base if not folder else (folder if name is None else f"{name}/{folder}")
        directory = where.join(folder) if folder else where.stripped()
        spans = [(f, SpanFile("", directory.join(f), _size(i) or 0, 0.0, identity(i))) for f, i in files]
        run = run_of(run_name, directory, spans)
        if run is not None:
            run.sidecars = tuple(sorted((f, _size(i) or 0, identity(i)) for f, i in files if f.endswith(SIDECAR_NAME)))
            runs.append(run)
    runs.sort(key=lambda r: r.name)
    return runs


def _wanted(path: str) -> bool:
    fname = path.rstrip("/").rsplit("/", 1)[-1]
    return is_trace_name(fname) or fname.endswith(SIDECAR_NAME)


def _find(
    fs: Any, url: str, root: str, deadline: float, warn: Warn | None, info_s: float | None
) -> dict[str, dict[str, Any]]:
    """fsspec path -> info of the trace and sidecar files under ``root``; those the listing gave
    without a size or an identity are asked for them, each within ``info_s`` (its file's
    ``max_seconds``; 0: no limit) and the listing's deadline (None: not asked)."""
    kwargs = {"timeout": max(0.1, deadline - time.monotonic())} if getattr(fs, "async_impl", False) else {}
    try:
        fs.invalidate_cache(root)  # a re-scan must see new and changed objects
    except Exception:  # noqa: BLE001 - a file system without a listing cache
        pass
    try:
        if hasattr(fs, "walk_tree"):  # http(s): an index page per folder, under our caps (http_fs.py)
            listed = _call(url, deadline, lambda: _walk(fs, root, deadline, warn))
        else:
            listed = _call(url, deadline, lambda: fs.find(root, withdirs=False, detail=True, **kwargs))
    except TraceNotFound:  # a store whose listing itself is not found (GCS: a missing bucket)
        raise TraceNotFound(url, "no such folder or file") from None
    if not listed:  # an empty folder, or none: ask, so that a store that cannot be reached says so
        try:
            _call(url, deadline, lambda: fs.info(root))
        except TraceNotFound:
            raise TraceNotFound(url, "no such folder or file") from None
    found = {p: dict(i) for p, i in listed.items() if _wanted(p) and i.get("type", "file") != "directory"}
    missing = [p for p, i in found.items() if _size(i) is None or not identity(i)]
    if missing and info_s is not None:
        info_by = min(deadline, time.monotonic() + info_s) if info_s > 0 else deadline
        for p, info in zip(missing, _infos(fs, url, missing, info_by), strict=True):
            found[p].update(info)
    return found


def _walk(fs: Any, root: str, deadline: float, warn: Warn | None) -> dict[str, dict[str, Any]]:
    """The guarded walk of an HTTP logdir, cancelled (its requests with it) at the deadline."""
    import asyncio  # here, not at the top: a local analysis has no use for its ~25 ms of import

    from fsspec.asyn import sync

    async def bounded() -> dict[str, dict[str, Any]]:
        return await asyncio.wait_for(fs.walk_tree(root, warn), max(0.01, deadline - time.monotonic()))

    try:
        result: dict[str, dict[str, Any]] = sync(fs.loop, bounded)
    except asyncio.TimeoutError:
        raise _timeout(root) from None
    return result


def _infos(fs: Any, url: str, paths: list[str], deadline: float) -> Iterable[dict[str, Any]]:
    """``fs.info`` of each path, ``INFO_THREADS`` at a time, all within the deadline. A file
    whose info fails (a dead link, a refused redirect) or does not come in time is kept with
    what the listing said: its read then fails with its own one-line error, and the other
    files of the folder are not lost with it."""
    pool = ThreadPoolExecutor(INFO_THREADS, thread_name_prefix="mfu-list")
    try:
        futures = [pool.submit(fs.info, p) for p in paths]
        out: list[dict[str, Any]] = []
        for fut in futures:
            try:
                out.append(dict(fut.result(timeout=max(0.0, deadline - time.monotonic()))))
            except Exception:  # noqa: BLE001 - that file's error, told when it is read
                out.append({})
        return out
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _call(url: str, deadline: float, fn: Callable[[], Any], max_seconds: float | None = None) -> Any:
    """``fn()`` on a daemon thread, given up at the deadline: a store that hangs cannot hang us,
    and a call still stuck then holds no thread that the process waits for at exit. The
    deadline is the listing's, or the file's ``max_seconds`` when that is given."""
    box: queue.Queue[tuple[bool, Any]] = queue.Queue(1)

    def run() -> None:
        try:
            box.put((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box.put((False, exc))

    threading.Thread(target=run, name="mfu-list", daemon=True).start()
    try:
        ok, value = box.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise _timeout(url, max_seconds) from None
    if ok:
        return value
    if isinstance(value, TraceError) or not isinstance(value, Exception):
        raise value
    if "Timeout" in type(value).__name__:
        raise _timeout(url, max_seconds) from None
    raise storage_error(url, value) from None


def _timeout(url: str, max_seconds: float | None = None) -> TraceError:
    if max_seconds is not None:
        return cap_error(url, "max_seconds", f"still running after {max_seconds:g} s")
    return TraceError(url, f"listing took longer than {list_timeout_s():g} s (${LIST_TIMEOUT_ENV} raises it)")


# -- archives ---------------------------------------------------------------------


def archive_identity(location: Location) -> str:
    """What changes when the archive does: local size and mtime, or the store's identity."""
    if location.is_url:
        fs, path = filesystem(location)
        info = _call(location.text, time.monotonic() + list_timeout_s(), lambda: fs.info(path))
        return f"{_size(info)}:{identity(info)}"
    st = os.stat(location.path)
    return f"{st.st_size}:{st.st_mtime_ns}"


def discover_archive(
    location: Location, name: str | None = None, limits: Limits | None = None, warn: Warn | None = None
) -> list[RunFiles]:
    """The runs of an archive read as a logdir; its refused trace members are listed too, in the
    run of their folder (or the archive's own), each to show why it is not read. What a cap
    left out of its listing is one line to ``warn``. A remote archive is listed within the
    listing's deadline."""
    if not location.is_url and not os.path.isfile(location.path):
        raise TraceError(location.text, "no such file" if not os.path.exists(location.path) else "not a regular file")
    if location.is_url:
        end = time.monotonic() + list_timeout_s()
        # its reads stop a second after the listing is given up: then its file is not kept
        scope = Deadline(location.text, list_timeout_s() + 1)

        def listed() -> Archive:
            with reads_within(scope):
                return archive_at(location, limits)

        arc = _call(location.text, end, listed)
    else:
        arc = archive_at(location, limits)
    for note in arc.notes:
        (warn or log_warning)(note)
    ident = archive_identity(location)
    base = name or _stem(location.basename)
    by_dir: dict[str, list[ArchiveMember]] = defaultdict(list)
    for m in arc.members:
        folder = posixpath.dirname(m.name.strip("/")) if m.refusal is None else ""
        by_dir[folder].append(m)
    runs = []
    for folder, members in sorted(by_dir.items()):
        run_name = base if not folder else (folder if name is None else f"{name}/{folder}")
        directory = Location.of_member(arc.kind, folder, location)
        files = [
            (
                posixpath.basename(m.name),
                SpanFile("", Location.of_member(arc.kind, m.name, location), m.size, 0.0, ident),
            )
            for m in members
            if m.is_trace
        ]
        run = run_of(run_name, directory, files)
        if run is not None:
            sidecars = (m for m in members if m.name.endswith(SIDECAR_NAME))
            run.sidecars = tuple(sorted((posixpath.basename(m.name), m.size, ident) for m in sidecars))
            runs.append(run)
    runs.sort(key=lambda r: r.name)
    return runs


def _stem(fname: str) -> str:
    low = fname.lower()
    for suffix in (".tar.gz", ".tgz", ".zip", ".tar"):
        if low.endswith(suffix):
            return fname[: -len(suffix)] or fname
    return fname
