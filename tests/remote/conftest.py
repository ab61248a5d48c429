"""Real servers on loopback for the remote-logdir tests: moto's S3 API (ThreadedMotoServer)
and Python's own HTTP file server, each counting the requests it answers."""

from __future__ import annotations

import functools
import itertools
import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from located import sample_logdir

pytest.importorskip("s3fs", reason="the S3 tests need the [s3] extra (s3fs)")
pytest.importorskip("moto.server", reason="the S3 tests need moto[server]")

import boto3  # noqa: E402  (after the skips: moto brings boto3)
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
# Two real one-file runs and a real 2-GPU run, committed with the repository.
RUNS = ("low_sm_efficiency", "pageable_copy_loop", "ddp_2gpu")
KEY_ID, SECRET = "AKIATESTMFU0000KEYID", "mfu-test-secret/5f3b9e0c1d7a4e22b6c8"


class CountingMotoServer(ThreadedMotoServer):
    """moto's threaded S3 server on a free loopback port, recording (method, path, query) of
    every request, so that a test can count the downloads (GETs of objects)."""

    def __init__(self) -> None:
        super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def _server_entry(self) -> None:
        app = DomainDispatcherApplication(create_backend_app)

        def counting(environ: dict[str, Any], start_response: Any) -> Any:
            with self._lock:
                self.requests.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], environ["QUERY_STRING"]))
            return app(environ, start_response)

        self._server = make_server(self._ip_address, self._port, counting, True)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def endpoint(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"

    def object_gets(self, bucket: str) -> list[str]:
        """Paths of the GETs of objects (downloads) in ``bucket``; listings are GETs of the bucket."""
        with self._lock:
            return [p for m, p, _ in self.requests if m == "GET" and p.startswith(f"/{bucket}/") and p != f"/{bucket}/"]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[CountingMotoServer]:
    server = CountingMotoServer()
    server.start()
    yield server
    server.stop()


_buckets = itertools.count()


class Bucket:
    """A fresh bucket on the moto server, and the storage options file that reaches it."""

    def __init__(self, server: CountingMotoServer, options_file: Path) -> None:
        self.server = server
        self.name = f"mfu-test-{next(_buckets)}"
        self.client = boto3.client(
            "s3", endpoint_url=server.endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
        )
        self.client.create_bucket(Bucket=self.name)
        self.options_file = options_file
        options = {f"s3://{self.name}/": {"endpoint_url": server.endpoint, "key": KEY_ID, "secret": SECRET}}
        options_file.write_text(json.dumps(options))

    def url(self, key: str = "") -> str:
        return f"s3://{self.name}/{key}"

    def upload_dir(self, local: Path, prefix: str) -> None:
        for f in sorted(p for p in local.rglob("*") if p.is_file()):
            self.client.upload_file(str(f), self.name, f"{prefix}/{f.relative_to(local).as_posix()}")

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=data)

    def downloads(self) -> list[str]:
        return self.server.object_gets(self.name)


@pytest.fixture
def bucket(moto_server: CountingMotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    """A bucket reached through a storage options file named by $TB_MFU_STORAGE_OPTIONS, with
    no AWS credentials in the environment (the file is the only place they are)."""
    import s3fs

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # botocore would look for an instance role at 169.254.169.254: tests reach loopback only
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
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
from ..plugin.conftest import serve  # noqa: E402, F401
