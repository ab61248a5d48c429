"""Upload in the tab: the /upload and /upload_done routes through TensorBoard's WSGI app.

Real sample traces go in; the run they make must equal the CLI's report of the
same files. Refusals (type, magic bytes, size, origin) leave nothing behind, and
nothing is ever written into a logdir.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import threading
import time
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.tensorboard import uploads as uploads_mod
from tb_mfu_plugin.tensorboard.uploads import UploadArea, UploadError

from .conftest import PREFIX, SAMPLES, Served, sample_file

HEADERS = {"X-MFU-Upload": "1", "Content-Type": "application/octet-stream"}


def upload(s: Served, batch: str, name: str, data: bytes, client: str = "127.0.0.1", **headers: str) -> Any:
    return s.client.post(
        f"{PREFIX}/upload?batch={batch}&name={quote(name, errors='surrogateescape')}",
        data=data,
        headers={**HEADERS, **headers},
        environ_base={"REMOTE_ADDR": client},
    )


def commit(s: Served, batch: str, client: str = "127.0.0.1") -> Any:
    return s.client.post(
        f"{PREFIX}/upload_done?batch={batch}", headers={"X-MFU-Upload": "1"}, environ_base={"REMOTE_ADDR": client}
    )


def upload_files(s: Served, batch: str, files: list[Path]) -> dict[str, Any]:
    for f in files:
        r = upload(s, batch, f.name, f.read_bytes())
        assert r.status_code == 200, r.get_data(as_text=True)
    r = commit(s, batch)
    assert r.status_code == 200, r.get_data(as_text=True)
    return json.loads(r.get_data())


def without_files(obj: Any) -> Any:
    """A report with its file paths and run names left out: the upload keeps the traces
    under other names than the sample folder's."""
    if isinstance(obj, dict):
        return {k: without_files(v) for k, v in obj.items() if k not in ("file", "name", "run")}
    if isinstance(obj, list):
        return [without_files(v) for v in obj]
    return obj


def cli_run(path: Path) -> dict[str, Any]:
    (run,) = json.loads(to_json(analyze_path(str(path))))["runs"]
    return run


def listing(d: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(d)), p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*"))


@pytest.fixture
def cache_dir(tmp_path: Path) -> str:
    return str(tmp_path / "cache")


def test_an_uploaded_trace_is_a_run_with_the_cli_figures(serve, two_runs, cache_dir):
    before = listing(two_runs)
    s = serve(two_runs, cache_dir=cache_dir)
    s.settle()
    assert s.json("/runs")["uploads"] == {"enabled": True, "reason": None, "max_bytes": 1 << 30}
    src = sample_file("gpt_sdpa_fused")
    done = upload_files(s, "batch0001", [src])
    assert done == {"run": "uploads/rank0", "state": "ready", "files": [src.name]}
    s.wait_for(lambda: "uploads/rank0" in [r["name"] for r in s.json("/runs")["runs"]])
    s.settle()
    run = next(r for r in s.json("/runs")["runs"] if r["name"] == "uploads/rank0")
    assert run["state"] == "ready" and run["path"] == "uploads/rank0"  # shown relative, as logdirs are
    report = s.json("/report?run=uploads/rank0")
    assert report["workers"][0]["file"] == f"uploads/rank0/{src.name}"
    assert without_files(report) == without_files(cli_run(src.parent))
    # stored under the cache directory, never in the logdir
    assert (Path(cache_dir) / "uploads" / "rank0" / src.name).read_bytes() == src.read_bytes()
    assert listing(two_runs) == before
    assert not os.listdir(Path(cache_dir) / "uploads-incoming")


def test_the_files_of_one_upload_are_one_run_named_after_them(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir)
    files = sorted((SAMPLES / "ddp_2gpu").glob("*.pt.trace.json.gz"))
    done = upload_files(s, "batch0002", files)
    assert done["run"] == "uploads/rank" and done["files"] == [f.name for f in files]
    s.wait_for(lambda: [r["name"] for r in s.json("/runs")["runs"]] == ["uploads/rank"])
    s.settle()
    report = s.json("/report?run=uploads/rank")
    assert [w["name"] for w in report["workers"]] == ["rank0", "rank1"]
    assert without_files(report) == without_files(cli_run(SAMPLES / "ddp_2gpu"))


