"""A finding's evidence as the faces show it: its fields in order, each value as text in its unit.

The order (``layout``): the cost first, then the rule's own fields, then the what-if re-timing; the
note is a sentence, not a figure, and the faces show it apart. Each value goes through its unit's one
function (``fmt``), so the CLI (``tb-mfu analyze --evidence``), the notebook (``Report.evidence()``)
and the tab (``frontend/src/diagnosis.ts``, from the same layout generated into
``evidence_fields.ts``) write the same text. A field that is None (unknown, or not applicable) is
left out, and reads ``UNKNOWN`` in a cell of a table or an entry of a map.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from .. import fmt
from .common import HEAD_KEYS, FindingEvidence
from .units import EvidenceField, EvidenceUnit, evidence_fields

UNKNOWN = fmt.NA  # what the tab writes for it too (diagnosis.ts)
NOTE = "note"


def layout(cls: type[FindingEvidence]) -> tuple[EvidenceField, ...]:
    """The fields of a rule's evidence in the order the faces show them."""
    fields = evidence_fields(cls)
    common = {f.key for f in evidence_fields(FindingEvidence)}
    head = [f for f in fields if f.key in HEAD_KEYS]
    tail = [f for f in fields if f.key in common and f.key not in HEAD_KEYS]
    return (*head, *(f for f in fields if f.key not in common), *tail)


def value_text(unit: EvidenceUnit, value: Any) -> str:
    """One value as text: by its unit's formatter (``fmt.FORMATTERS``), or as it is."""
    if value is None:
        return UNKNOWN
    if unit == "text":
        return str(value)
    if unit == "flag":
        return "yes" if value else "no"
    if unit == "index":
        return str(int(value))
    if unit == "shape":
        return json.dumps(value, separators=(",", ":"))
    if unit == "timestamp":
        return fmt.us(float(value))
    return fmt.FORMATTERS[unit](float(value))


def field_text(field: EvidenceField, value: Any) -> str:
    """A value, or a list as one line of text (``kind`` value, list)."""
    assert field.unit is not None, field.key
    if field.kind == "list":
        return ", ".join(value_text(field.unit, v) for v in value)
    return value_text(field.unit, value)


@dataclass(frozen=True)
class EvidenceLine:
    """One value of a finding's evidence: a field, a member of a block, a cell of a row, an entry of a map."""

    path: str  # where it is in the evidence's JSON: "whatif.unprofiled.gain_us_per_step", "kernels[0].name"
    label: str  # its labels from the top, joined by " › "
    unit: EvidenceUnit
    value: Any  # as in the JSON
    text: str


def evidence_lines(ev: FindingEvidence) -> list[EvidenceLine]:
    """Every value of the evidence, in the faces' order, the note left out (``Finding.evidence.note``)."""
    raw = msgspec.to_builtins(ev)
    return list(_lines(layout(type(ev)), raw, "", ""))


def _lines(
    fields: tuple[EvidenceField, ...], raw: Mapping[str, Any], path: str, label: str, row: bool = False
) -> Iterator[EvidenceLine]:
    """The lines of ``fields``; a None is left out, except in a row of a table (a cell of its own)."""
    for f in fields:
        value: Any = raw.get(f.key)
        if (not path and f.key == NOTE) or (value is None and not (row and f.unit is not None)):
            continue
        where, name = f"{path}{f.key}", f"{label}{f.label}"
        if f.kind == "block":
            yield from _lines(f.fields, value, f"{where}.", f"{name} › ")
        elif f.kind == "rows":
            for i, cells in enumerate(value):
                yield from _lines(f.fields, cells, f"{where}[{i}].", f"{name} {i + 1} › ", row=True)
        elif f.kind == "map":
            assert f.unit is not None
            for k, v in value.items():
                yield EvidenceLine(f"{where}.{k}", f"{name} › {k}", f.unit, v, value_text(f.unit, v))
        else:
            assert f.unit is not None
            yield EvidenceLine(where, name, f.unit, value, field_text(f, value) if value is not None else UNKNOWN)
