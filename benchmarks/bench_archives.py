#!/usr/bin/env python3
"""Time and peak memory of ``tb-mfu analyze --json`` on the hostile archives of issue 22,
and on two real archives of the sample traces (a .zip and a .tar.gz) for the cost of the
checks on real input.

Each archive runs in a child process (wall time, peak RSS, last line of stderr), with a
timeout. ``--code DIR`` measures another checkout (e.g. the commit before the fixes) for
before/after figures. The archives are built by tests/probe/hostile_archives.py, as the
probe builds them, at the sizes of the issue.

``--read`` measures the archive layer alone on real archives: list, then open and read
every member once, as the CLI and the tab do (a .tar.gz of uncompressed traces, as
``tar czf`` of a logdir written with ``use_gzip=False`` makes, shows the cost of
re-inflating from the start).

usage: python benchmarks/bench_archives.py [--code DIR] [--timeout 300] [--only NAME] [--read]
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "probe"))
import hostile_archives as H  # noqa: E402

MiB = 1 << 20
REAL_RUNS = ("ddp_4gpu", "fsdp2_4gpu", "tp_4gpu", "tpdp_4gpu", "gpt_sdpa_fused", "resnet50_bf16")


def _good() -> dict[str, bytes]:
    f = next((ROOT / "sample_traces" / "low_sm_efficiency").glob("*.pt.trace.json.gz"))
    return {f"good/{f.name}": f.read_bytes()}


def _real_files() -> dict[str, bytes]:
    out = {}
    for run in REAL_RUNS:
        for f in sorted((ROOT / "sample_traces" / run).glob("*.pt.trace.json.gz")):
            out[f"{run}/{f.name}"] = f.read_bytes()
    return out


def build(out: Path) -> dict[str, Path]:
    good = _good()
    cases: dict[str, Path] = {}

    def case(name: str, suffix: str) -> Path:
        cases[name] = out / f"{name}{suffix}"
        return cases[name]

    real = _real_files()
    with zipfile.ZipFile(case("real_zip", ".zip"), "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in real.items():
            zf.writestr(n, d)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for n, d in real.items():
            ti = tarfile.TarInfo(n)
            ti.size = len(d)
            tf.addfile(ti, io.BytesIO(d))
    case("real_tar_gz", ".tar.gz").write_bytes(buf.getvalue())
    bad = H.entry(b"bad/rank\xff\xfe.1.pt.trace.json", b"{}", flags=H.UTF8_FLAG)
    H.zip_of_files(case("zip_bad_utf8_name", ".zip"), good, [bad])
    bombs = [H.zeros_entry(f"bomb/rank{i}.1.pt.trace.json", 60 * MiB) for i in range(100)]
    H.zip_of_files(case("zip_100x60MiB", ".zip"), good, bombs)
    H.long_header_bomb(case("tar_longname_2500MB", ".tar.gz"), tarfile.GNUTYPE_LONGNAME, 2500 * 10**6, good)
    H.long_header_bomb(case("tar_pax_2500MB", ".tar.gz"), tarfile.XHDTYPE, 2500 * 10**6, good)
    H.pax_redos(case("tar_pax_redos_4x60KiB", ".tar.gz"), 4, good)
    H.reinflation_bomb(case("tar_reinflate_400", ".tar.gz"), 400, 60 * MiB, good)
    H.sparse_map_bomb(case("tar_sparse_map_25M", ".tar.gz"), 25_000_000, good)
    return cases


def build_real(out: Path) -> dict[str, Path]:
    """Real archives for --read: the sample traces as they are (gzipped), and 4 copies of
    them uncompressed in a .tar.gz."""
    import gzip

    real = _real_files()
    plain = {f"copy{k}/{n.removesuffix('.gz')}": gzip.decompress(d) for k in range(4) for n, d in real.items()}
    cases = {"real_zip_gz": out / "real_zip_gz.zip", "real_tgz_gz": out / "real_tgz_gz.tar.gz"}
    cases["real_tgz_json_x4"] = out / "real_tgz_json_x4.tar.gz"
    cases["real_zip_json_x4"] = out / "real_zip_json_x4.zip"
    for name, files in (("gz", real), ("json_x4", plain)):
        with zipfile.ZipFile(cases[f"real_zip_{name}"], "w", zipfile.ZIP_DEFLATED) as zf:
            for n, d in files.items():
                zf.writestr(n, d)
        with tarfile.open(cases[f"real_tgz_{name}"], "w:gz") as tf:
            for n, d in files.items():
                ti = tarfile.TarInfo(n)
                ti.size = len(d)
                tf.addfile(ti, io.BytesIO(d))
    return cases


def read_all(path: Path) -> None:
    """In a child: list the archive, read every member once, print seconds and MB read."""
    from tb_mfu_plugin.trace.archive.reader import Archive
    from tb_mfu_plugin.trace.locate.locations import Location

    t0 = time.perf_counter()
    total = 0
    with Archive.open(Location.local(str(path))) as arc:
        for m in arc.members:
            with arc.open_member(m.name) as f:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
    print(f"{time.perf_counter() - t0:.2f} {total / 1e6:.1f}")


def run(path: Path, code: Path, timeout: float, read: bool = False) -> tuple[str, float, float, str]:
    """(status, wall seconds, this child's peak RSS in MB, last stderr line, or stdout for --read)."""
    env = dict(os.environ, PYTHONPATH=str(code))
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "--read-one", str(path)] if read else [
        sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json", "--jobs", "1"]  # fmt: skip
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd, stdout=err if read else subprocess.DEVNULL, stderr=err, env=env, cwd=code,
        )  # fmt: skip
        while True:  # wait4 gives this child's own rusage (RUSAGE_CHILDREN would mix the runs)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
        code_ = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    state = f"killed after {timeout:.0f} s" if seconds > timeout else f"exit {code_}"
    return state, seconds, usage.ru_maxrss / 1024, (lines[-1] if lines else "")[:160]


