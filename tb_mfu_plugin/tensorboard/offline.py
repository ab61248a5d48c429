"""The offline report: one HTML file that shows a run's Overview with no server and no network.

It holds two things: the report, as JSON in a ``<script type="application/json">``
data block, and the tab's own bundle (``static/index.js``) as an inline module
script. The bundle sees the data block when it loads and draws the Overview from
it (``frontend/src/offline.ts``) instead of calling the routes.

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
import hashlib
import html
import re

from ..escape import escape_surrogates

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
