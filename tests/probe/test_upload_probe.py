"""Hostile uploads over real HTTP on loopback (issue 22, sections 4 and 7): idle slots, stalled
and trickling bodies, DNS rebinding and hostile names, each with a known good upload beside it
whose run keeps the CLI's exact figures.

Every 127.x.y.z address is this machine, so a connection from 127.0.0.2 is another client.
"""

from __future__ import annotations

import json
import threading
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


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[TabServer]:
    """A server with the default idle time (60 s), which a stalled body used to hold its slot for."""
    ctx = make_context(None, None, str(tmp_path / "cache"))
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


def good_run(server: TabServer, batch: str, source: str) -> dict[str, Any]:
    """The known good upload: answered, and its run has the CLI's exact figures. Its answer."""
    status, uploaded = upload(server, batch, GOOD.name, GOOD.read_bytes(), source)
    assert status == 200, uploaded
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
    return dict(uploaded)


def _figures(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _figures(v) for k, v in obj.items() if k not in ("file", "name", "run")}
    if isinstance(obj, list):
        return [_figures(v) for v in obj]
    return obj


def test_sixteen_idle_uploads_from_one_address_wait_in_turn_not_refused(server):
    """Uploads that send a 20-byte file and never commit give their slot back after the stall
    time: the next ones from that address (every client behind one proxy) wait for it in the
    queue and say so, and another client goes at once."""
    answers = [upload(server, f"idleprobe{i:02d}", "t.json", b"{" + b" " * 18 + b"}", "127.0.0.9") for i in range(16)]
    assert all(status == 200 for status, _ in answers), answers
    assert all(a["queued_s"] == 0 for _, a in answers[:4])
    assert any(a["queued_s"] > 0 for _, a in answers[4:])  # they waited in the queue, and were told
    assert good_run(server, "goodprobe01", "127.0.0.2")["queued_s"] < IDLE_S  # another client, at once


def test_sixteen_stalled_bodies_behind_one_address_free_their_slots_in_seconds(proxied: TabServer):
    """Issue 35: 16 uploads from one address that send 20 bytes of their body and then nothing.
    Each is dropped a few seconds after its start (408), not after the 60 s idle time; an upload
    from the same address waits in the queue for a slot and gets one, with the wait in its answer."""
    stall = proxied.plugin._uploads.stall_s
    assert stall <= 5.0 and proxied.plugin._uploads.idle_s == 60.0
    socks = []
    for i in range(16):
        sock = proxied.connect("127.0.0.9", timeout=120)
        head = request_bytes("POST", f"/upload?batch=stalled{i:02d}&name=s.json", headers("localhost", 10_000))
        sock.sendall(head + b"{" + b" " * 19)
        socks.append(sock)
    time.sleep(0.5)  # the 16 are in: four hold the address's slots, twelve wait
    t0 = time.monotonic()
    answer = good_run(proxied, "goodproxied", "127.0.0.9")
    waited = time.monotonic() - t0
    print(f"16 stalled bodies: the good upload waited {answer['queued_s']:.1f} s for a slot, {waited:.1f} s in all")
    assert 0 < answer["queued_s"] <= waited, answer
    assert waited < 4 * stall + 20, f"waited {waited:.1f} s"  # four turns of four stalled bodies, not 60 s
    for sock in socks:
        status, hdrs, body = read_response(sock)
        sock.close()
        assert status == 408 and hdrs.get("connection") == "close", body
        assert f"no byte arrived for {stall:g} s at its start" in json.loads(body)["error"]


def test_a_queued_upload_that_gets_no_slot_is_told_why(server):
    """Four uploads of one client that stay busy: a fifth waits for its deadline, then a 429
    that says it waited and for how long."""
    socks = []
    for i in range(4):
        sock = server.connect("127.0.0.11")
        sock.sendall(request_bytes("POST", f"/upload?batch=busyprobe{i}&name=b.json", headers("localhost", 1 << 30)))
        sock.sendall(b"{")
        socks.append(sock)
    stop = threading.Event()

    def keep_sending() -> None:  # fast enough to hold their slots: 160 KiB/s each
        while not stop.is_set():
            for sock in socks:
                try:
                    sock.sendall(b" " * 8192)
                except OSError:
                    pass
            time.sleep(0.05)

    sender = threading.Thread(target=keep_sending, daemon=True)
    sender.start()
    time.sleep(0.3)
    status, body = upload(server, "queuedprobe", "t.json", b"{}", "127.0.0.11")
    stop.set()
    sender.join()
    for sock in socks:
        sock.close()
    assert status == 429, body
    assert "waited" in body["error"] and "for an upload slot" in body["error"], body
    good_run(server, "goodprobe07", "127.0.0.12")


def test_a_stalled_body_is_dropped_at_its_start_and_its_connection_closed(server):
    sock = server.connect("127.0.0.3")
    sock.sendall(request_bytes("POST", "/upload?batch=stallprobe&name=s.json", headers("localhost", 10_000), b"{   "))
    status, hdrs, body = read_response(sock)  # the server answers while the client still owes 9,996 bytes
    assert status == 408 and hdrs.get("connection") == "close"
    error = json.loads(body)["error"]  # the stall at its start, or the rate rule's, whichever looks first
    assert error.startswith("s.json: upload dropped: ") and ("no byte arrived for" in error or "slower" in error)
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
