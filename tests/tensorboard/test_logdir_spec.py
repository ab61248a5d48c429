"""Which sources TensorBoard's own loader is left, and which only the tab reads (logdir_spec.py)."""

from __future__ import annotations

import argparse
import os
import zipfile
from pathlib import Path

import pytest

from tb_mfu_plugin.tensorboard.entry import MfuPluginLoader
from tb_mfu_plugin.tensorboard.logdir_spec import NO_TENSORBOARD_LOGDIR, move_unreadable_sources
from tb_mfu_plugin.tensorboard.runs import Source, sources_from_flags


def flags(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"logdir": "", "logdir_spec": "", "mfu_logdir_spec": None, **kw})


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "logs").mkdir()
    archive = tmp_path / "team.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("run/x.txt", "x")
    (tmp_path / "notes.txt").write_text("x")
    return {"logs": str(tmp_path / "logs"), "zip": str(archive), "file": str(tmp_path / "notes.txt")}


def test_tensorboard_keeps_its_local_folders_and_the_tab_gets_the_rest(places):
    spec = (
        f"mine:{places['logs']},theirs:http://h:1/logs/,b:s3://bucket/runs?X-Amz-Signature=abc,"
        f"arch:{places['zip']},f:{places['file']},later:/not/yet/there"
    )
    f = flags(logdir_spec=spec, mfu_logdir_spec="own:gs://b/x")
    notes = move_unreadable_sources(f)
    assert f.logdir_spec == f"mine:{places['logs']},later:/not/yet/there"  # a folder not there yet TB skips
    assert f.mfu_logdir_spec == (
        f"own:gs://b/x,theirs:http://h:1/logs/,b:s3://bucket/runs?X-Amz-Signature=abc,arch:{places['zip']},"
        f"f:{places['file']}"
    )
    kinds = ["an HTTP folder", "a s3:// URL", "an archive", "a file, not a folder"]
    assert len(notes) == 4 and all(k in n for k, n in zip(kinds, notes, strict=True))
    assert not [n for n in notes if "Signature" in n or "\n" in n]
    # the tab reads every source, each once, in TensorBoard's order then its own
    got = sources_from_flags(f)
    assert [s.name for s in got] == ["mine", "later", "own", "theirs", "b", "arch", "f"]


def test_with_nothing_left_tensorboard_gets_a_path_that_cannot_exist(places):
    f = flags(logdir=places["zip"])
    assert len(move_unreadable_sources(f)) == 1
    assert f.logdir == "" and f.logdir_spec == NO_TENSORBOARD_LOGDIR and f.mfu_logdir_spec == places["zip"]
    assert (
        not os.path.exists(NO_TENSORBOARD_LOGDIR) and os.path.realpath(NO_TENSORBOARD_LOGDIR) == NO_TENSORBOARD_LOGDIR
    )
    assert sources_from_flags(f) == [Source(None, os.path.realpath(places["zip"]))]


def test_a_local_logdir_alone_is_left_as_it_is(places):
    for f in (flags(logdir=places["logs"]), flags(logdir_spec=f"a:{places['logs']},b:{places['logs']}/x")):
        before = vars(f).copy()
        assert move_unreadable_sources(f) == [] and vars(f) == before


def test_object_stores_stay_with_tensorboard_when_asked(places):
    f = flags(logdir_spec=f"b:s3://bucket/runs,h:https://h/x/,a:{places['zip']}", mfu_tensorboard_reads_urls=True)
    move_unreadable_sources(f)
    assert f.logdir_spec == "b:s3://bucket/runs" and f.mfu_logdir_spec == f"h:https://h/x/,a:{places['zip']}"


def test_the_loader_moves_them_at_start_up(places):
    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", default="")
    parser.add_argument("--logdir_spec", default="")
    loader = MfuPluginLoader()
    loader.define_flags(parser)
    f = parser.parse_args(["--logdir_spec", f"mine:{places['logs']},arch:{places['zip']}"])
    loader.fix_flags(f)
    assert f.logdir_spec == f"mine:{places['logs']}" and f.mfu_logdir_spec == f"arch:{places['zip']}"
    f = parser.parse_args(["--logdir", places["logs"], "--mfu_logdir_spec", "theirs:http://h/x/"])
    loader.fix_flags(f)
    assert f.logdir == places["logs"] and [s.name for s in sources_from_flags(f)] == [None, "theirs"]
