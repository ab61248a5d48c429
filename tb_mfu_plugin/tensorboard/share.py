"""The tab's routes for sharing: upload in (``/upload``, ``/upload_done``), reports out (``/download``).

TensorBoard 2.21 has no CSRF defence of its own (its POST routes only read), so
the upload routes bring theirs, all of which a browser enforces for us:

- a custom header, ``X-MFU-Upload: 1``: a page of another origin cannot send it
  without a CORS preflight, which TensorBoard never answers, so the browser
  never sends that page's request;
- ``Origin``, when the browser sends one, must be this server (its Host, or the
  X-Forwarded-Host a proxy in front sets), and ``Sec-Fetch-Site`` must say
  ``same-origin``;
- the name in ``Host`` must be one this server answers to (``hosts``): a page
  that reached the server by DNS rebinding is same-origin with itself, but it
  sends its own name;
- the body must be ``application/octet-stream``: no HTML form can post that.

A header that does not parse (``Origin: http://[::1``) is a 400, never a 500.

An upload streams its body to disk as it reads it (``uploads.UploadArea``); the
cap is enforced per chunk read, not after. While it reads, the connection's
socket has a deadline of the area's ``idle_s``: a body that stalls ends in a 408
and the connection is closed. ``--mfu_disable_upload`` turns the routes off
(403) and the tab hides its drop zone.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

import msgspec
from tensorboard import errors
from tensorboard.backend import http_util
from werkzeug import wrappers
from werkzeug.exceptions import ClientDisconnected

from ..analysis.report import SCHEMA_VERSION, Report, RunReport
from ..core.escape import json_bytes
from ..core.version import __version__ as TOOL_VERSION
from ..trace.limits import parse_size
from .bodies import (
    ErrorBody,
    RunStatus,
    SourceInfo,
    UploadCancelled,
    UploadCommitted,
    UploadedFile,
    UploadsStatus,
    saved_listing,
)
from .hosts import AllowedHosts, client_key, hostname_of
from .offline import read_bundle, report_page
from .runs import Source
from .upload_files import safe_part, shown
from .uploads import DEFAULT_MAX_BYTES, IDLE_TTL_S, UploadArea, UploadError

UPLOAD_HEADER = "X-MFU-Upload"
ViewFn = Callable[[bytes], bytes]  # PathView.json: server paths made relative


def upload_area(
    flags: object, cache_dir: str | None, sources: Sequence[Source], on_commit: Callable[[], None]
) -> tuple[UploadArea | None, str | None]:
    """The upload area the flags ask for, or None and why upload is off."""
    if getattr(flags, "mfu_disable_upload", False):
        return None, "upload is turned off on this server (--mfu_disable_upload)"
    if not cache_dir:
        return None, "upload needs a cache directory, and this server has none (--mfu_cache_dir none)"
    text = getattr(flags, "mfu_upload_max_bytes", None)
    max_bytes = parse_size(str(text)) if text is not None else DEFAULT_MAX_BYTES
    idle = getattr(flags, "mfu_upload_idle_seconds", None)
    area = UploadArea(cache_dir, max_bytes, on_commit, idle_s=float(idle) if idle is not None else IDLE_TTL_S)
    real = os.path.realpath(area.root)
    for s in sources:
        root = os.path.realpath(s.path) if not s.is_remote else None
        if root and (real == root or real.startswith(root.rstrip(os.sep) + os.sep)):
            # Uploads would be written into that logdir, and listed twice.
            return None, "upload is off: the cache directory is inside a logdir"
    return area, None


def uploads_status(area: UploadArea | None, reason: str | None) -> UploadsStatus:
    """What ``/runs`` says about upload, for the tab's drop zone."""
    if area is None:
        return UploadsStatus(enabled=False, reason=reason, max_bytes=0)
    return UploadsStatus(enabled=True, reason=None, max_bytes=area.max_bytes)


def check_upload_request(request: wrappers.Request, hosts: AllowedHosts) -> None:
    """Refuse (403) a request a page of another origin could have made; see the module's docstring."""
    if request.method != "POST":
        raise errors.InvalidArgumentError("upload is a POST")
    if request.headers.get(UPLOAD_HEADER) != "1":
        raise errors.PermissionDeniedError(f"upload needs the {UPLOAD_HEADER} header (sent by the MFU tab)")
    named = [request.host]  # the names the request reached us by: each must be one of ours
    origin = request.headers.get("Origin")
    if origin is not None:
        try:
            netloc = urlsplit(origin).netloc.lower()
            if netloc:  # "null" (a sandboxed page, a file) has none: it is another site, below
                hostname_of(netloc)
        except ValueError:
            raise errors.InvalidArgumentError("upload refused: its Origin header does not parse") from None
        forwarded = [h.strip() for h in request.headers.get("X-Forwarded-Host", "").split(",") if h.strip()]
        if netloc == request.host.lower():
            pass
        elif netloc in (h.lower() for h in forwarded):
            named.append(netloc)
        else:
            raise errors.PermissionDeniedError("upload refused: the request comes from another site")
    for netloc in named:
        _check_host(netloc, hosts)
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site != "same-origin":
        raise errors.PermissionDeniedError("upload refused: the request comes from another site")
    ctype = request.mimetype or ""
    if request.path.endswith("/upload") and ctype != "application/octet-stream":
        raise errors.InvalidArgumentError("upload a file's bytes as application/octet-stream")


def _check_host(netloc: str, hosts: AllowedHosts) -> None:
    try:
        host = hostname_of(netloc)
    except ValueError:
        raise errors.InvalidArgumentError("upload refused: its Host header does not parse") from None
    if not hosts.allows(host):
        raise errors.PermissionDeniedError(
            f"upload refused: this server does not answer to the name {shown(host)!r} (DNS rebinding?); "
            "if it does, add the name to --mfu_allowed_hosts"
        )