def test_names_are_made_safe_and_unique_and_plain_json_is_a_worker(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir)
    text = gzip.decompress(sample_file("low_sm_efficiency").read_bytes())
    a = upload_files(s, "batch0003", [_write(Path(cache_dir).parent / "my profile (1).json", text)])
    b = upload_files(s, "batch0004", [_write(Path(cache_dir).parent / "my profile (1).json", text)])
    assert a == {"run": "uploads/my_profile_1", "state": "ready", "files": ["my_profile_1.pt.trace.json"]}
    assert b["run"] == "uploads/my_profile_1-2"
    # a name that starts with a dot or holds letters beyond ASCII is kept under a safe name
    c = upload_files(s, "batch0005", [_write(Path(cache_dir).parent / ".hidden données.json.gz", gzip.compress(text))])
    assert c == {"run": "uploads/hidden_donn_es", "state": "ready", "files": ["hidden_donn_es.pt.trace.json.gz"]}
    s.wait_for(lambda: len(s.json("/runs")["runs"]) == 3)
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert runs["uploads/my_profile_1"]["state"] == "ready"
    assert runs["uploads/my_profile_1"]["workers"][0]["name"] == "my_profile_1"


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("notes.txt", b'{"traceEvents": []}', "not a trace, sidecar or archive"),
        ("trace.json", b"\x7fELF\x02\x01", "does not start like a JSON trace"),
        ("trace.json.gz", gzip.compress(b"#!/bin/sh\nrm -rf /\n", mtime=0), "does not start like a JSON trace"),
        ("trace.json.gz", b"\x1f\x8bnot really gzip", "corrupt gzip header"),
        ("trace.json", b"", "empty file"),
        ("trace.json", b"   \n\t  ", "does not start like a JSON trace"),
        ("team.zip", gzip.compress(b"{}", mtime=0), "not a zip archive"),
        ("team.tar.gz", gzip.compress(b"{" + b" " * 600, mtime=0), "no tar header inside the gzip"),
        ("tb_mfu.json", gzip.compress(b"{}", mtime=0), "a sidecar is plain JSON"),
    ],
)
def test_other_files_are_refused_with_one_line_naming_them(serve, cache_dir, name, data, reason):
    s = serve(None, cache_dir=cache_dir)
    r = upload(s, "batch0006", name, data)
    assert r.status_code == 400
    msg = json.loads(r.get_data())["error"]
    assert msg.startswith(name) and reason in msg and "\n" not in msg
    assert commit(s, "batch0006").status_code in (400, 404)  # nothing was kept: nothing to commit
    assert not list((Path(cache_dir) / "uploads-incoming").rglob("*.*"))


def test_the_cap_is_enforced_while_reading_not_after(tmp_path):
    """A body with no Content-Length (or a false one) is stopped once it passes the cap:
    the reader never takes more than the cap plus one chunk, and nothing stays on disk."""
    area = UploadArea(str(tmp_path), max_bytes=3 * uploads_mod.CHUNK_BYTES)

    class Endless(io.RawIOBase):
        taken = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            chunk = (b"{" + b" " * (len(b) - 1)) if self.taken == 0 else b" " * len(b)
            b[: len(chunk)] = chunk
            self.taken += len(chunk)
            return len(chunk)

    body = Endless()
    with pytest.raises(UploadError) as err:
        area.receive("batch0007", "endless.json", io.BufferedReader(body), None)
    assert err.value.status == 413 and "--mfu_upload_max_bytes" in str(err.value)
    assert body.taken <= area.max_bytes + uploads_mod.CHUNK_BYTES + io.DEFAULT_BUFFER_SIZE
    assert not list((tmp_path / "uploads-incoming").rglob("*.*"))
    # the refused file's bytes no longer count: a small file still fits in the same upload
    assert area.receive("batch0007", "small.json", io.BytesIO(b"{}"), 2)["bytes"] == 2


