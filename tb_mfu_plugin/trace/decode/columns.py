"""Decoded events -> validated numpy columns (the body of ``TraceTables``).

Column extraction runs in C: map(attrgetter) over the decoded structs, then one
numpy conversion; None becomes NaN. A column holding something else (a ROCm
stream id written as a string, an integer beyond int64) falls back to a
per-event loop.

Values no real trace holds are clamped here, at the trace layer, and counted:
each kind of repair becomes one note in ``TraceMeta.notes``, which the pipeline
copies into every report of the file. Downstream code can then rely on finite
times, non-negative durations, occupancy within 0-100 %, byte counts that cannot
overflow a sum, and ids that fit int64.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from ..tables import (
    ANNOTATION,
    CPU_COLUMNS,
    GPU_COLUMNS,
    MEMORY_COLUMNS,
    CpuTable,
    GpuTable,
    OpInputs,
    TraceMeta,
    TraceTables,
    concat_columns,
)
from . import fast, schema
from .categories import CAT_CLASS, CPU, GPU, NO_CAT, kind_without_category
from .comm_args import CommArgs, comm_column, renumber
from .memory_events import MEMORY_NOTES, memory_columns, memory_of, memory_table
from .name_codes import NameCodes
from .schema import Event
from .values import MAX_ABS_TS, MAX_COPY_BYTES, MAX_DUR, MAX_PER_SM, floats, in_int64, products

_get = {k: attrgetter(k) for k in ("ph", "cat", "name", "ts", "dur", "pid", "tid", "args")}
_arg = {
    k: attrgetter(k)
    for k in (
        "external_id",
        "external_id_legacy",
        "correlation",
        "device",
        "stream",
        "blocks_per_sm",
        "occupancy",
        "bytes",
        "flops",
        "grid",
        "block",
        "collective",
    )
}

# Problem key -> the note's wording, with the count in front.
NOTES = {
    "ts": "events with a non-finite or absurd timestamp were dropped",
    "dur": "events with a negative, non-finite or absurd duration were given duration 0",
    "bytes": "copies with a negative or absurd byte count have unknown bytes",
    "occupancy": "kernels with an achieved occupancy outside 0-100 % have unknown occupancy",
    "per_sm": "kernels with negative or absurd blocks per SM have them unknown",
    "launch_dims": "kernels with negative or absurd grid/block sizes have them unknown",
    "ids": "ids (device, stream, correlation, pid, tid) beyond 64 bits were treated as unknown",
    "flops": "events with a negative or non-finite 'flops' arg have it unknown",
    "names": "names longer than the max_name_chars cap were cut short",
    **MEMORY_NOTES,
}


InputsKey = tuple[bytes | None, bytes | None, bytes | None]  # an OpInputs as a dict key
Getter = Callable[[Any], Any]


@dataclass
class Part:
    """The columns of one byte range of a trace, decoded in a worker process (see parallel.py).

    Codes and labels are the worker's own; ``Columns.absorb`` renumbers them. ``names``
    are the names as written (before the max_name_chars cut), in code order.
    """

    names: list[str]
    labels: list[str]
    cpu: dict[str, np.ndarray] | None
    gpu: dict[str, np.ndarray] | None
    cpu_rows: int
    gpu_rows: int
    records: list[OpInputs] = field(default_factory=list)  # the cpu "input_id" column indexes it
    problems: Counter[str] = field(default_factory=Counter)
    comm_args: list[CommArgs] = field(default_factory=list)  # the gpu "comm" column indexes it
    memory: dict[str, np.ndarray] | None = None  # the memory_events columns
    memory_rows: int = 0


class Columns:
    """Accumulates decoded events into per-chunk numpy columns."""

    def __init__(self, keep_inputs: Callable[[str], bool] | None, max_name_chars: int) -> None:
        self.keep_inputs = keep_inputs
        self.max_name_chars = max_name_chars
        self.cpu_parts: list[dict[str, np.ndarray]] = []
        self.gpu_parts: list[dict[str, np.ndarray]] = []
        self.records: list[OpInputs] = []  # distinct recorded inputs; the cpu "input_id" column indexes it
        self.comm_args: dict[CommArgs, int] = {}  # distinct collective records -> index (insertion order)
        # One record per distinct (dims, types, concrete): a step repeats the same few hundred
        # shapes thousands of times, and a 1 GB trace would otherwise hold ~400k copies.
        self._record_ids: dict[InputsKey, int] = {}
        self.memory_parts: list[dict[str, np.ndarray]] = []  # memory_events columns, per chunk
        self.cpu_rows = 0
        self.gpu_rows = 0
        self.memory_rows = 0
        self.problems: Counter[str] = Counter()
        self.names = NameCodes(keep_inputs, max_name_chars, self.problems)
        self._cats = dict(CAT_CLASS)
        # Non-numeric pid/tid labels ("Spans", "stream 7") -> stable negative ids, per file.
        self._labels: dict[str, int] = {}

    @property
    def rows(self) -> int:
        return self.cpu_rows + self.gpu_rows + self.memory_rows

    def notes(self) -> list[str]:
        return [f"{n} {NOTES[k]}." for k, n in sorted(self.problems.items()) if n]

    # -- ids ---------------------------------------------------------------------------

    # Each column is read straight from its items (``map(get, items)``), with no list in
    # between: a list of the values is built only on the rare column that needs a second look.

    def ints(self, items: list[Any], get: Getter) -> np.ndarray:
        """Ids and counts as int64, -1 where missing or not an int64."""
        try:
            return np.fromiter(map(get, items), np.int64, len(items))
        except (TypeError, ValueError, OverflowError):
            values = list(map(get, items))
            out = np.fromiter((v if in_int64(v) else -1 for v in values), np.int64, len(values))
            self.problems["ids"] += sum(1 for v in values if type(v) is int and not in_int64(v))
            return out

    def int_ids(self, items: list[Any], get: Getter) -> np.ndarray:
        try:
            return np.fromiter(map(get, items), np.int64, len(items))
        except (TypeError, ValueError, OverflowError):
            return np.fromiter(map(self._int_id, map(get, items)), np.int64, len(items))

    def _int_id(self, v: Any) -> int:
        """pid/tid as an int: 2021 traces write thread ids as strings ("25738", "stream 7")."""
        if type(v) is int:
            if in_int64(v):
                return v
            self.problems["ids"] += 1
            return -1
        if not isinstance(v, str) or v == "":
            return -1
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
        if v.isascii() and v.isdigit() and len(v) <= 18:
            return int(v)
        return self._label(v)

    def _label(self, v: str) -> int:
        got = self._labels.get(v)
        if got is None:
            got = self._labels[v] = -2 - len(self._labels)
        return got

    # -- names ---------------------------------------------------------------------------

    def name_codes(self, names: list[str]) -> np.ndarray:
        return self.names.of(names)

    # -- events --------------------------------------------------------------------------

    def _classify(self, events: list[Event]) -> tuple[np.ndarray, np.ndarray]:
        cats = list(map(_get["cat"], events))  # str: the schema refuses anything else
        table = self._cats
        for c in set(cats).difference(table):
            table[c] = table.get(c.lower(), 0) if c else NO_CAT * 8
        cls = np.fromiter(map(table.__getitem__, cats), np.int8, len(cats))
        which, kind = cls >> 3, cls & 7
        for i in np.flatnonzero(which == NO_CAT):  # decide from name and args
            got = kind_without_category(events[i])
            which[i], kind[i] = got if got is not None else (0, 0)
        return which, kind

    def add(self, events: list[Any] | fast.Block) -> None:
        """Add complete ("X") events: ``Complete`` structs, or ``Event`` structs already filtered
        (and the memory instants a chunk carries beside them, ``memory_events.with_memory``), or the
        columns of a chunk that the compiled parser read (``fast.Block``)."""
        if isinstance(events, fast.Block):
            fast.add_block(self, events)
            return
        memory = memory_of(events)
        if memory:
            self._add_memory(memory)
        if not events:
            return
        which, kind = self._classify(events)
        ts = floats(events, _get["ts"])
        keep = np.abs(ts) <= MAX_ABS_TS  # False for NaN (no ts) and inf
        bad_ts = ~keep & ~np.isnan(ts) & (which > 0)
        self.problems["ts"] += int(bad_ts.sum())
        rows = np.flatnonzero(keep & (which > 0))
        kept = [events[i] for i in rows.tolist()] if len(rows) < len(events) else events
        # Codes in file order, CPU and GPU rows together: the order then does not depend on
        # where chunks (or the ranges of a parallel decode) happen to be cut.
        codes = self.name_codes(list(map(_get["name"], kept)))
        which, kind, ts = which[rows], kind[rows], ts[rows]
        for table, add in ((CPU, self._add_cpu), (GPU, self._add_gpu)):
            sel = np.flatnonzero(which == table)
            if len(sel):
                evs = [kept[i] for i in sel.tolist()] if len(sel) < len(kept) else kept
                add(kind[sel], evs, list(map(_get["args"], evs)), ts[sel], codes[sel])

    def _common(self, evs: list[Event], ts: np.ndarray, codes: np.ndarray) -> dict[str, np.ndarray]:
        return self.common_columns(floats(evs, _get["dur"]), ts, codes)

    # The checks below take columns, whichever decoder read them (this module's, or fast.py's).

    def common_columns(self, dur: np.ndarray, ts: np.ndarray, codes: np.ndarray) -> dict[str, np.ndarray]:
        bad = ~np.isnan(dur) & ~((dur >= 0) & (dur <= MAX_DUR))
        self.problems["dur"] += int(bad.sum())
        return {"name": codes, "ts": ts, "dur": np.where(bad | np.isnan(dur), 0.0, dur)}

    def _external_ids(self, args: list[schema.Args]) -> np.ndarray:
        ext = self.ints(args, _arg["external_id"])
        legacy = self.ints(args, _arg["external_id_legacy"])
        return np.where(ext >= 0, ext, legacy)

    def _measure(self, args: list[schema.Args], key: str, lo: float, hi: float, problem: str) -> np.ndarray:
        return self.measure(floats(args, _arg[key]), lo, hi, problem)

    def measure(self, x: np.ndarray, lo: float, hi: float, problem: str) -> np.ndarray:
        """Floats within [lo, hi], NaN (unknown) otherwise; out-of-range values are counted."""
        bad = ~np.isnan(x) & ~((x >= lo) & (x <= hi))
        self.problems[problem] += int(bad.sum())
        x[bad] = np.nan
        return x

    def _add_cpu(
        self, kind: np.ndarray, evs: list[Event], args: list[schema.Args], ts: np.ndarray, codes: np.ndarray
    ) -> None:
        cols = self._common(evs, ts, codes)
        # ProfilerStep#N is an annotation even where the 2021 schema files it as an operator
        is_step = self.names.is_step
        kind = np.where(is_step[codes], ANNOTATION, kind).astype(np.int8)
        cols.update(
            kind=kind,
            pid=self.int_ids(evs, _get["pid"]),
            tid=self.int_ids(evs, _get["tid"]),
            external_id=self._external_ids(args),
            correlation=self.ints(args, _arg["correlation"]),
            flops=self._measure(args, "flops", 0.0, 1e30, "flops"),
            input_id=self._input_ids(args, codes),
        )
        self.cpu_parts.append(cols)
        self.cpu_rows += len(evs)

    def _input_ids(self, args: list[schema.Args], codes: np.ndarray) -> np.ndarray:
        """The "input_id" column: each kept op's record (-1: not kept, or no shapes recorded)."""
        out = np.full(len(args), -1, np.int32)
        if self.keep_inputs is None:
            return out
        wanted = self.names.wanted
        # One loop body, no call per op: a 1 GB trace keeps the shapes of ~400 k ops.
        get, new = self._record_ids.get, self._record_id
        at, ids = [], []
        for i in np.flatnonzero(wanted[codes]).tolist():
            a = args[i]
            dims = a.input_dims
            if dims:
                types, concrete = a.input_type, a.concrete_inputs
                key = (bytes(dims), bytes(types) if types else None, bytes(concrete) if concrete else None)
                got = get(key)
                at.append(i)
                ids.append(new(key) if got is None else got)
        out[at] = ids
        return out

    def _record_id(self, key: InputsKey) -> int:
        got = self._record_ids.get(key)
        if got is None:
            got = self._record_ids[key] = len(self.records)
            self.records.append(OpInputs(*key))
        return got

    def _launch_dims(self, values: list[Any]) -> np.ndarray:
        return self.launch_dims(products(values))

    def launch_dims(self, out: np.ndarray) -> np.ndarray:
        """Grid or block products (values.products: -1 missing, -2 absurd, counted and made -1)."""
        bad = out == -2
        self.problems["launch_dims"] += int(bad.sum())
        out[bad] = -1
        return out

    def _bytes(self, args: list[schema.Args]) -> np.ndarray:
        return self.copy_bytes(self.ints(args, _arg["bytes"]))

    def copy_bytes(self, b: np.ndarray) -> np.ndarray:
        bad = (b < -1) | (b > MAX_COPY_BYTES)
        self.problems["bytes"] += int(bad.sum())
        b[bad] = -1
        return b

    def _add_gpu(
        self, kind: np.ndarray, evs: list[Event], args: list[schema.Args], ts: np.ndarray, codes: np.ndarray
    ) -> None:
        cols = self._common(evs, ts, codes)
        device = self.ints(args, _arg["device"])
        missing = device < 0
        if missing.any():  # Kineto's GPU rows use the device as pid
            device[missing] = self.int_ids([evs[i] for i in np.flatnonzero(missing)], _get["pid"])
        cols.update(
            kind=kind,
            device=device,
            stream=self.ints(args, _arg["stream"]),
            correlation=self.ints(args, _arg["correlation"]),
            external_id=self._external_ids(args),
            blocks_per_sm=self._measure(args, "blocks_per_sm", 0.0, MAX_PER_SM, "per_sm").astype(np.float32),
            occupancy_pct=self._measure(args, "occupancy", 0.0, 100.0, "occupancy").astype(np.float32),
            grid_blocks=self._launch_dims(list(map(_arg["grid"], args))),
            block_threads=self._launch_dims(list(map(_arg["block"], args))),
            bytes=self._bytes(args),
            comm=comm_column(args, list(map(_arg["collective"], args)), self.comm_args, self.max_name_chars),
        )
        self.gpu_parts.append(cols)
        self.gpu_rows += len(evs)

    def _add_memory(self, events: list[Any]) -> None:
        cols = memory_columns(events, self.int_ids, self.problems)
        if cols is not None:
            self.memory_parts.append(cols)
            self.memory_rows += len(cols["ts"])

    # -- parallel decoding ---------------------------------------------------------------

    def part(self) -> Part:
        """Everything decoded so far, for a worker to send back: one array per column."""
        problems = Counter({k: n for k, n in self.problems.items() if k != "names"})  # absorb counts names again
        return Part(
            names=list(self.names.codes),
            labels=list(self._labels),
            cpu=concat_columns(self.cpu_parts, CPU_COLUMNS) if self.cpu_parts else None,
            gpu=concat_columns(self.gpu_parts, GPU_COLUMNS) if self.gpu_parts else None,
            cpu_rows=self.cpu_rows,
            gpu_rows=self.gpu_rows,
            records=self.records,
            comm_args=list(self.comm_args),
            problems=problems,
            memory=concat_columns(self.memory_parts, MEMORY_COLUMNS) if self.memory_parts else None,
            memory_rows=self.memory_rows,
        )

    def absorb(self, part: Part) -> None:
        """Append a worker's columns (the range after everything added so far), renumbering
        its name codes, pid/tid labels and input rows into this file's."""
        codes = self.name_codes(part.names)
        labels = np.array([self._label(v) for v in part.labels], np.int64)
        records = np.array([self._record_id((r.dims, r.types, r.concrete)) for r in part.records], np.int32)
        if part.cpu is not None:
            part.cpu["name"] = codes[part.cpu["name"]]
            kept = part.cpu["input_id"] >= 0
            part.cpu["input_id"][kept] = records[part.cpu["input_id"][kept]]
            for k in ("pid", "tid"):
                _relabel(part.cpu[k], labels)
            self.cpu_parts.append(part.cpu)
        if part.gpu is not None:
            part.gpu["name"] = codes[part.gpu["name"]]
            _relabel(part.gpu["device"], labels)
            renumber(part.gpu["comm"], part.comm_args, self.comm_args)
            self.gpu_parts.append(part.gpu)
        if part.memory is not None:
            for k in ("pid", "tid"):
                _relabel(part.memory[k], labels)
            self.memory_parts.append(part.memory)
        self.cpu_rows += part.cpu_rows
        self.gpu_rows += part.gpu_rows
        self.memory_rows += part.memory_rows
        self.problems.update(part.problems)

    def tables(self, meta: TraceMeta) -> TraceTables:
        cpu = concat_columns(self.cpu_parts, CPU_COLUMNS)
        gpu = concat_columns(self.gpu_parts, GPU_COLUMNS)
        self.cpu_parts, self.gpu_parts = [], []  # the parts go as soon as the concatenation exists
        # Sort by start time: queries (unions, nesting, step windows) assume it.
        cpu_order = np.argsort(cpu["ts"], kind="stable")
        cpu_table = CpuTable(**{k: cpu.pop(k)[cpu_order] for k in list(cpu)}, input_records=self.records)
        gpu_order = np.argsort(gpu["ts"], kind="stable")
        gpu_table = GpuTable(**{k: gpu.pop(k)[gpu_order] for k in list(gpu)})
        meta.notes.extend(self.notes())
        comm = list(self.comm_args)
        memory = memory_table(self.memory_parts)
        self.memory_parts = []
        return TraceTables(
            meta=meta, names=self.names.table(), cpu=cpu_table, gpu=gpu_table, comm_args=comm, memory=memory
        )


def _relabel(ids: np.ndarray, labels: np.ndarray) -> None:
    """Worker label ids (-2, -3, ...) -> this file's, in place."""
    if len(labels):
        at = ids <= -2
        if at.any():
            ids[at] = labels[-2 - ids[at]]
