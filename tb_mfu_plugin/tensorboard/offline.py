"""The offline report: one HTML file that shows a run's Overview with no server and no network.

It holds two things: the bodies the tab's routes would send for the report (``/runs`` and
each run's ``/report``, ``bodies.OfflinePayload``), as JSON in a
``<script type="application/json">`` data block, and the tab's own bundle
(``static/index.js``) as an inline module script. The bundle sees the data block when it
loads and answers its route calls from it (``frontend/src/offline.ts``), so the page is
drawn by the very code that draws the live tab. The tab's "Download report" and
``tb-mfu analyze --html`` both build it with ``report_page``.

Trace strings (kernel, op, run and file names) are untrusted, and a data block
ends at the first ``</script`` whatever JSON thinks. So the JSON is written with
``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e`` and ``\\u0026``: the same
string to ``JSON.parse``, and no tag the HTML parser can see. The bundle gets the
same treatment for the two sequences that end or confuse a script element
(``</script`` and ``<!--``), written with ``\\x3C`` for ``<``, which means the
same in every JavaScript literal they can occur in.

A Content-Security-Policy in the page allows only that one script (by its hash),
inline styles and data: images: nothing can be fetched, so the file works
offline and cannot call home.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import html
import os
import re
from collections.abc import Callable

from ..analysis.report import Report
from ..core.escape import escape_surrogates, json_bytes
from .bodies import OfflinePayload, RunsBody, runs_body

DATA_ID = "mfu-offline-report"  # the data block's id; frontend/src/offline.ts looks for it
_JSON_ESCAPES = {b"<": b"\\u003c", b">": b"\\u003e", b"&": b"\\u0026"}
_JSON_UNSAFE = re.compile(b"[<>&]")
_SCRIPT_UNSAFE = re.compile(rb"<(?=/script|!--)", re.IGNORECASE)


def script_safe_json(encoded: bytes) -> bytes:
    """Encoded JSON that can sit inside a ``<script>`` element: no ``<``, ``>`` or ``&``.

    Outside strings JSON has none of the three, so only strings change, to escapes
    that decode to the same characters."""
    return _JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group()], encoded)


def script_safe_js(code: bytes) -> bytes:
    """JavaScript that can sit inside a ``<script>`` element: ``</script`` and ``<!--`` escaped."""
    return _SCRIPT_UNSAFE.sub(rb"\\x3C", code)


def offline_html(payload_json: bytes, bundle: bytes, title: str) -> bytes:
    """The page: ``payload_json`` (encoded JSON) and ``bundle`` inlined under a strict CSP."""
    script = script_safe_js(bundle)
    digest = base64.b64encode(hashlib.sha256(script).digest()).decode()
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; "
        "img-src data: blob:; "
        "base-uri 'none'; form-action 'none'"
    )
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(escape_surrogates(title))}</title>\n"
    )
    # Both scripts sit in <head>: the page replaces <body>, and a module script runs once the
    # document is parsed, wherever it is.
    return b"".join(
        [
            head.encode(),
            f'<script type="application/json" id="{DATA_ID}">'.encode(),
            script_safe_json(payload_json),
            b'</script>\n<script type="module">',
            script,
            b"</script>\n</head>\n<body></body></html>\n",
        ]
    )


# -- the page of a report: one builder for the tab's download and `tb-mfu analyze --html` ------

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
BUNDLE = os.path.join(STATIC_DIR, "index.js")


def read_bundle() -> bytes:
    """The tab's built bundle; FileNotFoundError (naming the fix) when it is not built."""
    try:
        with open(BUNDLE, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{BUNDLE} is not built: run 'npm ci && npm run build' in frontend/") from None


def report_page(
    report: Report, runs: RunsBody, run: str, worker: int, bundle: bytes, view: Callable[[bytes], bytes] = bytes
) -> bytes:
    """The offline page of ``report``: the data block holds the bodies the tab's routes would
    send (``bodies.OfflinePayload``), which the bundle draws with the live tab's own code;
    ``view`` rewrites the encoded JSON (the plugin's ``PathView.json``: server paths relative)."""
    payload = OfflinePayload(
        report=report,
        runs=runs,
        run=run,
        worker=worker,
        saved_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
    return offline_html(view(json_bytes(payload)), bundle, f"MFU report: {run}")


def cli_page(report: Report, path: str) -> bytes:
    """``tb-mfu analyze PATH --html``: the page of every run of ``report``, opening on the first
    run with an analysed worker, its statuses made from the report itself (``bodies.runs_body``)."""
    runs = runs_body(report, path)
    shown = next((r for r in report.runs if any(w.error is None for w in r.workers)), report.runs[0])
    first = next((i for i, w in enumerate(shown.workers) if w.error is None and w.summary is not None), 0)
    return report_page(report, runs, shown.name, first, read_bundle())
