"""HTTP(S) logdirs, held to their origin and folder, with bounded listings and bodies.

fsspec's ``HTTPFileSystem`` (over aiohttp) makes the requests. :class:`GuardedHTTPFileSystem`
decides where they may go and how much they may bring back:

- **Where.** Every request, each hop of a redirect included, passes one aiohttp client
  middleware before it is sent (:func:`_guard`). A request to another origin (scheme, host,
  port) than the logdir's is refused, unless the storage option ``allowed_origins`` names that
  origin (or is ``"*"``); even then it goes without the storage options' headers, without
  ``Authorization`` and without cookies. A request on the logdir's origin must stay in the
  logdir's folder (a file's own folder, for a read): a path that climbs with ``..`` (in any
  percent-encoding) or lies elsewhere is refused. aiohttp itself only drops ``Authorization``
  on a redirect to another host, and fsspec's listing joins ``../`` links onto the folder.
- **How much.** No transfer encoding is decoded for us: every request asks for
  ``Accept-Encoding: identity`` and aiohttp's decompression is off, so a body that comes
  gzip-encoded anyway reaches the decoder as the gzip bytes it is and inflates under the
  trace caps (``max_trace_bytes``, and ``max_compression_ratio`` against the bytes on the
  wire). aiohttp's own 300 s total timeout is replaced by the file's deadline
  (``remote.RemoteFile``) and a stall timeout: a read that gets no byte for
  :func:`stall_timeout_s` seconds fails.
- **Listings.** An index page is read up to :func:`max_listing_bytes` bytes; its links are
  resolved against the page, and only those that stay in the logdir's folder on its origin
  are kept (:func:`inside`); a walk follows at most :func:`max_listing_links` links, folders
  included, :data:`MAX_DEPTH` folders deep, under the listing's deadline. A listing over a cap
  is read up to it: a page that is not read whole (larger than the byte cap, or holding more
  links than the walk may still follow) gives its sub-folders, which are walked, but not its
  own files, a partial list of which would pass for a whole run; one line to ``warn`` says
  what was left out, and the rest of the logdir is read. A sub-folder that cannot be listed is
  left out (one line to ``warn``); the logdir's own page must list, and a walk that found
  nothing but what it left out is the source's one-line error.
"""

from __future__ import annotations

import asyncio
import html
import inspect
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp
import yarl
from fsspec.asyn import sync
from fsspec.implementations.http import HTTPFileSystem, HTTPStreamFile, ex2

from ...core.errors import TraceError
from ..limits import format_size
from .redact import redacting_logger
from .storage import (
    ALLOWED_ORIGINS,
    LISTING_BYTES_ENV,
    LISTING_LINKS_ENV,
    max_listing_bytes,
    max_listing_links,
    stall_timeout_s,
    storage_error,
)

logger = redacting_logger(__name__)
# Where a listing's one-line warnings go (a sub-folder it could not list): the tab's scan
# collects them for /runs; elsewhere they are logged, which the CLI prints.
Warn = Callable[[str], None]

MAX_DEPTH = 32  # folders below the logdir: a page that links to itself deeper and deeper ends here
PAGES_AT_ONCE = 8
# Headers that carry credentials besides the storage options' own.
_CREDENTIAL_HEADERS = ("Authorization", "Proxy-Authorization", "Cookie")

Origin = tuple[str, str, int]


