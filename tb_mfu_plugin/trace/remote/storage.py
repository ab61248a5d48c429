"""fsspec file systems for remote locations, with credentials kept out of every output.

Credentials come from the standard places of each protocol's package (the
environment, ``~/.aws`` profiles, instance roles, ``gcloud`` logins, Azure's
environment) and, for what those cannot say (an endpoint, a profile, a key for one
bucket), from a *storage options file*: JSON or TOML, keyed by URL prefix, the
longest matching prefix wins::

    {"s3://team-bucket/": {"endpoint_url": "http://minio:9000", "profile": "team"},
     "gs://": {"token": "/home/me/gcs.json"}}

It is named by ``--storage-options FILE`` (``--mfu_storage_options`` in
TensorBoard) or ``$TB_MFU_STORAGE_OPTIONS``. Its values are passed to fsspec and
nowhere else: they are not part of any location, cache key, report or log line,
and every error text from a remote file system goes through :func:`redact`, which
blanks every value of the file (a header's value, a key, an endpoint: whatever its
name) and the credential variables; the faces blank :func:`secrets` (the credentials
among them) from all they show (``redact.shown``), where blanking a plain value such as
gcsfs's ``"anon"`` would rewrite kernel names (``(anonymous namespace)``).
``allowed_origins`` is ours: the other origins an http(s) logdir's redirects may
reach (``http_fs.py``), never passed to fsspec.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

from ...core.errors import TraceError, TraceNotFound
from ...core.escape import one_line
from ..locate.locations import scheme

STORAGE_OPTIONS_ENV = "TB_MFU_STORAGE_OPTIONS"
# The storage option that lets an http(s) logdir's redirects reach other origins (http_fs.py).
ALLOWED_ORIGINS = "allowed_origins"
_MAX_CONFIG_BYTES = 1 << 20
# Caps of remote reads and HTTP listings from the environment (http_fs.py reads them; here,
# below it, so that storage_error can name the stall timeout).
STALL_TIMEOUT_ENV = "TB_MFU_STALL_TIMEOUT"
DEFAULT_STALL_TIMEOUT_S = 60.0
LISTING_BYTES_ENV = "TB_MFU_MAX_LISTING_BYTES"
DEFAULT_LISTING_BYTES = 16 << 20  # an nginx index of 100,000 files is about 15 MB
LISTING_LINKS_ENV = "TB_MFU_MAX_LISTING_LINKS"
DEFAULT_LISTING_LINKS = 20_000  # each file without a size costs a HEAD request

# protocol -> (the package fsspec needs, our extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "az": ("adlfs", "azure"),
    "abfs": ("adlfs", "azure"),
    "abfss": ("adlfs", "azure"),
    "adl": ("adlfs", "azure"),
    "hdfs": ("pyarrow", "hdfs"),
    "http": ("aiohttp", "http"),
    "https": ("aiohttp", "http"),
}
# Credential variables of the protocols' packages, blanked from errors too.
_SECRET_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET",
)
# adlfs's words when no account is named anywhere (options, environment): no credentials.
_ADLFS_NO_ACCOUNT = "Must provide either a connection_string or account_name"
# aiohttp's parser errors (aiohttp.http_exceptions), raised as a ClientResponseError "400".
_HTTP_PARSE_ERRORS = frozenset(
    {
        "HttpProcessingError",
        "BadHttpMessage",
        "BadStatusLine",
        "LineTooLong",
        "InvalidHeader",
        "InvalidURLError",
        "TransferEncodingError",
        "ContentLengthError",
        "ContentEncodingError",
        "HttpBadRequest",
        "DecompressSizeError",
    }
)
_MIN_SECRET_CHARS = 4
# Credentials are long; the faces' pass over everything they show (kernel names included)
# blanks no shorter value, so that a word such as a profile's name cannot rewrite a figure.
_MIN_CREDENTIAL_CHARS = 8
# gcsfs's token modes: words, not secrets.
_NOT_CREDENTIALS = frozenset({"anon", "google_default", "cache", "cloud", "browser"})
# Option names whose values are credentials (anywhere in the name, any case), and "headers":
# every header the options send (Authorization, X-Api-Key, Cookie...) is one.
_CREDENTIAL_NAME = re.compile(
    r"key|secret|token|passw|credential|sas|sig|connection_string|private|auth|cookie|headers", re.I
)
_MAX_MESSAGE_CHARS = 300  # shorter values would blank ordinary words

_lock = threading.Lock()
_config: tuple[str | None, dict[str, dict[str, Any]]] | None = None  # (file, prefix -> options)


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def stall_timeout_s() -> float:
    """Seconds a read may wait for its next byte: ``$TB_MFU_STALL_TIMEOUT``, else 60."""
    return _env_number(STALL_TIMEOUT_ENV, DEFAULT_STALL_TIMEOUT_S)


def max_listing_bytes() -> int:
    """Bytes one index page may hold: ``$TB_MFU_MAX_LISTING_BYTES``, else 16 MiB."""
    return int(_env_number(LISTING_BYTES_ENV, DEFAULT_LISTING_BYTES))


def max_listing_links() -> int:
    """Links one walk of an HTTP logdir may follow: ``$TB_MFU_MAX_LISTING_LINKS``, else 20,000."""
    return int(_env_number(LISTING_LINKS_ENV, DEFAULT_LISTING_LINKS))


def use_storage_options(path: str | None) -> None:
    """Read the storage options from ``path`` (None: from ``$TB_MFU_STORAGE_OPTIONS``, if set).

    The path is also put in the environment, so that child processes (a decode
    helper, a Dask worker started from here) read the same file. Raises
    ``TraceError`` naming the file on any problem with it; never quotes its content.
    """
    global _config
    if path is None:
        path = os.environ.get(STORAGE_OPTIONS_ENV) or None
    table = _load(path) if path else {}
    with _lock:
        _config = (path, table)
    if path:
        os.environ[STORAGE_OPTIONS_ENV] = path


def _table() -> dict[str, dict[str, Any]]:
    with _lock:
        config = _config
    if config is None or config[0] != (os.environ.get(STORAGE_OPTIONS_ENV) or None):
        use_storage_options(None)
        with _lock:
            assert _config is not None
            config = _config
    return config[1]


def _load(path: str) -> dict[str, dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise TraceError(path, f"cannot read the storage options file ({exc.strerror or exc})") from None
    if len(data) > _MAX_CONFIG_BYTES:
        raise TraceError(path, "storage options file is larger than 1 MiB")
    try:
        if path.lower().endswith(".toml"):
            import tomllib  # Python 3.11+; JSON works everywhere

            table: Any = tomllib.loads(data.decode("utf-8"))
        else:
            table = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        # the parser's message may quote the text, which may hold a secret: give only where
        kind = "TOML" if path.lower().endswith(".toml") else "JSON"
        where = f" (line {exc.lineno})" if hasattr(exc, "lineno") else ""
        raise TraceError(path, f"storage options file is not valid {kind}{where}") from None
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise TraceError(path, 'storage options file must map URL prefixes to tables of options ({"s3://b/": {...}})')
    for prefix in table:
        if scheme(prefix) is None:
            raise TraceError(path, f"storage options key {prefix!r} is not a URL prefix like 's3://bucket/'")
    return table


def options_for(url: str) -> dict[str, Any]:
    """The storage options of the longest prefix of ``url`` in the file ({} when none)."""
    table = _table()
    best = max((p for p in table if url.startswith(p)), key=len, default=None)
    return dict(table[best]) if best is not None else {}


def _option_strings(credentials_only: bool) -> list[str]:
    """The string values of the storage options file (``_MIN_SECRET_CHARS`` or more), each
    whitespace-separated part of one too ("Bearer <token>": the token alone may be echoed);
    ``credentials_only``: only those under a credential's name or under ``headers``, of
    ``_MIN_CREDENTIAL_CHARS`` or more, and not one of gcsfs's token modes."""
    found: list[str] = []
    shortest = _MIN_CREDENTIAL_CHARS if credentials_only else _MIN_SECRET_CHARS

    def walk(value: Any, credential: bool) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if k != ALLOWED_ORIGINS:  # where redirects may go: the operator's words, shown in refusals
                    walk(v, credential or bool(_CREDENTIAL_NAME.search(str(k))))
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v, credential)
        elif isinstance(value, str) and (credential or not credentials_only):
            if credentials_only and value in _NOT_CREDENTIALS:
                return
            found.extend(w for w in {value, *value.split()} if len(w) >= shortest)

    try:
        walk(_table(), False)
    except TraceError:  # an unreadable options file holds no secret we could have used
        pass
    found.extend(v for k in _SECRET_ENV if len(v := os.environ.get(k, "")) >= shortest)
    return sorted(set(found), key=len, reverse=True)


