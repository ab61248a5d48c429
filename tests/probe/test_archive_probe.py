"""The probe of hostile archives through the CLI (issue 22): each archive holds a good run
beside the hostile part, and runs in a real ``tb-mfu analyze`` process whose peak RSS and
wall time are measured.

Pass criterion: the good run's figures equal those of the same trace read from a folder;
what is refused is refused with one line naming the archive (and the member); no
traceback; peak RSS under ``MAX_RSS_MB``; each run within ``HANG_GUARD_S`` (a guard against
hangs, not a speed test: speed is benchmarks/bench_archives.py's).
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from located import runs_by_name

from tb_mfu_plugin.core.escape import json_bytes
from tb_mfu_plugin.running.pipeline import analyze_path

from . import hostile_archives as H

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = next((ROOT / "sample_traces" / "low_sm_efficiency").glob("*.json.gz"))
GOOD = {f"good/{SAMPLE.name}": SAMPLE.read_bytes()}
MAX_RSS_MB = 300  # the CLI alone peaks at about 40 MB here; a long-name bomb took 2,436 MB before the fix
HANG_GUARD_S = 60.0
MiB = H.MiB

# Runs the CLI as its only child and reports the child's own peak RSS: a child of pytest
# itself would start its count at pytest's RSS (Linux carries it over fork and exec).
LAUNCHER = """
import json, resource, subprocess, sys, time
t0 = time.monotonic()
p = subprocess.run(sys.argv[2:], capture_output=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
out = {"rc": p.returncode, "out": p.stdout.decode(errors="replace"), "err": p.stderr.decode(errors="replace"),
       "peak_mb": peak, "seconds": time.monotonic() - t0}
open(sys.argv[1], "w").write(json.dumps(out))
"""


@dataclass
class Run:
    rc: int
    out: str
    err: str
    peak_mb: float
    seconds: float


def cli(tmp_path: Path, location: str, *flags: str) -> Run:
    report = tmp_path / "launcher.json"
    cmd = [sys.executable, "-c", LAUNCHER, str(report), sys.executable, "-m", "tb_mfu_plugin.cli", "analyze"]
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH") or str(ROOT))  # the code under test
    subprocess.run([*cmd, location, "--json", "--jobs", "1", *flags], check=True, timeout=300, cwd=tmp_path, env=env)
    return Run(**json.loads(report.read_text()))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("folder")
    (folder / "good").mkdir()
    shutil.copy(SAMPLE, folder / "good")
    return runs_by_name(json_bytes(analyze_path(str(folder))).decode(), str(folder))["good"]


def assert_clean_stderr(run: Run) -> list[str]:
    lines = run.err.strip().splitlines()
    assert "Traceback" not in run.err, run.err[-2000:]
    assert all(line.startswith("tb-mfu: ") for line in lines), run.err[-2000:]
    return lines


def _good_entries() -> list[H.ZipEntry]:
    return [H.entry(name, data) for name, data in GOOD.items()]


# (build, exit status, what stderr must say); each archive also holds the good run
CASES: dict[str, tuple[Any, int, str]] = {
    "zip name not UTF-8": (
        lambda p: H.zip_of_files(p, GOOD, [H.entry(b"bad/rank\xff\xfe.1.pt.trace.json", b"{}", flags=H.UTF8_FLAG)]),
        0,
        r"member 'bad/rank\\xff\\xfe\.1\.pt\.trace\.json' of case\.zip has a name that is not UTF-8",
    ),
    # many members, each under the per-member grace: the members that make the bomb are left
    # out, in one line, and the good run beside them is read
    "zip 100 x 60 MiB": (
        lambda p: H.zip_of_files(p, GOOD, [H.zeros_entry(f"b/rank{i}.1.pt.trace.json", 60 * MiB) for i in range(100)]),
        0,
        r"case\.zip: its members declare 5\.86 GiB, \d+:1 of its .* over the max_archive_ratio cap .*: "
        r"100 members left out",
    ),
    "zip 100 x 60 MiB, the good run last": (
        lambda p: H.zip_of_files(
            p, {}, [*(H.zeros_entry(f"b/rank{i}.1.pt.trace.json", 60 * MiB) for i in range(100)), *_good_entries()]
        ),
        0,
        r"case\.zip: its members declare 5\.86 GiB, .*: 100 members left out",
    ),
    "tar long-name header of 2.5 GB": (
        lambda p: H.long_header_bomb(p, tarfile.GNUTYPE_LONGNAME, 2500 * 10**6, GOOD),
        2,
        r"case\.tar\.gz: gzip expands \d+:1 \(a gzip bomb\?\): over the max_compression_ratio cap",
    ),
    "tar pax header of 2.5 GB": (
        lambda p: H.long_header_bomb(p, tarfile.XHDTYPE, 2500 * 10**6, GOOD),
        2,
        r"case\.tar\.gz: gzip expands \d+:1 \(a gzip bomb\?\): over the max_compression_ratio cap",
    ),
    "tar pax header parsed in quadratic time": (
        lambda p: H.pax_redos(p, 2, GOOD),
        0,
        r"member 'redos/rank1\.1\.pt\.trace\.json' of case\.tar\.gz has a pax header that is not a well-formed",
    ),
    "tar sparse map of 2M entries": (
        lambda p: H.sparse_map_bomb(p, 2_000_000, GOOD),
        0,
        r"member 'sparse/rank0\.1\.pt\.trace\.json' of case\.tar\.gz is a special file",
    ),
    "tar.gz of 100 tiny members behind 60 MiB": (
        lambda p: H.reinflation_bomb(p, 100, 60 * MiB, GOOD),
        0,
        r"tar://tiny/rank99\.1\.pt\.trace\.json::.*case\.tar\.gz: JSON has no 'traceEvents'",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_cli_on_a_hostile_archive(tmp_path: Path, reference: dict[str, Any], case: str):
    build, status, says = CASES[case]
    arc = build(tmp_path / ("case.zip" if "zip" in case else "case.tar.gz"))
    run = cli(tmp_path, str(arc))
    assert run.rc == status, run.err[-2000:]
    lines = assert_clean_stderr(run)
    assert any(re.search(says, line) for line in lines), lines[-5:]
    print(f"{case}: rc {run.rc}, {run.seconds:.1f} s, peak RSS {run.peak_mb:.0f} MB")
    assert run.peak_mb < MAX_RSS_MB, f"peak RSS {run.peak_mb:.0f} MB"
    assert run.seconds < HANG_GUARD_S
    if status == 0:
        assert runs_by_name(run.out, str(arc))["good"] == reference


def test_an_archive_of_more_members_than_its_cap_is_read_up_to_it(tmp_path: Path, reference: dict[str, Any]):
    """A listing too long to read whole: the first members up to the cap are read, one line
    says how many were left out, and the good run among them keeps its figures."""
    files = {**GOOD, **{f"many/n{i:03d}.txt": b"x" for i in range(300)}}
    arc = H.zip_of_files(tmp_path / "case.zip", files)
    run = cli(tmp_path, str(arc), "--max-archive-members", "100")
    assert run.rc == 0, run.err[-2000:]
    lines = assert_clean_stderr(run)
    assert len(lines) == 1, lines
    assert re.search(r"case\.zip: more than 100 members: over the max_archive_members cap", lines[0])
    assert "201 members left out" in lines[0], lines
    assert runs_by_name(run.out, str(arc))["good"] == reference


class RangeHandler(SimpleHTTPRequestHandler):
    """Python's file server, answering ``Range`` requests (fsspec's random access needs them)."""

    def send_head(self) -> Any:
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if m is None or not path.is_file():
            return super().send_head()
        data = path.read_bytes()
        start, end = int(m[1]), min(int(m[2] or len(data) - 1), len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(max(0, end - start + 1)))
        self.end_headers()
        return io.BytesIO(data[start : end + 1])

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
        pass


# file name -> offset: a range of that file starting before the offset comes a byte at a time
SLOW_BEFORE: dict[str, int] = {}


class SlowRangeHandler(RangeHandler):
    """The same, except for the files of ``SLOW_BEFORE``: a range that starts before its
    offset comes a byte every half second after its headers (a slowloris for one member)."""

    def send_head(self) -> Any:
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        name = self.path.rsplit("/", 1)[-1]
        if m is None or int(m[1]) >= SLOW_BEFORE.get(name, 0):
            return super().send_head()
        data = Path(self.translate_path(self.path)).read_bytes()
        start, end = int(m[1]), min(int(m[2] or len(data) - 1), len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(max(0, end - start + 1)))
        self.end_headers()
        for i in range(start, end + 1):
            try:
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
            except OSError:
                break
            time.sleep(0.5)
        return None


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "served"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SlowRangeHandler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    host, port = httpd.server_address[:2]
    yield root, f"http://{host}:{port}"
    httpd.shutdown()
    httpd.server_close()


def test_hostile_archives_over_http_read_as_local_ones(tmp_path: Path, http_root: tuple[Path, str], reference):
    """The archive reader over ``remote.open_seekable``: a zip with a name that is not UTF-8,
    and a .tar.gz read from its index points, both over HTTP."""
    root, base = http_root
    bad = H.entry(b"bad/rank\xff\xfe.1.pt.trace.json", b"{}", flags=H.UTF8_FLAG)
    H.zip_of_files(root / "team.zip", GOOD, [bad])
    H.reinflation_bomb(root / "team.tar.gz", 20, 8 * MiB, GOOD)
    for name, says in (
        ("team.zip", r"member 'bad/rank\\xff\\xfe\.1\.pt\.trace\.json' of team\.zip has a name that is not UTF-8"),
        ("team.tar.gz", r"tar://tiny/rank19\.1\.pt\.trace\.json::http://.*: JSON has no 'traceEvents'"),
    ):
        run = cli(tmp_path, f"{base}/{name}")
        assert run.rc == 0, run.err[-2000:]
        lines = assert_clean_stderr(run)
        assert any(re.search(says, line) for line in lines), lines[-5:]
        assert runs_by_name(run.out, f"{base}/{name}")["good"] == reference


def test_a_member_served_a_byte_at_a_time_ends_at_max_seconds(tmp_path: Path, http_root, reference):
    """A zip over HTTP whose server sends one member's bytes a byte at a time: that member ends
    in the max_seconds error, within --max-seconds (its reads were waited for without end
    before), and the good run beside it, read from the archive opened afresh, keeps its figures."""
    root, base = http_root
    slow = H.entry("bad/rank0.1.pt.trace.json", b" " * (17 * MiB), method=H.STORED)  # past one fetched block
    arc = H.write_zip(root / "slow.zip", [slow, *_good_entries()])
    with zipfile.ZipFile(arc) as zf:
        SLOW_BEFORE["slow.zip"] = zf.getinfo(next(iter(GOOD))).header_offset
    run = cli(tmp_path, f"{base}/slow.zip", "--max-seconds", "5")
    print(f"slow member: rc {run.rc}, {run.seconds:.1f} s, peak RSS {run.peak_mb:.0f} MB")
    assert run.rc == 0, run.err[-2000:]
    lines = assert_clean_stderr(run)
    assert len(lines) == 1 and "bad/rank0.1.pt.trace.json" in lines[0] and "still running after 5 s" in lines[0]
    assert runs_by_name(run.out, f"{base}/slow.zip")["good"] == reference
    assert run.seconds < 5 + 10
