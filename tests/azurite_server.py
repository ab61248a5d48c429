"""A real Azure Blob API on loopback for tests: Microsoft's emulator, Azurite (a Node program
pinned in tests/emulators/package.json), counting the requests it answers from its access log,
and fresh containers reached through a storage options file. ``azurite_path()`` is None when
node or the emulator is not installed, so that the tests can skip with the reason."""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

EMULATORS = Path(__file__).resolve().parent / "emulators"
# An account of our own rather than Azurite's well-known devstoreaccount1 key (public, and
# in every Azure SDK's docs): a key nothing else prints, so a test finding it means we leaked it.
ACCOUNT = "mfutest"
ACCOUNT_KEY = base64.b64encode(b"tb-mfu test account key, never printed 7f3e").decode()
# Credential variables of the Azure SDKs: cleared, so the options file is the only way in.
AZURE_VARS_CLEARED = (
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CLIENT_ID",
    "AZURE_STORAGE_CLIENT_SECRET",
    "AZURE_STORAGE_TENANT_ID",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_TENANT_ID",
)
_LISTENING = re.compile(r"listens on (http://\S+?):(\d+)")
# Azurite's access log (morgan's "combined" format): "GET /account/container/blob?... HTTP/1.1" 206
_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<target>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def azurite_path() -> str | None:
    """The ``azurite-blob`` of tests/emulators (``npm ci`` there), when node is installed too."""
    exe = EMULATORS / "node_modules" / ".bin" / "azurite-blob"
    return str(exe) if exe.exists() and shutil.which("node") else None


def azurite_version() -> str:
    package = EMULATORS / "node_modules" / "azurite" / "package.json"
    return str(json.loads(package.read_text())["version"])


class AzuriteServer:
    """``azurite-blob`` in memory on a free loopback port, its access log read by a thread
    into ``requests`` as (method, path, query, status)."""

    def __init__(self, exe: str, workdir: Path) -> None:
        env = {**os.environ, "AZURITE_ACCOUNTS": f"{ACCOUNT}:{ACCOUNT_KEY}"}
        self.requests: list[tuple[str, str, str, int]] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._log: list[str] = []
        self.endpoint = ""
        self.proc = subprocess.Popen(
            [exe, "--inMemoryPersistence", "--blobHost", "127.0.0.1", "--blobPort", "0",
             "--skipApiVersionCheck", "--loose", "--disableTelemetry"],
            cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, name="azurite-log", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 60
        while not self._ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("azurite-blob did not start: " + " | ".join(self._log[-5:]))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not self._ready.is_set():
                self._log.append(line.strip())
                if m := _LISTENING.search(line):
                    self.endpoint = f"{m[1]}:{m[2]}"
                    self._ready.set()
                continue
            if m := _ACCESS.search(line):
                path, _, query = m["target"].partition("?")
                with self._lock:
                    self.requests.append((m["method"], path, query, int(m["status"])))

    @property
    def blob_endpoint(self) -> str:
        return f"{self.endpoint}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.blob_endpoint};"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)


_containers = itertools.count()


class Container:
    """A fresh container on the Azurite server, and the storage options file that reaches it
    (the connection string, account key included, is only there)."""

    def __init__(self, server: AzuriteServer, options_file: Path, protocol: str = "az") -> None:
        from azure.storage.blob import BlobServiceClient

        self.server = server
        self.name = f"mfu-test-{next(_containers)}"
        self.protocol = protocol
        self.service = BlobServiceClient.from_connection_string(server.connection_string)
        self.client = self.service.create_container(self.name)
        self.options_file = options_file
        self.write_options({f"{p}://{self.name}/": {"connection_string": server.connection_string}
                            for p in ("az", "abfs")})  # fmt: skip

    def write_options(self, options: dict[str, dict[str, object]]) -> None:
        self.options_file.write_text(json.dumps(options))

    def url(self, key: str = "", protocol: str | None = None) -> str:
        return f"{protocol or self.protocol}://{self.name}/{key}"

    def upload_dir(self, local: Path, prefix: str) -> None:
        for f in sorted(p for p in local.rglob("*") if p.is_file()):
            self.put(f"{prefix}/{f.relative_to(local).as_posix()}", f.read_bytes())

    def put(self, key: str, data: bytes) -> None:
        self.client.upload_blob(key, data, overwrite=True)

    def downloads(self) -> list[str]:
        """Paths (``/account/container/blob``) of the GETs of blobs: listings and properties
        are GETs of the container with a query, or HEADs."""
        prefix = f"/{ACCOUNT}/{self.name}/"
        time.sleep(0.3)  # the access log line follows the answer
        with self.server._lock:
            return [p for m, p, _, _ in self.server.requests if m == "GET" and p.startswith(prefix) and p != prefix]
