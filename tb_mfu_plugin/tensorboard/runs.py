"""The server-side map of runs: which logdirs to scan, and a cached background scan.

Sources are local folders, URLs (``s3://``, ``gs://``, ``http://``, ...) and
archives, listed by ``trace.locate.listing.discover``. Requests never walk the file
system. They read the last scan shown, and at
most ask for a new one, which a daemon thread runs (at most one at a time, and
not more often than ``min_interval_s``). New runs and spans thus appear on the
next reload of the tab, without a restart.

A scan lists the local folders first and shows their runs at once; each URL and
archive is listed on a thread of its own, all at the same time, each within its
listing deadline, and the scan is shown again as each one comes in (a slow source
shows its last listing meanwhile). So a remote listing that trickles delays no
local run, and three of them cost one deadline, not three. Any failure of one
source, whatever its type, is that source's one-line error.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..analysis.fmt import setting
from ..core.errors import TraceError
from ..core.escape import escape_surrogates, one_line
from ..trace.limits import Limits
from ..trace.locate.discover import SIDECAR_NAME, RunFiles
from ..trace.locate.listing import LIST_TIMEOUT_ENV, discover, list_timeout_s
from ..trace.locate.locations import Location
from ..trace.remote.redact import redacting_logger
from ..trace.remote.storage import redact
from .logdir_spec import NO_TENSORBOARD_LOGDIR, spec_parts, split_part

logger = redacting_logger(__name__)


@dataclass(frozen=True)
class Source:
    """One logdir to scan. ``name`` prefixes its run names (``--logdir_spec name:path``).

    ``path`` is the text as the tab shows it; its ``location`` is parsed from it once, when the
    source is made (the tab's face), or, for text that is refused (a password in a URL),
    ``refusal`` says why, and the scan shows that line instead of runs."""

    name: str | None
    path: str
    location: Location | None = field(default=None, compare=False)
    refusal: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.location is None and self.refusal is None:
            try:
                object.__setattr__(self, "location", Location.parse(self.path))
            except TraceError as exc:
                object.__setattr__(self, "refusal", one_line(exc))

    @property
    def is_remote(self) -> bool:
        """Not a local folder or file: a URL, a member, or text refused as a location."""
        return self.location is None or not self.location.is_local


def parse_logdir_spec(spec: str) -> list[Source]:
    """``name:path,path2,...`` as TensorBoard reads ``--logdir_spec`` (``logdir_spec.split_part``).

    URLs are kept as they are (``file://`` becomes a local path). The path that stands
    for "no folder of TensorBoard's" (``NO_TENSORBOARD_LOGDIR``) is no source.
    """
    sources: list[Source] = []
    for part in spec_parts(spec):
        name, path = split_part(part)
        if path != NO_TENSORBOARD_LOGDIR:
            sources.append(_source(name, path))
    return sources


def sources_from_flags(flags: object, logdir: str | None = None) -> list[Source]:
    """``--logdir`` wins over ``--logdir_spec``, as in TensorBoard; then the tab's own
    ``--mfu_logdir_spec`` (sources TensorBoard's loader never sees: ``logdir_spec``)."""
    flag_logdir = getattr(flags, "logdir", None) or logdir
    if flag_logdir:
        sources = [_source(None, flag_logdir)]
    else:
        sources = parse_logdir_spec(getattr(flags, "logdir_spec", None) or "")
    sources += parse_logdir_spec(getattr(flags, "mfu_logdir_spec", None) or "")
    return list(dict.fromkeys(sources))  # one given twice is scanned once


def _source(name: str | None, text: str) -> Source:
    """The source of ``text``, parsed once: a URL as given (``file://`` made local); a local
    path made absolute, links resolved."""
    try:
        where = Location.parse(text)
    except TraceError as exc:  # a password in the URL: kept, so that the scan reports it (blanked)
        return Source(name, text, None, one_line(exc))
    if where.is_local:
        where = Location.local(os.path.realpath(os.path.expanduser(where.path)))
    return Source(name, where.text, where)


Sidecars = tuple[tuple[str, int, int | str], ...]
# How long past its own listing deadline a slow source is waited for before the scan goes on.
_GRACE_S = 5.0


@dataclass(frozen=True)
class Listed:
    """One source's part of a scan: its runs, or the one line that says why it has none."""

    runs: list[RunFiles]
    error: str | None = None
    warnings: tuple[str, ...] = ()  # parts it could not list (a remote sub-folder): its runs are the rest


@dataclass(frozen=True)
class Scan:
    runs: dict[str, RunFiles]  # in display order
    errors: list[str]  # one line per source that could not be scanned
    finished_at: float  # time.monotonic(); 0.0 before the first scan
    # Per run: (name, size, mtime_ns) of the sidecar files beside its traces. They change
    # the analysis, so they are part of each file's cache key.
    sidecars: dict[str, Sidecars] = field(default_factory=dict)
    # Each source's listing, so that the next scan shows a slow source's last runs until
    # its new listing is in.
    by_source: dict[Source, Listed] = field(default_factory=dict)


def sidecar_signature(folder: Location) -> Sidecars:
    """(name, size, mtime_ns) of the sidecars in the local ``folder``: tb_mfu.json and <worker>.tb_mfu.json."""
    directory = folder.path
    if not folder.is_local or not os.path.isdir(directory):
        return ()
    out: list[tuple[str, int, int | str]] = []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(SIDECAR_NAME))
    except OSError:
        return ()
    for n in names:
        try:
            st = os.stat(os.path.join(directory, n))
        except OSError:
            continue
        out.append((n, st.st_size, st.st_mtime_ns))
    return tuple(out)


def list_source(src: Source, limits: Limits | None = None) -> Listed:
    """The runs of one source; any failure of it, whatever it is, is its one-line error."""
    where = src.location
    if where is None:
        return Listed([], src.refusal)
    if where.is_local and not os.path.exists(where.path):
        return Listed([], f"{src.path}: no such file or directory")
    warnings: list[str] = []
    try:
        runs = discover(where, src.name, limits, warnings.append)
        if not runs and where.archive_kind is not None:
            # an archive is a logdir of its own: with nothing in it, say so, or an upload that
            # was "ready" would silently never appear as a run
            return Listed([], f"{src.name or src.path}: the archive holds no trace files (*.pt.trace.json[.gz])")
        return Listed(runs, None, tuple(one_line(redact(w)) for w in warnings))
    except TraceError as exc:  # a remote source or an archive that cannot be listed (secrets blanked)
        return Listed([], one_line(exc))
    except OSError as exc:  # discover_runs tolerates most, but be safe on odd file systems
        return Listed([], f"{src.path}: cannot scan ({exc.strerror or exc})")
    except Exception as exc:  # noqa: BLE001 - one source's failure must not hide the others' runs
        logger.warning("MFU plugin: listing %s failed", one_line(src.path), exc_info=True)
        return Listed([], one_line(f"{src.path}: cannot scan ({type(exc).__name__}: {redact(str(exc))[:300]})"))


def _slow(src: Source) -> bool:
    """A source whose listing may take long (a URL, an archive): listed on its own thread."""
    return src.is_remote or (src.location is not None and src.location.archive_kind is not None)


def merge(sources: list[Source], listed: dict[Source, Listed]) -> Scan:
    """The scan made of the sources' listings, in the sources' order (those not listed yet left out)."""
    runs: dict[str, RunFiles] = {}
    errors: list[str] = []
    sidecars: dict[str, Sidecars] = {}
    for src in dict.fromkeys(sources):
        part = listed.get(src)
        if part is None:
            continue
        if part.error is not None:
            errors.append(part.error)
        errors.extend(part.warnings)
        for run in part.runs:
            # The name is the run's id in requests and in JSON, so it must be valid UTF-8:
            # bytes that are not (kept as surrogates by os.listdir) are shown as \xNN.
            # Its files keep their real paths.
            shown = escape_surrogates(run.name)
            name = shown
            n = 2
            while name in runs:  # two specs naming the same run, or names equal once escaped: keep both
                name = f"{shown} ({n})"
                n += 1
            if name != run.name:
                run = RunFiles(name, run.path, run.workers, run.sidecars)
            runs[name] = run
            sidecars[name] = run.sidecars if run.sidecars is not None else sidecar_signature(run.path)
    return Scan(runs, errors, time.monotonic(), sidecars, {s: listed[s] for s in sources if s in listed})


def scan_sources(
    sources: list[Source],
    limits: Limits | None = None,
    on_progress: Callable[[Scan], None] | None = None,
    previous: dict[Source, Listed] | None = None,
) -> Scan:
    """Every source listed: local folders first, then each URL and archive on a thread of its
    own, all at once, each within the listing deadline. ``on_progress`` gets the scan so far
    once the local folders are listed and again as each slow source comes in (a slow source
    not in yet shows its ``previous`` listing), so that local runs never wait for a remote one."""
    listed: dict[Source, Listed] = {}
    slow = [s for s in dict.fromkeys(sources) if _slow(s)]
    for src in dict.fromkeys(sources):
        if not _slow(src):
            listed[src] = list_source(src, limits)
    if not slow:
        return merge(sources, listed)
    done: queue.Queue[tuple[Source, Listed]] = queue.Queue()
    for src in slow:
        # daemon threads: a listing that ignores its deadline must not hold the process at exit
        threading.Thread(
            target=lambda s=src: done.put((s, list_source(s, limits))), name="mfu-list-source", daemon=True
        ).start()

    def so_far() -> Scan:
        return merge(sources, {**{s: (previous or {})[s] for s in pending if s in (previous or {})}, **listed})

    pending = set(slow)
    if on_progress is not None:
        on_progress(so_far())
    give_up = time.monotonic() + list_timeout_s() + _GRACE_S
    while pending:
        try:
            src, part = done.get(timeout=max(0.0, give_up - time.monotonic()))
        except queue.Empty:
            break
        listed[src] = part
        pending.discard(src)
        if pending and on_progress is not None:
            on_progress(so_far())
    for src in pending:  # its listing has not kept its own deadline
        took = setting(list_timeout_s(), "s")
        listed[src] = Listed([], f"{src.path}: listing took longer than {took} (${LIST_TIMEOUT_ENV})")
    return merge(sources, listed)


class RunIndex:
    """The last scan of the sources, refreshed in the background."""

    def __init__(
        self,
        sources: list[Source],
        min_interval_s: float = 5.0,
        on_scan: Callable[[Scan], None] | None = None,
        limits: Limits | None = None,
        extra_sources: Callable[[], list[Source]] | None = None,
    ) -> None:
        self.sources = list(sources)
        self.limits = limits
        self.min_interval_s = min_interval_s
        self._on_scan = on_scan
        self._extra_sources = extra_sources  # sources that change while the server runs (uploads)
        self._changed_at = -1.0
        self._lock = threading.Lock()
        self._scan = Scan({}, [], 0.0)
        self._thread: threading.Thread | None = None
        self._requested_at = 0.0
        self._first = threading.Event()  # a whole scan is done
        self._shown = threading.Event()  # a scan, whole or with its local sources only, is shown

    # -- reading ---------------------------------------------------------
    def current(self) -> Scan:
        with self._lock:
            return self._scan

    @property
    def scanned(self) -> bool:
        """Whether a scan is shown: from the moment the local sources are listed."""
        return self._shown.is_set()

    @property
    def scanning(self) -> bool:
        with self._lock:
            return self._thread is not None

    def wait_first_scan(self, timeout: float | None = None) -> bool:
        """Wait for the first whole scan (every source listed, or given up)."""
        return self._first.wait(timeout)

    # -- refreshing ------------------------------------------------------
    def refresh(self, force: bool = False) -> None:
        """Start a background scan if the last one is older than the minimum interval.

        Never blocks. ``force`` shortens the interval to one second, which still
        bounds how often a client can make the server walk the disk.
        """
        interval = 1.0 if force else self.min_interval_s
        with self._lock:
            if self._thread is not None:
                return
            if self._changed_at >= self._requested_at:
                interval = 0.0
            now = time.monotonic()
            if self._first.is_set() and now - max(self._scan.finished_at, self._requested_at) < interval:
                return
            self._requested_at = now
            self._thread = threading.Thread(target=self._run, name="mfu-scan", daemon=True)
            self._thread.start()

    def invalidate(self) -> None:
        """A source changed (an upload landed): scan at once, and again after a scan under way."""
        with self._lock:
            self._changed_at = time.monotonic()
        self.refresh()

    def _run(self) -> None:
        try:
            extra = self._extra_sources() if self._extra_sources is not None else []
            previous = self.current().by_source
            scan = scan_sources(self.sources + extra, self.limits, self._publish, previous)
        except Exception as exc:  # never let a scan kill the thread silently
            logger.exception("MFU plugin: scanning the logdir failed")
            old = self.current()
            scan = Scan(old.runs, [one_line(f"scan failed: {redact(str(exc))[:300]}")], time.monotonic(), old.sidecars)
        self._publish(scan)
        with self._lock:
            self._thread = None
            again = self._changed_at >= self._requested_at  # changed while this scan ran
        self._first.set()
        if again:
            self.refresh()

    def _publish(self, scan: Scan) -> None:
        """Show ``scan`` (whole, or so far) and queue its files."""
        with self._lock:
            self._scan = scan
        if self._on_scan is not None:  # before "scanned": whoever waits for the scan sees its files queued
            try:
                self._on_scan(scan)
            except Exception:
                logger.exception("MFU plugin: handling a scan failed")
        self._shown.set()
