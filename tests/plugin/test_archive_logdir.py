"""The tab over an archive (``--logdir team.zip``, or beside a folder in ``--logdir_spec``):
the same runs and reports as the CLI's, the archive checked as the file that is opened."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from urllib.parse import quote

from located import add_sidecar, reports_at, runs_by_name

from .conftest import RUN_A, RUN_B, sample_file


def _team_zip(tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    for run in (RUN_A, RUN_B):
        (logs / run).mkdir(parents=True)
        shutil.copy(sample_file(run), logs / run)
    add_sidecar(logs / RUN_A)
    arc = tmp_path / "team.zip"
    with zipfile.ZipFile(arc, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(p for p in logs.rglob("*") if p.is_file()):
            zf.write(f, f.relative_to(logs).as_posix())
    return arc


def test_tab_reads_an_archive_logdir(serve, tmp_path: Path):
    arc = _team_zip(tmp_path)
    s = serve(logdir_spec=f"theirs:{arc}", confine_to_logdir=True)
    s.settle()
    body = s.json("/runs")
    assert body["errors"] == []
    assert [r["name"] for r in body["runs"]] == [f"theirs/{RUN_A}", f"theirs/{RUN_B}"]
    assert all(r["state"] == "ready" for r in body["runs"])
    span = body["runs"][0]["workers"][0]["spans"][0]
    assert span["file"] == sample_file(RUN_A).name and span["errors"] == []
    expected = reports_at(arc)
    for run in (RUN_A, RUN_B):
        got = s.json(f"/report?run={quote(f'theirs/{run}')}")
        # the tab shows the archive by its --logdir_spec name, as it shows a folder's root
        text = json.dumps({"runs": [got]})
        assert '::theirs"' in text and str(arc) not in text
        shown = runs_by_name(text.replace("::theirs", f"::{arc}"), str(arc))
        assert shown == {f"theirs/{run}": {**expected[run], "name": f"theirs/{run}"}}
    assert str(tmp_path) not in s.get("/runs").get_data(as_text=True)  # no server path shown


# -- hostile archives (issue 22): every other run keeps working ------------------------


def _figures(report: dict) -> dict:
    """A run's report without its names and file locations: what must not change."""
    if isinstance(report, dict):
        return {k: _figures(v) for k, v in report.items() if k not in ("file", "name", "run")}
    if isinstance(report, list):
        return [_figures(v) for v in report]
    return report


def _hostile_sources(tmp_path: Path) -> tuple[dict[str, Path], dict[str, bytes]]:
    from probe import hostile_archives as H

    good = {f"good/{sample_file(RUN_A).name}": sample_file(RUN_A).read_bytes()}
    d = tmp_path / "hostile"
    d.mkdir()
    bad_name = H.entry(b"bad/rank\xff\xfe.1.pt.trace.json", b"{}", flags=H.UTF8_FLAG)
    broken = d / "broken.zip"
    broken.write_bytes(H.zip_of_files(d / "tmp.zip", good).read_bytes()[:-30])  # its directory cut off
    bombs = [H.zeros_entry(f"b/r{i}.1.pt.trace.json", 60 << 20) for i in range(100)]
    return {
        "badname": H.zip_of_files(d / "badname.zip", good, [bad_name]),
        "bomb": H.zip_of_files(d / "bomb.zip", good, bombs),
        "longname": H.long_header_bomb(d / "longname.tar.gz", b"L", 2500 * 10**6, good),
        "redos": H.pax_redos(d / "redos.tar.gz", 2, good),
        "tiny": H.reinflation_bomb(d / "tiny.tar.gz", 20, 8 << 20, good),
        "broken": broken,
    }, good


