"""Hostile archives (issue 22): names that are not UTF-8, anything the archive libraries
raise, bombs of many members, tar headers that ask for gigabytes or quadratic time, and
.tar.gz members that re-inflated the archive from its start. Beside each hostile member
lies a good run whose figures must equal those of the same trace read from a folder.

The archives are built here by tests/probe/hostile_archives.py; peak memory and the CLI
are the probe's (tests/probe/test_archive_probe.py)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from located import runs_by_name
from probe import hostile_archives as H

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.core.escape import json_bytes
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.archive import reader as archive_mod
from tb_mfu_plugin.trace.archive import streams as archive_streams
from tb_mfu_plugin.trace.archive.reader import Archive
from tb_mfu_plugin.trace.limits import KiB, Limits, MiB
from tb_mfu_plugin.trace.locate.listing import discover
from tb_mfu_plugin.trace.locate.locations import Location

SAMPLE = next((Path(__file__).resolve().parents[2] / "sample_traces" / "low_sm_efficiency").glob("*.json.gz"))
GOOD = {f"good/{SAMPLE.name}": SAMPLE.read_bytes()}
EMPTY = b'{"traceEvents": []}'
MEMBER = "m/rank0.1.pt.trace.json"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The good run's report, read from a folder."""
    folder = tmp_path_factory.mktemp("folder")
    (folder / "good").mkdir()
    shutil.copy(SAMPLE, folder / "good")
    return reports_at(folder)["good"]


def report_text(path: Path, limits: Limits | None = None) -> str:
    """The CLI's JSON of ``path`` (names that are not UTF-8 written as ``\\xNN``, as it writes them)."""
    return json_bytes(analyze_path(str(path), AnalysisOptions(limits=limits or Limits()))).decode()


def reports_at(path: Path) -> dict[str, Any]:
    return runs_by_name(report_text(path), str(path))


def errors_of(path: Path, limits: Limits | None = None) -> dict[str, str]:
    doc = json.loads(report_text(path, limits))
    return {w["file"]: w["error"] for r in doc["runs"] for w in r["workers"] if w["error"]}


def assert_one_line(text: str) -> None:
    assert "\n" not in text and "Traceback" not in text


# -- names -----------------------------------------------------------------------------


def test_a_zip_name_flagged_utf8_that_is_not_is_refused_alone(tmp_path: Path, reference: dict[str, Any]):
    bad = H.entry(b"bad/rank\xff\xfe.1.pt.trace.json", EMPTY, flags=H.UTF8_FLAG)
    junk = H.entry(b"notes/\xc3(.txt", b"x", flags=H.UTF8_FLAG)  # not a trace: refused, and not listed
    arc = H.zip_of_files(tmp_path / "team.zip", GOOD, [bad, junk])
    with Archive.open(Location.parse(str(arc))) as a:
        refused = {m.name: m.refusal for m in a.members if m.refusal}
    assert refused == {
        "bad/rank\udcff\udcfe.1.pt.trace.json": "member 'bad/rank\\xff\\xfe.1.pt.trace.json' of team.zip has a "
        "name that is not UTF-8, though its entry says it is: refused, not read",
        "notes/\udcc3(.txt": "member 'notes/\\xc3(.txt' of team.zip has a name that is not UTF-8, though its "
        "entry says it is: refused, not read",
    }
    assert [r.name for r in discover(Location.parse(str(arc)))] == [
        "good",
        "team",
    ]  # the refused trace in the archive's run
    (line,) = errors_of(arc).values()
    assert line == refused["bad/rank\udcff\udcfe.1.pt.trace.json"]
    assert reports_at(arc)["good"] == reference


def test_an_unflagged_zip_name_is_cp437_as_the_zip_format_says(tmp_path: Path, reference: dict[str, Any]):
    raw = H.entry(b"cp/rank\x81.1.pt.trace.json.gz", SAMPLE.read_bytes())  # the bytes, unflagged
    arc = H.write_zip(tmp_path / "team.zip", [H.entry(n, d) for n, d in GOOD.items()] + [raw])
    runs = reports_at(arc)
    assert sorted(runs) == ["cp", "good"] and runs["good"] == reference
    (worker,) = runs["cp"]["workers"]
    assert worker["file"] == "<root>/cp/rankü.1.pt.trace.json.gz" and worker["error"] is None
    assert {k: v for k, v in worker.items() if k not in ("name", "file", "span")} == {
        k: v for k, v in reference["workers"][0].items() if k not in ("name", "file", "span")
    }


