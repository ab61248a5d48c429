"""Caps on what one trace file may cost: the single place their defaults live.

Every file is decoded under these caps; a file over one gets a one-line error that
names the cap (and the flag that raises it), and the other files go on. The
defaults never refuse a real trace: a 3 GB Kineto trace decodes under all of them.
Measured on our H200 samples and the shared third-party traces (60 files): gzip
ratios 11:1 to 30:1, the longest kernel name 5,123 characters, one device per file,
no repair note on any of them. See docs/limits.md.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, fields

from ..core.errors import TraceError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limits:
    # Decompressed bytes of one file.
    max_trace_bytes: int = 8 * GiB
    # Decompressed / compressed bytes of a gzip file, checked once RATIO_GRACE_BYTES
    # have been decompressed (a small file may compress better than a big one).
    max_compression_ratio: float = 200.0
    # The most bytes decoded in one piece: one event of a Kineto-layout file, or the
    # whole document when it has no event boundaries (one-line JSON).
    max_line_bytes: int = 1 * GiB
    # Longer names (kernels, ops) are cut to this many characters, with a note.
    max_name_chars: int = 32 * KiB
    # Complete ("X") events, and device memory events (trace/decode/memory_events.py), kept from one file.
    max_events: int = 200_000_000
    # Devices analysed per file; the others are left out with a note.
    max_devices: int = 64
    # Wall time to decode and analyse one file, in seconds (0: no limit).
    max_seconds: float = 1800.0
    # An archive read as a logdir (.zip, .tar.gz): the decompressed bytes of all its
    # members, and how many members it may list. Each member is a file under the caps above.
    max_archive_bytes: int = 64 * GiB
    max_archive_members: int = 100_000
    # The bytes an archive's members inflate to, all together, over the archive's own size:
    # declared (a zip's sizes, a tar's after its listing) and counted as members are read
    # (a .tar.gz member re-inflates the stream from the index point before it). Checked once
    # ARCHIVE_RATIO_GRACE_BYTES are reached: a bomb of many members each under the per-file
    # grace is still one bomb.
    max_archive_ratio: float = 200.0
    # Decompressed bytes of a remote file whose server declares no size (a chunked HTTP body
    # without Content-Length): an endless body ends here, before its events fill memory.
    max_unsized_bytes: int = 64 * MiB

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not v >= 0:  # also refuses NaN
                raise ValueError(f"{f.name} must be a non-negative number, got {v!r}")


DEFAULT_LIMITS = Limits()
RATIO_GRACE_BYTES = 64 * MiB
ARCHIVE_RATIO_GRACE_BYTES = 64 * MiB
# A tar's GNU long-name/long-link or pax header is read whole before the member it names:
# a bigger one is never read (its member is refused). Real names are at most 4 KiB
# (PATH_MAX); real pax headers hold a name, times, ids and a few extended attributes. Not a
# flag: nothing real comes near it, and Python before 3.11.10 parses a pax header in
# quadratic time (CVE-2024-6232), so a bigger limit would be a CPU bomb.
MAX_TAR_HEADER_BYTES = 64 * KiB

# flag name -> (field, what the number counts), for the faces
FLAGS: dict[str, tuple[str, str]] = {
    "--max-trace-bytes": ("max_trace_bytes", "bytes"),
    "--max-compression-ratio": ("max_compression_ratio", "ratio"),
    "--max-line-bytes": ("max_line_bytes", "bytes"),
    "--max-name-chars": ("max_name_chars", "count"),
    "--max-events": ("max_events", "count"),
    "--max-devices": ("max_devices", "count"),
    "--max-seconds": ("max_seconds", "seconds"),
    "--max-archive-bytes": ("max_archive_bytes", "bytes"),
    "--max-archive-members": ("max_archive_members", "count"),
    "--max-archive-ratio": ("max_archive_ratio", "ratio"),
    "--max-unsized-bytes": ("max_unsized_bytes", "bytes"),
}
_FLAG_OF = {f: flag for flag, (f, _) in FLAGS.items()}
# field -> what the cap bounds, as the flags' help says it (running/flags.py, docs/options.md)
CAP_WORDS: dict[str, str] = {
    "max_trace_bytes": "Decompressed bytes of one trace file",
    "max_compression_ratio": "Decompressed over compressed bytes of a gzip file",
    "max_line_bytes": "The most bytes decoded in one piece: one event, or a document without event boundaries",
    "max_name_chars": "Longer kernel and op names are cut to this many characters, with a note",
    "max_events": "Complete events kept from one file",
    "max_devices": "Devices analysed per file; the others are left out with a note",
    "max_seconds": "Wall time to decode and analyse one file, in seconds (0: no limit)",
    "max_archive_bytes": "Decompressed bytes of all the members of an archive read as a logdir",
    "max_archive_members": "Members an archive read as a logdir may list",
    "max_archive_ratio": "Bytes an archive's members inflate to, all together, over the archive's own size",
    "max_unsized_bytes": "Decompressed bytes of a remote file whose server declares no size: an endless body ends here",
}


def plugin_flag(flag: str) -> str:
    """The TensorBoard flag of a cap (``--max-trace-bytes`` -> ``mfu_max_trace_bytes``)."""
    return "mfu_" + flag.removeprefix("--").replace("-", "_")


def cap_error(path: str, cap: str, detail: str) -> TraceError:
    """The one-line error of a file over a cap, naming the cap and its flag."""
    flag = _FLAG_OF.get(cap, cap)
    raise_with = f"raise it with {flag}, in TensorBoard --{plugin_flag(flag)}"
    return TraceError(path, f"{detail}: over the {cap} cap ({raise_with})")


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``"8GiB"``, ``"512M"``, ``"1e9"`` or ``"1024"`` as bytes (binary units). ValueError if not."""
    m = _SIZE.match(text)
    if m is None:
        value = float(text)  # "1e9"
        if not value >= 0:
            raise ValueError(text)
        return int(value)
    return int(float(m.group(1)) * _SCALE[m.group(2).lower()])


def format_size(n: float) -> str:
    """Bytes in binary units, as the flags accept them back: ``8 GiB``, ``512 MiB``, ``10 KiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def format_limit(value: float, unit: str) -> str:
    if unit == "bytes":
        return format_size(value)
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


class Deadline:
    """The wall-time cap of one file, checked between chunks and between devices."""

    def __init__(self, path: str, seconds: float) -> None:
        self.path = path
        self.seconds = seconds
        self.end = time.monotonic() + seconds if seconds > 0 else float("inf")

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise cap_error(self.path, "max_seconds", f"still running after {self.seconds:g} s")