def test_a_declared_length_over_the_cap_is_refused_before_reading(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir, upload_max_bytes="1KiB")
    assert s.json("/runs")["uploads"]["max_bytes"] == 1024
    r = upload(s, "batch0008", "big.json", b"{" + b" " * 2000 + b"}")
    assert r.status_code == 413 and "1 KiB" in json.loads(r.get_data())["error"]
    # the cap is on the whole upload: two files of 600 bytes do not fit either
    assert upload(s, "batch0009", "a.json", b"{" + b" " * 598 + b"}").status_code == 200
    assert upload(s, "batch0009", "b.json", b"{" + b" " * 598 + b"}").status_code == 413


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"X-MFU-Upload": ""}, 403),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "http://localhost.evil.example"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
        ({"Content-Type": "multipart/form-data; boundary=x"}, 400),
        ({"Content-Type": "text/plain"}, 400),
        ({"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}, 200),
        # DNS rebinding: a page of evil.example, now resolving to this server, is same-origin with itself
        ({"Host": "evil.example:6006", "Origin": "http://evil.example:6006", "Sec-Fetch-Site": "same-origin"}, 403),
        ({"Host": "evil.example"}, 403),
        ({"Host": "127.0.0.1:6006", "Origin": "http://127.0.0.1:6006"}, 200),
        ({"Host": "[::1]:6006", "Origin": "http://[::1]:6006"}, 200),
        # a proxy in front: its public name must be one the server was told of (--mfu_allowed_hosts)
        ({"Origin": "https://tb.example.com", "X-Forwarded-Host": "tb.example.com"}, 200),
        ({"Origin": "https://tb.example.org", "X-Forwarded-Host": "tb.example.org"}, 403),
        ({"Host": "tb.example.com", "Origin": "https://tb.example.com"}, 200),
        ({"Host": "x.team.example.net", "Origin": "https://x.team.example.net"}, 200),
        ({"Origin": "http://[::1"}, 400),
        ({"Origin": "http://localhost:notaport"}, 403),
        ({"Origin": "null"}, 403),
        ({"Host": "[::1"}, 400),
    ],
)
def test_only_the_tab_itself_may_upload(serve, cache_dir, headers, status):
    """What a page of another site could send is refused before anything is read."""
    s = serve(None, cache_dir=cache_dir, allowed_hosts="tb.example.com,.team.example.net")
    r = upload(s, "batch0010", "t.json", b"{}", **headers)
    assert r.status_code == status, r.get_data(as_text=True)
    stored = list((Path(cache_dir) / "uploads-incoming").rglob("*.json"))
    assert bool(stored) == (status == 200)
    if status in (400, 403):
        assert commit(s, "batch0010").status_code == 404  # nor could it commit one


def test_a_get_or_a_commit_without_the_header_is_refused(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir)
    assert s.get("/upload?batch=batch0011&name=t.json").status_code == 400
    assert upload(s, "batch0011", "t.json", b"{}").status_code == 200
    assert s.client.post(f"{PREFIX}/upload_done?batch=batch0011").status_code == 403
    assert commit(s, "batch0011").status_code == 200


def test_upload_is_off_with_the_flag_or_without_a_cache_dir(serve, two_runs, cache_dir):
    s = serve(two_runs, cache_dir=cache_dir, disable_upload=True)
    up = s.json("/runs")["uploads"]
    assert up["enabled"] is False and "--mfu_disable_upload" in up["reason"]
    r = upload(s, "batch0012", "t.json", b"{}")
    assert r.status_code == 403 and b"--mfu_disable_upload" in r.get_data()
    assert not (Path(cache_dir) / "uploads-incoming").exists()
    s = serve(two_runs)  # the tests' default: --mfu_cache_dir none
    assert "--mfu_cache_dir none" in s.json("/runs")["uploads"]["reason"]
    assert upload(s, "batch0012", "t.json", b"{}").status_code == 403