def inflated_mb(path: Path) -> float:
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            return sum(i.file_size for i in zf.infolist()) / 1e6
    with tarfile.open(path) as tf:
        return sum(m.size for m in tf.getmembers()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose tb_mfu_plugin to measure")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--only", default=None)
    ap.add_argument("--read", action="store_true", help="the archive layer alone, on real archives")
    ap.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--build-real", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--read-one", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build or args.build_real:
        build(args.build) if args.build else build_real(args.build_real)
        return
    if args.read_one:
        read_all(args.read_one)
        return
    with tempfile.TemporaryDirectory(prefix="tb_mfu_archives_") as tmp:
        # built in a child: a child forked from a big parent would start with the parent's RSS
        subprocess.run([sys.executable, __file__, "--build-real" if args.read else "--build", tmp], check=True)
        cases = {p.name.split(".")[0]: p for p in sorted(Path(tmp).iterdir(), key=lambda p: p.stat().st_mtime_ns)}
        print(f"code: {args.code}")
        if args.read:
            print(
                f"{'case':22} {'archive MB':>10} {'status':>16} {'seconds':>8} {'MB read':>8} {'MB/s':>7} {'RSS MB':>7}"
            )
            for name, path in cases.items():
                status, seconds, rss, out = run(path, args.code, args.timeout, read=True)
                inner, mb = (float(x) for x in out.split()) if status == "exit 0" else (seconds, 0.0)
                size = path.stat().st_size / 1e6
                print(f"{name:22} {size:10.2f} {status:>16} {inner:8.2f} {mb:8.1f} {mb / inner:7.1f} {rss:7.0f}")
            return
        print(f"{'case':22} {'archive MB':>10} {'status':>16} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>11}  stderr")
        for name, path in cases.items():
            if args.only and args.only != name:
                continue
            status, seconds, rss, err = run(path, args.code, args.timeout)
            rate = f"{inflated_mb(path) / seconds:7.1f}" if name.startswith("real") else f"{'':7}"
            size = path.stat().st_size / 1e6
            print(f"{name:22} {size:10.2f} {status:>16} {seconds:8.1f} {rate} {rss:11.0f}  {err}", flush=True)


if __name__ == "__main__":
    main()
