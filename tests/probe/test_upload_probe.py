"""Hostile uploads over real HTTP on loopback (issue 22, sections 4 and 7): idle slots, stalled
and trickling bodies, DNS rebinding and hostile names, each with a known good upload beside it
whose run keeps the CLI's exact figures.

Every 127.x.y.z address is this machine, so a connection from 127.0.0.2 is another client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.tensorboard.plugin import MfuPlugin

from ..plugin.conftest import make_context, sample_file
from .tab_server import TabServer, exchange, read_response, request_bytes

IDLE_S = 1.0  # the servers' --mfu_upload_idle_seconds here: the default is 60
GOOD = sample_file("gpt_sdpa_fused")


def headers(host: str, length: int | None, **extra: str) -> dict[str, str]:
    out = {"Host": host, "X-MFU-Upload": "1", "Content-Type": "application/octet-stream", **extra}
    if length is not None:
        out["Content-Length"] = str(length)
    return out


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TabServer]:
    ctx = make_context(None, None, str(tmp_path / "cache"), upload_idle_seconds=IDLE_S)
    s = TabServer(MfuPlugin(ctx, min_scan_interval_s=0.0))
    yield s
    s.stop()
    s.plugin._cache.close()


def upload(server: TabServer, batch: str, name: str, data: bytes, source: str = "127.0.0.1") -> tuple[int, Any]:
    host = f"127.0.0.1:{server.port}"
    raw = request_bytes("POST", f"/upload?batch={batch}&name={quote(name)}", headers(host, len(data)), data)
    status, _, body = exchange(server, raw, source)
    return status, json.loads(body) if body else None


def commit(server: TabServer, batch: str, source: str = "127.0.0.1") -> tuple[int, Any]:
    raw = request_bytes("POST", f"/upload_done?batch={batch}", headers(f"127.0.0.1:{server.port}", 0))
    status, _, body = exchange(server, raw, source)
    return status, json.loads(body)


def good_run(server: TabServer, batch: str, source: str) -> None:
    """The known good upload: answered at once, and its run has the CLI's exact figures."""
    assert upload(server, batch, GOOD.name, GOOD.read_bytes(), source)[0] == 200
    status, done = commit(server, batch, source)
    assert status == 200 and done["state"] == "ready"
    plugin = server.plugin
    deadline = time.monotonic() + 60
    while done["run"] not in plugin._index.current().runs:
        assert time.monotonic() < deadline, "the upload never became a run"
        plugin._index.refresh()
        time.sleep(0.05)
    raw = request_bytes("GET", f"/report?run={quote(done['run'])}", {"Host": "localhost", "Connection": "close"})
    while (answer := exchange(server, raw))[0] == 202:  # its file is being analysed
        assert time.monotonic() < deadline, "the upload was never analysed"
        time.sleep(0.1)
    status, _, body = answer
    assert status == 200
    (cli,) = json.loads(to_json(analyze_path(str(GOOD.parent))))["runs"]
    assert _figures(json.loads(body)) == _figures(cli)


def _figures(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _figures(v) for k, v in obj.items() if k not in ("file", "name", "run")}
    if isinstance(obj, list):
        return [_figures(v) for v in obj]
    return obj


def test_sixteen_idle_uploads_hold_only_their_clients_quota_and_only_for_idle_s(server):
    for i in range(16):
        status, body = upload(server, f"idleprobe{i:02d}", "t.json", b"{" + b" " * 18 + b"}", "127.0.0.9")
        assert status == (200 if i < 4 else 429), body
    good_run(server, "goodprobe01", "127.0.0.2")  # another client, at once
    time.sleep(IDLE_S + 0.2)
    assert upload(server, "idleprobe99", "t.json", b"{}", "127.0.0.9")[0] == 200  # its own slots are free again


def test_a_stalled_body_is_dropped_after_idle_s_and_its_connection_closed(server):
    sock = server.connect("127.0.0.3")
    sock.sendall(request_bytes("POST", "/upload?batch=stallprobe&name=s.json", headers("localhost", 10_000), b"{   "))
    status, hdrs, body = read_response(sock)  # the server answers while the client still owes 9,996 bytes
    assert status == 408 and hdrs.get("connection") == "close"
    error = json.loads(body)["error"]  # the idle deadline, or the rate rule's, whichever looks first
    assert error.startswith("s.json: upload dropped: ") and ("no byte arrived for 1 s" in error or "slower" in error)
    assert sock.recv(1) == b""  # closed: the rest of that body can never be read as a request
    sock.close()
    incoming = Path(server.plugin._uploads.incoming) / "stallprobe"
    assert not list(incoming.glob("*"))
    good_run(server, "goodprobe02", "127.0.0.3")