class Refused(aiohttp.ClientError):
    """A request the guard did not send. ``mfu_refusal`` is its one-line reason (storage.storage_error)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.mfu_refusal = reason


def origin_of(url: str | yarl.URL) -> Origin | None:
    """(scheme, host, port) of an http(s) URL, the port made explicit; None for anything else."""
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    return (scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80))


def shown_origin(origin: Origin) -> str:
    return f"{origin[0]}://{origin[1]}:{origin[2]}"


_NOT_A_PATH = re.compile(r"[\x00-\x1f\x7f\\]")  # control characters, and "\\" (a "/" to some servers)


def _dot_segments(path: str) -> bool:
    """Whether ``path`` holds a ``.`` or ``..`` segment in any of up to three percent-decodings
    (a server may decode ``%2e%2e`` or ``..%2f`` once or more) or with ``\\`` taken for ``/``."""
    for _ in range(4):
        segments = path.replace("\\", "/").split("/")
        if "." in segments or ".." in segments:
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True  # still encoded after three decodings: nobody writes paths so


def inside(raw_path: str, folder: str) -> bool:
    """Whether a request path (percent-encoded as sent) names ``folder`` or lies below it."""
    if _dot_segments(raw_path) or _NOT_A_PATH.search(raw_path):
        return False
    return raw_path == folder.rstrip("/") or raw_path.startswith(folder)


@dataclass(frozen=True)
class Scope:
    """Where the requests of one logdir (or one file) may go."""

    origin: Origin
    folder: str  # the raw path that every request on the origin must stay in, ending in "/"
    allowed: frozenset[Origin]  # other origins a redirect may reach (without credentials)
    any_origin: bool = False

    @classmethod
    def of(cls, url: str, is_folder: bool, allowed: Any = None) -> Scope:
        origin = origin_of(url)
        if origin is None:
            raise TraceError(url, "not an http(s) URL with a host")
        path = yarl.URL(url).raw_path or "/"
        folder = path.rstrip("/") + "/" if is_folder else path.rsplit("/", 1)[0] + "/"
        names = [allowed] if isinstance(allowed, str) else list(allowed or [])
        others = frozenset(o for o in map(origin_of, (str(n) for n in names if n != "*")) if o is not None)
        return cls(origin, folder, others, "*" in names)

    def refusal(self, url: yarl.URL) -> str | None:
        """Why a request to ``url`` must not be sent, or None."""
        origin = origin_of(url)
        if origin is None:
            return "refused a request that is not http(s)"
        if origin != self.origin:
            if self.any_origin or origin in self.allowed:
                return None
            return (
                f"refused: the server sent the request to another origin ({shown_origin(origin)}); "
                f"name it in the storage option {ALLOWED_ORIGINS!r} to allow it"
            )
        if not inside(url.raw_path, self.folder):
            return f"refused: the server sent the request outside the logdir's folder ({url.raw_path[:200]})"
        return None


Handler = Callable[[aiohttp.ClientRequest], Awaitable[aiohttp.ClientResponse]]


def _guard(scope: Scope, secret_headers: frozenset[str]) -> Callable[..., Awaitable[aiohttp.ClientResponse]]:
    """The middleware that every request, each redirect hop included, passes before it is sent."""

    async def guard(req: aiohttp.ClientRequest, handler: Handler) -> aiohttp.ClientResponse:
        reason = scope.refusal(req.url)
        if reason is not None:
            raise Refused(reason)
        if origin_of(req.url) != scope.origin:  # an allowed other origin: no credentials go there
            for name in (*secret_headers, *_CREDENTIAL_HEADERS):
                req.headers.popall(name, None)
        return await handler(req)

    return guard


class GuardedHTTPFileSystem(HTTPFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """fsspec's HTTP file system, its requests held to ``scope`` and its listings bounded."""

    def __init__(self, scope: Scope, **options: Any) -> None:
        options = dict(options)
        client_kwargs = dict(options.pop("client_kwargs", None) or {})
        headers = {str(k): str(v) for k, v in dict(options.pop("headers", None) or {}).items()}
        secret = frozenset(headers)
        headers = {k: v for k, v in headers.items() if k.lower() != "accept-encoding"}
        headers["Accept-Encoding"] = "identity"
        client_kwargs["middlewares"] = (*tuple(client_kwargs.get("middlewares", ())), _guard(scope, secret))
        client_kwargs["auto_decompress"] = False
        stall = stall_timeout_s()
        client_kwargs.setdefault("timeout", aiohttp.ClientTimeout(total=None, sock_connect=stall, sock_read=stall))
        self.scope = scope
        super().__init__(client_kwargs=client_kwargs, headers=headers, skip_instance_cache=True, **options)

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, **kwargs: Any) -> Any:
        """A streamed file (``block_size=0``) opens with its GET alone: fsspec would first ask
        for the size with a HEAD (and a GET when the HEAD fails), which a stream does not use.
        (``kwargs`` are ``open``'s own: autocommit, cache and size settings, none for a stream.)"""
        if mode == "rb" and block_size == 0:
            session = sync(self.loop, self.set_session)
            return HTTPStreamFile(self, path, mode=mode, loop=self.loop, session=session, **self.kwargs)
        return super()._open(path, mode, block_size=block_size, **kwargs)

    async def _ls_real(self, url: str, detail: bool = True, **kwargs: Any) -> Any:
        """One index page's entries (as fsspec's listing gives them), read under the caps."""
        base = url.split("?", 1)[0].split("#", 1)[0]
        children, _ = await self._page(url, base, max_listing_links())
        entries = [
            {"name": f"{base.rstrip('/')}/{rel}", "size": None, "type": "directory" if rel.endswith("/") else "file"}
            for rel in children
        ]
        return entries if detail else sorted(e["name"] for e in entries)

    async def _page(self, url: str, page_dir: str, limit: int) -> tuple[list[str], bool]:
        """The links of the index page at ``url``, as paths relative to ``page_dir``, kept only
        where they stay below the scope's folder, ``limit`` + 1 at most; and whether the page
        was larger than the byte cap (its links are then those of its first bytes)."""
        session = await self.set_session()
        async with session.get(self.encode_url(url), **self.kwargs) as r:
            self._raise_not_found_for_status(r, url)
            encoding = r.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding not in ("identity", ""):
                raise TraceError(url, f"the server sent the listing {encoding}-encoded though identity was asked")
            mimetype = r.headers.get("Content-Type", "").partition(";")[0].strip().lower()
            if mimetype not in ("text/html", ""):  # a file, not an index page: no links (as fsspec)
                return [], False
            body, cut = await _read_capped(r.content, max_listing_bytes())
        folder_raw = yarl.URL(page_dir.rstrip("/") + "/").raw_path
        # parsed on a worker thread: fsspec's one event loop serves every remote source at once
        children = await asyncio.get_running_loop().run_in_executor(None, self._children, body, folder_raw, limit)
        return children, cut

    def _children(self, body: bytes, folder_raw: str, limit: int) -> list[str]:
        out: dict[str, None] = {}
        for link in links_of(body.decode("utf-8", "replace")):
            raw = self._resolve(link, folder_raw)
            if raw is not None:
                out[raw[len(folder_raw) :]] = None
                if len(out) > limit:
                    break
        return list(out)

    def _resolve(self, link: str, page_raw: str) -> str | None:
        """The raw path that ``link`` on the page at ``page_raw`` names, or None when it leaves
        the scope's folder or origin, or is no plain path (a query, control characters)."""
        link = html.unescape(link).strip().split("#", 1)[0]
        if not link or "?" in link or _NOT_A_PATH.search(link):
            return None
        if link.startswith("//") or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link):
            absolute = (self.scope.origin[0] + ":" + link) if link.startswith("//") else link
            if origin_of(absolute) != self.scope.origin:
                return None
            raw = urlsplit(absolute).path
        else:
            raw = link if link.startswith("/") else page_raw + link
        if not inside(raw, self.scope.folder) or "//" in raw or not raw.startswith(page_raw) or raw == page_raw:
            return None
        return raw

    async def walk_tree(self, root: str, warn: Warn | None = None) -> dict[str, dict[str, Any]]:
        """URL -> fsspec-like info of every file linked from the index at ``root`` and the
        folders below it, breadth first, under the caps on links, bytes and depth. A page not read
        whole gives its sub-folders only, and one line to ``warn`` (default: logged) says what was
        left out; so does a sub-folder that cannot be listed, and the others go on. A walk that
        found no file, having left some out, raises that line as the source's error."""
        base = root.split("?", 1)[0].rstrip("/")
        walk = _Walk(max_listing_links())
        todo, seen = [""], {""}
        while todo:
            batch, todo = todo[:PAGES_AT_ONCE], todo[PAGES_AT_ONCE:]
            pages = [root if rel == "" else f"{base}/{rel}" for rel in batch]
            results = await asyncio.gather(
                *(self._page(u, u.split("?", 1)[0], walk.cap) for u in pages), return_exceptions=True
            )
            for rel, page_url, result in zip(batch, pages, results, strict=True):
                if isinstance(result, BaseException):
                    if rel == "" or not isinstance(result, Exception):
                        raise result
                    # the logdir's other folders go on; the CLI prints this line, the tab lists it
                    reason = storage_error(page_url, result).reason
                    (warn or _log_warning)(f"{page_url}: sub-folder not listed ({reason})")
                    continue
                children, too_big = result
                for path in walk.page(rel, page_url, children, too_big):
                    if path not in seen and path.count("/") <= MAX_DEPTH:
                        seen.add(path)
                        todo.append(path)
        files = {f"{base}/{path}": {"name": f"{base}/{path}", "size": None, "type": "file"} for path in walk.files}
        note = walk.note()
        if note is not None:
            if not files:
                raise TraceError(walk.cut_pages[0], note)
            (warn or _log_warning)(f"{walk.cut_pages[0]}: {note}")
        return files