def test_upload_is_off_when_the_cache_dir_is_inside_a_logdir(serve, two_runs):
    before = listing(two_runs)
    s = serve(two_runs, cache_dir=str(two_runs / "cache"))
    assert "inside a logdir" in s.json("/runs")["uploads"]["reason"]
    assert upload(s, "batch0013", "t.json", b"{}").status_code == 403
    assert [p for p in listing(two_runs) if not p[0].startswith("cache")] == before


def test_an_uploaded_archive_is_a_logdir_once_archives_are_read(serve, cache_dir, tmp_path):
    src = sample_file("low_sm_efficiency")
    archive = tmp_path / "team.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(src, f"team/run_a/{src.name}")
    s = serve(None, cache_dir=cache_dir)
    done = upload_files(s, "batch0016", [archive])
    assert done == {"run": "uploads/team", "state": "ready", "files": ["team.zip"]}
    s.wait_for(lambda: [r["name"] for r in s.json("/runs")["runs"]] == ["uploads/team/team/run_a"])
    s.settle()
    report = s.json("/report?run=uploads/team/team/run_a")
    assert without_files(report) == without_files(cli_run(src.parent))


def test_uploads_at_once_get_their_own_runs(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir)
    data = sample_file("low_sm_efficiency").read_bytes()
    results: list[dict[str, Any]] = []

    def one(i: int) -> None:  # six clients: one may have only four uploads arriving at once
        batch, client = f"batchpar{i:02d}", f"10.0.0.{i}"
        assert upload(s, batch, "same.json.gz", data, client).status_code == 200
        results.append(json.loads(commit(s, batch, client).get_data()))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = sorted(r["run"] for r in results)
    assert names == sorted(["uploads/same"] + [f"uploads/same-{n}" for n in range(2, 7)])
    for n in names:
        folder = Path(cache_dir) / n
        assert [p.read_bytes() == data for p in folder.iterdir()] == [True]


def test_an_unfinished_upload_is_swept_after_its_time(tmp_path):
    area = UploadArea(str(tmp_path), idle_s=0.2)
    area.receive("batchold1", "t.json", io.BytesIO(b"{}"), 2)
    assert (tmp_path / "uploads-incoming" / "batchold1").is_dir()
    time.sleep(0.3)
    area.receive("batchnew1", "t.json", io.BytesIO(b"{}"), 2)
    assert not (tmp_path / "uploads-incoming" / "batchold1").exists()
    with pytest.raises(UploadError) as err:
        area.commit("batchold1")
    assert err.value.status == 404 and "0.2 s idle" in str(err.value)
    assert area.commit("batchnew1")["run"] == "uploads/t"


def test_a_cancelled_upload_leaves_nothing(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir)
    assert upload(s, "batch0015", "t.json", b"{}").status_code == 200
    r = s.client.post(
        f"{PREFIX}/upload_done?batch=batch0015&cancel=1",
        headers={"X-MFU-Upload": "1"},
        environ_base={"REMOTE_ADDR": "127.0.0.1"},
    )
    assert r.status_code == 200
    assert not list((Path(cache_dir) / "uploads-incoming").iterdir())
    assert not (Path(cache_dir) / "uploads").exists()


def test_the_loader_defines_the_upload_flags_and_checks_the_cap():
    import argparse

    from tensorboard.plugins import base_plugin

    from tb_mfu_plugin.tensorboard.entry import MfuPluginLoader

    parser = argparse.ArgumentParser()
    loader = MfuPluginLoader()
    loader.define_flags(parser)
    flags = parser.parse_args(["--mfu_disable_upload", "--mfu_upload_max_bytes", "256MiB"])
    loader.fix_flags(flags)
    assert flags.mfu_disable_upload is True and flags.mfu_upload_max_bytes == "256MiB"
    assert parser.parse_args([]).mfu_disable_upload is False
    for bad in ("lots", "0", "-1"):
        with pytest.raises(base_plugin.FlagsError, match="--mfu_upload_max_bytes"):
            loader.fix_flags(parser.parse_args(["--mfu_upload_max_bytes", bad]))


