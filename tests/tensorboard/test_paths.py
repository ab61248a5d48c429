"""How server paths are shown, and which files the tab agrees to open."""

from __future__ import annotations

import os
from pathlib import Path

from tb_mfu_plugin.core.escape import json_bytes
from tb_mfu_plugin.tensorboard.paths import FileGate, PathView
from tb_mfu_plugin.tensorboard.runs import Source
from tb_mfu_plugin.trace.locate.locations import Location


def shown(view: PathView, obj: object) -> object:
    import json

    return json.loads(view.json(json_bytes(obj)))


def test_paths_are_relative_to_their_logdir():
    view = PathView([Source(None, "/srv/logs"), Source("theirs", "/srv/logs/team"), Source(None, "s3://b/x")])
    assert shown(
        view,
        {
            "file": "/srv/logs/run/w.1.pt.trace.json",
            "nested": "/srv/logs/team/run/w.json",  # the longer root wins
            "root": "/srv/logs",
            "error": "/srv/logs: no such file or directory; see '/srv/logs/a'",
            "sibling": "/srv/logs2/run/w.json",  # another folder that merely starts alike
            "remote": "s3://b/x/run",
        },
    ) == {
        "file": "run/w.1.pt.trace.json",
        "nested": "theirs/run/w.json",
        "root": "logs",
        "error": "logs: no such file or directory; see 'a'",
        "sibling": "/srv/logs2/run/w.json",
        "remote": "s3://b/x/run",
    }
    full = PathView([Source(None, "/srv/logs")], show_full_paths=True)
    assert shown(full, ["/srv/logs/run/w.json"]) == ["/srv/logs/run/w.json"]
    assert full.source_path(Source(None, "/srv/logs")) == "/srv/logs"
    assert view.source_path(Source("theirs", "/srv/logs/team")) == "team"


def test_roots_with_odd_characters():
    root = os.fsdecode(b'/srv/l"o\\g\xff')
    view = PathView([Source(None, root)])
    assert shown(view, [root + "/r/w.json", root]) == ["r/w.json", 'l"o\\g\\xff']


def test_the_gate_refuses_what_is_no_regular_file_and_links_out_when_confined(tmp_path: Path):
    logdir, outside = tmp_path / "logs", tmp_path / "outside"
    logdir.mkdir()
    outside.mkdir()
    (outside / "t.json").write_text("{}")
    (logdir / "own.json").write_text("{}")
    (logdir / "out.json").symlink_to(outside / "t.json")
    os.mkfifo(logdir / "fifo.json")
    (logdir / "dir.json").mkdir()
    free, confined = FileGate([Source(None, str(logdir))]), FileGate([Source(None, str(logdir))], confine=True)

    def at(name: str) -> Location:
        return Location.local(str(logdir / name))

    for gate in (free, confined):
        assert gate.refusal(at("own.json"), "w") is None
        assert gate.refusal(at("fifo.json"), "w") == "is not a regular file (a FIFO): not read"
        assert gate.refusal(at("dir.json"), "w") == "is not a regular file (a directory): not read"
        assert gate.refusal(at("gone.json"), "w") == "cannot be read: No such file or directory"
    assert free.refusal(at("out.json"), "w") is None
    assert "outside the logdir" in (confined.refusal(at("out.json"), "w") or "")


def test_names_equal_once_escaped_stay_two_runs(tmp_path: Path):
    from tb_mfu_plugin.tensorboard.runs import scan_sources

    logdir = tmp_path / "logs"
    for name in (b"r\xff", b"r\\xff"):  # the byte 0xff, and a backslash, 'x', 'f', 'f'
        os.makedirs(os.path.join(os.fsencode(logdir), name))
        with open(os.path.join(os.fsencode(logdir), name, b"w.1.pt.trace.json"), "w") as f:
            f.write("{}")
    scan = scan_sources([Source(None, str(logdir))])
    assert sorted(scan.runs) == ["r\\xff", "r\\xff (2)"]
    assert {os.fsencode(r.path.text).rsplit(b"/", 1)[1] for r in scan.runs.values()} == {b"r\xff", b"r\\xff"}