class _Walk:
    """What one walk of an HTTP logdir keeps, under its cap of ``cap`` links (folders followed
    and files kept). A page whose links would pass the cap, or larger than the byte cap, is not
    read whole: its sub-folders are kept while the cap allows, its own files are left out (a
    partial list of a folder's files would pass for a whole run), and ``note`` says so."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.links = 0
        self.files: list[str] = []
        self.cut_pages: list[str] = []  # pages whose files were left out, in the walk's order
        self.too_big = False  # a page over the byte cap (else only the link cap was passed)

    def page(self, rel: str, url: str, children: list[str], too_big: bool) -> list[str]:
        """Take one page's ``children`` (paths relative to ``rel``); the sub-folders to walk."""
        whole = not too_big and self.links + len(children) <= self.cap
        if not whole:
            self.cut_pages.append(url)
            self.too_big = self.too_big or too_big
        folders = []
        for child in children:  # a whole page never takes the count past the cap
            if child.endswith("/"):
                if self.links >= self.cap:
                    break
                folders.append(rel + child)
            elif whole:
                self.files.append(rel + child)
            else:
                continue
            self.links += 1
        return folders

    def note(self) -> str | None:
        """The one line of what was left out, or None when the walk read everything."""
        if not self.cut_pages:
            return None
        if self.too_big:
            why = f"the listing page is larger than {format_size(max_listing_bytes())} (${LISTING_BYTES_ENV} raises it)"
        else:
            why = f"the listing holds more than {self.cap:,} links (${LISTING_LINKS_ENV} raises it)"
        more = f" (and those of {len(self.cut_pages) - 1:,} more folders)" if len(self.cut_pages) > 1 else ""
        return f"{why}: read up to the cap; the files it lists were left out{more}, its sub-folders walked"