def serve_upload(
    request: wrappers.Request, area: UploadArea | None, reason: str | None, hosts: AllowedHosts
) -> wrappers.Response:
    """One file of an upload: ``POST upload?batch=ID&name=FILE`` with the file as the body."""
    check_upload_request(request, hosts)
    if area is None:
        raise errors.PermissionDeniedError(reason or "upload is off")
    sock = request.environ.get("werkzeug.socket")  # the dev server's connection (TensorBoard's server)
    before = _deadline(sock, area.idle_s)
    try:
        body = area.receive(
            request.args.get("batch", ""),
            _file_name(request),
            _Body(request.stream),
            request.content_length,
            client_key(request.remote_addr),
            (lambda: sock.shutdown(socket.SHUT_RD)) if sock is not None else None,
        )
    except UploadError as exc:
        return _error(request, exc, close=exc.status == 408)
    finally:
        _deadline(sock, before)
    return http_util.Respond(request, json_bytes(msgspec.convert(body, UploadedFile)), "application/json")


class _Body:
    """The request's body as ``UploadArea`` reads it: werkzeug turns a socket's timeout (or
    any error of the connection) into its ``ClientDisconnected``, a 400; this gives back the
    ``TimeoutError`` (a 408, the connection closed) or a ``ConnectionError``."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def read(self, size: int) -> bytes:
        try:
            data: bytes = self.stream.read(size)
        except ClientDisconnected as exc:
            if isinstance(exc.__cause__ or exc.__context__, TimeoutError):  # raised while handling it
                raise TimeoutError("no byte arrived in time") from None
            raise ConnectionError("the connection ended") from None
        except TimeoutError:  # a chunked body is read straight from the socket
            raise
        except (OSError, ValueError):  # werkzeug's reader of a chunked body says "Client disconnected" so
            raise ConnectionError("the connection ended") from None
        return data


def _file_name(request: wrappers.Request) -> str:
    """The ``name`` parameter, decoded from the query's own bytes: werkzeug keeps bytes that
    are not UTF-8 percent-encoded (``bad%FF.json``), which would pass for a real name."""
    for part in request.query_string.split(b"&"):
        key, _, value = part.partition(b"=")
        if unquote_to_bytes(key.replace(b"+", b" ")) != b"name":
            continue
        raw = unquote_to_bytes(value.replace(b"+", b" "))
        try:
            return raw.decode()
        except UnicodeDecodeError:
            name = shown(raw.decode(errors="replace"))
            raise UploadError(400, f"{name}: a file name that is not valid UTF-8") from None
    return ""


def _deadline(sock: Any, seconds: float | None) -> float | None:
    """Set the socket's timeout (a read that waits longer raises TimeoutError); the one it had."""
    if sock is None:
        return None
    try:
        before: float | None = sock.gettimeout()
        sock.settimeout(seconds)
    except (OSError, AttributeError, ValueError):  # closed, or not a socket after all
        return None
    return before


def serve_upload_done(
    request: wrappers.Request, area: UploadArea | None, reason: str | None, hosts: AllowedHosts
) -> wrappers.Response:
    """``POST upload_done?batch=ID`` makes the upload a run; ``&cancel=1`` drops it instead."""
    check_upload_request(request, hosts)
    if area is None:
        raise errors.PermissionDeniedError(reason or "upload is off")
    batch = request.args.get("batch", "")
    client = client_key(request.remote_addr)
    if request.args.get("cancel") == "1":
        area.cancel(batch, client)
        return http_util.Respond(request, json_bytes(UploadCancelled(cancelled=True)), "application/json")
    try:
        body = area.commit(batch, client)
    except UploadError as exc:
        return _error(request, exc)
    return http_util.Respond(request, json_bytes(msgspec.convert(body, UploadCommitted)), "application/json")


def _error(request: wrappers.Request, exc: UploadError, close: bool = False) -> wrappers.Response:
    # After a stalled body the connection holds unread bytes: it cannot carry another request.
    headers = [("Connection", "close")] if close else None
    return http_util.Respond(
        request, json_bytes(ErrorBody(error=str(exc))), "application/json", code=exc.status, headers=headers
    )


def serve_download(
    request: wrappers.Request, run: RunReport, status: RunStatus, sources: list[SourceInfo], view: ViewFn
) -> wrappers.Response:
    """The run's report as a file: ``format=json`` (what ``tb-mfu analyze --json`` prints for
    it) or ``format=html`` (the offline page, opening on worker report ``worker``; ``status``
    is what ``/runs`` says of the run, so the page draws it as the tab does)."""
    fmt = request.args.get("format", "html")
    if fmt not in ("html", "json"):
        raise errors.InvalidArgumentError("format is html or json")
    report = Report(schema_version=SCHEMA_VERSION, tool_version=TOOL_VERSION, runs=[run])
    name = f"mfu-{safe_part(run.name.replace('/', '-'), 'report')}.{fmt}"
    headers = [("Content-Disposition", f'attachment; filename="{name}"')]
    if fmt == "json":
        return http_util.Respond(request, view(json_bytes(report)), "application/json", headers=headers)
    worker = request.args.get("worker", "0")
    try:
        bundle = read_bundle()
    except FileNotFoundError as exc:
        raise errors.NotFoundError(str(exc)) from None
    index = int(worker) if re.fullmatch(r"\d{1,6}", worker) else 0
    listing = saved_listing(report, [status], sources)
    page = report_page(report, listing, run.name, index, bundle, view)
    return http_util.Respond(request, page, "text/html", headers=headers)
