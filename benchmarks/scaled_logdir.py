"""Helpers of the scaling benchmarks: big rank files made from a real multi-GPU sample,
the machine's load, and the MFU plugin served in-process through TensorBoard's WSGI app.

Rank files are built with ../shared/tools/scale_trace.py (each real rank repeated up
to the wanted size), then copied as ranks 0..N-1 of one run, each copy's
``distributedInfo`` rewritten to its own rank and the new world size, so the tab's
ranks table holds N distinct ranks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# TensorBoard's own start-up (its WSGI app pulls in grpc, markdown, bleach: about a second),
# imported here so that no timing counts it.
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_mfu_plugin.tensorboard.plugin import MfuPlugin

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT.parent / "shared" / "tools" / "scale_trace.py"
_RANK = re.compile(rb'("distributedInfo": \{[^}]*?"rank": )(\d+)([^}]*?"world_size": )(\d+)')


@contextlib.contextmanager
def work_dir(work: Path | None, keep: bool, prefix: str) -> Iterator[Path]:
    """``work``, or a new temp dir; removed at the end (the big files with it) unless ``keep``."""
    path = work or Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)
            print(f"removed {path}")


def load() -> str:
    """The 1, 5 and 15 minute load averages and the core count, as one figure to print."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def scaled(source: Path, dst: Path, target_mb: float) -> Path:
    """``source`` repeated to about ``target_mb`` MB of plain JSON (made once, then reused)."""
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".part")
        cmd = [sys.executable, str(SCALE), str(source), str(tmp), "--target-mb", str(target_mb)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        tmp.rename(dst)
    return dst


def rank_files(source_run: Path, work: Path, ranks: int, total_mb: float) -> Path:
    """A run directory of ``ranks`` files of ``total_mb / ranks`` MB each, made from the
    source run's ranks in turn; returns the logdir holding it."""
    sources = sorted(source_run.glob("*.pt.trace.json*"))
    if not sources:
        sys.exit(f"{source_run}: no trace files")
    each_mb = total_mb / ranks
    bases = [scaled(s, work / f"base{i}_{each_mb:.0f}mb.json", each_mb) for i, s in enumerate(sources)]
    run = work / "logdir" / f"ranks{ranks}"
    run.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        out = run / f"rank{rank}.{1_800_000_000_000_000_000 + rank}.pt.trace.json"
        if not out.exists():
            _copy_as_rank(bases[rank % len(bases)], out, rank, ranks)
    return run.parent


def _copy_as_rank(src: Path, dst: Path, rank: int, world: int) -> None:
    with open(src, "rb") as f, open(dst, "wb") as out:
        head = f.read(1 << 20)
        head, n = _RANK.subn(lambda m: m[1] + str(rank).encode() + m[3] + str(world).encode(), head, count=1)
        if n != 1:
            sys.exit(f"{src}: no distributedInfo with rank and world_size in its first MB")
        out.write(head)
        shutil.copyfileobj(f, out, 16 << 20)


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.pt.trace.json*"))


def plugin_client(logdir: Path, cache_dir: Path | None, workers: int, scheduler: str | None = None) -> Any:
    """(plugin, werkzeug client) of the MFU plugin over ``logdir``, as ``tensorboard`` builds it
    from its flags (processes, disk cache), served through TensorBoard's WSGI app."""
    flags = argparse.Namespace(
        logdir=str(logdir),
        logdir_spec="",
        mfu_cache_dir=str(cache_dir) if cache_dir else "none",
        mfu_peak_tflops=None,
        mfu_show_full_paths=False,
        mfu_confine_to_logdir=False,
        mfu_workers=str(workers),
        mfu_scheduler=scheduler,
        mfu_cache_max_bytes=None,
    )
    plugin = MfuPlugin(base_plugin.TBContext(flags=flags, logdir=str(logdir), multiplexer=None))
    return plugin, Client(application.TensorBoardWSGI([plugin]))


def get(client: Any, route: str) -> tuple[int, Any, float]:
    """(status, JSON body, seconds) of one request to the plugin."""
    t0 = time.perf_counter()
    r = client.get("/data/plugin/mfu" + route)
    body = json.loads(r.get_data())
    return r.status_code, body, time.perf_counter() - t0
