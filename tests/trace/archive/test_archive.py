"""A .zip or .tar.gz of a logdir is a logdir: members streamed (never extracted), hostile
members refused one by one with a line naming archive and member, a listing over a cap read
up to it, a stream that bombs refused whole."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest
from located import reports_at, sample_logdir

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.core.errors import TraceError, TraceNotFound
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.archive.by_location import open_member_location
from tb_mfu_plugin.trace.archive.reader import Archive
from tb_mfu_plugin.trace.limits import KiB, Limits, MiB
from tb_mfu_plugin.trace.locate.listing import discover
from tb_mfu_plugin.trace.locate.locations import Location

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "sample_traces"
RUNS = ("low_sm_efficiency", "ddp_2gpu")
TRACE = "run_x/rank0.1.pt.trace.json.gz"


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    return sample_logdir(tmp_path / "logs", RUNS)


def zip_of(folder: Path, dest: Path, extra: list[tuple[zipfile.ZipInfo, bytes]] = ()) -> Path:  # type: ignore[assignment]
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            zf.write(f, f.relative_to(folder).as_posix())
        for info, data in extra:
            zf.writestr(info, data)
    return dest


def tar_of(folder: Path, dest: Path, extra: list[tuple[tarfile.TarInfo, bytes]] = ()) -> Path:  # type: ignore[assignment]
    with tarfile.open(dest, "w:gz") as tf:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            tf.add(f, f.relative_to(folder).as_posix())
        for info, data in extra:
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return dest


def reports(path: Path | str, limits: Limits | None = None) -> dict[str, dict]:
    return reports_at(path, AnalysisOptions(limits=limits or Limits()))


def sample_bytes() -> bytes:
    return next((SAMPLES / RUNS[0]).glob("*.pt.trace.json.gz")).read_bytes()


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_archive_reports_equal_the_folder_field_for_field(logdir: Path, tmp_path: Path, kind: str):
    arc = (zip_of if kind == "zip" else tar_of)(logdir, tmp_path / f"team.{kind}")
    local, packed = reports(logdir), reports(arc)
    assert sorted(packed) == sorted(local) == sorted(RUNS)
    assert all(not w["error"] for r in packed.values() for w in r["workers"])
    assert packed == local
    flops = packed[RUNS[0]]["workers"][0]["flops"]  # the sidecar was read out of the archive
    assert flops["user_flops_source"] == f"test sidecar (<root>/{RUNS[0]}/tb_mfu.json)"


def test_cli_analyzes_an_archive_and_extracts_nothing(logdir: Path, tmp_path: Path):
    arc = zip_of(logdir, tmp_path / "team_traces.zip")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    env = dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(arc), "--json"],
        capture_output=True,
        env=env,
        cwd=scratch,
        timeout=300,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert [r["name"] for r in doc["runs"]] == sorted(RUNS)
    assert doc["runs"][0]["workers"][0]["file"].startswith("zip://ddp_2gpu/rank0.")
    assert os.listdir(scratch) == []  # nothing staged in $TMPDIR or the working directory
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _member_errors(path: Path, limits: Limits | None = None) -> dict[str, str]:
    doc = json.loads(to_json(analyze_path(str(path), AnalysisOptions(limits=limits or Limits()))))
    return {w["file"]: w["error"] for r in doc["runs"] for w in r["workers"] if w["error"]}


def _zip_info(name: str, mode: int | None = None) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    if mode is not None:
        info.create_system = 3
        info.external_attr = mode << 16
    return info


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_hostile_zip_members_are_refused_one_by_one(logdir: Path, tmp_path: Path):
    data = sample_bytes()
    hostile = [
        (_zip_info("../../outside/rank0.1.pt.trace.json.gz"), data),
        (_zip_info("/etc/rank1.1.pt.trace.json.gz"), data),
        (_zip_info("C:/evil/rank2.1.pt.trace.json.gz"), data),
        (_zip_info("run_x/rank3.1.pt.trace.json", stat.S_IFLNK | 0o777), b"/etc/passwd"),
        (_zip_info("run_x/rank4.1.pt.trace.json", stat.S_IFIFO | 0o644), b""),
        (_zip_info(TRACE), data),
        (_zip_info(TRACE), data),
    ]
    arc = zip_of(logdir, tmp_path / "team.zip", hostile)
    errors = _member_errors(arc)
    expect = {
        "../../outside/rank0.1.pt.trace.json.gz": "climbs out of the archive with '..' (zip-slip)",
        "/etc/rank1.1.pt.trace.json.gz": "is an absolute path",
        "C:/evil/rank2.1.pt.trace.json.gz": "is an absolute path",
        "run_x/rank3.1.pt.trace.json": "is a symbolic link",
        "run_x/rank4.1.pt.trace.json": "is a special file",
        TRACE: "appears 2 times",
    }
    assert len(errors) == 6
    for member, why in expect.items():
        (line,) = [e for f, e in errors.items() if f.startswith(f"zip://{member}::")]
        assert f"member {member!r} of team.zip {why}" in line and "refused, not read" in line
        assert "\n" not in line
    # the good runs are analysed all the same, equal to the folder's
    good = reports(arc)
    assert {k: good[k] for k in RUNS} == reports(logdir)


def test_hostile_tar_members_are_refused_one_by_one(logdir: Path, tmp_path: Path):
    def info(name: str, kind: bytes, size: int = 0, target: str = "") -> tarfile.TarInfo:
        ti = tarfile.TarInfo(name)
        ti.type, ti.size, ti.linkname = kind, size, target
        return ti

    data = sample_bytes()
    hostile = [
        (info("../rank0.1.pt.trace.json.gz", tarfile.REGTYPE, len(data)), data),
        (info("run_x/rank1.1.pt.trace.json", tarfile.SYMTYPE, target="/etc/passwd"), b""),
        (info("run_x/rank2.1.pt.trace.json", tarfile.LNKTYPE, target="/etc/shadow"), b""),
        (info("run_x/rank3.1.pt.trace.json", tarfile.CHRTYPE), b""),
        (info("run_x/rank4.1.pt.trace.json", tarfile.FIFOTYPE), b""),
    ]
    arc = tar_of(logdir, tmp_path / "team.tar.gz", hostile)
    errors = _member_errors(arc)
    whys = [
        "climbs out of the archive",
        "is a symbolic link",
        "is a hard link",
        "is a special file",
        "is a special file",
    ]
    assert len(errors) == len(hostile)
    for (ti, _), why in zip(hostile, whys, strict=True):
        (line,) = [e for f, e in errors.items() if f.startswith(f"tar://{ti.name}::")]
        assert f"member {ti.name!r} of team.tar.gz {why}" in line
    good = reports(arc)
    assert {k: good[k] for k in RUNS} == reports(logdir)


def test_a_zip_bomb_member_is_refused_by_its_ratio(logdir: Path, tmp_path: Path):
    # 80 MiB of one byte deflates about 1000:1; real traces deflate 10-30:1
    arc = zip_of(logdir, tmp_path / "team.zip", [(_zip_info("run_x/rank0.1.pt.trace.json"), b" " * (80 * MiB))])
    with Archive.open(Location.parse(str(arc))) as a:
        (m,) = [m for m in a.members if m.name.startswith("run_x/")]
        assert m.refusal is not None and "over the max_compression_ratio cap" in m.refusal
        with pytest.raises(TraceError, match="zip bomb"):
            a.open_member(m.name)


def test_a_tar_gz_bomb_is_refused_whole_while_it_inflates(tmp_path: Path):
    arc = tmp_path / "bomb.tar.gz"
    with tarfile.open(arc, "w:gz", compresslevel=1) as tf:
        ti = tarfile.TarInfo("run/rank0.1.pt.trace.json")
        ti.size = 96 * MiB
        tf.addfile(ti, io.BytesIO(bytes(ti.size)))
    assert arc.stat().st_size < 1 * MiB
    with pytest.raises(TraceError, match="gzip expands .* over the max_compression_ratio cap") as exc:
        discover(Location.parse(str(arc)))
    assert str(exc.value).startswith(str(arc))


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_archive_caps_are_configurable(logdir: Path, tmp_path: Path, kind: str):
    """A listing over a cap on members or bytes is read up to it, with one line that says what
    was left out (issue 35: the whole archive was refused, and the good runs in it with it)."""
    arc = (zip_of if kind == "zip" else tar_of)(logdir, tmp_path / f"team.{kind}")
    notes: list[str] = []
    runs = discover(Location.parse(str(arc)), limits=Limits(max_archive_members=2), warn=notes.append)
    assert [(r.name, len(r.files)) for r in runs] == [("ddp_2gpu", 2)]  # members in the archive's order
    left = "2 members left out, the first 2 read" if kind == "zip" else "the members after the first 2 left out"
    assert notes == [
        f"{arc}: more than 2 members: over the max_archive_members cap "
        f"(raise it with --max-archive-members, in TensorBoard --mfu_max_archive_members): {left}"
    ]
    notes.clear()
    runs = discover(Location.parse(str(arc)), limits=Limits(max_archive_bytes=500 * KiB), warn=notes.append)
    assert [(r.name, len(r.files)) for r in runs] == [("ddp_2gpu", 1)]  # 386 KB, then 366 KB more
    assert len(notes) == 1 and "members of more than 500 KiB decompressed: over the max_archive_bytes cap" in notes[0]
    # a member over the trace cap is refused by its declared size, the others are read
    errors = _member_errors(arc, Limits(max_trace_bytes=100 * KiB))
    assert errors and all("over the max_trace_bytes cap" in e for e in errors.values())


def test_cli_names_the_archive_cap_and_its_flag(logdir: Path, tmp_path: Path):
    arc = tar_of(logdir, tmp_path / "team.tar.gz")
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(arc), "--max-archive-members", "1"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr  # the first member is read
    assert out.stderr.strip() == (
        f"tb-mfu: {arc}: more than 1 members: over the max_archive_members cap "
        "(raise it with --max-archive-members, in TensorBoard --mfu_max_archive_members): "
        "the members after the first 1 left out"
    )


def test_member_streams_and_file_objects(logdir: Path, tmp_path: Path):
    arc = zip_of(logdir, tmp_path / "team.zip")
    want = next((logdir / "ddp_2gpu").glob("rank1.*")).read_bytes()
    name = f"ddp_2gpu/{next((logdir / 'ddp_2gpu').glob('rank1.*')).name}"
    with open_member_location(Location.parse(f"zip://{name}::{arc}")) as f:
        assert f.read() == want
    # an archive from a file object (the tab's upload): the same members and bytes
    for kind, path in (("zip", arc), ("tar", tar_of(logdir, tmp_path / "team.tgz"))):
        with open(path, "rb") as raw, Archive.open(raw, name="upload." + kind) as a:
            assert [m.name for m in a.traces()] == sorted(m for m in a._by_name if m.endswith(".gz"))
            with a.open_member(name) as f:
                assert f.read() == want
            with pytest.raises(TraceNotFound):
                a.open_member("no/such.pt.trace.json")


def test_not_an_archive_is_one_line(tmp_path: Path):
    bad = tmp_path / "broken.zip"
    bad.write_bytes(b"PK\x03\x04 not really" + zlib.compress(b"x"))
    with pytest.raises(TraceError, match=r"broken.zip: not a readable zip archive \(BadZipFile"):
        discover(Location.parse(str(bad)))
