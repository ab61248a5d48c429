"""The counted ops of one trace (``OpFlops``, from ``flop_count``) and their FLOPs per window.

Three FLOP conventions come out of the same ops: ``flops`` counts every executed FLOP as
FlopCounterMode does (HFU), ``model_flops`` removes all recompute (PaLM's MFU), and
``mfu_flops`` removes only the activation-checkpoint re-runs (what FlopCounterMode counts for
the same model trained without checkpointing: the headline MFU).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ...core.distinct import distinct, distinct_inverse
from ..time import intervals


@dataclass(frozen=True)
class OpFlops:
    """The counted ops of one trace, in time order (rows of ``tables.cpu``)."""

    row: np.ndarray  # int64 cpu row
    ts: np.ndarray  # float64 µs, op start (attribute to steps by this)
    flops: np.ndarray  # float64, FlopCounterMode convention (recompute included)
    recompute_flops: np.ndarray  # float64, part of ``flops`` that repeats forward work
    checkpoint_recompute: np.ndarray  # bool, the whole op re-runs forward (activation checkpointing)
    name: np.ndarray  # int32 code into ``names``
    dtype: np.ndarray  # object: "bf16", "fp16", "fp32", "fp8", ... or "unknown"
    family: np.ndarray  # object: "matmul" | "conv" | "attention"
    exact: np.ndarray  # bool: False where a documented assumption was needed
    device: np.ndarray  # int32, the device its GPU work ran on (-1 unknown / CPU-only)
    names: list[str]
    # per row of ``tables.gpu``: launched inside a counted op / name of the launching op
    kernel_counted: np.ndarray  # bool
    kernel_op_name: np.ndarray  # int32 code into ``names``, -1 when unknown
    gpu_work_required: bool
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.row)

    def for_device(self, device: int) -> OpFlops:
        """The ops whose GPU work ran on ``device`` (ops of unknown device go to every device
        when the trace has one device, else to none)."""
        known = self.device[self.device >= 0]
        single = len(distinct(known)) <= 1
        keep = (self.device == device) | ((self.device < 0) & single)
        idx = np.flatnonzero(keep)
        per_op = {f: getattr(self, f)[idx] for f in _PER_OP_FIELDS}
        return dataclasses.replace(self, **per_op)

    @property
    def total(self) -> float:
        return float(self.flops.sum())

    @property
    def model_flops(self) -> np.ndarray:
        """FLOPs per op without recompute (PaLM's MFU convention)."""
        out: np.ndarray = self.flops - self.recompute_flops
        return out

    @property
    def mfu_flops(self) -> np.ndarray:
        """FLOPs per op without activation-checkpoint re-runs; the fused attention backward's
        Q·Kᵀ recompute stays, as FlopCounterMode counts it."""
        return self.flops - np.where(self.checkpoint_recompute, self.recompute_flops, 0.0)

    def dominant_dtype(self) -> str | None:
        """FLOP-weighted compute dtype of the counted ops (None when nothing counted)."""
        if not len(self):
            return None
        acc = self._flops_by_dtype()
        known = {k: v for k, v in acc.items() if k != "unknown"}
        pick = known or acc
        return max(pick, key=lambda k: pick[k])

    def dtype_shares(self) -> dict[str, float]:
        tot = self.total
        if tot <= 0:
            return {}
        acc = self._flops_by_dtype()
        return {k: v / tot for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}

    def _flops_by_dtype(self) -> dict[str, float]:
        """Total FLOPs per dtype, in the order the dtypes first appear."""
        acc: dict[str, float] = {}
        for d, f in zip(self.dtype.tolist(), self.flops.tolist(), strict=True):
            acc[d] = acc.get(d, 0.0) + f
        return acc

    def by_op(self) -> dict[str, float]:
        """Total FLOPs per op name, largest first."""
        if not len(self):
            return {}
        codes, inv = distinct_inverse(self.name)
        sums = np.bincount(inv, weights=self.flops)
        order = np.argsort(-sums)
        return {self.names[int(codes[i])]: float(sums[i]) for i in order}


# The fields of ``OpFlops`` with one entry per counted op (the rest describe the whole trace).
_PER_OP_FIELDS = (
    "row",
    "ts",
    "flops",
    "recompute_flops",
    "checkpoint_recompute",
    "name",
    "dtype",
    "family",
    "exact",
    "device",
)


@dataclass(frozen=True)
class WindowFlops:
    flops: np.ndarray  # per window, every executed FLOP, FlopCounterMode convention (HFU numerator)
    model_flops: np.ndarray  # per window, all recompute removed (PaLM convention)
    # per window, FlopCounterMode convention without activation-checkpoint re-runs: what
    # FlopCounterMode counts for the same model trained without checkpointing (headline MFU)
    mfu_flops: np.ndarray


def flops_in_windows(of: OpFlops, start_us: np.ndarray, end_us: np.ndarray) -> WindowFlops:
    """FLOPs of counted ops whose start falls in each ``[start, end)`` window (e.g. steps)."""
    nwin = len(np.asarray(start_us))
    w = intervals.window_of_unsorted(of.ts, start_us, end_us)
    ok = w >= 0

    def per_window(values: np.ndarray) -> np.ndarray:
        return np.bincount(w[ok], weights=values[ok], minlength=nwin)[:nwin].astype(np.float64)

    return WindowFlops(per_window(of.flops), per_window(of.model_flops), per_window(of.mfu_flops))
