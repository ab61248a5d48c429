"""A real S3 API on loopback for tests: moto's threaded server, counting the requests it
answers, and fresh buckets reached through a storage options file (the remote tests and the
browser test of an S3-backed run share them). Import it after
``pytest.importorskip("moto.server")``."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.server import ThreadedMotoServer
from werkzeug.serving import make_server

KEY_ID, SECRET = "AKIATESTMFU0000KEYID", "mfu-test-secret/5f3b9e0c1d7a4e22b6c8"
# The environment a tool reading the bucket runs with: no AWS credentials, profile or
# instance role anywhere but the storage options file, and nothing beyond loopback.
AWS_VARS_CLEARED = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
)


def isolated_aws_env(tmp_dir: Path) -> dict[str, str]:
    """Variables to set so botocore finds no credentials of this machine (and asks no
    metadata endpoint for an instance role)."""
    return {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_dir / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_dir / "no-aws-credentials"),
    }


def env_without_aws(tmp_dir: Path) -> dict[str, str | None]:
    """Changes to a child's environment (None: removed) for ``isolated_aws_env``."""
    return {**dict.fromkeys(AWS_VARS_CLEARED), **isolated_aws_env(tmp_dir)}


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