# -- issue 22: what one visitor can do to the others, and names that were accepted then lost --------


def test_idle_uploads_of_one_client_neither_block_others_nor_stay(serve, cache_dir):
    """16 uploads of 20 bytes, opened and never committed, once made every other upload a 429
    for an hour; then 4 of them held one client's quota for idle_s (issue 35: every client
    behind a proxy has one address). Now an upload holds its slot a few seconds after its last
    file, the next ones wait their turn for it, and an upload idle for idle_s is dropped."""
    s = serve(None, cache_dir=cache_dir, upload_idle_seconds=2)
    twenty = b"{" + b" " * 18 + b"}"
    answers = [upload(s, "idlebatch00", "t.json", twenty, client="10.0.0.5")]
    # another client can neither add to, commit nor cancel them
    assert upload(s, "idlebatch00", "u.json", b"{}", client="10.0.0.6").status_code == 404
    assert commit(s, "idlebatch00", client="10.0.0.6").status_code == 404
    answers += [upload(s, f"idlebatch{i:02d}", "t.json", twenty, client="10.0.0.5") for i in range(1, 16)]
    assert [r.status_code for r in answers] == [200] * 16
    queued = [json.loads(r.get_data())["queued_s"] for r in answers]
    # the fifth waits for the four's grace to end, and is told how long; none waits past it
    assert queued[:4] == [0] * 4 and 0 < queued[4] and all(q < 2 for q in queued), queued
    # the known good run beside it: another client's upload goes through, with the CLI's figures
    src = sample_file("gpt_sdpa_fused")
    assert upload(s, "goodbatch01", src.name, src.read_bytes(), client="10.0.0.6").status_code == 200
    assert json.loads(commit(s, "goodbatch01", client="10.0.0.6").get_data())["run"] == "uploads/rank0"
    s.wait_for(lambda: "uploads/rank0" in [r["name"] for r in s.json("/runs")["runs"]])
    s.settle()
    assert without_files(s.json("/report?run=uploads/rank0")) == without_files(cli_run(src.parent))
    time.sleep(2.2)  # idle_s: every one of the 16 is dropped at the next upload
    assert upload(s, "idlebatch51", "t.json", b"{}", client="10.0.0.5").status_code == 200
    assert sorted(os.listdir(Path(cache_dir) / "uploads-incoming")) == ["idlebatch51"]
    assert commit(s, "idlebatch00", client="10.0.0.5").status_code == 404


def test_an_upload_that_finds_no_slot_waits_its_turn_then_gets_a_429_that_says_so(tmp_path):
    """The server's 16 slots held by bodies that keep arriving: a 17th upload waits in the queue
    until queue_s, then is refused with the time it waited; once one body ends, the next goes."""
    area = UploadArea(str(tmp_path), idle_s=60, queue_s=0.5)
    release = threading.Event()

    class Busy(io.RawIOBase):  # a body that keeps arriving until released
        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            if release.wait(0.01):
                return 0
            n = min(len(b), 512)
            b[:n] = (b"{" if not getattr(self, "started", False) else b" ") + b" " * (n - 1)
            self.started = True
            return n

    def one(i: int) -> None:
        area.receive(f"busybatch{i:02d}", "b.json", Busy(), None, f"10.0.2.{i}")
        area.commit(f"busybatch{i:02d}", f"10.0.2.{i}")  # a committed upload holds no slot

    busy = [threading.Thread(target=one, args=(i,)) for i in range(uploads_mod.MAX_OPEN_BATCHES)]
    for t in busy:
        t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    with pytest.raises(UploadError) as err:
        area.receive("latebatch1", "t.json", io.BytesIO(b"{}"), 2, "10.0.2.99")
    assert err.value.status == 429 and "waited 0.5 s for an upload slot (the server is busy)" in str(err.value)
    assert 0.5 <= time.monotonic() - t0 < 5
    release.set()
    for t in busy:
        t.join()
    assert area.receive("latebatch2", "t.json", io.BytesIO(b"{}"), 2, "10.0.2.99")["queued_s"] == 0