def test_tar_names_keep_bytes_that_are_not_utf8_as_local_file_names_do(tmp_path: Path, reference: dict[str, Any]):
    name = b"bad/rank\xff.1.pt.trace.json.gz".decode("utf-8", "surrogateescape")
    arc = H.tar_gz(tmp_path / "team.tar.gz", {**GOOD, name: SAMPLE.read_bytes()})
    text = report_text(arc)
    assert '"file":"tar://bad/rank\\\\xff.1.pt.trace.json.gz::' in text  # shown as \xff, read as the bytes
    runs = reports_at(arc)
    assert runs["good"] == reference and runs["bad"]["workers"][0]["error"] is None


# -- whatever the libraries raise ------------------------------------------------------


def _zip_case(tmp_path: Path, *extra: H.ZipEntry) -> Path:
    return H.zip_of_files(tmp_path / "x.zip", GOOD, list(extra))


def _data_entry(**kw: Any) -> H.ZipEntry:
    return H.ZipEntry(b"m/rank0.1.pt.trace.json", kw.pop("payload", b"\xff\xfe\xfd\xfc" * 8), 0, 32, **kw)


MEMBER_CASES = {
    "method 99 (AES)": (lambda p: _zip_case(p, _data_entry(method=99)), r"is compressed by method 99, which we"),
    "method 9 (deflate64)": (lambda p: _zip_case(p, _data_entry(method=9)), r"is compressed by method 9, which we"),
    "bad deflate": (lambda p: _zip_case(p, _data_entry()), r"cannot be read \(zlib\.error: Error -3"),
    "bad bzip2": (lambda p: _zip_case(p, _data_entry(method=12)), r"cannot be read \(OSError: Invalid data stream"),
    "bad lzma": (
        lambda p: _zip_case(p, _data_entry(method=14, payload=b"\x09\x14\x05\x00\x5d\x00\x00\x10\x00" + b"\xff" * 64)),
        r"cannot be read \(LZMAError: Corrupt input data\)",
    ),
    "bad CRC": (
        lambda p: _zip_case(p, H.ZipEntry(b"m/rank0.1.pt.trace.json", H.deflate(EMPTY), 1234, len(EMPTY))),
        r"cannot be read \(BadZipFile: Bad CRC-32 for file 'm/rank0\.1\.pt\.trace\.json'\)",
    ),
    "local name differs": (
        lambda p: _zip_case(p, replace(H.entry(MEMBER, EMPTY), local_name=b"m/rank9.1.pt.trace.json")),
        r"cannot be read \(BadZipFile: File name in directory 'm/rank0\.1\.pt\.trace\.json' and header",
    ),
    "offset past the end": (
        lambda p: _zip_case(p, H.ZipEntry(b"m/rank0.1.pt.trace.json", b"", 0, 0, offset=1 << 30)),
        r"cannot be read \(BadZipFile: ",
    ),
}

ARCHIVE_CASES = {
    "zip version 10.0": (
        lambda p: _zip_case(p, H.ZipEntry(b"m/rank0.1.pt.trace.json", b"", 0, 0, version=100)),
        r"x\.zip: not a readable zip archive \(NotImplementedError: zip file version 10\.0\)",
    ),
    "zip64 extra field cut short": (
        lambda p: _zip_case(p, H.ZipEntry(b"m/a", b"", 0, 0xFFFFFFFF, extra=struct.pack("<HH", 1, 2) + b"\0\0")),
        r"x\.zip: not a readable zip archive \(BadZipFile: Corrupt zip64 extra field",
    ),
    "central directory cut short": (
        lambda p: _cut_central_directory(_zip_case(p)),
        r"x\.zip: not a readable zip archive \(BadZipFile: ",
    ),
    "tar.gz cut in half": (
        lambda p: _cut(H.tar_gz(p / "x.tar.gz", {**GOOD, "big/rank0.1.pt.trace.json": os.urandom(256 * KiB)})),
        r"x\.tar\.gz: not a readable tar archive \(EOFError: compressed file ended before the end-of-stream",
    ),
    "negative size": (
        lambda p: _write_gz(p / "x.tar.gz", H.tar_members(GOOD) + _negative_size_header() + bytes(1024)),
        r"x\.tar\.gz: not a readable tar archive \(ReadError: a tar header at offset \d+ declares a negative size\)",
    ),
    "3,000 chained long names": (
        lambda p: _write_gz(p / "x.tar.gz", H.tar_members(GOOD) + _chained_long_names(3000)),
        r"x\.tar\.gz: not a readable tar archive \(RecursionError: maximum recursion depth exceeded",
    ),
}


