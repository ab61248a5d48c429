"""Find runs, workers and spans under a logdir, as torch-tb-profiler does.

- A *run* is every directory holding ``*.pt.trace.json[.gz]``; its name is the
  path relative to the logdir.
- A *worker* is the file-name prefix before ``.<timestamp>.pt.trace.json``.
- A *span* is each timestamped file of that worker, in time order.
- A path to a single file of any name is one run with one worker.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

TRACE_FILE = re.compile(r"^(?P<worker>.*?)(?:\.(?P<span>\d+))?\.pt\.trace\.json(?:\.gz)?$")
# Files we accept when named directly: any JSON trace, gzipped or not.
_SINGLE_SUFFIXES = (".json", ".json.gz", ".gz")


@dataclass(frozen=True)
class SpanFile:
    span: str  # the timestamp, or "" when the file name has none
    path: str
    size: int
    mtime: float


@dataclass
class WorkerFiles:
    name: str
    spans: list[SpanFile] = field(default_factory=list)


@dataclass
class RunFiles:
    name: str
    path: str  # the directory (or the single file)
    workers: list[WorkerFiles] = field(default_factory=list)

    @property
    def files(self) -> list[SpanFile]:
        return [s for w in self.workers for s in w.spans]


def _stat(path: str) -> tuple[int, float]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0.0)
    return (st.st_size, st.st_mtime)


def _group(name: str, directory: str, file_names: list[str]) -> RunFiles | None:
    workers: dict[str, WorkerFiles] = {}
    for fname in file_names:
        m = TRACE_FILE.match(fname)
        if not m:
            continue
        path = os.path.join(directory, fname)
        size, mtime = _stat(path)
        w = workers.setdefault(m["worker"], WorkerFiles(m["worker"]))
        w.spans.append(SpanFile(m["span"] or "", path, size, mtime))
    if not workers:
        return None
    for w in workers.values():
        w.spans.sort(key=lambda s: (int(s.span) if s.span else -1, s.path))
    return RunFiles(name, directory, [workers[k] for k in sorted(workers)])


def single_file_run(path: str, name: str | None = None) -> RunFiles:
    fname = os.path.basename(path)
    m = TRACE_FILE.match(fname)
    worker = m["worker"] if m else re.sub(r"(\.pt\.trace)?\.json(\.gz)?$|\.gz$", "", fname)
    span = (m["span"] or "") if m else ""
    size, mtime = _stat(path)
    return RunFiles(name or fname, path, [WorkerFiles(worker or fname, [SpanFile(span, path, size, mtime)])])


def discover_runs(path: str, name: str | None = None) -> list[RunFiles]:
    """All runs under ``path`` (a logdir or one trace file), sorted by name.

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
