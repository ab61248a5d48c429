"""A held-out host's traces, kept as one ``traces.tar.xz`` beside its ground truth (issue 33).

A device call carries the tracked tree only up to 64 MiB, and each host's truth runs and pairs are
about 10 MB of gzipped traces. Traces of one host share most of their text (the same models, the same
kernel names), which gzip, file by file, cannot use and xz over one tar can: the traces are stored as
plain JSON in one archive, about half the bytes. ``ground_truth.json`` and the README stay in the tree
as they were, so the figures are still read without unpacking anything.

    python validation/packed.py pack validation/h100_host5 mfu_truth gain_pairs gain_pairs_noncausal
    python validation/packed.py unpack validation/h100_host5          # prints where it unpacked

``pack`` writes ``<host>/traces.tar.xz`` from those folders and removes the trace files it packed
(``git rm`` them after). ``unpacked(folder)`` is what the tables and fits call: the folder itself where
its traces are there, else the same folder in a cache the archive is unpacked into once (its traces
gzipped again, under their names), keyed by the archive's hash.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import os
import shutil
import sys
import tarfile
import tempfile

ARCHIVE = "traces.tar.xz"
TRACE = ".pt.trace.json"
CACHE = os.path.join(tempfile.gettempdir(), "tb_mfu_validation")


def _traces_in(folder: str) -> bool:
    return any(f.endswith((TRACE, TRACE + ".gz")) for _, _, files in os.walk(folder) for f in files)


def pack(host: str, subfolders: list[str]) -> str:
    """``<host>/traces.tar.xz`` of the subfolders' traces as plain JSON; the packed files are removed."""
    out = os.path.join(host, ARCHIVE)
    if os.path.exists(out):
        raise SystemExit(f"{out} exists: unpack it and remove it before packing again")
    if not all(_traces_in(os.path.join(host, sub)) for sub in subfolders):
        raise SystemExit(f"{host}: not every one of {subfolders} holds traces to pack")
    packed: list[str] = []
    with tarfile.open(out, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
        for sub in subfolders:
            for root, _, files in sorted(os.walk(os.path.join(host, sub))):
                for name in sorted(files):
                    path = os.path.join(root, name)
                    rel = os.path.relpath(path, host)
                    if name.endswith(TRACE + ".gz"):
                        data = gzip.open(path).read()
                        info = tarfile.TarInfo(rel[: -len(".gz")])
                        info.size, info.mtime = len(data), 0
                        tar.addfile(info, io.BytesIO(data))
                        packed.append(path)
                    elif name.endswith(TRACE):
                        tar.add(path, rel)
                        packed.append(path)
    for path in packed:
        os.remove(path)
    return out


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def unpack(host: str) -> str:
    """The host's archive unpacked (once per archive content) into the cache, its traces gzipped again and
    the tree's ground truth beside them; the cache's copy of the host folder."""
    archive = os.path.join(host, ARCHIVE)
    dest = os.path.join(CACHE, f"{os.path.basename(os.path.normpath(host))}-{_digest(archive)}")
    if os.path.isdir(dest):
        return dest
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(dir=CACHE)
    with tarfile.open(archive, "r:xz") as tar:
        for m in tar:
            if not m.isfile() or m.name.startswith(("/", "..")) or ".." in m.name.split("/"):
                continue
            target = os.path.join(work, m.name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            src = tar.extractfile(m)
            assert src is not None
            with gzip.open(target + ".gz", "wb", compresslevel=6) as f:
                shutil.copyfileobj(src, f)
    # the ground truth the tree holds (not packed: it is read and reviewed as text)
    for root, _, files in os.walk(host):
        for name in files:
            if name.endswith(".json") and not name.endswith(TRACE):
                rel = os.path.relpath(os.path.join(root, name), host)
                if os.path.isdir(os.path.join(work, os.path.dirname(rel))):
                    shutil.copyfile(os.path.join(root, name), os.path.join(work, rel))
    try:
        os.rename(work, dest)
    except OSError:  # another process unpacked it first
        shutil.rmtree(work, ignore_errors=True)
    return dest


def unpacked(folder: str) -> str:
    """``folder`` (a host's ``mfu_truth``, ``gain_pairs`` …) with its traces: itself where they are in the
    tree, else its copy unpacked from the host's archive."""
    if _traces_in(folder):
        return folder
    host = os.path.dirname(os.path.normpath(folder))
    if not os.path.exists(os.path.join(host, ARCHIVE)):
        return folder
    return os.path.join(unpack(host), os.path.basename(os.path.normpath(folder)))


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "pack":
        print(pack(argv[1], argv[2:]))
        return 0
    if len(argv) == 2 and argv[0] == "unpack":
        print(unpack(argv[1]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