def _cut(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _cut_central_directory(path: Path) -> Path:
    data = bytearray(path.read_bytes())
    cd_size_at = len(data) - 22 + 12  # the end record's central directory size
    (size,) = struct.unpack_from("<L", data, cd_size_at)
    struct.pack_into("<L", data, cd_size_at, size + 100)
    struct.pack_into("<L", data, cd_size_at + 4, struct.unpack_from("<L", data, cd_size_at + 4)[0] - 100)
    path.write_bytes(bytes(data))
    return path


def _write_gz(path: Path, tar: bytes) -> Path:
    path.write_bytes(H.gz(tar))
    return path


def _negative_size_header() -> bytes:
    block = bytearray(H.tar_header("neg/rank0.1.pt.trace.json", 0))
    block[124:136] = b"\xff" * 12  # base-256: -1
    block[148:156] = b" " * 8
    block[148:155] = f"{sum(block):06o}\0".encode()
    return bytes(block)


def _chained_long_names(n: int) -> bytes:
    one = H.tar_header("././@LongLink", 8, tarfile.GNUTYPE_LONGNAME) + b"x" * 8 + bytes(504)
    return one * n + H.tar_members({"chain/rank0.1.pt.trace.json": EMPTY}) + bytes(1024)


@pytest.mark.parametrize("case", sorted(MEMBER_CASES))
def test_a_member_the_libraries_cannot_read_is_one_line_beside_the_good_run(
    tmp_path: Path, reference: dict[str, Any], case: str
):
    build, pattern = MEMBER_CASES[case]
    arc = build(tmp_path)
    errors = errors_of(arc)
    (line,) = errors.values()
    assert list(errors) == [f"zip://m/rank0.1.pt.trace.json::{arc}"]
    assert line.startswith("member 'm/rank0.1.pt.trace.json' of x.zip ") and re.search(pattern, line), line
    assert_one_line(line)
    assert reports_at(arc)["good"] == reference


@pytest.mark.parametrize("case", sorted(ARCHIVE_CASES))
def test_an_archive_the_libraries_cannot_list_is_one_line(tmp_path: Path, case: str):
    build, pattern = ARCHIVE_CASES[case]
    arc = build(tmp_path)
    with pytest.raises(TraceError) as exc:
        discover(Location.parse(str(arc)))
    assert str(exc.value).startswith(str(arc)) and re.search(pattern, str(exc.value)), str(exc.value)
    assert_one_line(str(exc.value))


def test_corrupted_archives_raise_nothing_but_one_line(tmp_path: Path):
    """A byte changed anywhere in a small zip or .tar.gz: listed, or one line, never a traceback."""
    files = {f"r{i}/rank0.1.pt.trace.json": EMPTY + b" " * i for i in range(3)}
    clean = {"zip": H.zip_of_files(tmp_path / "c.zip", files).read_bytes(), "tgz": H.gz(H.tar_bytes(files))}
    rng = random.Random(22)
    for kind, data in clean.items():
        for i in range(30):
            bad = bytearray(data)
            at = rng.randrange(len(bad))
            bad[at] ^= 1 << rng.randrange(8)
            path = tmp_path / f"bad{i}.{'zip' if kind == 'zip' else 'tar.gz'}"
            path.write_bytes(bytes(bad))
            try:
                errors = errors_of(path)
            except TraceError as exc:
                assert str(exc).startswith(str(path)), str(exc)
                assert_one_line(str(exc))
                continue
            for line in errors.values():
                assert_one_line(line)


# -- bombs -----------------------------------------------------------------------------


def test_many_members_each_under_the_grace_are_one_bomb(tmp_path: Path):
    """The archive's ratio counts every member: its bomb's members are left out, in one line,
    and the good run beside them is listed (issue 35: the whole archive was refused with it)."""
    bombs = [H.zeros_entry(f"bomb/rank{i}.1.pt.trace.json", 60 * MiB) for i in range(100)]
    arc = H.zip_of_files(tmp_path / "bomb.zip", GOOD, bombs)
    assert arc.stat().st_size < 8 * MiB
    notes: list[str] = []
    assert [r.name for r in discover(Location.parse(str(arc)), warn=notes.append)] == ["good"]
    assert len(notes) == 1 and re.fullmatch(
        rf"{re.escape(str(arc))}: its members declare 5\.86 GiB, \d+:1 of its 5\.\d+ MiB \(an archive bomb\?\): "
        r"over the max_archive_ratio cap \(raise it with --max-archive-ratio, in TensorBoard "
        r"--mfu_max_archive_ratio\): "
        r"100 members left out, those that inflate most; the others read",
        notes[0],
    ), notes
    assert [r.name for r in discover(Location.parse(str(arc)), limits=Limits(max_archive_ratio=2000))] == [
        "bomb",
        "good",
    ]


def test_a_bomb_of_members_each_under_every_per_member_cap_is_cut_where_it_inflates_most(tmp_path: Path):
    """Members that each inflate under max_compression_ratio, but many: the most compressed are
    left out until the rest fits the archive's ratio; the good run, which compresses least, stays."""
    bombs = [H.zeros_entry(f"bomb/rank{i}.1.pt.trace.json", 60 * MiB) for i in range(100)]
    arc = H.zip_of_files(tmp_path / "bomb.zip", GOOD, bombs)
    notes: list[str] = []
    limits = Limits(max_compression_ratio=5000)  # no member is over the cap of one file
    runs = discover(Location.parse(str(arc)), limits=limits, warn=notes.append)
    with Archive.open(Location.parse(str(arc)), limits=limits) as a:
        kept = sum(m.size for m in a.members)
        assert kept <= limits.max_archive_ratio * a.packed
        assert len(a.members) < 101 and any(m.name.startswith("good/") for m in a.members)
    assert [r.name for r in runs] == ["bomb", "good"]  # some of the bomb's members fit, and are read
    assert len(notes) == 1 and "members left out, those that inflate most" in notes[0]


def test_reading_is_held_to_the_archive_ratio_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Without index points (spacing beyond the archive), every member re-inflates from the
    start: the bytes inflated for reads pass the archive's ratio, and the member read then is
    refused with one line naming the cap."""
    monkeypatch.setattr(archive_streams, "MIN_SPACING", 1 << 40)
    monkeypatch.setattr(archive_mod, "ARCHIVE_RATIO_GRACE_BYTES", 0)
    files = {f"r/rank{i}.1.pt.trace.json": os.urandom(20 * KiB) for i in range(40)}
    arc = H.tar_gz(tmp_path / "q.tar.gz", files)
    with Archive.open(Location.parse(str(arc)), limits=Limits(max_archive_ratio=4)) as a:
        refused = []
        for name in files:
            try:
                with a.open_member(name) as f:
                    assert f.read() == files[name]
            except TraceError as exc:
                refused.append(str(exc))
        assert a.inflated <= 4 * arc.stat().st_size + 40 * KiB
    assert 0 < len(refused) < len(files)
    assert re.search(r"reading its members would inflate .*: over the max_archive_ratio cap", refused[0])
    assert refused[0].startswith("tar://r/rank") and "::" in refused[0]


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE])
def test_a_long_header_over_the_cap_is_never_read_and_refuses_its_member(
    tmp_path: Path, reference: dict[str, Any], kind: bytes
):
    big = H.tar_header("././@LongLink" if kind in b"LK" else "pax", 1 * MiB, kind) + b"a" * MiB
    after = H.tar_members({"next/rank0.1.pt.trace.json": EMPTY, "other/rank0.1.pt.trace.json": EMPTY})
    arc = _write_gz(tmp_path / "t.tar.gz", H.tar_members(GOOD) + big + after + bytes(1024))
    with Archive.open(Location.parse(str(arc))) as a:
        refused = {m.name: m.refusal for m in a.members if m.refusal}
    what = {b"L": "GNU long-name", b"K": "GNU long-link", b"x": "pax", b"g": "pax global"}[kind]
    assert refused == {
        "next/rank0.1.pt.trace.json": f"member 'next/rank0.1.pt.trace.json' of t.tar.gz has a {what} header "
        "of 1 MiB, over the 64 KiB such a header may hold: refused, not read"
    }
    assert reports_at(arc)["good"] == reference


def test_a_pax_header_that_would_parse_in_quadratic_time_is_never_parsed(tmp_path: Path, reference: dict[str, Any]):
    arc = H.pax_redos(tmp_path / "r.tar.gz", 2, GOOD)  # Python 3.11.7 took about 20 s for each
    with Archive.open(Location.parse(str(arc))) as a:
        refused = sorted(m.refusal or "" for m in a.members if m.refusal)
    assert refused == [
        f"member 'redos/rank{i}.1.pt.trace.json' of r.tar.gz has a pax header that is not a well-formed list "
        "of records: refused, not read"
        for i in range(2)
    ]
    assert reports_at(arc)["good"] == reference


def test_well_formed_pax_headers_are_read(tmp_path: Path, reference: dict[str, Any]):
    arc = tmp_path / "p.tar.gz"
    with tarfile.open(arc, "w:gz", format=tarfile.PAX_FORMAT) as tf:  # pax headers for the long and the non-ASCII name
        for name in (f"{'d' * 120}/{SAMPLE.name}", f"ünï/{SAMPLE.name}", f"good/{SAMPLE.name}"):
            tf.add(SAMPLE, name)
    runs = reports_at(arc)
    assert sorted(runs) == ["d" * 120, "good", "ünï"] and runs["good"] == reference
    assert all(w["error"] is None for r in runs.values() for w in r["workers"])


def test_a_sparse_map_is_never_read(tmp_path: Path, reference: dict[str, Any]):
    arc = H.sparse_map_bomb(tmp_path / "s.tar.gz", 200_000, GOOD)
    with Archive.open(Location.parse(str(arc))) as a:
        (sparse,) = [m for m in a.members if m.refusal]
        assert sparse.refusal is not None and "is a special file (device, FIFO or sparse)" in sparse.refusal
        assert sparse.size < 2 * MiB  # its stored size, not a size from its pax header
    assert reports_at(arc)["good"] == reference


# -- re-inflation ----------------------------------------------------------------------


def test_members_of_a_tar_gz_are_read_from_index_points_not_from_the_start(tmp_path: Path):
    arc = H.reinflation_bomb(tmp_path / "re.tar.gz", 100, 60 * MiB, GOOD)
    with Archive.open(Location.parse(str(arc))) as a:
        tiny = [m.name for m in a.members if m.name.startswith("tiny/")]
        assert len(tiny) == 100
        for name in tiny:
            with a.open_member(name) as f:
                assert f.read() == b"{}"
        # from the start, each would inflate 60 MiB: 100 x 60 MiB = 5.9 GiB
        assert a.inflated < 100 * 2 * archive_streams.MIN_SPACING


def test_index_points_resume_exactly_across_gzip_members_and_thinning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(archive_streams, "MIN_SPACING", 4 * KiB)
    monkeypatch.setattr(archive_streams, "MAX_CHECKPOINTS", 8)
    rng = random.Random(7)
    files = {f"r{i:03}/rank0.1.pt.trace.json": rng.randbytes(rng.randrange(100, 20_000)) for i in range(150)}
    # each member its own gzip member, some with zero padding after it (gzip reads both)
    parts = [H.gz(H.tar_members({n: d})) + (bytes(7) if i % 3 == 0 else b"") for i, (n, d) in enumerate(files.items())]
    arc = tmp_path / "cat.tar.gz"
    arc.write_bytes(b"".join(parts) + H.gz(bytes(1024)))
    with Archive.open(Location.parse(str(arc))) as a:
        assert a._index is not None and 2 < len(a._index.points) <= 8
        for name in reversed(list(files)):
            with a.open_member(name) as f:
                assert f.read() == files[name], name
        spacing = a._index.spacing
        assert a.inflated <= sum(len(d) + 1024 for d in files.values()) + 150 * 2 * spacing


def test_a_zip_read_from_a_file_object_is_checked_as_one_read_from_a_path(tmp_path: Path):
    bad = H.entry(b"bad/rank\xff.1.pt.trace.json", EMPTY, flags=H.UTF8_FLAG)
    arc = H.zip_of_files(tmp_path / "up.zip", GOOD, [bad])
    with open(arc, "rb") as raw, Archive.open(raw, name="upload.zip") as a:
        assert [m.name for m in a.members if m.refusal is None] == list(GOOD)
        with a.open_member(next(iter(GOOD))) as f:
            assert f.read() == next(iter(GOOD.values()))
    with zipfile.ZipFile(tmp_path / "plain.zip", "w") as zf:  # and a zip without lies takes the usual way
        zf.writestr("a/rank0.1.pt.trace.json", EMPTY)
    with Archive.open(Location.parse(str(tmp_path / "plain.zip"))) as a:
        assert a.members[0].refusal is None
