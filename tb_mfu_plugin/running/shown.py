"""A report as a face may show it: no signature of a signed URL and no storage option value in
any of its strings (``trace.remote.redact``).

The CLI (its tables, JSON and scalars) and the notebook (its frames, its ``to_json``, which a
notebook's saved outputs keep) show reports made here; the tab blanks its routes' JSON with the same
``redact.shown_json``. The reports keep their locations as they are until then, because a worker
process needs a signed URL's query to read the file.
"""

from __future__ import annotations

import msgspec

from ..analysis.report import Report
from ..core.escape import json_bytes, map_strings
from ..trace.remote.redact import shown, shown_json


def shown_report(report: Report) -> tuple[Report, bytes | None]:
    """``report`` with its secrets blanked, and its JSON when that needed no change (a report of
    many steps is tens of MB: encoded once, not twice)."""
    if shown_json(encoded := json_bytes(report)) is encoded:
        return report, encoded
    return msgspec.convert(map_strings(msgspec.to_builtins(report), shown), type(report)), None
