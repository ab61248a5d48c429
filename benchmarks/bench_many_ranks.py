#!/usr/bin/env python3
"""Many ranks: one run of 64 rank files, analysed serially, in 2 processes, on Dask, and in the tab.

Builds a run of RANKS plain-JSON rank files of TOTAL_GB / RANKS each from a real
multi-GPU sample's ranks (benchmarks/scaled_logdir.py), then measures in one go:

- ``tb-mfu analyze DIR --json`` at ``--jobs 1``, ``--jobs 2`` and ``--scheduler local
  --jobs 2`` (a LocalCluster of 2 worker processes, its start-up included), each in its
  own child process, and the speed-ups over ``--jobs 1``; the three JSON outputs must be
  byte for byte the same;
- the cold tab: the MFU plugin in this process, through TensorBoard's WSGI app, with an
  empty disk cache and ``--mfu_workers 2``: time from its start to the first rank's
  figures (a 202 /report with one worker report), to all ranks ready (/report 200), and
  the slowest /runs answer meanwhile.

The load average is printed next to every figure: the machine may be shared. The rank
files are deleted at the end unless --keep.

usage: python benchmarks/bench_many_ranks.py [--ranks 64] [--total-gb 5] [--source DIR]
           [--work DIR] [--keep] [--skip-dask] [--skip-tab]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scaled_logdir import ROOT, get, load, plugin_client, rank_files, size_of, work_dir

MODES = {
    "--jobs 1": ["--jobs", "1"],
    "--jobs 2": ["--jobs", "2"],
    "--scheduler local --jobs 2": ["--scheduler", "local", "--jobs", "2"],
}


def cli(logdir: Path, flags: list[str]) -> tuple[float, str]:
    """Wall seconds and the sha256 of the JSON of one ``tb-mfu analyze`` in a child process."""
    cmd = [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(logdir), "--json", *flags]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT).stdout
    return time.perf_counter() - t0, hashlib.sha256(out).hexdigest()


def cold_tab(logdir: Path, cache: Path, workers: int) -> None:
    """Polls as the tab does: /runs often, /report each time one more file of the run is done."""
    plugin, client = plugin_client(logdir, cache, workers)
    t0 = time.perf_counter()
    first, slowest, seen, fetches = None, 0.0, -1, 0
    while True:
        _, runs, seconds = get(client, "/runs")
        slowest = max(slowest, seconds)
        if runs["runs"]:
            run = runs["runs"][0]
            spans = [sp for w in run["workers"] for sp in w["spans"]]
            done, total = sum(sp["state"] in ("done", "error") for sp in spans), len(spans)
            if done != seen:
                seen = done
                # The browser's parsing is not the server's time: only read the body while it matters.
                status, body, _ = get(client, f"/report?run={run['name']}", parse=first is None or done == total)
                fetches += 1
                if first is None and any(w.get("summary") for w in body["workers"]):
                    first = time.perf_counter() - t0
                    print(f"  first rank's figures     {first:7.1f} s   ({load()})", flush=True)
                if status == 200:
                    break
        time.sleep(0.25)
    ready = time.perf_counter() - t0
    print(f"  all {len(body['workers'])} ranks ready        {ready:7.1f} s   ({load()}; {fetches} /report fetches)")
    print(f"  slowest /runs meanwhile  {slowest * 1000:7.1f} ms")
    if first:
        print(f"  ratio first / all        {first / ready:7.2f}")
    plugin._cache.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--total-gb", type=float, default=5.0)
    ap.add_argument("--source", type=Path, default=ROOT / "sample_traces" / "tpdp_4gpu")
    ap.add_argument("--work", type=Path, help="where to build the files (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the rank files")
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--skip-tab", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="run the modes this many times in turn; the best counts")
    a = ap.parse_args()
    with work_dir(a.work, a.keep, "tb_mfu_ranks_") as work:
        print(f"building {a.ranks} rank files of {a.total_gb / a.ranks * 1000:.0f} MB from {a.source} ({load()})")
        logdir = rank_files(a.source, work, a.ranks, a.total_gb * 1000)
        size = size_of(logdir)
        free_gb = shutil.disk_usage(work).free / 1e9
        print(f"{logdir}: {a.ranks} files, {size / 1e9:.2f} GB of JSON; disk: {free_gb:.0f} GB free")
        times: dict[str, float] = {}
        rounds: list[dict[str, float]] = []
        digests = set()
        for _ in range(a.rounds):
            rounds.append({})
            for label, flags in MODES.items():
                if a.skip_dask and "--scheduler" in flags:
                    continue
                before = load()
                seconds, digest = cli(logdir, flags)
                times[label] = min(seconds, times.get(label, seconds))
                rounds[-1][label] = seconds
                digests.add(digest)
                mbs = size / 1e6 / seconds
                print(f"  {label:<28} {seconds:7.1f} s  {mbs:6.1f} MB/s   (before: {before}; after: {load()})")
        if a.rounds > 1:  # the spread: each round's speed-up against that round's --jobs 1
            for label in (k for k in rounds[0] if k != "--jobs 1"):
                ups = sorted(r["--jobs 1"] / r[label] for r in rounds)
                listed = ", ".join(f"{u:.2f}" for u in ups)
                print(f"  {label}: speed-up per round {listed} (median {statistics.median(ups):.2f}x)")
        if not a.skip_dask:  # what the LocalCluster itself costs: the same small run with and without it
            small = [cli(a.source, ["--jobs", "1"])[0], cli(a.source, MODES["--scheduler local --jobs 2"])[0]]
            print(f"  LocalCluster start and stop: about {small[1] - small[0]:.1f} s (on {a.source.name})")
        base = times["--jobs 1"]
        for label, seconds in times.items():
            if label != "--jobs 1":
                print(f"  speed-up of {label:<28} {base / seconds:5.2f}x over --jobs 1")
        print(f"  JSON identical across modes: {len(digests) == 1}")
        if not a.skip_tab:
            print(f"cold tab, --mfu_workers 2, empty cache ({load()})")
            cold_tab(logdir, work / "tab-cache", 2)


if __name__ == "__main__":
    main()
