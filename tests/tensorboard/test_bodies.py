"""The routes' bodies are the Structs of tensorboard/bodies.py, the ones frontend/src/route_types.ts
is generated from: each decodes strictly (no key missing, none unknown, every type right), and
/runs says which runs Compare and Strategies start with."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from tb_mfu_plugin.tensorboard.bodies import CompareBody, RunReport, RunsBody

from .conftest import RUN_A, RUN_B, SAMPLES


def decoded(raw: bytes, t: type) -> object:
    """``raw`` as a ``t``, which must hold all of it: encoded again it is the same JSON, so no key
    was unknown to the Struct (msgspec would drop it) and none was missing or mistyped."""
    body = msgspec.json.decode(raw, type=t)
    assert msgspec.to_builtins(body) == msgspec.json.decode(raw)
    return body


def test_runs_and_compare_bodies_decode_as_their_structs(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    runs = decoded(s.get("/runs").get_data(), RunsBody)
    assert isinstance(runs, RunsBody)
    assert [r.name for r in runs.runs] == [RUN_A, RUN_B] and {r.state for r in runs.runs} == {"ready"}
    assert runs.scanned and not runs.uploads.enabled and "--mfu_cache_dir none" in (runs.uploads.reason or "")
    body = decoded(s.get(f"/compare?run={RUN_A}&run={RUN_B}").get_data(), CompareBody)
    assert isinstance(body, CompareBody)
    assert [e.name for e in body.runs] == [RUN_A, RUN_B] and all(isinstance(e.report, RunReport) for e in body.runs)
    assert [r.run for r in body.strategies] == [RUN_A, RUN_B]


def test_runs_suggest_compare_and_strategies_sets(serve, tmp_path: Path):
    """On real runs: two of one model for Compare, one GPU count under several strategies for
    Strategies; until the runs are analysed, nothing, with a reason."""
    names = ("dataloader_stall", "ddp_2gpu", "fsdp2_2gpu", "gpt_naive_attention", "gpt_sdpa_fused", "tp_2gpu")
    if not all((SAMPLES / n).is_dir() for n in names):
        pytest.skip("sample traces not available")
    logdir = tmp_path / "logs"
    for n in names:
        shutil.copytree(SAMPLES / n, logdir / n)
    s = serve(logdir)
    s.settle()
    body = msgspec.json.decode(s.get("/runs").get_data(), type=RunsBody)
    assert body.suggested_compare.runs == ["gpt_naive_attention", "gpt_sdpa_fused"]
    assert body.suggested_strategies.runs == ["ddp_2gpu", "fsdp2_2gpu", "tp_2gpu"]
    assert "3 strategies" in body.suggested_strategies.reason


def test_the_partial_report_decodes_as_its_struct(serve, tmp_path: Path):
    """/report's 202 body while one rank of ddp_2gpu is still analysed."""
    import threading

    from tb_mfu_plugin.running.pipeline import analyze_file
    from tb_mfu_plugin.tensorboard.bodies import PartialReport

    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "ddp_2gpu", logdir / "ddp_2gpu")
    gate = threading.Event()

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        assert worker == "rank0" or gate.wait(60)
        return analyze_file(span, worker, options, progress)

    s = serve(logdir, analyze=analyze, workers="2")
    try:
        s.wait_for(lambda: s.plugin._index.scanned)
        s.wait_for(lambda: len(s.json("/report?run=ddp_2gpu", status=202)["workers"]) == 1)
        raw = s.get("/report?run=ddp_2gpu").get_data()
        partial = decoded(raw, PartialReport)
        assert isinstance(partial, PartialReport)
        assert [w.name for w in partial.workers] == ["rank0"] and [p.worker for p in partial.pending] == ["rank1"]
        assert partial.state == "loading" and partial.pending[0].state in ("queued", "loading")
    finally:
        gate.set()
    s.settle()


def test_a_pending_archive_member_is_named_by_its_own_file(serve, tmp_path: Path):
    """/report's 202 body of a zip logdir names the member still being analysed (its trace's file
    name), as /runs does, not the archive it is in."""
    import threading
    import zipfile

    from tb_mfu_plugin.running.pipeline import analyze_file
    from tb_mfu_plugin.tensorboard.bodies import PartialReport

    team = tmp_path / "team.zip"
    with zipfile.ZipFile(team, "w") as z:
        for f in sorted((SAMPLES / "ddp_2gpu").glob("*.pt.trace.json.gz")):
            z.write(f, f"ddp_2gpu/{f.name}")
    gate = threading.Event()

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        assert worker == "rank0" or gate.wait(60)
        return analyze_file(span, worker, options, progress)

    s = serve(team, analyze=analyze, workers="2")
    try:
        s.wait_for(lambda: s.plugin._index.scanned)
        s.wait_for(lambda: len(s.json("/report?run=ddp_2gpu", status=202)["workers"]) == 1)
        partial = decoded(s.get("/report?run=ddp_2gpu").get_data(), PartialReport)
        assert isinstance(partial, PartialReport)
        (pending,) = partial.pending
        rank1 = next((SAMPLES / "ddp_2gpu").glob("rank1.*.pt.trace.json.gz")).name
        assert pending.worker == "rank1" and pending.file == rank1
    finally:
        gate.set()
    s.settle()