def test_a_body_that_stalls_at_its_start_frees_its_slot_in_seconds(tmp_path):
    """20 bytes, then nothing: dropped (408) after stall_s, not after idle_s."""
    area = UploadArea(str(tmp_path), idle_s=60, stall_s=0.3)
    assert UploadArea(str(tmp_path)).stall_s == uploads_mod.STALL_S <= 5

    class Stalls(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            if not getattr(self, "sent", False):
                self.sent = True
                b[:20] = b"{" + b" " * 19
                return 20
            while not getattr(self, "shut", False):  # a read that waits, as a socket's would
                time.sleep(0.05)
            return 0  # the watchdog shut it

    body = Stalls()
    t0 = time.monotonic()
    with pytest.raises(UploadError) as err:
        area.receive("stallstart", "s.json", body, 10_000, "10.0.0.9", lambda: setattr(body, "shut", True))
    assert err.value.status == 408 and "no byte arrived for 0.3 s at its start" in str(err.value)
    assert time.monotonic() - t0 < 5
    assert area.receive("nextbatch1", "t.json", io.BytesIO(b"{}"), 2, "10.0.0.9")["queued_s"] == 0


def test_clients_of_one_ipv6_network_share_their_quota():
    from tb_mfu_plugin.tensorboard.hosts import client_key

    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::5") != client_key("2001:db8:1:2::5")
    assert client_key("::ffff:10.0.0.5") == client_key("10.0.0.5") == "10.0.0.5"
    assert client_key(None) == ""


def test_a_body_slower_than_the_least_rate_is_dropped(tmp_path):
    """A body that trickles (each read returns a byte) is dropped once its first idle_s have
    passed and it is under min_rate; nothing of it stays, and its slot is free again."""
    area = UploadArea(str(tmp_path), idle_s=0.2, min_rate=1000)

    class Trickle(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            time.sleep(0.01)
            b[:1] = b"{" if not getattr(self, "started", False) else b" "
            self.started = True
            return 1

    with pytest.raises(UploadError) as err:
        area.receive("slowbatch1", "slow.json", Trickle(), None, "10.0.0.7")
    assert err.value.status == 408 and "slower than" in str(err.value) and str(err.value).startswith("slow.json")
    assert not list((tmp_path / "uploads-incoming").rglob("*.json"))


def test_a_read_that_times_out_is_a_408_and_leaves_nothing(tmp_path):
    area = UploadArea(str(tmp_path), idle_s=7)

    class Stalled(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            raise TimeoutError("timed out")  # what the socket's deadline raises

    with pytest.raises(UploadError) as err:
        area.receive("stallbatch", "s.json", Stalled(), 100, "10.0.0.8")
    assert err.value.status == 408 and "no byte arrived for 7 s" in str(err.value)
    assert not list((tmp_path / "uploads-incoming").rglob("*.json"))
    assert area.receive("stallbatch", "ok.json", io.BytesIO(b"{}"), 2, "10.0.0.8")["bytes"] == 2


HOSTILE_NAMES = [
    ("../x.json.gz", "with a folder in it"),
    ("/etc/abs.json.gz", "with a folder in it"),
    ("a\\b.json.gz", "with a folder in it"),
    ("C:evil.json.gz", "with a drive in it"),
    ("n\x00ul.json.gz", "control or invisible characters"),
    ("c\x07trl.json.gz", "control or invisible characters"),
    ("bidi\u202eevil.json.gz", "control or invisible characters"),
    ("new\nline.json.gz", "control or invisible characters"),
    ("L" * 10_000 + ".json.gz", "longer than 255 bytes"),
    ("bad\udcff.json.gz", "not valid UTF-8"),
    ("bad\ufffd.json.gz", "not valid UTF-8"),
    (".json.gz", "only a suffix"),
    (".pt.trace.json.gz", "only a suffix"),
    ("..json", "only a suffix"),
    ("", "without a name"),
]


@pytest.mark.parametrize(("name", "reason"), HOSTILE_NAMES)
def test_names_no_browser_sends_are_refused_with_one_line(serve, cache_dir, name, reason):
    s = serve(None, cache_dir=cache_dir)
    r = upload(s, "namebatch1", name, sample_file().read_bytes())
    assert r.status_code == 400, r.get_data(as_text=True)
    msg = json.loads(r.get_data())["error"]
    assert reason in msg and "\n" not in msg and len(msg) < 400
    assert commit(s, "namebatch1").status_code in (400, 404)
    assert not list((Path(cache_dir) / "uploads-incoming").rglob("*.*"))


def test_every_upload_answered_ready_is_a_run_in_runs(serve, cache_dir):
    """Names that are taken (odd but plain) each become the run the commit named, at once."""
    s = serve(None, cache_dir=cache_dir)
    data = sample_file().read_bytes()
    names = [
        "my trace (2).json.gz",
        "données.json.gz",
        "日本.json.gz",
        "-dash.json.gz",
        "x%2e%2e.json.gz",
        "a..b.json.gz",
        "worker0.1700000000000.pt.trace.json.gz",
        "UPPER.JSON.GZ",
        "L" * 240 + ".json.gz",
    ]
    ready = []
    for i, name in enumerate(names):
        assert upload(s, f"readybatch{i:02d}", name, data).status_code == 200, name
        done = json.loads(commit(s, f"readybatch{i:02d}").get_data())
        assert done["state"] == "ready"
        ready.append(done["run"])
    assert len(set(ready)) == len(names)
    s.wait_for(lambda: set(ready) <= {r["name"] for r in s.json("/runs")["runs"]})
    s.settle()
    runs = {r["name"]: r for r in s.json("/runs")["runs"]}
    assert {runs[n]["state"] for n in ready} == {"ready"}


def test_an_upload_of_only_a_sidecar_is_refused(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir)
    assert upload(s, "sidebatch1", "tb_mfu.json", b'{"flops_per_step": 1e12}').status_code == 200
    r = commit(s, "sidebatch1")
    assert r.status_code == 400 and "only a sidecar" in json.loads(r.get_data())["error"]
    assert not list((Path(cache_dir) / "uploads-incoming").iterdir())
    assert not (Path(cache_dir) / "uploads").exists()
    # a trace refused beside the sidecar does not make the sidecar a run either
    assert upload(s, "sidebatch2", "tb_mfu.json", b"{}").status_code == 200
    assert upload(s, "sidebatch2", "t.json", b"not json").status_code == 400
    assert commit(s, "sidebatch2").status_code == 400


def test_the_names_this_server_answers_to():
    import argparse
    import socket

    from tb_mfu_plugin.tensorboard.hosts import AllowedHosts, hostname_of

    hosts = AllowedHosts.from_flags(
        argparse.Namespace(host="tb.internal", mfu_allowed_hosts="a.example, .corp.example")
    )
    for ok in ("localhost", "LOCALHOST.", "127.0.0.1", "10.1.2.3", "::1", "fe80::1%eth0", socket.gethostname(),
               "tb.internal", "a.example", "x.corp.example", "y.x.corp.example", socket.getfqdn()):  # fmt: skip
        assert hosts.allows(ok), ok
    for bad in ("evil.example", "localhost.evil.example", "corp.example", "b.example", "a.example.evil"):
        assert not hosts.allows(bad), bad
    assert AllowedHosts(["*"]).allows("anything.example")
    assert hostname_of("[::1]:6006") == "::1" and hostname_of("Tb.Example.COM.:80") == "tb.example.com"
    with pytest.raises(ValueError):
        hostname_of("[::1")
