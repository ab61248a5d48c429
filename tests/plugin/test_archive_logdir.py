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
