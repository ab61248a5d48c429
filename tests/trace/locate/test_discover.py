from __future__ import annotations

import os
from pathlib import Path

from tb_mfu_plugin.trace.locate.discover import discover_runs


def _touch(p: Path) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"{}")


def test_runs_workers_spans(tmp_path: Path) -> None:
    _touch(tmp_path / "run_a" / "host_12.1700000000002.pt.trace.json.gz")
    _touch(tmp_path / "run_a" / "host_12.1700000000001.pt.trace.json.gz")
    _touch(tmp_path / "run_a" / "rank1.1700000000005.pt.trace.json")
    _touch(tmp_path / "run_a" / "notes.txt")
    _touch(tmp_path / "team" / "run_b" / "rank0.pt.trace.json.gz")
    _touch(tmp_path / "empty" / "x.json")
    runs = discover_runs(str(tmp_path))
    assert [r.name for r in runs] == ["run_a", "team/run_b"]
    a = runs[0]
    assert [w.name for w in a.workers] == ["host_12", "rank1"]
    assert [s.span for s in a.workers[0].spans] == ["1700000000001", "1700000000002"]
    assert runs[1].workers[0].name == "rank0" and runs[1].workers[0].spans[0].span == ""


def test_single_file_of_any_name(tmp_path: Path) -> None:
    f = tmp_path / "rank-0.json.gz"
    _touch(f)
    (run,) = discover_runs(str(f))
    assert run.workers[0].name == "rank-0"
    assert run.files[0].path.text == str(f)


def test_symlinks_followed_and_cycles_safe(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "run"
    _touch(real / "w.1.pt.trace.json")
    logdir = tmp_path / "logs"
    logdir.mkdir()
    os.symlink(real, logdir / "linked")
    os.symlink(logdir, logdir / "linked" / "loop")  # a cycle back to the top
    runs = discover_runs(str(logdir))
    assert [r.name for r in runs] == ["linked"]


def test_missing_path_has_no_runs(tmp_path: Path) -> None:
    assert discover_runs(str(tmp_path / "nope")) == []
