"""A real GCS JSON API on loopback for tests: gcp-storage-emulator's request handler, in
memory, on a threaded server that records the requests it answers, and fresh buckets
reached through a storage options file. Import it after
``pytest.importorskip("gcp_storage_emulator")``."""

from __future__ import annotations

import itertools
import json
import socket
import threading
from functools import partial
from http.server import ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import gcsfs.core
from gcp_storage_emulator.handlers import buckets
from gcp_storage_emulator.server import RequestHandler
from gcp_storage_emulator.storage import Storage

EMULATOR = f"gcp-storage-emulator {version('gcp-storage-emulator')}"
# What would take gcsfs past the options file: the emulator's own variable, a key file.
GCS_VARS_CLEARED = ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT")


class GcsServer:
    """The emulator's handler on a free loopback port. Its own ``create_server`` runs a
    one-request-at-a-time ``HTTPServer``; ours is threaded, as a real store is concurrent
    (a pool of decode workers reads several objects at once)."""

    def __init__(self) -> None:
        self.storage = Storage(use_memory_fs=True)
        self.requests: list[tuple[str, str, str]] = []  # (method, path, query)
        self._lock = threading.Lock()
        requests, lock = self.requests, self._lock

        class Counting(RequestHandler):
            def parse_request(self) -> bool:  # every request passes here once, before its do_*
                ok = super().parse_request()
                if ok:
                    parts = urlsplit(self.path)
                    with lock:
                        requests.append((self.command, unquote(parts.path), parts.query))
                return ok

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Counting, self.storage))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="gcs-emulator", daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def media_gets(self, bucket: str) -> list[str]:
        """Object names of the downloads (GETs of media) from ``bucket``; listings and
        metadata GETs are not downloads."""
        out = []
        with self._lock:
            seen = list(self.requests)
        for method, path, query in seen:
            media = path.startswith("/download/") or parse_qs(query).get("alt") == ["media"]
            marker = f"/b/{bucket}/o/"
            if method == "GET" and media and marker in path:
                out.append(path.split(marker, 1)[1])
        return out

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port_endpoint() -> str:
    """An http endpoint on loopback where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


_buckets = itertools.count()


class GcsBucket:
    """A fresh bucket on the emulator, and the storage options file that reaches it."""

    def __init__(self, server: GcsServer, options_file: Path) -> None:
        self.server = server
        self.name = f"mfu-gcs-{next(_buckets)}"
        buckets.create_bucket(self.name, server.storage)
        # uploads go through the emulator's JSON API, as a teammate's gsutil/gcsfs would
        self.fs = gcsfs.core.GCSFileSystem(endpoint_url=server.endpoint, token="anon", skip_instance_cache=True)
        self.options_file = options_file
        self.options: dict[str, dict[str, Any]] = {
            f"gs://{self.name}/": {"endpoint_url": server.endpoint, "token": "anon"}
        }
        self.write_options()

    def write_options(self) -> None:
        self.options_file.write_text(json.dumps(self.options))

    def url(self, key: str = "") -> str:
        return f"gs://{self.name}/{key}"

    def upload_dir(self, local: Path, prefix: str) -> None:
        for f in sorted(p for p in local.rglob("*") if p.is_file()):
            self.put(f"{prefix}/{f.relative_to(local).as_posix()}", f.read_bytes())

    def put(self, key: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.name}/{key}", data)

    def info(self, key: str) -> dict[str, Any]:
        self.fs.invalidate_cache()
        return dict(self.fs.info(f"{self.name}/{key}"))

    def downloads(self) -> list[str]:
        return self.server.media_gets(self.name)