def _log_warning(line: str) -> None:
    logger.warning("tb-mfu: %s", line)


_HREF = re.compile(r"""\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
_MAX_TAG_CHARS = 16 << 10


def links_of(text: str) -> Iterator[str]:
    """The ``href`` of every ``<a>`` tag of an index page, then its bare http(s) URLs (as
    fsspec's listing takes both). Tags are found one after another with ``str.find``, so a
    hostile page costs linear time (a regular expression over the whole page, like fsspec's,
    backtracks quadratically on ``<a`` followed by megabytes of blanks)."""
    pos = 0
    while (start := text.find("<", pos)) >= 0:
        end = text.find(">", start)
        if end < 0:
            break
        pos = end + 1
        tag = text[start + 1 : end]
        if len(tag) > _MAX_TAG_CHARS or tag[:1] not in "aA" or tag[1:2] not in (" ", "\t", "\n", "\r"):
            continue
        m = _HREF.search(tag)
        if m:
            yield next(g for g in m.groups() if g is not None)
    for m in ex2.finditer(text):
        yield m.group("url")


async def _read_capped(content: aiohttp.StreamReader, cap: int) -> tuple[bytes, bool]:
    """The body's first ``cap`` bytes, and whether there were more (the rest is never read)."""
    chunks, got = [], 0
    while chunk := await content.read(1 << 16):
        if got + len(chunk) > cap:
            chunks.append(chunk[: cap - got])
            return b"".join(chunks), True
        got += len(chunk)
        chunks.append(chunk)
    return b"".join(chunks), False


def http_filesystem(url: str, options: dict[str, Any], is_folder: bool) -> GuardedHTTPFileSystem:
    """The guarded file system of ``url`` (a logdir when ``is_folder``, else one file)."""
    if "middlewares" not in inspect.signature(aiohttp.ClientSession).parameters:
        # without them a redirect could not be checked before it is followed: no request at all
        raise TraceError(url, f"http(s):// needs aiohttp 3.12 or later (found {aiohttp.__version__})")
    options = dict(options)
    scope = Scope.of(url, is_folder, options.pop(ALLOWED_ORIGINS, None))
    return GuardedHTTPFileSystem(scope, **options)
