"""The compiled fast path of the decoder: a chunk of events straight to columns (``_kineto.c``).

msgspec builds a Python object per event and per field read, and turning ~2 M of them into
numpy columns cost more than the parse itself (docs/scaling.md). ``_kineto.decode`` reads a
chunk's bytes once in C and writes the columns the analysis reads, with one Python object per
distinct name and per distinct recorded shape, not per event. ``add_block`` then applies the
same checks, repairs and counts as ``Columns.add`` (the shared ``Columns`` methods), so the
tables are identical either way (tests/trace/test_fast_decode.py compares them).

The C parser accepts only what it reads exactly as msgspec does and answers None for anything
else (a string id, a ``\\u`` escape, a ``[memory]`` instant, a missing category, malformed
JSON...): that chunk is then decoded by msgspec, which raises the same errors and makes the
same repairs as before. The extension is optional (built at install where a C compiler is
present, ``setup.py``); without it, or with ``$TB_MFU_FAST_DECODE=0``, every chunk takes the
msgspec path.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import numpy as np

from ..tables import ANNOTATION, OpInputs
from . import schema
from .categories import CAT_CLASS
from .comm_args import comm_record

try:
    from . import _kineto  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler at install): the msgspec path alone
    _kineto = None

ENV = "TB_MFU_FAST_DECODE"  # "0": never use the compiled path (benchmarks, comparisons)
_CATS = tuple((cat.encode(), cls) for cat, cls in CAT_CLASS.items())
_args = msgspec.json.Decoder(schema.Args)

# The C parser's columns, in its order, with their dtypes.
_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("cls", np.int8),
    ("ts", np.float64),
    ("dur", np.float64),
    ("name", np.int32),
    ("pid", np.int64),
    ("tid", np.int64),
    ("external_id", np.int64),
    ("external_id_legacy", np.int64),
    ("correlation", np.int64),
    ("device", np.int64),
    ("stream", np.int64),
    ("bytes", np.int64),
    ("blocks_per_sm", np.float64),
    ("occupancy", np.float64),
    ("flops", np.float64),
    ("grid", np.int64),
    ("block", np.int64),
    ("record", np.int32),
)


def available() -> bool:
    """Whether chunks go through the compiled parser (built, and not turned off)."""
    return _kineto is not None and os.environ.get(ENV, "1").strip() != "0"


@dataclass
class Block:
    """The complete events of one chunk, as columns (the rows an analysed category and a
    plausible time keep, in file order)."""

    rows: int
    bad_ts: int  # rows dropped for a non-finite or absurd ts (the "ts" note)
    cols: dict[str, np.ndarray]
    names: list[str]  # the distinct names, in first-appearance order: the "name" column indexes it
    records: list[tuple[bytes, bytes | None, bytes | None]]  # distinct (dims, types, concrete): "record"
    comm: list[tuple[int, bytes]]  # (row, its args object) of kernels with a "Collective name"


def decode(view: memoryview) -> Block | None:
    """The chunk's columns, or None: decode this chunk with msgspec instead."""
    if not available():
        return None
    got = _kineto.decode(view, _CATS)
    if got is None:
        return None
    rows, bad_ts, raw, names, records, comm = got
    cols = {name: np.frombuffer(buf, dtype) for (name, dtype), buf in zip(_COLUMNS, raw, strict=True)}
    return Block(rows, bad_ts, cols, names, records, comm)


class Sink(Protocol):
    """What ``add_block`` uses of ``columns.Columns`` (a protocol: columns.py imports this module)."""

    problems: Counter[str]
    names: Any  # name_codes.NameCodes
    comm_args: dict[Any, int]
    max_name_chars: int
    keep_inputs: Any
    cpu_parts: list[dict[str, np.ndarray]]
    gpu_parts: list[dict[str, np.ndarray]]
    cpu_rows: int
    gpu_rows: int

    def name_codes(self, names: list[str]) -> np.ndarray: ...
    def common_columns(self, dur: np.ndarray, ts: np.ndarray, codes: np.ndarray) -> dict[str, np.ndarray]: ...
    def measure(self, x: np.ndarray, lo: float, hi: float, problem: str) -> np.ndarray: ...
    def launch_dims(self, out: np.ndarray) -> np.ndarray: ...
    def copy_bytes(self, b: np.ndarray) -> np.ndarray: ...
    def _record_id(self, key: tuple[bytes, bytes | None, bytes | None]) -> int: ...


