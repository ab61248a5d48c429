"""Hostile route parameters (issue 22, section 6): a table of values run through every route of
the tab, by TensorBoard's WSGI app and over a real socket with raw request bytes. Nothing may
answer 5xx or show a traceback; names that are no run are 4xx; every run the tab lists (local
folders with odd names, an HTTP listing whose links hold traversal sequences) answers on every
route; and the good run beside them keeps the CLI's exact figures.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_file, analyze_path
from tb_mfu_plugin.tensorboard.cache import AnalysisCache
from tb_mfu_plugin.tensorboard.plugin import MfuPlugin

from ..tensorboard.conftest import Served, make_context, sample_file
from .tab_server import TabServer, exchange

GOOD = "good_run"
# Folder names a teammate's job could write (bytes: some are not UTF-8).
ODD_FOLDERS = [b"%2e%2e", b"file:", b"a\\..\\b", b"nl\nx", b"\xff\xfe", b"...", b" sp ", b"q?x=1&run=y", b"h#f"]
# Values of a parameter, as the text of a query (percent-escapes are the client's).
HOSTILE = [
    "trav/../secret", "trav%2F..%2Fsecret", "%2e%2e", "%252e%252e", "..%2f..%2fetc%2fpasswd", "file:///etc/passwd",
    "..", "/", "", "%00", "run%00x", "%ff", "%", "%zz", "%c0%af", "%ed%a0%80", "%e2%80%ae", "%0d%0aX-Injected:%201",
    "<script>alert(1)</script>", "a" * 5000, "%u002e", "\\..\\..\\windows", "C:%5Cwindows", "${jndi:ldap://x}",
    "CON", "~root", "-1", "99999999999999999999", "1e309", "null", "[]", "{}", "true",
]  # fmt: skip
ROUTES = [
    "/report?run={v}", "/download?run={v}", "/download?run={good}&format={v}",
    "/download?run={good}&format=html&worker={v}", "/compare?run={v}", "/compare?run={good}&run={v}",
    "/runs?refresh={v}", "/runs?{v}={v}", "/report?run={good}&run={v}", "/{v}", "/index.js?{v}",
    "/upload_done?batch={v}", "/upload?batch={v}&name=t.json",
]  # fmt: skip


class Traversing(SimpleHTTPRequestHandler):
    """A folder index whose links leave the folder in every spelling the probe used."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/trav":
            name = sample_file().name
            links = ["../secret/", f"..%2fsecret/{name}", f"%2e%2e/secret/{name}", "file:///etc/", "ok/"]
            body = "".join(f'<a href="{h}">x</a>' for h in links).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


@pytest.fixture
def tab(tmp_path: Path) -> Iterator[tuple[Served, TabServer]]:
    logdir = tmp_path / "logs"
    src = sample_file()
    (logdir / GOOD).mkdir(parents=True)
    shutil.copy(src, logdir / GOOD / src.name)
    for name in ODD_FOLDERS:
        folder = os.path.join(os.fsencode(logdir), name)
        os.makedirs(folder)
        shutil.copy(src, os.path.join(folder, os.fsencode(src.name)))
    served = tmp_path / "served"
    for d in ("secret", "trav/ok"):
        (served / d).mkdir(parents=True)
        shutil.copy(src, served / d / src.name)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Traversing, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    spec = f"mine:{logdir},trav:http://127.0.0.1:{httpd.server_address[1]}/trav/"
    ctx = make_context(None, spec, str(tmp_path / "cache"))
    cache = AnalysisCache(AnalysisOptions(), None, 2, analyze=analyze_file)
    plugin = MfuPlugin(ctx, cache=cache, min_scan_interval_s=0.0)
    s = Served(plugin)
    s.settle()
    real = TabServer(plugin)
    yield s, real
    real.stop()
    httpd.shutdown()
    httpd.server_close()


def test_no_hostile_value_answers_5xx_on_any_route(tab):
    s, real = tab
    good = f"mine/{GOOD}"
    seen: dict[int, int] = {}
    for value in HOSTILE:
        for route in ROUTES:
            target = route.format(v=value, good=quote(good))
            for status, body in (_wsgi(s, target), _raw(real, target)):
                seen[status] = seen.get(status, 0) + 1
                assert status < 500, (target, status, body[:300])
                assert b"Traceback" not in body, target
    assert set(seen) <= {200, 202, 400, 403, 404, 405, 414}, seen
    # names of no run are 4xx on every route that looks a run up (a listing that is followed out of
    # its folder may make "trav/../secret" a run: that is the remote lister's to refuse)
    runs = {r["name"] for r in s.json("/runs")["runs"]}
    for value in ("trav/../secret", "trav/%2e%2e/secret", "file:///etc/passwd", "..", "run%00x", "%2e%2e"):
        if value.replace("%2e", ".") in runs or value in runs:
            continue
        for route in ("/report?run={v}", "/download?run={v}", "/compare?run={v}"):
            assert 400 <= _wsgi(s, route.format(v=value, good=""))[0] < 500, (route, value)
    _good_run_has_the_cli_figures(s)


def test_every_listed_run_answers_on_every_route(tab):
    s, real = tab
    runs = [r["name"] for r in s.json("/runs")["runs"]]
    assert f"mine/{GOOD}" in runs and len(runs) > len(ODD_FOLDERS)
    for name in runs:
        for route in ("/report?run={n}", "/download?run={n}&format=json", "/download?run={n}", "/compare?run={n}"):
            target = route.format(n=quote(name, errors="surrogateescape"))
            for status, body in (_wsgi(s, target), _raw(real, target)):
                assert status in (200, 202), (name, target, status, body[:300])
    _good_run_has_the_cli_figures(s)


def _wsgi(s: Served, target: str) -> tuple[int, bytes]:
    r = s.client.get("/data/plugin/mfu" + target)
    return r.status_code, r.get_data()


def _raw(real: TabServer, target: str) -> tuple[int, bytes]:
    """The request line as the bytes given: a browser or curl may send what no library builds."""
    line = f"GET /data/plugin/mfu{target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    status, _, body = exchange(real, line.encode("utf-8", "surrogateescape"))
    return status, body


def _good_run_has_the_cli_figures(s: Served) -> None:
    report = s.json(f"/report?run=mine/{GOOD}")
    (cli,) = json.loads(to_json(analyze_path(str(sample_file().parent))))["runs"]
    strip = ("file", "name")
    assert _without(report, strip) == _without(cli, strip)


def _without(obj: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(obj, dict):
        return {k: _without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [_without(v, keys) for v in obj]
    return obj
