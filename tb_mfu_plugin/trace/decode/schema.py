"""The Kineto trace schema we decode: only the fields the analysis reads.

msgspec skips every other key without building Python objects for it, which is
what makes decoding fast. Field types are unions where real traces disagree
(2021 traces write ``"tid": "25738"``, torch 2.x writes ``"tid": 25738``;
ROCm and ns-resolution traces write float timestamps).
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

Id = int | str | None
NO_RAW = msgspec.Raw(b"")
NAN = float("nan")


class Args(msgspec.Struct, gc=False):
    # Ids and counts are ``int`` in CUDA traces, but other backends write some as
    # strings (ROCm: "stream": "..."); the decoder keeps only numbers. Missing ids
    # default to -1 and missing measures to NaN, so that columns build without a
    # per-event check.
    external_id: int | str | None = msgspec.field(default=-1, name="External id")
    # 2021 legacy traces spell it in lower case on runtime, kernel and memcpy events
    external_id_legacy: int | str | None = msgspec.field(default=-1, name="external id")
    correlation: int | str | None = -1
    device: int | str | None = -1
    stream: int | str | None = -1
    blocks_per_sm: float | str | None = msgspec.field(default=NAN, name="blocks per SM")
    occupancy: float | str | None = msgspec.field(default=NAN, name="est. achieved occupancy %")
    bytes: int | str | None = -1
    flops: float | str | None = NAN
    # Triton launches may write a grid as a string; only lists are used.
    grid: list[int] | str | None = None
    block: list[int] | str | None = None
    # Shapes are kept raw and parsed only for the few ops that have a FLOP formula.
    # (An empty Raw means "absent": msgspec allows no Raw | None union.)
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")
    # What a collective moved, on NCCL kernels (torch >= 2.2) and ``record_param_comms`` ops.
    # Any: these names are generic ("dtype", "Group size"), so another event may carry them with
    # another type; columns.py keeps only the strings and counts it expects, never failing a file.
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=-1, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=-1, name="Out msg nelems")
    group_size: Any = msgspec.field(default=-1, name="Group size")
    comm_dtype: Any = msgspec.field(default=None, name="dtype")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")


class EventFields(msgspec.Struct, gc=False):
    """The fields of an event that the analysis reads."""

    cat: str = ""
    name: str = ""
    pid: Id = None
    tid: Id = None
    ts: float | None = None
    dur: float | None = None
    # Never None, so that attrgetter("args.x") works on every event (see decode.py).
    args: Args = msgspec.field(default_factory=Args)


class Event(EventFields, gc=False):
    """Any event, its phase as a plain field: the schema for traces the tagged one refuses."""

    ph: str = ""


class Complete(EventFields, tag_field="ph", tag="X", gc=False):
    """A complete event (``"ph": "X"``), the only phase the analysis reads.

    Decoding events as a union tagged on ``ph`` lets msgspec skip flows, instants
    and metadata (a third of a torch 2.x trace) without building their args.
    """


# Every other phase letter of the Chrome trace format, decoded to an empty struct.
_OTHER_PHASES = tuple(
    msgspec.defstruct(f"Phase_{c}", [], tag_field="ph", tag=c, gc=False) for c in "BEiICbnestfPONDMRc()"
)
TaggedEvent = Union[(Complete, *_OTHER_PHASES)]  # type: ignore[valid-type]  # noqa: UP007


class Header(msgspec.Struct):
    """Top-level keys of a trace document (the part outside ``traceEvents``)."""

    schemaVersion: Any = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    traceName: str | None = None
    displayTimeUnit: str | None = None
    baseTimeNanoseconds: int | None = None


class Document(Header):
    traceEvents: list[Event] = []


# Category names, lower-cased. Legacy 2021 names sit beside the torch 2.x ones.
CPU_OP_CATS = frozenset({"cpu_op", "operator"})
ANNOTATION_CATS = frozenset({"user_annotation"})
RUNTIME_CATS = frozenset({"cuda_runtime", "runtime", "hip_runtime", "privateuse1_runtime"})
DRIVER_CATS = frozenset({"cuda_driver", "hip_driver", "privateuse1_driver"})
KERNEL_CATS = frozenset({"kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "memset"})
