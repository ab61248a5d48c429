"""Columnar tables decoded from one trace file.

Every metric in ``analysis`` is a query over these arrays. Names are stored once
in ``TraceTables.names`` and referenced by int32 codes, like a categorical column.
Missing numbers are NaN (floats) or -1 (ids, counts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, repeat
from operator import getitem
from typing import Any

import numpy as np

from ..core.distinct import distinct, match_rows

# The allocator's device memory events (profile_memory=True), decoded in decode/memory_events.py.
MEMORY, OOM = 0, 1  # MemoryTable.kind
UNKNOWN_BYTES = np.iinfo(np.int64).min  # MemoryTable.bytes: the one value a change cannot take

MEMORY_COLUMNS: dict[str, Any] = {
    "kind": np.int8,
    "ts": np.float64,
    "pid": np.int64,
    "tid": np.int64,
    "device_type": np.int16,  # c10::DeviceType (1 CUDA, 6 HIP...), -1 unknown
    "device": np.int64,  # Device Id, -1 unknown
    "bytes": np.int64,  # + allocated, - freed; UNKNOWN_BYTES unknown
    "total_allocated": np.int64,  # after the event, -1 unknown
    "total_reserved": np.int64,  # after the event, -1 unknown
    "addr": np.int64,  # -1 unknown
}


@dataclass(frozen=True)
class MemoryTable:
    """Device memory events, sorted by time. Unknown values: -1 (UNKNOWN_BYTES for ``bytes``)."""

    kind: np.ndarray
    ts: np.ndarray  # float64 µs
    pid: np.ndarray
    tid: np.ndarray
    device_type: np.ndarray
    device: np.ndarray
    bytes: np.ndarray
    total_allocated: np.ndarray
    total_reserved: np.ndarray
    addr: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)

    @staticmethod
    def empty() -> MemoryTable:
        return MemoryTable(**{k: np.empty(0, dt) for k, dt in MEMORY_COLUMNS.items()})

    def take(self, index: np.ndarray) -> MemoryTable:
        return MemoryTable(**{k: getattr(self, k)[index] for k in MEMORY_COLUMNS})


# GpuTable.kind
KERNEL, MEMCPY, MEMSET = 0, 1, 2
# CpuTable.kind
OP, ANNOTATION, RUNTIME, DRIVER = 0, 1, 2, 3


class _Intervals:
    """Rows with a start and a duration: what the GPU and CPU tables share."""

    ts: np.ndarray
    dur: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)

    @cached_property
    def end(self) -> np.ndarray:
        # computed once: queries ask for it in loops
        end: np.ndarray = self.ts + self.dur
        return end


@dataclass(frozen=True)
class GpuTable(_Intervals):
    """Kernels, memcpys and memsets: work that ran on a device."""

    kind: np.ndarray  # int8
    name: np.ndarray  # int32 code into TraceTables.names
    ts: np.ndarray  # float64 µs
    dur: np.ndarray  # float64 µs
    device: np.ndarray  # int64 (int32 wrapped ids beyond 2^31 onto real devices)
    stream: np.ndarray  # int64, -1 unknown
    correlation: np.ndarray  # int64, -1 unknown
    external_id: np.ndarray  # int64, -1 unknown
    blocks_per_sm: np.ndarray  # float32, NaN unknown
    occupancy_pct: np.ndarray  # float32, NaN unknown
    grid_blocks: np.ndarray  # int64 (product of grid dims), -1 unknown
    block_threads: np.ndarray  # int64 (product of block dims), -1 unknown
    bytes: np.ndarray  # int64, -1 unknown
    comm: np.ndarray  # int32 index into TraceTables.comm_args (collective kernels), -1 none

    def take(self, index: np.ndarray) -> GpuTable:
        return GpuTable(**{k: getattr(self, k)[index] for k in self.__dataclass_fields__})


@dataclass(frozen=True)
class CommArgs:
    """What one collective kernel moved, as its args say (NCCL kernels of torch >= 2.2 carry
    them; kernels launched before the profiler started do not). Distinct records are stored once
    per file: a trace repeats the same few bucket sizes."""

    collective: str  # as torch names it: "allreduce", "_allgather_base", "send", "alltoall_base"...
    in_nelems: int  # elements in, -1 unknown
    out_nelems: int  # elements out, -1 unknown
    group_size: int  # ranks in the process group, -1 unknown
    dtype: str | None  # "Float", "BFloat16", ...
    group: str | None  # process group name (a hash, or "0" for the default group)
    group_desc: str | None  # "default_pg", "mesh_tp", ...
    group_ranks: str | None  # global ranks of the group, as written: "[0, 2]"


@dataclass(frozen=True)
class OpInputs:
    """Raw JSON of an op's recorded shapes; parsed only when a FLOP formula needs it."""

    dims: bytes | None
    types: bytes | None
    concrete: bytes | None


