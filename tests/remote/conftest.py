"""Real servers on loopback for the remote-logdir tests: moto's S3 API (ThreadedMotoServer)
and Python's own HTTP file server, each counting the requests it answers."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from located import sample_logdir

pytest.importorskip("s3fs", reason="the S3 tests need the [s3] extra (s3fs)")
pytest.importorskip("moto.server", reason="the S3 tests need moto[server]")

from s3_server import AWS_VARS_CLEARED, Bucket, CountingMotoServer, isolated_aws_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
from .scenarios import RUNS  # noqa: E402


@pytest.fixture(scope="session")
def moto_server() -> Iterator[CountingMotoServer]:
    server = CountingMotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def bucket(moto_server: CountingMotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    """A bucket reached through a storage options file named by $TB_MFU_STORAGE_OPTIONS, with
    no AWS credentials in the environment (the file is the only place they are)."""
    import s3fs

    for var in AWS_VARS_CLEARED:
        monkeypatch.delenv(var, raising=False)
    for var, value in isolated_aws_env(tmp_path).items():
        monkeypatch.setenv(var, value)
    options = tmp_path / "storage_options.json"
    b = Bucket(moto_server, options)
    monkeypatch.setenv("TB_MFU_STORAGE_OPTIONS", str(options))
    yield b
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    """A local logdir with copies of the sample runs (tests never write into sample_traces)."""
    return sample_logdir(tmp_path / "logs", RUNS)


class CountingHandler(SimpleHTTPRequestHandler):
    gets: list[str]

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        self.gets.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
        pass


class HttpServer:
    def __init__(self, root: Path) -> None:
        self.gets: list[str] = []
        handler = type("Handler", (CountingHandler,), {"gets": self.gets})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "") -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/{path}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def http_server(logdir: Path) -> Iterator[HttpServer]:
    """Python's file server over ``logdir``'s parent, on loopback."""
    server = HttpServer(logdir.parent)
    yield server
    server.stop()


# The plugin tests' server of the tab (TensorBoard's WSGI app over our plugin).
from ..tensorboard.conftest import serve  # noqa: E402, F401
