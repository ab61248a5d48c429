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
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.pipeline import analyze_path
from tb_mfu_plugin.tensorboard import uploads as uploads_mod
from tb_mfu_plugin.tensorboard.uploads import UploadArea, UploadError

from .conftest import PREFIX, SAMPLES, Served, sample_file

HEADERS = {"X-MFU-Upload": "1", "Content-Type": "application/octet-stream"}


def upload(s: Served, batch: str, name: str, data: bytes, **headers: str) -> Any:
    return s.client.post(f"{PREFIX}/upload?batch={batch}&name={quote(name)}", data=data, headers={**HEADERS, **headers})


def commit(s: Served, batch: str) -> Any:
    return s.client.post(f"{PREFIX}/upload_done?batch={batch}", headers={"X-MFU-Upload": "1"})


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
    # a name with folders and odd characters keeps only its last part, made safe
    r = upload(s, "batch0005", "..\\..\\etc/../.hidden\u202e.json.gz", gzip.compress(text))
    assert r.status_code == 200 and json.loads(r.get_data())["file"] == "hidden.pt.trace.json.gz"
    s.wait_for(lambda: len(s.json("/runs")["runs"]) == 2)
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
        ({"Origin": "https://tb.example.com", "X-Forwarded-Host": "tb.example.com"}, 200),
    ],
)
def test_only_the_tab_itself_may_upload(serve, cache_dir, headers, status):
    """What a page of another site could send is refused before anything is read."""
    s = serve(None, cache_dir=cache_dir)
    r = upload(s, "batch0010", "t.json", b"{}", **headers)
    assert r.status_code == status, r.get_data(as_text=True)
    stored = list((Path(cache_dir) / "uploads-incoming").rglob("*.json"))
    assert bool(stored) == (status == 200)
    if status == 403:
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

    def one(i: int) -> None:
        batch = f"batchpar{i:02d}"
        assert upload(s, batch, "same.json.gz", data).status_code == 200
        results.append(json.loads(commit(s, batch).get_data()))

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


def test_an_unfinished_upload_is_swept_after_its_time(tmp_path, monkeypatch):
    area = UploadArea(str(tmp_path))
    area.receive("batchold1", "t.json", io.BytesIO(b"{}"), 2)
    assert (tmp_path / "uploads-incoming" / "batchold1").is_dir()
    monkeypatch.setattr(uploads_mod, "INCOMING_TTL_S", -1.0)
    area.receive("batchnew1", "t.json", io.BytesIO(b"{}"), 2)
    assert not (tmp_path / "uploads-incoming" / "batchold1").exists()
    with pytest.raises(UploadError) as err:
        area.commit("batchold1")
    assert err.value.status == 404
    assert area.commit("batchnew1")["run"] == "uploads/t"


def test_a_cancelled_upload_leaves_nothing(serve, cache_dir):
    s = serve(None, cache_dir=cache_dir)
    assert upload(s, "batch0015", "t.json", b"{}").status_code == 200
    r = s.client.post(f"{PREFIX}/upload_done?batch=batch0015&cancel=1", headers={"X-MFU-Upload": "1"})
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