@dataclass(frozen=True)
class CpuTable(_Intervals):
    """Host-side events: operators, user annotations, runtime and driver calls."""

    kind: np.ndarray  # int8
    name: np.ndarray  # int32
    ts: np.ndarray  # float64 µs
    dur: np.ndarray  # float64 µs
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64
    external_id: np.ndarray  # int64, -1 unknown
    correlation: np.ndarray  # int64, -1 unknown (runtime and driver calls only)
    flops: np.ndarray  # float64, NaN unless the trace carries a ``flops`` arg
    # int32 index into ``input_records`` for the ops the decoder was asked to keep, -1 for the
    # others: a step repeats the same few hundred shapes thousands of times, so each distinct
    # record is stored, and can be parsed or estimated, once
    input_id: np.ndarray
    input_records: list[OpInputs] = field(default_factory=list)

    def inputs_at(self, row: int) -> OpInputs | None:
        """The recorded inputs of cpu row ``row``, None when they were not kept."""
        i = int(self.input_id[row])
        return self.input_records[i] if i >= 0 else None

    @property
    def input_rows(self) -> np.ndarray:
        """The rows whose recorded inputs were kept, in row order."""
        return np.flatnonzero(self.input_id >= 0)

    def distinct_inputs(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct (name code, input id) pairs of ``rows``, in order of first appearance, as
        two arrays; and for each of ``rows`` its pair's index (-1 where its inputs were not kept).
        What depends only on an op's name and recorded inputs is then computed once per pair."""
        ids = self.input_id[rows]
        has = ids >= 0
        pair_of = np.full(len(rows), -1, np.int64)
        if not has.any():
            empty = np.empty(0, np.int64)
            return empty, empty, pair_of
        n = len(self.input_records)
        packed = self.name[rows][has].astype(np.int64) * n + ids[has]
        uniq, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        pair_of[has] = rank[inverse.reshape(-1)]
        pairs = uniq[order]
        return pairs // n, pairs % n, pair_of


@dataclass(frozen=True)
class TraceMeta:
    path: str
    device_properties: list[dict[str, Any]]
    distributed_info: dict[str, Any] | None
    trace_name: str | None
    base_time_ns: int | None
    schema_version: Any
    size_bytes: int  # uncompressed JSON bytes decoded
    # What the decoder repaired or left out (impossible values, cut names, dropped
    # header fields), one line each; the pipeline copies them into every report.
    notes: list[str] = field(default_factory=list)


STEP_PREFIX = "ProfilerStep#"


MAX_STEP_DIGITS = 18  # a step number of at most 18 digits fits int64


def step_markers(names: list[str], first: int = 0) -> tuple[list[int], list[int], list[int]]:
    """The names of ``STEP_PREFIX`` among ``names``, and the step markers among them,
    ``ProfilerStep#<ASCII digits>`` (the one name a trace has per step): the codes of both
    (``first`` being the code of ``names[0]``) and the markers' numbers (-1 for one of more than
    ``MAX_STEP_DIGITS`` digits)."""
    # in C (map, compress), without a Python step per name: a trace of many steps has 100,000s
    is_prefixed = list(map(str.startswith, names, repeat(STEP_PREFIX)))
    prefixed = list(compress(range(first, first + len(names)), is_prefixed))
    tails: list[str] = list(map(getitem, compress(names, is_prefixed), repeat(slice(len(STEP_PREFIX), None))))
    if not tails:
        return [], [], []
    every = "".join(tails)
    if every.isascii() and every.isdigit() and min(map(len, tails)) > 0 and max(map(len, tails)) <= MAX_STEP_DIGITS:
        return prefixed, prefixed, list(map(int, tails))  # the usual case: every one a plain marker
    found = [(c, d) for c, d in zip(prefixed, tails, strict=True) if d.isascii() and d.isdigit()]
    numbers = [int(d) if len(d) <= MAX_STEP_DIGITS else -1 for _, d in found]
    return prefixed, [c for c, _ in found], numbers


class Names(list[str]):
    """``TraceTables.names``: each distinct name once, in code order, and which codes are step
    markers (``step_markers``), with their numbers.

    A trace of 100,000 steps has 100,000 marker names and a handful of others, so a question asked
    of every name (is it a matmul, an optimizer step, an op with a FLOP formula?) would run 100,000
    times for nothing. ``name_lookup`` asks it once for all the markers: a name predicate says what
    kind of event a name is, and every marker is the same kind. (Reading a step's number is not such
    a predicate: ``marker_numbers`` holds them.)"""

    markers: np.ndarray  # codes of the step markers, ascending
    marker_numbers: np.ndarray  # their numbers, -1 beyond MAX_STEP_DIGITS digits

    def __init__(self, names: Iterable[str] = (), markers: tuple[list[int], list[int]] | None = None) -> None:
        """``markers``: ``step_markers`` of these names, when the caller has them already."""
        super().__init__(names)
        codes, numbers = markers if markers is not None else step_markers(self)[1:]
        self.markers = np.array(codes, np.int64)
        self.marker_numbers = np.array(numbers, np.int64)

    @cached_property
    def is_marker(self) -> np.ndarray:
        """Per code: a step marker."""
        out = np.zeros(len(self), bool)
        out[self.markers] = True
        return out


@dataclass(frozen=True)
class TraceTables:
    meta: TraceMeta
    names: Names  # a plain list is made a Names (__post_init__)
    cpu: CpuTable
    gpu: GpuTable
    comm_args: list[CommArgs] = field(default_factory=list)  # GpuTable.comm indexes it
    # the allocator's [memory] events (profile_memory=True), empty without them
    memory: MemoryTable = field(default_factory=MemoryTable.empty)

    def __post_init__(self) -> None:
        if not isinstance(self.names, Names):
            object.__setattr__(self, "names", Names(self.names))

    @cached_property
    def launch_rows(self) -> np.ndarray:
        """cpu rows of the runtime/driver calls that carry a correlation id."""
        cpu = self.cpu
        return np.flatnonzero(((cpu.kind == RUNTIME) | (cpu.kind == DRIVER)) & (cpu.correlation >= 0))

    @cached_property
    def launcher(self) -> np.ndarray:
        """For each GPU row, the cpu row of the call that launched it (-1 if none).

        The join runtime call -> GPU event by correlation id; computed once, since the
        steps, the metrics and the diagnosis of every device all read it.
        """
        rows = self.launch_rows
        return match_rows(self.cpu.correlation[rows], rows, self.gpu.correlation)

    def name_codes(self, predicate: Any, codes: np.ndarray | None = None) -> np.ndarray:
        """Codes of all names for which ``predicate(name)`` is true (a boolean lookup table);
        ``codes``: test only these (``name_lookup``)."""
        return name_lookup(self.names, predicate, codes)

    # The names each kind of row uses. A trace of many steps holds one "ProfilerStep#N" name per
    # step; a table read only at kernel, copy or call rows need not test them.
    @cached_property
    def gpu_name_codes(self) -> np.ndarray:
        """The distinct names of the GPU rows (kernels, copies, memsets), of every device."""
        return distinct(self.gpu.name)

    @cached_property
    def call_name_codes(self) -> np.ndarray:
        """The distinct names of the runtime and driver calls."""
        cpu = self.cpu
        return distinct(cpu.name[(cpu.kind == RUNTIME) | (cpu.kind == DRIVER)])

    def cpu_name_codes(self, kinds: tuple[int, ...]) -> np.ndarray:
        """The distinct names of the cpu rows of these kinds."""
        cpu = self.cpu
        return distinct(cpu.name[np.isin(cpu.kind, np.array(kinds, cpu.kind.dtype))])


def name_lookup(names: list[str] | Any, predicate: Any, codes: np.ndarray | None = None) -> np.ndarray:
    """A boolean lookup table over name codes: ``predicate(name)`` of every name, or, given
    ``codes``, of those names only and False for the others (for a table read only at rows whose
    names are among ``codes``). Of a ``Names``, the step markers are asked once, as one (``Names``)."""
    table = names if isinstance(names, Names) and len(names.markers) > 1 else None
    if table is None and codes is None:
        return np.fromiter((bool(predicate(n)) for n in names), dtype=bool, count=len(names))
    out = np.zeros(len(names), bool)
    if table is None:
        picked = np.asarray(codes, np.int64).tolist()
    else:
        asked = np.arange(len(names)) if codes is None else np.asarray(codes, np.int64)
        of_marker = table.is_marker[asked]
        picked, markers = asked[~of_marker].tolist(), asked[of_marker]
        if len(markers):
            out[markers] = bool(predicate(names[int(markers[0])]))
    out[picked] = [bool(predicate(names[c])) for c in picked]
    return out


# The columns of each table and their dtypes, as the decoder builds them (the dataclass fields
# above, but for the lists of records).
CPU_COLUMNS: dict[str, Any] = {
    "kind": np.int8,
    "name": np.int32,
    "ts": np.float64,
    "dur": np.float64,
    "pid": np.int64,
    "tid": np.int64,
    "external_id": np.int64,
    "correlation": np.int64,
    "flops": np.float64,
    "input_id": np.int32,
}
GPU_COLUMNS: dict[str, Any] = {
    "kind": np.int8,
    "name": np.int32,
    "ts": np.float64,
    "dur": np.float64,
    "device": np.int64,
    "stream": np.int64,
    "correlation": np.int64,
    "external_id": np.int64,
    "blocks_per_sm": np.float32,
    "occupancy_pct": np.float32,
    "grid_blocks": np.int64,
    "block_threads": np.int64,
    "bytes": np.int64,
    "comm": np.int32,
}


def concat_columns(parts: list[dict[str, np.ndarray]], dtypes: dict[str, Any]) -> dict[str, np.ndarray]:
    """The columns of several parts of a table end to end (empty columns of ``dtypes`` for none)."""
    if not parts:
        return {k: np.empty(0, dt) for k, dt in dtypes.items()}
    if len(parts) == 1:
        return dict(parts[0])
    return {k: np.concatenate([p[k] for p in parts]) for k in dtypes}
