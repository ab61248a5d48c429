"""Slow remote sources beside a local run, with the tab's real worker processes (issue 22,
section 4): three trace files served one byte a second once held both workers, and the local
run was still not analysed after 241 s. Now remote files hold at most workers - 1 of them."""

from __future__ import annotations

import functools
import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.tensorboard.plugin import MfuPlugin

from ..tensorboard.conftest import Served, make_context, sample_file

STOP = threading.Event()


class Trickling(SimpleHTTPRequestHandler):
    """Python's file server, but a trace file's body comes one byte a second."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def copyfile(self, source: Any, outputfile: Any) -> None:
        if not self.path.endswith(".gz"):
            return super().copyfile(source, outputfile)
        while not STOP.is_set() and (byte := source.read(1)):
            outputfile.write(byte)
            outputfile.flush()
            STOP.wait(1.0)
        return None


@pytest.fixture
def slow_and_local(tmp_path: Path) -> Iterator[dict[str, Any]]:
    STOP.clear()
    local = tmp_path / "mine" / "good"
    local.mkdir(parents=True)
    shutil.copy(sample_file(), local / sample_file().name)
    served = tmp_path / "served"
    for i in range(3):
        (served / f"slow{i}").mkdir(parents=True)
        shutil.copy(sample_file("pageable_copy_loop"), served / f"slow{i}" / sample_file("pageable_copy_loop").name)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Trickling, directory=str(served)))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield {"local": tmp_path / "mine", "url": f"http://127.0.0.1:{httpd.server_address[1]}/", "tmp": tmp_path}
    STOP.set()
    httpd.shutdown()
    httpd.server_close()


def test_three_trickling_files_leave_a_worker_to_the_local_run(slow_and_local):
    """The slow source is listed first, so its files are queued before the local one."""
    s = slow_and_local
    ctx = make_context(None, f"slow:{s['url']},mine:{s['local']}", str(s["tmp"] / "cache"), workers="2")
    plugin = MfuPlugin(ctx, min_scan_interval_s=0.0)
    served = Served(plugin)
    try:
        assert plugin._index.wait_first_scan(120)
        deadline = time.monotonic() + 180
        while (r := served.get("/report?run=mine/good")).status_code == 202:
            assert time.monotonic() < deadline, "the local run was not analysed beside the slow ones"
            time.sleep(0.2)
        assert r.status_code == 200
        runs = {run["name"]: run for run in served.json("/runs")["runs"]}
        slow = [runs[f"slow/slow{i}"]["state"] for i in range(3)]
        assert sorted(slow) == ["loading", "queued", "queued"], slow  # one worker each, the other kept
        (cli,) = json.loads(to_json(analyze_path(str(s["local"] / "good"))))["runs"]
        assert _without(json.loads(r.get_data())) == _without(cli)
    finally:
        plugin._cache.close()


def _without(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without(v) for k, v in obj.items() if k not in ("file", "name")}
    if isinstance(obj, list):
        return [_without(v) for v in obj]
    return obj
