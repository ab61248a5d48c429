"""One file's reports in the tab's disk cache: the file's identity (``FileKey``), its entry's
name, and the reports read back and written.

A file is identified by (location, size, mtime) plus the run and worker it belongs to, and for a
remote object or an archive member by its store's identity (ETag or version id,
``SpanFile.ident``) and size instead of a date; a trace that grows or is rewritten gets a new
key. An entry's name adds the analysis options and a fingerprint of the analysis code, so an
upgrade re-analyses. The folder is a user cache directory (``--mfu_cache_dir``,
``$TB_MFU_CACHE_DIR``, else ``$XDG_CACHE_HOME/tb_mfu_plugin`` or ``~/.cache/tb_mfu_plugin``),
never the logdir, bounded by ``--mfu_cache_max_bytes`` (``disk_cache``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import msgspec

from ..analysis.options import AnalysisOptions
from ..analysis.report import SCHEMA_VERSION, WorkerReport
from ..core.escape import json_bytes, one_line
from ..running.flags import CACHE_DIR_ENV
from ..trace.locate.locations import Location
from ..trace.remote.redact import redacting_logger
from .disk_cache import DiskCache

logger = redacting_logger(__name__)  # locations and errors in its lines: signatures blanked

_reports_decoder = msgspec.json.Decoder(list[WorkerReport])


@dataclass(frozen=True)
class FileKey:
    path: Location
    size: int
    mtime: float
    run: str
    worker: str
    span: str
    deps: tuple[tuple[str, int, int | str], ...] = ()  # other inputs of the analysis (sidecar files)
    ident: str = ""  # a remote object's ETag or version id (SpanFile.ident)


def default_cache_dir(flag_value: str | None = None) -> str | None:
    """The disk cache folder, or None when turned off (``none``, ``off`` or empty)."""
    value = flag_value if flag_value is not None else os.environ.get(CACHE_DIR_ENV)
    if value is not None:
        if value.strip().lower() in ("", "none", "off", "0", "false"):
            return None
        return os.path.expanduser(value)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_mfu_plugin")


_fingerprint: str | None = None


def code_fingerprint() -> str:
    """Changes whenever the analysis code does: the version plus the sources' sizes and mtimes."""
    global _fingerprint
    if _fingerprint is None:
        import tb_mfu_plugin

        root = os.path.dirname(os.path.abspath(tb_mfu_plugin.__file__))
        h = hashlib.sha256(f"{getattr(tb_mfu_plugin, '__version__', '')}|{SCHEMA_VERSION}".encode())
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ("tensorboard", "__pycache__"))
            for fn in sorted(filenames):
                if fn.endswith(".py"):
                    p = os.path.join(dirpath, fn)
                    try:
                        st = os.stat(p)
                    except OSError:
                        continue
                    h.update(f"{os.path.relpath(p, root)}:{st.st_size}:{st.st_mtime_ns}".encode())
        _fingerprint = h.hexdigest()[:16]
    return _fingerprint


class StoredReports:
    """The reports of files analysed with ``options``, kept in a ``DiskCache``."""

    def __init__(self, disk: DiskCache, options: AnalysisOptions) -> None:
        self.disk = disk
        self.options = options

    def name(self, key: FileKey) -> str:
        ident = json.dumps(
            [
                os.path.abspath(key.path.path) if key.path.is_local else key.path.text,
                key.size,
                key.mtime,
                key.ident,
                key.run,
                key.worker,
                key.span,
                [list(d) for d in key.deps],
                repr(self.options),
                code_fingerprint(),
            ]
        )
        return hashlib.sha256(ident.encode()).hexdigest()

    def read(self, key: FileKey) -> list[WorkerReport] | None:
        """The file's reports, if the cache has a readable entry of them."""
        data = self.disk.read(self.name(key))
        if data is None:
            return None
        try:
            return _reports_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            logger.info(
                "MFU plugin: ignoring unreadable cache entry for %s (%s)", one_line(key.path.text), one_line(exc)
            )
            return None

    def write(self, key: FileKey, reports: list[WorkerReport]) -> None:
        try:
            data = json_bytes(reports)  # names that are not UTF-8 are stored escaped
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written costs speed, never the result
            logger.warning(
                "MFU plugin: cannot encode the cache entry of %s (%s)", one_line(key.path.text), one_line(exc)
            )
            return
        self.disk.write(self.name(key), data)
