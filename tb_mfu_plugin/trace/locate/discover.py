"""Find runs, workers and spans under a logdir, as torch-tb-profiler does.

- A *run* is every directory holding ``*.pt.trace.json[.gz]``; its name is the
  path relative to the logdir.
- A *worker* is the file-name prefix before ``.<timestamp>.pt.trace.json``.
- A *span* is each timestamped file of that worker, in time order.
- A path to a single file of any name is one run with one worker.

This module walks local folders; ``listing`` lists URLs and archives and groups
their files with :func:`run_of`, so every source names runs the same way.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .locations import Location

TRACE_FILE = re.compile(r"^(?P<worker>.*?)(?:\.(?P<span>\d+))?\.pt\.trace\.json(?:\.gz)?$")
# The user's model FLOPs beside the traces (sidecar.py reads them): tb_mfu.json, <worker>.tb_mfu.json.
SIDECAR_NAME = "tb_mfu.json"
# Files we accept when named directly: any JSON trace, gzipped or not.
_SINGLE_SUFFIXES = (".json", ".json.gz", ".gz")


@dataclass(frozen=True)
class SpanFile:
    span: str  # the timestamp, or "" when the file name has none
    path: Location  # a local path, a URL or an archive member
    size: int
    mtime: float  # 0.0 where the store gives none that is reliable: ``ident`` says instead
    # The object's identity in a remote store (an ETag or version id), or in an archive; ""
    # for a local file, whose size and mtime identify it.
    ident: str = ""


@dataclass
class WorkerFiles:
    name: str
    spans: list[SpanFile] = field(default_factory=list)


@dataclass
class RunFiles:
    name: str
    path: Location  # the directory (or the single file)
    workers: list[WorkerFiles] = field(default_factory=list)
    # (name, size, identity) of the sidecar files beside the traces, when the listing
    # already knows them (a bucket, an archive); None for a local folder, read when needed.
    sidecars: tuple[tuple[str, int, int | str], ...] | None = None

    @property
    def files(self) -> list[SpanFile]:
        return [s for w in self.workers for s in w.spans]


def _stat(path: str) -> tuple[int, float]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0.0)
    return (st.st_size, st.st_mtime)


def run_of(name: str, directory: Location, files: list[tuple[str, SpanFile]]) -> RunFiles | None:
    """The run of the trace files among ``files`` ((file name, its SpanFile with no span
    yet)), or None when none is named like a trace."""
    workers: dict[str, WorkerFiles] = {}
    for fname, f in files:
        m = TRACE_FILE.match(fname)
        if not m:
            continue
        w = workers.setdefault(m["worker"], WorkerFiles(m["worker"]))
        w.spans.append(SpanFile(m["span"] or "", f.path, f.size, f.mtime, f.ident))
    if not workers:
        return None
    for w in workers.values():
        w.spans.sort(key=lambda s: (int(s.span) if s.span else -1, s.path))
    return RunFiles(name, directory, [workers[k] for k in sorted(workers)])


def _group(name: str, directory: str, file_names: list[str]) -> RunFiles | None:
    folder = Location.local(directory)
    files = []
    for fname in file_names:
        if TRACE_FILE.match(fname):
            path = folder.join(fname)
            files.append((fname, SpanFile("", path, *_stat(path.path))))
    return run_of(name, folder, files)


def single_name(fname: str) -> tuple[str, str]:
    """(worker, span) of a trace file named directly, whatever its name."""
    m = TRACE_FILE.match(fname)
    worker = m["worker"] if m else re.sub(r"(\.pt\.trace)?\.json(\.gz)?$|\.gz$", "", fname)
    return (worker or fname, (m["span"] or "") if m else "")


def is_trace_name(fname: str) -> bool:
    """A file name we read when it is named directly (any JSON trace, gzipped or not)."""
    return fname.endswith(_SINGLE_SUFFIXES)


def single_file_run(path: str, name: str | None = None) -> RunFiles:
    """The run of the one local trace file at ``path`` (an OS path)."""
    where = Location.local(path)
    fname = where.basename
    worker, span = single_name(fname)
    size, mtime = _stat(path)
    return RunFiles(name or fname, where, [WorkerFiles(worker, [SpanFile(span, where, size, mtime)])])


def discover_runs(path: str, name: str | None = None) -> list[RunFiles]:
    """All runs under the local ``path`` (an OS path: a logdir or one trace file), sorted by name.

    Symlinks are followed; a directory reached twice (a link cycle or two links
    to one place) is walked once.
    """
    if os.path.isfile(path) or (os.path.exists(path) and not os.path.isdir(path)):
        # a FIFO or device named on the command line is a "file" too: the decoder
        # refuses it with a clear error instead of it vanishing from the listing
        return [single_file_run(path, name)]
    if not os.path.isdir(path):
        return []
    root = os.path.abspath(path)
    base = name or os.path.basename(os.path.normpath(root)) or root
    runs: list[RunFiles] = []
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            dirnames[:] = []  # a cycle or a second link to a directory already walked
            continue
        seen.add(key)
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        run_name = base if rel == "." else (rel.replace(os.sep, "/") if name is None else f"{name}/{rel}")
        run = _group(run_name, dirpath, sorted(filenames))
        if run is not None:
            runs.append(run)
    runs.sort(key=lambda r: r.name)
    return runs


def other_json_files(path: str, shown: int = 2) -> tuple[int, list[str]]:
    """JSON files under the local folder ``path`` that are not named as trace files (nor the
    sidecar): how many, and the first ``shown`` of them relative to ``path``. What a folder with
    no run holds instead, for the one-line error: traces saved by other tools (HTA's
    ``rank-0.json.gz``, TraceLens's) are read when named directly, never picked up by a folder's
    name, as torch-tb-profiler does (a config ``.json`` is no trace)."""
    count, names = 0, list[str]()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith((".json", ".json.gz")) and not TRACE_FILE.match(f) and not f.endswith(SIDECAR_NAME):
                count += 1
                if len(names) < shown:
                    names.append(os.path.relpath(os.path.join(dirpath, f), path))
    return count, names