def add_block(c: Sink, b: Block) -> None:
    """``Columns.add`` for a decoded block."""
    c.problems["ts"] += b.bad_ts
    if not b.rows:
        return
    cols = b.cols
    codes = c.name_codes(b.names)[cols["name"]]
    cls = cols["cls"]
    which, kind = cls >> 3, cls & 7
    comm = np.full(b.rows, -1, np.int32)
    for row, args in b.comm:
        if which[row] != 2:  # record_param_comms ops carry the args too; only kernels have a comm column
            continue
        comm[row] = c.comm_args.setdefault(comm_record(_args.decode(args), c.max_name_chars), len(c.comm_args))
    ext = np.where(cols["external_id"] >= 0, cols["external_id"], cols["external_id_legacy"])
    cpu = np.flatnonzero(which == 1)
    if len(cpu):
        at = _rows(cpu, b.rows)
        names = codes[at]
        part = c.common_columns(cols["dur"][at], cols["ts"][at], names)
        part.update(
            kind=np.where(c.names.is_step[names], ANNOTATION, kind[at]).astype(np.int8),
            pid=cols["pid"][at],
            tid=cols["tid"][at],
            external_id=ext[at],
            correlation=cols["correlation"][at],
            flops=c.measure(cols["flops"][at], 0.0, 1e30, "flops"),
            input_id=_input_ids(c, b, cols["record"][at], names),
        )
        c.cpu_parts.append(part)
        c.cpu_rows += len(cpu)
    gpu = np.flatnonzero(which == 2)
    if len(gpu):
        at = _rows(gpu, b.rows)
        device = cols["device"][at]
        device = np.where(device < 0, cols["pid"][at], device)  # Kineto's GPU rows use the device as pid
        part = c.common_columns(cols["dur"][at], cols["ts"][at], codes[at])
        part.update(
            kind=kind[at].astype(np.int8),
            device=device,
            stream=cols["stream"][at],
            correlation=cols["correlation"][at],
            external_id=ext[at],
            blocks_per_sm=c.measure(cols["blocks_per_sm"][at], 0.0, 1e9, "per_sm").astype(np.float32),
            occupancy_pct=c.measure(cols["occupancy"][at], 0.0, 100.0, "occupancy").astype(np.float32),
            grid_blocks=c.launch_dims(cols["grid"][at].copy()),
            block_threads=c.launch_dims(cols["block"][at].copy()),
            bytes=c.copy_bytes(cols["bytes"][at].copy()),
            comm=comm[at],
        )
        c.gpu_parts.append(part)
        c.gpu_rows += len(gpu)


def _rows(sel: np.ndarray, n: int) -> slice | np.ndarray:
    """All rows as a slice (no copy), else the selection."""
    return slice(None) if len(sel) == n else sel


def _input_ids(c: Sink, b: Block, local: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The "input_id" column: the block's record of each op whose shapes are kept, renumbered
    into the file's records in order of first appearance among those ops (as ``Columns`` does)."""
    out = np.full(len(local), -1, np.int32)
    if c.keep_inputs is None:
        return out
    at = np.flatnonzero(c.names.wanted[codes] & (local >= 0))
    if not len(at):
        return out
    mine = local[at]
    distinct, first = np.unique(mine, return_index=True)
    ids = np.full(len(b.records), -1, np.int32)
    for r in distinct[np.argsort(first, kind="stable")].tolist():
        ids[r] = c._record_id(b.records[r])
    out[at] = ids[mine]
    return out


__all__ = ["Block", "OpInputs", "add_block", "available", "decode"]
