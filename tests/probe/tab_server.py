"""The tab served over real HTTP on loopback: TensorBoard's WSGI app over our plugin, behind
werkzeug's threaded server (the server class TensorBoard's own ``WerkzeugServer`` extends), so
that sockets, deadlines and raw request bytes are those a real client meets."""

from __future__ import annotations

import socket
import threading
from typing import Any

from tensorboard.backend import application
from werkzeug.serving import make_server

from tb_mfu_plugin.tensorboard.plugin import MfuPlugin

PREFIX = "/data/plugin/mfu"


class TabServer:
    def __init__(self, plugin: MfuPlugin) -> None:
        self.plugin = plugin
        self.httpd = make_server("127.0.0.1", 0, application.TensorBoardWSGI([plugin]), threaded=True)
        self.port = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def connect(self, source: str = "127.0.0.1", timeout: float = 30.0) -> socket.socket:
        """A connection from ``source`` (any 127.x.y.z is this machine: a client of its own)."""
        return socket.create_connection(("127.0.0.1", self.port), timeout, source_address=(source, 0))

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def request_bytes(method: str, target: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {PREFIX}{target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one response, read until the server closes or the body ends."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    length = int(headers.get("content-length", "-1"))
    while length < 0 or len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(status_line.split()[1]), headers, body


def exchange(server: TabServer, raw: bytes, source: str = "127.0.0.1") -> tuple[int, dict[str, str], Any]:
    with server.connect(source) as sock:
        sock.sendall(raw)
        return read_response(sock)