def test_a_trickling_body_cannot_hold_its_slot(server):
    """A byte every 0.3 s never trips the idle deadline; the least rate ends it after idle_s."""
    sock = server.connect("127.0.0.4")
    sock.sendall(request_bytes("POST", "/upload?batch=trickleprobe&name=t.json", headers("localhost", 1 << 20), b"{"))
    sent, answered = 1, None
    sock.settimeout(0.3)
    deadline = time.monotonic() + 30
    while answered is None and time.monotonic() < deadline:
        try:
            sock.sendall(b" ")
            sent += 1
            answered = sock.recv(65536) or None
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
    sock.settimeout(10)
    while answered is not None and (more := sock.recv(65536)):  # the rest, until the server closes
        answered += more
    sock.close()
    assert answered is not None and answered.startswith(b"HTTP/1.1 408"), answered
    # the rate rule; on a loaded machine a send may come late enough for the idle deadline instead
    assert b"upload dropped: it arrives slower than 16 KiB/s" in answered or b"no byte arrived" in answered
    assert sent < 60  # ended after about idle_s, not when the 1 MiB it announced would have come
    good_run(server, "goodprobe03", "127.0.0.4")


@pytest.mark.parametrize(
    ("host", "origin", "status"),
    [
        ("evil.example:{port}", "http://evil.example:{port}", 403),  # DNS rebinding
        ("localhost.evil.example", "http://localhost.evil.example", 403),
        ("127.0.0.1:{port}", "http://evil.example", 403),  # a plain cross-site post
        ("127.0.0.1:{port}", "http://[::1", 400),  # malformed
        ("[::1", None, 400),
        ("127.0.0.1:{port}", "http://127.0.0.1:{port}", 200),  # the tab itself
        ("localhost:{port}", "http://localhost:{port}", 200),
    ],
)
def test_the_host_must_be_this_servers(server, host, origin, status):
    extra = {"Origin": origin.format(port=server.port)} if origin else {}
    raw = request_bytes(
        "POST", "/upload?batch=hostprobe1&name=t.json", headers(host.format(port=server.port), 2, **extra), b"{}"
    )
    got, _, body = exchange(server, raw, "127.0.0.5")
    assert got == status, body
    if status != 200:
        assert not (Path(server.plugin._uploads.incoming) / "hostprobe1").exists()
        assert b"Traceback" not in body
    good_run(server, "goodprobe04", "127.0.0.6")


def test_names_are_refused_or_become_the_run_the_answer_named(server):
    """Over the wire, with raw query bytes no client library would send (invalid UTF-8)."""
    data = sample_file().read_bytes()
    refused = {
        "../x.json.gz": "folder",
        "%2e%2e%2fx.json.gz": "folder",
        "C%3a%5cx.json.gz": "folder",
        "n%00ul.json.gz": "control",
        "bad%ff.json.gz": "not valid UTF-8",
        "%2ejson%2egz": "only a suffix",
        "L" * 300 + ".json.gz": "longer than 255 bytes",
    }
    for i, (name, why) in enumerate(refused.items()):
        target = f"/upload?batch=nameprobe{i:02d}&name={name}"
        raw = request_bytes("POST", target, headers("localhost", len(data)), data)
        status, _, body = exchange(server, raw, "127.0.0.7")
        assert status == 400 and why in json.loads(body)["error"], (name, body)
    status, done = upload(server, "nameprobe99", "my run (2).json.gz", data, "127.0.0.7")
    assert status == 200
    status, done = commit(server, "nameprobe99", "127.0.0.7")
    assert done["run"] == "uploads/my_run_2"
    good_run(server, "goodprobe05", "127.0.0.8")
    assert "uploads/my_run_2" in server.plugin._index.current().runs


def test_a_chunked_body_that_lies_or_stalls_is_a_4xx(server):
    chunked = {"Transfer-Encoding": "chunked"}
    raw = request_bytes("POST", "/upload?batch=chunkprobe1&name=c.json", headers("localhost", None, **chunked))
    status, _, body = exchange(server, raw + b"2\r\n{}\r\nzz\r\n", "127.0.0.10")  # a chunk size that is no number
    assert status == 400 and b"Traceback" not in body, body
    sock = server.connect("127.0.0.10")
    sock.sendall(raw.replace(b"chunkprobe1", b"chunkprobe2") + b"4\r\n{   \r\n")  # then nothing
    status, hdrs, body = read_response(sock)
    sock.close()
    assert status == 408 and "upload dropped" in json.loads(body)["error"]
    good_run(server, "goodprobe06", "127.0.0.10")
