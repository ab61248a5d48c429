"""Hostile HTTP servers on loopback, for the probe of remote logdirs.

An :class:`Origin` is one threaded HTTP/1.1 server on ``127.0.0.1`` (its own port, so its own
origin) with a table of routes, path -> behaviour. It records every request it answers
(method, path with query, headers), so that a test can say which origin was asked for what,
and with which headers. Unknown paths answer 404.

The behaviours are what a hostile or broken server does: redirect a listing or a file to
another origin, serve listings whose links climb out of the folder (``../``, ``%2e%2e/``,
``..%2f``), dead links, a ``Content-Length`` that lies, bodies that trickle one byte a
second or never end, ``Content-Encoding: gzip`` bombs, a 401 whose reason phrase echoes the
request's headers, listings of 100,000 links or of 50 MB, and a slowloris that sends its whole
answer, status line and headers included, a byte at a time. Each writer stops when the client
goes away or the server closes.
"""

from __future__ import annotations

import gzip
import html
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

Behaviour = Callable[["Handler"], None]


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # as sent, query included
    headers: dict[str, str]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    origin: Origin

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._answer()

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer()

    def _answer(self) -> None:
        self.origin.record(Request(self.command, self.path, dict(self.headers.items())))
        path = self.path.split("?", 1)[0]
        behaviour = self.origin.routes.get(path)
        if behaviour is None:  # a folder asked without its slash: moved, as Python's file server says
            behaviour = redirect(path + "/", 301) if path + "/" in self.origin.routes else not_found()
        try:
            behaviour(self)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    @property
    def head(self) -> bool:
        return self.command == "HEAD"

    @property
    def stopping(self) -> bool:
        return self.origin.stopping.is_set()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up on an endless body is what the probe does


class Origin:
    """One server on loopback; ``routes`` maps a path (no query) to its behaviour."""

    def __init__(self) -> None:
        self.routes: dict[str, Behaviour] = {}
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        handler = type("BoundHandler", (Handler,), {"origin": self})
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False  # endless writers must not hold the shutdown
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="hostile-http", daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str = "/") -> str:
        return self.base + path

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def asked(self, prefix: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(prefix)]

    def add_folder(self, prefix: str, folder: Path) -> list[str]:
        """Every file under ``folder`` served under ``prefix`` (ending in ``/``), with an index
        page for each folder as Python's file server writes it. Returns the file paths."""
        paths = []
        for p in sorted(folder.rglob("*")):
            rel = p.relative_to(folder).as_posix()
            if p.is_dir():
                continue
            paths.append(prefix + rel)
            self.routes[prefix + rel] = static(p.read_bytes())
        self._index(prefix, folder)
        return paths

    def _index(self, prefix: str, folder: Path) -> None:
        entries = sorted(folder.iterdir())
        self.routes.setdefault(prefix, listing(*(e.name + ("/" if e.is_dir() else "") for e in entries)))
        for e in entries:
            if e.is_dir():
                self._index(prefix + e.name + "/", e)

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


# -- behaviours -------------------------------------------------------------------------


def _headers(h: Handler, status: int, headers: dict[str, str], reason: str | None = None) -> None:
    h.send_response(status, reason)
    for k, v in headers.items():
        h.send_header(k, v)
    h.end_headers()


def static(body: bytes, content_type: str = "application/octet-stream", **extra: str) -> Behaviour:
    def answer(h: Handler) -> None:
        _headers(h, 200, {"Content-Type": content_type, "Content-Length": str(len(body)), **extra})
        if not h.head:
            h.wfile.write(body)

    return answer


def page(text: str) -> Behaviour:
    return static(text.encode(), "text/html; charset=utf-8")


def listing_html(links: Iterable[str]) -> str:
    items = "".join(f'<li><a href="{html.escape(link, quote=True)}">{html.escape(link)}</a></li>\n' for link in links)
    return f"<!DOCTYPE HTML>\n<html><body><h1>Index</h1><ul>\n{items}</ul></body></html>\n"


def listing(*links: str) -> Behaviour:
    """An index page linking to ``links`` as written (relative, absolute, hostile)."""
    return page(listing_html(links))


def redirect(location: str, status: int = 302) -> Behaviour:
    def answer(h: Handler) -> None:
        _headers(h, status, {"Location": location, "Content-Length": "0"})

    return answer


def not_found() -> Behaviour:
    def answer(h: Handler) -> None:
        body = b"not here"
        _headers(h, 404, {"Content-Type": "text/plain", "Content-Length": str(len(body))})
        if not h.head:
            h.wfile.write(body)

    return answer


def lying_length(body: bytes, declared: int) -> Behaviour:
    """``Content-Length: declared``, then only ``body`` and the connection closed."""

    def answer(h: Handler) -> None:
        _headers(h, 200, {"Content-Type": "application/octet-stream", "Content-Length": str(declared)})
        h.close_connection = True
        if not h.head:
            h.wfile.write(body)
            h.wfile.flush()

    return answer


