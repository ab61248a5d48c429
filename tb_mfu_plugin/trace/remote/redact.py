"""What every face shows of a location or an error: no signature of a signed URL, and no
value of the storage options.

A location is shown in many places: the tab's ``/runs`` and ``/report`` (its ``file``, its
sources, its errors), the CLI's tables, one-line errors and JSON, and the logs. A
presigned URL is a credential (whoever sees ``X-Amz-Signature=...`` may read the object
until it expires), and a server's error text may quote a header it was sent. So each face
passes what it shows through :func:`shown` (or :func:`shown_json` for encoded JSON, or
:class:`RedactingFilter` for log records), at the point where the text leaves us:

- the values of signature and credential query parameters become ``***``: S3's
  ``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``, GCS's
  ``X-Goog-Signature`` and ``X-Goog-Credential``, an Azure SAS (``sig``, ``se``, ``sp``,
  ``sv``, ...), CloudFront's ``Signature``, ``Policy`` and ``Key-Pair-Id``, and any
  parameter whose name says key, token, secret, signature, credential or password;
- the credentials of the storage options file (the values under a secret-looking name and
  every header's value) and the credential variables (``storage.secrets``). Error texts
  have every option value blanked already, where they are made (``storage.redact``).

The location itself keeps its query: a worker needs the signature to read the file.
"""

from __future__ import annotations

import json
import logging
import re

from .storage import secrets

# Query parameters that are credentials whatever their value, by name (any case).
_SIGNED_NAMES = frozenset(
    {
        # Azure SAS: the signature and the fields it signs (who may do what, until when)
        "sig",
        "se",
        "sp",
        "sv",
        "sr",
        "st",
        "spr",
        "ss",
        "srt",
        "sip",
        "skoid",
        "sktid",
        "skt",
        "ske",
        "sks",
        "skv",
        "sdd",
        # CloudFront signed URLs, GCS's V2 signed URLs
        "policy",
        "key-pair-id",
        "googleaccessid",
        "awsaccesskeyid",
        "expires",
        "code",
        "auth",
    }
)
_SECRET_PARAM = re.compile(r"signature|credential|token|secret|passw|key|sas", re.IGNORECASE)
# A query parameter in plain text or in JSON (where "&" may be written \u0026).
_PARAM = re.compile(r"""((?:[?&;]|\\u0026)([A-Za-z0-9_.~-]+)=)([^&#\s"'<>\\]+)""")
MASK = "***"


def _mask(m: re.Match[str]) -> str:
    name = m.group(2)
    if name.lower() in _SIGNED_NAMES or _SECRET_PARAM.search(name):
        return m.group(1) + MASK
    return m.group(0)


# Where a query parameter can start; a report of many steps is megabytes of numbers with none.
_PARAM_STARTS = ("?", "&", ";", "\\u0026")


def redact_query(text: str) -> str:
    """``text`` with the values of signature and credential query parameters blanked.

    ``_PARAM.sub(_mask, text)``, trying the pattern only where a parameter can start (found with
    ``str.find``, which runs far faster than the regex's scan of every character): the same
    matches, left to right and not overlapping, so the same text."""
    if "=" not in text:
        return text
    starts = sorted(i for c in _PARAM_STARTS for i in _positions(text, c))
    out: list[str] = []
    done = 0
    for i in starts:
        m = _PARAM.match(text, i) if i >= done else None
        if m:
            out += (text[done:i], _mask(m))
            done = m.end()
    return "".join((*out, text[done:])) if out else text


def _positions(text: str, needle: str) -> list[int]:
    out, i = [], text.find(needle)
    while i >= 0:
        out.append(i)
        i = text.find(needle, i + 1)
    return out


def shown(text: str) -> str:
    """``text`` as a face may show it: signed URLs' signatures and credentials blanked."""
    for s in secrets():
        text = text.replace(s, MASK)
    return redact_query(text)


# The bytes of a query parameter's name (``_PARAM``'s second group).
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.~-")


def _untouched(body: bytes, found: list[str]) -> bool:
    """Whether ``shown_json`` leaves ``body`` as it is, read on the bytes: no secret in it (as
    written or JSON-escaped) and no query parameter. A report of many steps is hundreds of MB of
    JSON: decoding it to text to find nothing cost a second and a copy of the text as large again
    (the 300,000-step report's 200 MB, issue 24 §4).

    Every match of ``_PARAM`` has an ``=`` after its name, and the report has few: from each one,
    the name bytes before it are passed over, and what precedes them must be ``?``, ``&``, ``;``
    or ``\\u0026`` (whose ``u0026`` the name bytes include). This test holds wherever a match is."""
    for s in found:
        escaped = json.dumps(s, ensure_ascii=False)[1:-1]
        if any(v.encode("utf-8", "surrogateescape") in body for v in (s, escaped)):
            return False
    name = _NAME_BYTES
    i = body.find(b"=")
    while i >= 0:
        j = i
        while j > 0 and body[j - 1] in name:  # back to the previous "=" at most: linear in all
            j -= 1
        if j < i and j > 0 and body[j - 1] in b"?&;":
            return False
        if j > 0 and body[j - 1] == 0x5C and body.startswith(b"u0026", j) and i > j + 5:
            return False
        i = body.find(b"=", i + 1)
    return True


def shown_json(body: bytes) -> bytes:
    """Encoded JSON as a face may send it (values blanked in their JSON-escaped form too)."""
    if _untouched(body, secrets()):
        return body
    text = body.decode("utf-8", "surrogateescape")
    out = shown(text)
    for s in secrets():
        escaped = json.dumps(s, ensure_ascii=False)[1:-1]
        if escaped != s:
            out = out.replace(escaped, MASK)
    return body if out == text else out.encode("utf-8", "surrogateescape")


class RedactingFilter(logging.Filter):
    """Blanks what :func:`shown` blanks in a log record: its message, arguments and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format stays as it is
            return True
        record.msg, record.args = shown(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = shown(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = shown(record.exc_text)
        return True


_FILTER = RedactingFilter()


def redacting_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` whose records are blanked as :func:`shown` does (a filter
    on a logger holds for its own records only, so each module that logs locations asks here)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
