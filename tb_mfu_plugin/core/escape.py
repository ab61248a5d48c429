"""Untrusted strings made safe for the medium they are shown in.

File names, run, worker, kernel and op names come from the file system and the
trace, so they may hold anything: bytes that are not UTF-8 (Python keeps them as
lone surrogates, ``"worker\\udcff"``, which no UTF-8 encoder accepts), terminal
escape sequences, newlines, rich markup. Each face escapes them here:

- JSON (the ``--json`` output, the tab's responses, the disk cache):
  :func:`json_bytes` escapes lone surrogates as ``\\xNN`` (the byte they stand
  for) and keeps everything else verbatim; JSON itself quotes the rest.
- Terminals and logs: :func:`one_line` also escapes control characters, line
  separators and bidirectional overrides, so a name can neither move the cursor,
  recolour the terminal, split a one-line error nor reorder what is shown.
- rich: :func:`rich_text` is a ``Text``, never parsed as markup.

The web page renders every string as text (never as HTML), so JSON needs no HTML
escaping.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

# Lone surrogates: U+DC80..U+DCFF stand for undecodable bytes (surrogateescape).
_SURROGATE = re.compile("[\ud800-\udfff]")
# What a terminal acts on or a reader misreads: C0/C1 controls, DEL, line and
# paragraph separators, bidirectional embeddings, overrides and isolates.
_UNSAFE_ON_TERMINAL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # the byte surrogateescape could not decode
        return f"\\x{code - 0xDC00:02x}"
    named = _NAMED.get(c)
    if named is not None:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as ``\\xNN`` or ``\\uDXXX``: encodable as UTF-8."""
    return _SURROGATE.sub(_escape_char, text) if _SURROGATE.search(text) else text


def one_line(text: object) -> str:
    """``str(text)`` safe for a terminal or a log line: one line, no escape sequence."""
    s = str(text)
    return _UNSAFE_ON_TERMINAL.sub(_escape_char, s) if _UNSAFE_ON_TERMINAL.search(s) else s


def rich_text(text: object, style: str = "") -> Any:
    """A rich ``Text`` of ``one_line(text)``: shown as written, never read as markup."""
    from rich.text import Text

    return Text(one_line(text), style=style)


def markup_escape(text: object) -> str:
    """``one_line(text)`` for inclusion inside a rich markup string."""
    from rich.markup import escape

    return escape(one_line(text))


def map_strings(obj: Any, fn: Callable[[str], str]) -> Any:
    """A copy of a JSON-like tree (dicts, lists, scalars) with ``fn`` applied to every string, keys included."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {(fn(k) if isinstance(k, str) else k): map_strings(v, fn) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [map_strings(v, fn) for v in obj]
    return obj


_encoder = msgspec.json.Encoder()


def json_bytes(obj: Any) -> bytes:
    """``obj`` (msgspec structs, dicts, lists) as JSON, whatever its strings hold.

    The fast path encodes directly; only when a string is not encodable (a file
    name that is not UTF-8) does it escape every string first.
    """
    try:
        return _encoder.encode(obj)
    except UnicodeEncodeError:
        return _encoder.encode(map_strings(msgspec.to_builtins(obj), escape_surrogates))


def for_rich(obj: Any) -> Any:
    """A copy of ``obj`` (a msgspec struct) whose every string is safe in rich markup:
    one line, markup escaped. The CLI renders this copy, so no table or title can be
    restyled or broken by a name, whichever field it is printed from."""
    return msgspec.convert(map_strings(msgspec.to_builtins(obj), markup_escape), type(obj))