def trickle(body: bytes, every_s: float = 1.0, content_type: str = "application/octet-stream") -> Behaviour:
    """The right headers at once (a HEAD is answered in full), then one byte each ``every_s``."""

    def answer(h: Handler) -> None:
        _headers(h, 200, {"Content-Type": content_type, "Content-Length": str(len(body))})
        if h.head:
            return
        for i in range(len(body)):
            if h.stopping:
                break
            h.wfile.write(body[i : i + 1])
            h.wfile.flush()
            time.sleep(every_s)
        h.close_connection = True

    return answer


def slowloris(body: bytes, every_s: float = 1.0, content_type: str = "application/octet-stream") -> Behaviour:
    """The whole answer a byte each ``every_s``, status line and headers included (a HEAD's too):
    a client waits for the headers as long as the server likes, unless its own deadline ends it."""

    def answer(h: Handler) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        raw = (head + "Server: slowloris\r\nConnection: close\r\n\r\n").encode() + (b"" if h.head else body)
        h.close_connection = True
        for i in range(len(raw)):
            if h.stopping:
                break
            h.wfile.write(raw[i : i + 1])
            h.wfile.flush()
            time.sleep(every_s)

    return answer


def chunked(
    pieces: Callable[[], Iterator[bytes]], content_type: str = "application/octet-stream", **extra: str
) -> Behaviour:
    """A chunked body of ``pieces()``, which may never end."""

    def answer(h: Handler) -> None:
        _headers(h, 200, {"Content-Type": content_type, "Transfer-Encoding": "chunked", **extra})
        h.close_connection = True
        if h.head:
            return
        for piece in pieces():
            if h.stopping:
                return
            h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        h.wfile.write(b"0\r\n\r\n")

    return answer


def endless_events() -> Iterator[bytes]:
    """A Kineto-looking document that never ends: instant events, each at an event boundary."""
    yield b'{"traceEvents": [\n  '
    block = b'{"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 1},\n  ' * 20000
    while True:
        yield block


def endless_kernels() -> Iterator[bytes]:
    """A Kineto-looking document of GPU kernels that never ends: each event is kept as a row of
    the decoder's tables, so a reader without a cap grows with every byte."""
    yield b'{"traceEvents": [\n  '
    kernel = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, "dur": 1, "args": {"device": 0}}'
    kernel += b",\n  "
    ts = 0
    while True:
        yield b"".join(kernel % (ts + i) for i in range(20000))
        ts += 20000


@cache
def _spaces_member() -> bytes:
    return gzip.compress(b" " * (1 << 20), 9)  # 1 MiB of blanks in about 1 KB


def gzip_bomb_pieces(endless: bool = True, members: int = 4096) -> Callable[[], Iterator[bytes]]:
    """A gzip stream (members one after another, as gzip allows) that opens a trace document and
    then inflates blanks about 1,000:1, without end or for ``members`` MiB."""

    def pieces() -> Iterator[bytes]:
        yield gzip.compress(b'{"traceEvents": [\n  ')
        member = _spaces_member()
        n = 0
        while endless or n < members:
            yield member * 64
            n += 64

    return pieces


def gzip_encoded_bomb(endless: bool = True, content_type: str = "application/octet-stream") -> Behaviour:
    """The bomb sent as ``Content-Encoding: gzip``: a client that decodes transfer encodings
    for its caller inflates it before any cap of the caller sees a byte."""
    return chunked(gzip_bomb_pieces(endless), content_type, **{"Content-Encoding": "gzip"})


def echo_401() -> Behaviour:
    """401, with the request's headers written into the reason phrase."""

    def answer(h: Handler) -> None:
        echoed = "; ".join(f"{k}: {v}" for k, v in h.headers.items())[:4000]
        body = b"who are you?"
        _headers(h, 401, {"Content-Type": "text/plain", "Content-Length": str(len(body))}, f"Unauthorized ({echoed})")
        if not h.head:
            h.wfile.write(body)

    return answer


def signed(body: bytes, params: Iterable[str]) -> Behaviour:
    """``body`` only for a request whose query carries every one of ``params`` (a presigned URL)."""
    wanted = tuple(params)

    def answer(h: Handler) -> None:
        query = h.path.partition("?")[2]
        names = {kv.split("=", 1)[0] for kv in query.split("&") if kv}
        if all(p in names for p in wanted):
            static(body, "application/gzip")(h)
        else:
            _headers(h, 403, {"Content-Length": "0"})

    return answer


@cache
def many_links_html(n: int = 100_000) -> str:
    """An index of ``n`` trace files (none of which exists)."""
    return listing_html(f"w{i}.1.pt.trace.json.gz" for i in range(n))


@cache
def padded_html(megabytes: int = 50, links: tuple[str, ...] = ("good/",)) -> bytes:
    """An index of ``links``, padded to ``megabytes`` MB with a comment."""
    head = listing_html(links).encode()
    return head + b"<!-- " + b"x" * (megabytes * 1_000_000 - len(head) - 9) + b" -->\n"
