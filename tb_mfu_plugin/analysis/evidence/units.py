"""The unit of every evidence field, carried in its type, and the layout every face reads from them.

A leaf field of an evidence struct is ``Annotated[<type>, unit("<unit>")]`` (the aliases below:
``Time``, ``Share``, ``Bytes``...): the units of ``analysis.definitions`` (``Unit``) and what evidence
needs besides (``EXTRA_UNITS``: text, a yes/no flag, an index, tensor shapes, a moment on the trace's
clock). ``evidence_fields`` walks a struct's types (``msgspec.inspect``) into the layout the faces
show: each field's JSON key, label, unit and kind (one value, a list or a map of values in one unit,
rows of a table, a block of fields). ``scripts/gen_ts_types.py`` writes the same layout into the tab
(``frontend/src/evidence_fields.ts``), and the CLI and the notebook read it here (``evidence.show``),
so no face guesses a unit from a key's name. A field with no unit is a ``TypeError`` here, and the
tests walk every rule's struct.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, cast, get_args

import msgspec
import msgspec.inspect as mi

from ..definitions import Unit

# What evidence holds besides the figures of analysis.definitions (their meanings: EXTRA_UNITS)
EvidenceUnit = Literal[Unit, "text", "flag", "index", "shape", "timestamp"]
EXTRA_UNITS: dict[str, str] = {
    "text": "words or a name, shown as they are",
    "flag": "yes or no",
    "index": "a number that names something (a rank, a stage, a step number), shown as it is",
    "shape": "tensor shapes as the trace recorded them (Input Dims), shown as JSON",
    "timestamp": "a moment on the trace's clock in µs, shown as a time since the clock's origin",
}
EVIDENCE_UNITS: tuple[str, ...] = get_args(Unit) + tuple(EXTRA_UNITS)

# How a field holds its values: one value, a list or a map (name -> value) of values in one unit,
# rows of a table (a list of structs), a block of fields (a struct)
Kind = Literal["value", "list", "map", "rows", "block"]


def unit(u: EvidenceUnit, label: str | None = None) -> msgspec.Meta:
    """The metadata of a field in unit ``u`` (``label``: its label, where the key's words are not it)."""
    extra: dict[str, str] = {"unit": u}
    if label is not None:
        extra["label"] = label
    return msgspec.Meta(extra=extra)


Time = Annotated[float, unit("time")]  # µs
Share = Annotated[float, unit("share")]  # 0-1
Bytes = Annotated[float, unit("bytes")]
ByteCount = Annotated[int, unit("bytes")]
Flops = Annotated[float, unit("flops")]
Bandwidth = Annotated[float, unit("bandwidth")]  # GB/s
Count = Annotated[float, unit("count")]
Whole = Annotated[int, unit("count")]
Factor = Annotated[float, unit("factor")]
Text = Annotated[str, unit("text")]
Flag = Annotated[bool, unit("flag")]
Index = Annotated[int, unit("index")]
Timestamp = Annotated[float, unit("timestamp")]  # µs on the trace's clock
Shapes = Annotated[list[list[int]], unit("shape")]  # a matmul's recorded input dims


@dataclass(frozen=True)
class EvidenceField:
    """One field as the faces show it: ``unit`` for values, lists and maps; ``fields`` for rows and blocks."""

    key: str  # the JSON key
    label: str
    kind: Kind
    unit: EvidenceUnit | None = None
    fields: tuple[EvidenceField, ...] = ()
    struct: str = ""  # rows and blocks: the struct of a row, of the block


# Words of keys that read otherwise in a label; "us" goes (the value says its unit)
_WORDS = {
    "gpu": "GPU",
    "cpu": "CPU",
    "api": "API",
    "sm": "SM",
    "sms": "SMs",
    "num": "number of",
    "d2d": "D2D",
    "h2d": "H2D",
    "d2h": "D2H",
    "p2p": "P2P",
    "mfu": "MFU",
    "gbps": "bandwidth",
    "busbw": "bus",
    "algbw": "algorithm",
    "whatif": "what-if",
    "oom": "OOM",
    "flops": "FLOPs",
}


def field_label(key: str) -> str:
    """A key's words as a label: ``host_blocked_us_per_step`` -> "Host blocked / step"."""
    words = key.split("_")
    per_step = words[-2:] == ["per", "step"]
    words = words[:-2] if per_step else words
    # µs says nothing the value does not: "time" where it is the subject, else it goes
    words = [_time(words, i) if w == "us" else _WORDS.get(w, w) for i, w in enumerate(words)]
    text = " ".join(w for w in words if w) + (" / step" if per_step else "")
    return text[:1].upper() + text[1:]


def _time(words: list[str], i: int) -> str:
    return "time" if i == 0 or (i < len(words) - 1 and words[i + 1] != "per") else ""


def evidence_fields(cls: type[msgspec.Struct]) -> tuple[EvidenceField, ...]:
    """The fields of an evidence struct, in its JSON order (the tag, the rule's id, left out)."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return tuple(_field(f"{cls.__name__}.{f.name}", f.encode_name, f.type) for f in info.fields)


def _field(where: str, key: str, t: mi.Type) -> EvidenceField:
    t = _one(where, t)
    if isinstance(t, mi.Metadata):
        u = _unit_of(t)
        if u is not None:
            return EvidenceField(key, _label_of(t) or field_label(key), "value", u)
        t = _one(where, t.type)
    if isinstance(t, mi.StructType):
        return EvidenceField(key, field_label(key), "block", fields=evidence_fields(t.cls), struct=t.cls.__name__)
    inner = t.item_type if isinstance(t, mi.ListType) else t.value_type if isinstance(t, mi.DictType) else None
    if inner is not None:
        inner = _one(where, inner)
        if isinstance(inner, mi.StructType):
            if isinstance(t, mi.ListType):
                fields = evidence_fields(inner.cls)
                return EvidenceField(key, field_label(key), "rows", fields=fields, struct=inner.cls.__name__)
        elif isinstance(inner, mi.Metadata) and (u := _unit_of(inner)) is not None:
            return EvidenceField(key, field_label(key), "list" if isinstance(t, mi.ListType) else "map", u)
    raise TypeError(f"evidence field {where} has no unit: annotate it with one of {', '.join(EVIDENCE_UNITS)}")


def _one(where: str, t: mi.Type) -> mi.Type:
    """``t`` without None (a field that may be unknown is one of its unit all the same)."""
    if isinstance(t, mi.UnionType):
        kept = [x for x in t.types if not isinstance(x, mi.NoneType)]
        if len(kept) != 1:
            raise TypeError(f"evidence field {where} is a union of several types: give it one")
        return kept[0]
    return t


def _unit_of(t: mi.Metadata) -> EvidenceUnit | None:
    u = (t.extra or {}).get("unit")
    if u is None:
        return None
    if u not in EVIDENCE_UNITS:
        raise TypeError(f"unknown evidence unit {u!r}")
    return cast(EvidenceUnit, u)


def _label_of(t: mi.Metadata) -> str | None:
    label = (t.extra or {}).get("label")
    return str(label) if label is not None else None
