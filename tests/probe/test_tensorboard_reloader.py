"""TensorBoard's own loading beside the tab's remote and archive sources (issue 22, section 6).

An HTTP folder or an archive in ``--logdir_spec`` used to kill TensorBoard's reloader thread
(RecursionError, "not a directory"), and with it every other dashboard. A real ``tensorboard``
runs here with a local logdir holding a scalar run, beside an HTTP folder (Python's file
server on loopback) and a zip, given either way the README documents:

- ``--logdir LOCAL --mfu_logdir_spec theirs:URL,arch:ZIP`` (sources only the tab reads);
- ``--logdir_spec mine:LOCAL,theirs:URL,arch:ZIP`` (moved into the tab's own list at start).

TensorBoard's scalars must list the local run, *and a run written after start-up* (so its
reloader is still running), and the tab's /runs every source with the CLI's figures.
"""

from __future__ import annotations

import functools
import json
import shutil
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.scalars.tbevents import ScalarWriter

from ..e2e.conftest import TensorBoard, _tensorboard_cmd
from ..tensorboard.conftest import SAMPLES

LOCAL_RUN, REMOTE_RUN, ARCHIVE_RUN = "low_sm_efficiency", "pageable_copy_loop", "gpt_sdpa_fused"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def sources(tmp_path: Path) -> Iterator[dict[str, Any]]:
    if not _tensorboard_cmd():
        pytest.skip("tensorboard is not installed")
    local = tmp_path / "mine"
    shutil.copytree(SAMPLES / LOCAL_RUN, local / LOCAL_RUN)
    scalars(local / "train", "loss")
    served = tmp_path / "served"
    shutil.copytree(SAMPLES / REMOTE_RUN, served / "logs" / REMOTE_RUN)
    archive = tmp_path / "team.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in sorted((SAMPLES / ARCHIVE_RUN).glob("*.pt.trace.json.gz")):
            z.write(f, f"{ARCHIVE_RUN}/{f.name}")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/logs/"
    yield {"local": local, "url": url, "archive": archive, "tmp": tmp_path}
    httpd.shutdown()
    httpd.server_close()


def scalars(run_dir: Path, tag: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with ScalarWriter(str(run_dir)) as w:
        for step in range(5):
            w.add_scalar(tag, 1.0 / (step + 1), step)


def wait_json(tb: TensorBoard, route: str, ok: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        body = tb.get_json(route)
        if ok(body):
            return body
        assert time.monotonic() < deadline, f"{route} never met the condition: {json.dumps(body)[:600]}"
        time.sleep(0.5)


def check(tb: TensorBoard, s: dict[str, Any], local_prefix: str) -> None:
    train, later = f"{local_prefix}train", f"{local_prefix}later"
    tags = wait_json(tb, "/data/plugin/scalars/tags", lambda b: "loss" in b.get(train, {}))
    assert list(tags[train]) == ["loss"]
    # a run written after start-up appears too: TensorBoard's reloader is still running
    scalars(s["local"] / "later", "accuracy")
    wait_json(tb, "/data/plugin/scalars/tags", lambda b: "accuracy" in b.get(later, {}))
    assert train in tb.get_json("/data/runs") and later in tb.get_json("/data/runs")
    body = tb.wait_analysed()
    names = {r["name"]: r for r in body["runs"]}
    expected = {f"{local_prefix}{LOCAL_RUN}", f"theirs/{REMOTE_RUN}", f"arch/{ARCHIVE_RUN}"}
    assert expected <= set(names), sorted(names)
    assert {names[n]["state"] for n in expected} == {"ready"}, {n: names[n]["errors"] for n in expected}
    assert body["errors"] == []
    for name, where in ((f"arch/{ARCHIVE_RUN}", SAMPLES / ARCHIVE_RUN), (f"theirs/{REMOTE_RUN}", SAMPLES / REMOTE_RUN)):
        report = tb.get_json(f"/data/plugin/mfu/report?run={quote(name)}")
        (cli,) = json.loads(to_json(analyze_path(str(where))))["runs"]
        assert figures(report) == figures(cli), name
    assert not [line for line in tb.log if "Traceback" in line or "RecursionError" in line], "".join(tb.log[-30:])


def figures(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: figures(v) for k, v in obj.items() if k not in ("file", "name", "notes")}
    if isinstance(obj, list):
        return [figures(v) for v in obj]
    return obj


def start(s: dict[str, Any], logdir: Path | str, *extra: str) -> TensorBoard:
    """``tensorboard --logdir LOGDIR`` (a Path) or ``--logdir_spec SPEC`` (a str), reloading every second."""
    cache = s["tmp"] / f"cache-{len(list(s['tmp'].glob('cache-*')))}"
    return TensorBoard(logdir, cache, "--reload_interval", "1", "--mfu_workers", "2", *extra)


def test_the_tabs_own_flag_leaves_tensorboard_its_local_logdir(sources):
    spec = f"theirs:{sources['url']},arch:{sources['archive']}"
    tb = start(sources, sources["local"], "--mfu_logdir_spec", spec)
    try:
        check(tb, sources, local_prefix="")
        assert not [line for line in tb.log if "cannot read" in line]
    finally:
        tb.stop()


def test_remote_and_archive_entries_of_logdir_spec_are_moved_to_the_tab(sources):
    spec = f"mine:{sources['local']},theirs:{sources['url']},arch:{sources['archive']}"
    tb = start(sources, spec)
    try:
        check(tb, sources, local_prefix="mine/")
        notes = [line for line in tb.log if "TensorBoard's own loading cannot read" in line]
        assert len(notes) == 2 and "an HTTP folder" in notes[0] and "an archive" in notes[1], notes
    finally:
        tb.stop()