def test_the_tab_lists_every_good_run_beside_hostile_archives(serve, two_runs, tmp_path: Path):
    sources, _ = _hostile_sources(tmp_path)
    spec = ",".join([f"local:{two_runs}", *(f"{n}:{p}" for n, p in sources.items())])
    s = serve(logdir_spec=spec)
    s.settle()
    r = s.get("/runs")
    assert r.status_code == 200
    body = json.loads(r.get_data())
    errors = body["errors"]
    assert len(errors) == 3 and all("\n" not in e and "Traceback" not in e for e in errors), errors
    # each archive shown by its --logdir_spec name, as a folder's root is; the bomb's members
    # are left out in one line, and the good run beside them is read (issue 35)
    assert errors[0].startswith("bomb: its members declare 5.86 GiB") and "--mfu_max_archive_ratio" in errors[0]
    assert errors[0].endswith("100 members left out, those that inflate most; the others read")
    assert errors[1].startswith("longname: gzip expands")
    assert errors[2] == "broken: not a readable zip archive (BadZipFile: File is not a zip file)"
    runs = {run["name"]: run for run in body["runs"]}
    good = [f"local/{RUN_A}", f"local/{RUN_B}", "badname/good", "bomb/good", "redos/good", "tiny/good"]
    assert set(runs) == {*good, "badname", "redos", "tiny/tiny"}  # refused members in the archive's own run
    assert all(runs[n]["state"] == "ready" for n in good)
    refused = runs["badname"]["workers"][0]["spans"][0]["errors"]
    assert refused == ["member 'bad/rank\\xff\\xfe.1.pt.trace.json' of badname.zip has a name that is not UTF-8, "
                       "though its entry says it is: refused, not read"]  # fmt: skip
    for name in runs:  # every run answers, none with a 500
        assert s.get(f"/report?run={quote(name, safe='')}").status_code == 200, name
    cli = reports_at(two_runs)
    want = _figures(cli[RUN_A])
    for name in (f"local/{RUN_A}", "badname/good", "bomb/good", "redos/good", "tiny/good"):
        assert _figures(s.json(f"/report?run={quote(name, safe='')}")) == want, name
    assert _figures(s.json(f"/report?run={quote(f'local/{RUN_B}', safe='')}")) == _figures(cli[RUN_B])


def test_an_uploaded_archive_with_a_bad_name_hides_no_other_run(serve, two_runs, tmp_path: Path):
    from .test_upload import upload_files

    sources, _ = _hostile_sources(tmp_path)
    s = serve(two_runs, cache_dir=str(tmp_path / "cache"))
    done = upload_files(s, "batch0001", [sources["badname"]])
    assert done["run"] == "uploads/badname"
    trace = tmp_path / "later" / sample_file(RUN_B).name
    trace.parent.mkdir()
    shutil.copy(sample_file(RUN_B), trace)
    assert upload_files(s, "batch0002", [trace])["state"] == "ready"
    want = {RUN_A, RUN_B, "uploads/badname/good", "uploads/badname", "uploads/rank0"}
    s.wait_for(lambda: {r["name"] for r in s.json("/runs")["runs"]} == want)
    s.settle()
    body = s.json("/runs")
    assert body["errors"] == []
    states = {r["name"]: r["state"] for r in body["runs"]}
    assert states == {**dict.fromkeys(want - {"uploads/badname"}, "ready"), "uploads/badname": "error"}
    assert _figures(s.json("/report?run=uploads/badname/good")) == _figures(reports_at(two_runs)[RUN_A])


def test_an_uploaded_archive_with_no_trace_says_so(serve, two_runs, tmp_path: Path):
    """The upload is stored ("ready"), but it makes no run: /runs says why, by its run name,
    instead of a run that never appears; the other runs are listed as before."""
    from .test_upload import upload_files

    arc = tmp_path / "notes.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("README.txt", "no traces here")
    s = serve(two_runs, cache_dir=str(tmp_path / "cache"))
    assert upload_files(s, "batch0001", [arc])["run"] == "uploads/notes"
    want = "uploads/notes: the archive holds no trace files (*.pt.trace.json[.gz])"
    s.wait_for(lambda: s.json("/runs")["errors"] == [want])
    assert {r["name"] for r in s.json("/runs")["runs"]} == {RUN_A, RUN_B}
