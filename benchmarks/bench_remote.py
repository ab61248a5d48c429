#!/usr/bin/env python3
"""Reading and analysing a trace from loopback S3 and HTTP servers against the local disk.

Builds a large trace from a real one with ../shared/tools/scale_trace.py (cached under
the system temp dir, as bench_analyze.py does), starts moto's S3 server on 127.0.0.1
in a child process (so that it does not share our GIL), uploads the trace, serves its
folder with Python's ``http.server`` in another child process, and prints for the local
file, ``s3://`` and ``http://``:

- read: the file's bytes through ``trace.opener.open_location`` (MB/s of stored bytes);
- analyse: ``pipeline.analyze_path`` in this process, once warm (imports done, the S3
  client made): the streamed decode and analysis (MB/s of uncompressed JSON);
- CLI: ``tb-mfu analyze --json`` in a child process, start-up included (importing s3fs
  and its AWS client alone takes about a second);

and the ratios (the goal: within 1.5x of local). Best of ``--repeat`` runs. moto answers
ranged GETs at a few tens of MB/s, far below a real store; the HTTP row shows what our
remote reading costs when the server is not the bottleneck.

usage: python benchmarks/bench_remote.py [SOURCE_TRACE] [--target-mb 100] [--plain] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_analyze import _source, _uncompressed_size, big_trace  # noqa: E402

BUCKET = "bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_moto(port: int) -> subprocess.Popen[bytes]:
    code = (
        "import sys, time; from moto.server import ThreadedMotoServer; "
        f"s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False); s.start(); "
        "print('ready', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        sys.exit("moto's server did not start")
    return proc


def _start_http(port: int, directory: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    sys.exit("http.server did not start")


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _read_all(location: str) -> None:
    from tb_mfu_plugin.trace.locate.locations import Location
    from tb_mfu_plugin.trace.locate.opener import open_location

    with open_location(Location.parse(location)) as f:
        while f.read(8 << 20):
            pass


def _analyse_here(location: str) -> None:
    from tb_mfu_plugin.running.pipeline import analyze_path

    report = analyze_path(location)
    if not report.runs or any(w.error for r in report.runs for w in r.workers):
        sys.exit(f"analyze {location} failed")


def _cli(location: str, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", location, "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        sys.exit(f"analyze {location} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", nargs="?")
    ap.add_argument("--target-mb", type=int, default=100)
    ap.add_argument("--plain", action="store_true", help="an uncompressed trace (default: gzip, as traces are stored)")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    big = big_trace(_source(args.source), args.target_mb, not args.plain)
    stored, size = big.stat().st_size, _uncompressed_size(big)

    port, http_port = _free_port(), _free_port()
    server = _start_moto(port)
    http = _start_http(http_port, big.parent)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        )
        s3.create_bucket(Bucket=BUCKET)
        s3.upload_file(str(big), BUCKET, f"run/{big.name}")
        with tempfile.TemporaryDirectory() as tmp:
            options = Path(tmp) / "storage_options.json"
            options.write_text(
                json.dumps({f"s3://{BUCKET}/": {"endpoint_url": endpoint, "key": "bench", "secret": "bench"}})
            )
            os.environ["TB_MFU_STORAGE_OPTIONS"] = str(options)
            url = f"s3://{BUCKET}/run/{big.name}"
            env = {**os.environ, "PYTHONPATH": str(ROOT), "TB_MFU_CACHE_DIR": "none"}
            rows = []
            http_url = f"http://127.0.0.1:{http_port}/{big.name}"
            places = (("local disk", str(big)), ("S3 (moto, 127.0.0.1)", url), ("HTTP (http.server)", http_url))
            for label, loc in places:
                _analyse_here(loc)  # warm: imports, the S3 client
                read_s = _best(lambda loc=loc: _read_all(loc), args.repeat)
                analyse_s = _best(lambda loc=loc: _analyse_here(loc), args.repeat)
                cli_s = _best(lambda loc=loc: _cli(loc, env), args.repeat)
                rows.append((label, read_s, analyse_s, cli_s))
    finally:
        for proc in (server, http):
            proc.terminate()
            proc.wait()
    print(f"trace: {big.name} ({size / 1e6:.1f} MB uncompressed JSON, {stored / 1e6:.1f} MB stored)")
    for label, read_s, analyse_s, cli_s in rows:
        print(
            f"{label:>22}: read {stored / 1e6 / read_s:7.1f} MB/s ({read_s:.2f} s)   "
            f"analyse {size / 1e6 / analyse_s:6.1f} MB/s ({analyse_s:.2f} s)   "
            f"CLI {size / 1e6 / cli_s:6.1f} MB/s ({cli_s:.2f} s)"
        )
    (_, lr, la, lc), *remote = rows
    for (_label, rr, ra, rc), name in zip(remote, ("S3", "HTTP"), strict=True):
        ratios = f"read {rr / lr:.2f}x, analyse {ra / la:.2f}x, CLI {rc / lc:.2f}x"
        print(f"{name} / local time: {ratios} (goal: within 1.5x)")


if __name__ == "__main__":
    main()
