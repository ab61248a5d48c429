"""The tab's routes for sharing: upload in (``/upload``, ``/upload_done``), reports out (``/download``).

TensorBoard 2.21 has no CSRF defence of its own (its POST routes only read), so
the upload routes bring theirs, all of which a browser enforces for us:

- a custom header, ``X-MFU-Upload: 1``: a page of another origin cannot send it
  without a CORS preflight, which TensorBoard never answers, so the browser
  never sends that page's request;
- ``Origin``, when the browser sends one, must be this server (its Host, or the
  X-Forwarded-Host a proxy in front sets), and ``Sec-Fetch-Site`` must say
  ``same-origin``;
- the body must be ``application/octet-stream``: no HTML form can post that.

An upload streams its body to disk as it reads it (``uploads.UploadArea``); the
cap is enforced per chunk read, not after. ``--mfu_disable_upload`` turns the
routes off (403) and the tab hides its drop zone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import msgspec
from tensorboard import errors
from tensorboard.backend import http_util
from werkzeug import wrappers

from .. import __version__ as TOOL_VERSION
from ..analysis.report import SCHEMA_VERSION, Report, RunReport
from ..escape import json_bytes
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
from .offline import read_bundle, report_page
from .runs import Source, is_remote
from .upload_files import safe_part
from .uploads import DEFAULT_MAX_BYTES, UploadArea, UploadError

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
    area = UploadArea(cache_dir, max_bytes, on_commit)
    real = os.path.realpath(area.root)
    for s in sources:
        root = os.path.realpath(s.path) if not is_remote(s.path) else None
        if root and (real == root or real.startswith(root.rstrip(os.sep) + os.sep)):
            # Uploads would be written into that logdir, and listed twice.
            return None, "upload is off: the cache directory is inside a logdir"
    return area, None


def uploads_status(area: UploadArea | None, reason: str | None) -> UploadsStatus:
    """What ``/runs`` says about upload, for the tab's drop zone."""
    if area is None:
        return UploadsStatus(enabled=False, reason=reason, max_bytes=0)
    return UploadsStatus(enabled=True, reason=None, max_bytes=area.max_bytes)


def check_upload_request(request: wrappers.Request) -> None:
    """Refuse (403) a request a page of another origin could have made; see the module's docstring."""
    if request.method != "POST":
        raise errors.InvalidArgumentError("upload is a POST")
    if request.headers.get(UPLOAD_HEADER) != "1":
        raise errors.PermissionDeniedError(f"upload needs the {UPLOAD_HEADER} header (sent by the MFU tab)")
    origin = request.headers.get("Origin")
    if origin is not None:
        forwarded = request.headers.get("X-Forwarded-Host", "").split(",")
        hosts = {request.host.lower(), *(h.strip().lower() for h in forwarded)} - {""}
        if urlsplit(origin).netloc.lower() not in hosts:
            raise errors.PermissionDeniedError("upload refused: the request comes from another site")
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site != "same-origin":
        raise errors.PermissionDeniedError("upload refused: the request comes from another site")
    ctype = request.mimetype or ""
    if request.path.endswith("/upload") and ctype != "application/octet-stream":
        raise errors.InvalidArgumentError("upload a file's bytes as application/octet-stream")


def serve_upload(request: wrappers.Request, area: UploadArea | None, reason: str | None) -> wrappers.Response:
    """One file of an upload: ``POST upload?batch=ID&name=FILE`` with the file as the body."""
    check_upload_request(request)
    if area is None:
        raise errors.PermissionDeniedError(reason or "upload is off")
    try:
        body = area.receive(
            request.args.get("batch", ""), request.args.get("name", ""), request.stream, request.content_length
        )
    except UploadError as exc:
        return _error(request, exc)
    return http_util.Respond(request, json_bytes(msgspec.convert(body, UploadedFile)), "application/json")


def serve_upload_done(request: wrappers.Request, area: UploadArea | None, reason: str | None) -> wrappers.Response:
    """``POST upload_done?batch=ID`` makes the upload a run; ``&cancel=1`` drops it instead."""
    check_upload_request(request)
    if area is None:
        raise errors.PermissionDeniedError(reason or "upload is off")
    batch = request.args.get("batch", "")
    if request.args.get("cancel") == "1":
        area.cancel(batch)
        return http_util.Respond(request, json_bytes(UploadCancelled(cancelled=True)), "application/json")
    try:
        body = area.commit(batch)
    except UploadError as exc:
        return _error(request, exc)
    return http_util.Respond(request, json_bytes(msgspec.convert(body, UploadCommitted)), "application/json")


def _error(request: wrappers.Request, exc: UploadError) -> wrappers.Response:
    return http_util.Respond(request, json_bytes(ErrorBody(error=str(exc))), "application/json", code=exc.status)


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
