"""A location is parsed once, at the face (issue 24): ``tb-mfu analyze`` parses the path it is
given, and the listing, the opener, the decoder's stream, the archive reader, the remote
storage and the sidecar lookup below it take the parsed ``Location`` and never parse again."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from located import sample_logdir

from tb_mfu_plugin.cli.main import main
from tb_mfu_plugin.trace.locate.locations import Location

from .conftest import HttpServer

RUN = "low_sm_efficiency"  # one real trace file, with a sidecar beside it (sample_logdir)


@pytest.fixture
def places(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The same run as a local folder, in a local zip (its member read), and as a URL over HTTP."""
    logdir = sample_logdir(tmp_path / "logs", (RUN,))
    archive = tmp_path / "team.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in (logdir / RUN).iterdir():
            zf.write(f, f"{RUN}/{f.name}")
    server = HttpServer(tmp_path)
    try:
        yield {
            "local": str(logdir / RUN),
            "archive": str(archive),
            "url": server.url(f"logs/{RUN}/"),
        }
    finally:
        server.stop()


@pytest.mark.parametrize("where", ["local", "archive", "url"])
def test_analyze_parses_the_location_it_is_given_once(
    where: str, places: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parsed: list[str] = []
    real = Location.parse

    def counted(text: str) -> Location:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(Location, "parse", staticmethod(counted))
    # one worker: the file is analysed in this process, where the parses are counted
    assert main(["analyze", places[where], "--json", "--workers", "1"]) == 0
    assert parsed == [places[where]]  # the CLI's one parse; nothing below parsed again
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    (worker,) = run["workers"]
    assert worker["error"] is None and f"{RUN}/rank0." in worker["file"]
    # the sidecar beside the trace was found through the parsed location's parent()
    sidecar = {
        "local": f"{places['local']}/tb_mfu.json",
        "archive": f"zip://{RUN}/tb_mfu.json::{places['archive']}",
        "url": f"{places['url']}tb_mfu.json",
    }[where]
    assert f"test sidecar ({sidecar})" in json.dumps(worker)