def secrets() -> list[str]:
    """The credentials among the storage options (values under a secret-looking name, every
    header's value) and the credential variables: blanked from everything a face shows."""
    return _option_strings(credentials_only=True)


def option_values() -> list[str]:
    """Every value of the storage options file, whatever its name, and the credential variables:
    blanked from every error text (a server may echo any of them, in a reason phrase or a URL)."""
    return _option_strings(credentials_only=False)


def redact(text: str) -> str:
    """``text`` (an error, a message) with every storage option value and credential blanked."""
    for s in option_values():
        text = text.replace(s, "***")
    return text


def missing_extra(url: str, proto: str) -> TraceError:
    package, extra = EXTRAS.get(proto, (f"the fsspec implementation of {proto}://", ""))
    install = f": pip install 'tb_mfu_plugin[{extra}]'" if extra else ""
    return TraceError(url, f"{proto}:// needs {package}, which is not installed{install}")


def storage_error(url: str, exc: BaseException) -> TraceError:
    """A remote file system's exception as a one-line ``TraceError``, secrets blanked."""
    for e in _chain(exc):  # fsspec re-raises a refused or capped request as "not found"
        if isinstance(e, TraceError):
            return e
        refusal = getattr(e, "mfu_refusal", None)
        if isinstance(refusal, str):
            return TraceError(url, redact(refusal))
    if isinstance(exc, ImportError):
        return missing_extra(url, scheme(url) or "file")
    cause = exc.__cause__
    if (
        isinstance(exc, FileNotFoundError)
        and cause is not None
        and not isinstance(cause, FileNotFoundError)
        and (isinstance(cause, OSError) or isinstance(getattr(cause, "status", None), int))
    ):
        # fsspec's HTTP file system says "not found" for a server it could not reach, or that
        # answered its HEAD and GET with an error status
        exc = cause
    name = type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return TraceNotFound(url, "not found")
    status = getattr(exc, "status_code", None)
    http_status = getattr(exc, "status", None) if name == "ClientResponseError" else None
    if isinstance(http_status, int) and type(exc.__cause__).__name__ in _HTTP_PARSE_ERRORS:
        # aiohttp's parser refused the answer; its text quotes the bytes, which may be anything
        return TraceError(url, f"the server's answer is not valid HTTP ({type(exc.__cause__).__name__})")
    if isinstance(http_status, int):
        # aiohttp's text holds the server's reason phrase, which a server may fill with anything
        # (the request's own headers): only the status is shown
        denied = " (access denied)" if http_status in (401, 403) else ""
        return TraceError(url, f"the server answered HTTP {http_status}{denied}")
    if isinstance(exc, ConnectionError) or "Connect" in name:
        return TraceError(url, f"cannot reach the server ({name}: {redact(_message(exc))})")
    if (
        isinstance(exc, PermissionError)
        or name in ("AccessDenied", "ClientAuthenticationError")
        or status in (401, 403)
    ):
        return TraceError(url, f"access denied ({redact(_message(exc))})")
    if name in ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError") or (
        isinstance(exc, ValueError) and _ADLFS_NO_ACCOUNT in str(exc)
    ):
        return TraceError(
            url,
            "no credentials found (environment, profile or instance role), "
            "or name them in a storage options file (--storage-options)",
        )
    if isinstance(exc, TimeoutError) or "Timeout" in name:
        if scheme(url) in ("http", "https"):  # aiohttp's read timeout: the stall timeout of http_fs
            return TraceError(url, f"the server sent nothing for {stall_timeout_s():g} s (${STALL_TIMEOUT_ENV})")
        return TraceError(url, f"the storage did not answer in time ({name})")
    text = one_line(_message(exc) or name)[:_MAX_MESSAGE_CHARS]  # (a client's text may quote what it was sent)
    return TraceError(url, f"cannot read ({name}: {redact(text)})" if name not in text else redact(text))


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, each once."""
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out and len(out) < 16:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _message(exc: BaseException) -> str:
    """``str(exc)``, but of an Azure SDK error (one with an ``error_code``) only the first line
    and the code: the lines after it are a request id, a time and the response's XML body."""
    text = str(exc)
    code = getattr(exc, "error_code", None)
    if code is None or getattr(exc, "status_code", None) is None:
        return text
    code = str(getattr(code, "value", code))  # the SDK's enum: its value is the service's word
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"{first} ({code})" if code not in first else first
