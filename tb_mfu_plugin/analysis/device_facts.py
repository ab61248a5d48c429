"""Facts about one device's analysed steps that more than one consumer reads, computed once and
lazily: row masks by kind and name family, which host call launched each GPU row, graph replays,
the optimizer/zero_grad/DataLoader host windows and the GPU rows they launched, attention chains,
host-device syncs and the copies behind them, and the GPU idle gaps with their causes.

Pure array work over the tables (no thresholds of the diagnosis: the two settings that shape a
fact, the attention chain's launch gap and the idle gaps' thresholds, are parameters). The
diagnosis' ``Context`` extends this with the report, its thresholds and the rules' ledger; per-step
figures here are totals over the analysed steps, so they add up (the waterfall relies on that).
"""

from __future__ import annotations

import json
import re
from functools import cached_property

import numpy as np

from ..core.distinct import distinct, distinct_counts
from ..trace.tables import KERNEL, MEMCPY, MEMSET, OP, TraceTables
from .device_view import DeviceView
from .flops.attention_chains import AttentionChain, attention_chains
from .flops.attention_mask import mask_syncs
from .kernels import families as kernel_families
from .kernels import name_patterns
from .time import aggregate, copies, graphs, intervals, syncs, windows
from .time import patterns as pt
from .time.idle_gaps import Gaps, GapThresholds, HostActivity, idle_gaps
from .time.steps import Steps
from .time.thread_ops import ThreadOps

# What ``torch.amp.GradScaler.unscale_`` runs (and only it): the check of the gradients for inf/NaN that
# fills ``found_inf``, which ``GradScaler.step`` then reads with ``.item()`` for an optimizer that cannot
# take it on the GPU.
AMP_UNSCALE_OP = "aten::_amp_foreach_non_finite_check_and_unscale_"
# How far back from a scalar read to look for it: GradScaler reads found_inf right after unscale_, or
# after what the user runs between an explicit ``scaler.unscale_(opt)`` and ``scaler.step(opt)``
# (``clip_grad_norm_``'s foreach norm and scale: about a dozen ops)
FOUND_INF_LOOKBACK = 64
SCALAR_READ_OPS = ("aten::item", "aten::_local_scalar_dense")


def _first_type(types: bytes | None) -> str | None:
    """The first entry of a recorded ``Input type`` list, when it is a non-empty string."""
    try:
        parsed = json.loads(types) if types is not None else None
    except ValueError:
        return None
    first = parsed[0] if isinstance(parsed, list) and parsed else None
    return first if isinstance(first, str) and first else None


class DeviceFacts:
    def __init__(
        self,
        tables: TraceTables,
        steps: Steps,
        view: DeviceView,
        device_index: int | None,
        attention_max_launches_between: int | None = None,
        gap_thresholds: GapThresholds | None = None,
    ) -> None:
        self.tables, self.steps, self.view = tables, steps, view
        self._device_index = device_index
        self._attention_max_launches_between = attention_max_launches_between
        self._gap_thresholds = gap_thresholds
        self.names = tables.names
        self.n = len(steps)
        self.total_us = aggregate.total_us(steps.end - steps.start)
        self.step_us = self.total_us / self.n if self.n else 0.0
        g = view.gpu
        # Which step a GPU row belongs to is the analysis' one rule (steps.assign: the step whose
        # host window holds its launch), so every consumer counts the rows the summary counts.
        self.step_of = view.step
        self.in_step = self.step_of >= 0
        self.is_kernel = g.kind == KERNEL
        self.is_memcpy = g.kind == MEMCPY
        self.is_memset = g.kind == MEMSET
        # tables over name codes, read at GPU rows only: only the GPU rows' names are tested
        self.mm_code = name_patterns.matmul_kernel_mask(self.names, tables.gpu_name_codes)
        self.comm_code = name_patterns.comm_kernel_mask(self.names, tables.gpu_name_codes)
        self.classes = view.classes  # the worker's classes (they honour --tensor-core-pattern)
        self.tc_code = self.classes.mask(kernel_families.TENSOR_CORE)

    # ------------------------------------------------------------------ settings

    @property
    def attention_max_launches_between(self) -> int:
        """Launches allowed between two ops of one attention chain (a setting, not a fact)."""
        if self._attention_max_launches_between is None:
            raise ValueError("these facts were made without the attention chains' launch gap")
        return self._attention_max_launches_between

    @property
    def gap_thresholds(self) -> GapThresholds:
        """The thresholds the idle gaps are attributed with (a setting, not a fact)."""
        if self._gap_thresholds is None:
            raise ValueError("these facts were made without the idle gaps' thresholds")
        return self._gap_thresholds

    # ------------------------------------------------------------------ helpers

    @cached_property
    def matmul_input_dtypes(self) -> dict[str, int]:
        """First-input dtypes (``Input type``) of the matmul/conv ops whose shapes were recorded,
        counted. Two rules read it; computed once, since the roofline keeps many more ops' shapes."""
        out: dict[str, int] = {}
        cpu = self.tables.cpu
        # one regex test per distinct name, and one parse per distinct record, not per op
        rows = cpu.input_rows
        matmul = self.tables.name_codes(re.compile(r"mm|matmul|conv|linear").search, distinct(cpu.name[rows]))
        ids, counts = distinct_counts(cpu.input_id[rows[matmul[cpu.name[rows]]]])
        for i, n in zip(ids.tolist(), counts.tolist(), strict=True):
            first = _first_type(cpu.input_records[i].types)
            if first:
                out[first] = out.get(first, 0) + n
        return out

    @cached_property
    def device_index(self) -> int | None:
        """The report's device index, else the device of the view's first GPU row."""
        if self._device_index is not None:
            return self._device_index
        return int(self.view.gpu.device[0]) if len(self.view.gpu) else None

    @property
    def launcher(self) -> np.ndarray:
        """cpu row of the call that launched each GPU row of the view (-1 unknown)."""
        return self.view.launcher

    @cached_property
    def graph_launched(self) -> np.ndarray:
        """View rows that a CUDA/HIP graph replay ran (one launch call for the whole replay)."""
        return graphs.graph_launched(self.tables, self.launcher)

    @cached_property
    def launched_one_by_one(self) -> np.ndarray:
        """View rows whose own launch call the trace shows (not a graph replay's, not unknown)."""
        own: np.ndarray = (self.launcher >= 0) & ~self.graph_launched
        return own

    @cached_property
    def host_windows(self) -> list[tuple[float, float]]:
        return list(zip(self.steps.cpu_start.tolist(), self.steps.cpu_end.tolist(), strict=True))

    def host_in_steps(self, ts: np.ndarray) -> np.ndarray:
        """Whether each host time lies in a step's host window ``[cpu_start, cpu_end]``."""
        return intervals.window_of(ts, self.steps.cpu_start, self.steps.cpu_end, closed=True) >= 0

    def _step_pairs(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The view rows in ``mask`` (sorted by start) against every step: (row, step) pairs of the
        rows in each step's overlap slice, and each row clipped to its step (start, end, kept)."""
        g = self.view.gpu
        ts, end = g.ts[mask], g.end[mask]
        lo, hi = self.steps.start, self.steps.end
        longest = float((end - ts).max()) if len(ts) else 0.0
        rows, win = windows.overlap_pairs(ts, end, lo, hi, *windows.overlap_bounds(ts, lo, hi, longest))
        return (rows, win, *windows.clipped(ts, end, lo, hi, rows, win))

    def per_step_union(self, mask: np.ndarray) -> float:
        """Total time (over all steps) covered by the view rows in ``mask``, clipped to the steps."""
        _, win, s, e, kept = self._step_pairs(mask)
        per_step = windows.union_lengths(*windows.merged(s[kept], e[kept], win[kept]), self.n)
        return windows.running_total(per_step)  # added step by step

    def per_step_coverage(self, mask: np.ndarray, weights: np.ndarray) -> float:
        """∫ min(1, Σ weights of the active rows in ``mask``) dt over the steps."""
        rows, win, s, e, kept = self._step_pairs(mask)
        w = weights[mask][rows]
        per_step = windows.capped_coverages(s[kept], e[kept], w[kept], np.bincount(win[kept], minlength=self.n))
        return windows.running_total(per_step)

    def launched_in(self, w: pt.Windows) -> np.ndarray:
        """View rows launched from inside the host windows."""
        return pt.launched_in(self.tables, self.launcher, w)

    # ------------------------------------------------------------------ host windows

    def _in_steps(self, rows: np.ndarray) -> np.ndarray:
        """The cpu ``rows`` that start inside a step's host window."""
        kept: np.ndarray = rows[self.host_in_steps(self.tables.cpu.ts[rows])]
        return kept

    @cached_property
    def optimizer_rows(self) -> np.ndarray:
        return self._in_steps(pt.optimizer_step_rows(self.tables))

    @cached_property
    def optimizer_classes(self) -> list[str]:
        """The classes of the optimizers the steps run (``Optimizer.step#AdamW.step``: AdamW), sorted."""
        cpu, names = self.tables.cpu, self.names
        step = name_patterns.OPTIMIZER_STEP
        return sorted({m.group(1) for r in self.optimizer_rows if (m := step.match(names[cpu.name[r]]))})

    @cached_property
    def zero_grad_rows(self) -> np.ndarray:
        return self._in_steps(pt.zero_grad_rows(self.tables))

    @cached_property
    def dataloader_rows(self) -> np.ndarray:
        return self._in_steps(pt.dataloader_rows(self.tables))

    @cached_property
    def attention_chains(self) -> list[AttentionChain]:
        chains = attention_chains(self.tables, self.attention_max_launches_between)
        if not chains:
            return []
        starts = np.array([c.start for c in chains])
        keep = self.host_in_steps(starts)
        return [c for c, k in zip(chains, keep.tolist(), strict=True) if k]

    @cached_property
    def attention_rows(self) -> np.ndarray:
        """View rows launched by the attention chains."""
        chains = self.attention_chains
        if not chains:
            return np.zeros(len(self.view.gpu), bool)
        w = pt.Windows(
            np.array([c.pid for c in chains], np.int64),
            np.array([c.tid for c in chains], np.int64),
            np.array([c.start for c in chains]),
            np.array([c.end for c in chains]),
        )
        return self.launched_in(w) & self.in_step

    @cached_property
    def fused_attention_present(self) -> bool:
        """A fused attention kernel runs, or a fused attention op is called, in the steps: the chains
        found are then not the model's attention (or not all of it)."""
        g = self.view.gpu
        fused = name_patterns.fused_attention_kernel_mask(self.names, self.tables.gpu_name_codes)
        if (fused[g.name] & self.is_kernel & self.in_step).any():
            return True
        cpu = self.tables.cpu
        codes = [i for i, n in enumerate(self.names) if n in name_patterns.FUSED_ATTENTION_OPS]
        if not codes:
            return False
        rows = np.flatnonzero((cpu.kind == OP) & np.isin(cpu.name, codes))
        return bool(self.host_in_steps(cpu.ts[rows]).any())

    @cached_property
    def attention_mask_syncs(self) -> np.ndarray:
        """The cpu rows of the syncs in the build of the hand-written attention's additive mask
        (``flops.attention_mask``): a fused attention builds none, so its fix takes them away."""
        chains = self.attention_chains
        if not chains or self.fused_attention_present:
            return np.empty(0, np.int64)
        ev = self.sync_events
        ops = [root if root is not None else op for op, root in zip(ev.op, ev.root, strict=True)]

        def h2d(row: int) -> bool:
            return self.copy_direction(row) == "H2D"

        return mask_syncs(self.tables, chains, ev.rows, ops, h2d, self.thread_ops)

    @cached_property
    def thread_ops(self) -> ThreadOps:
        return ThreadOps(self.tables)

    def from_host_value(self, copy_op: int | None) -> bool:
        """The copy op is ``torch.tensor(value, device=...)``'s: the constructor copies the value it
        built on the host, then runs ``aten::lift_fresh`` (torch/csrc/utils/tensor_new.cpp)."""
        return copy_op is not None and self.thread_ops.next_named(copy_op, 1, "aten::lift_fresh") is not None

    def reads_found_inf(self, op: int | None) -> bool:
        """The scalar read ``op`` is ``torch.amp.GradScaler.step``'s ``found_inf.item()``: the last
        ``AMP_UNSCALE_OP`` among the ``FOUND_INF_LOOKBACK`` ops before it on its thread, in the same step,
        with no other scalar read between them. GradScaler reads it so only for an optimizer that cannot
        take it on the GPU (torch/amp/grad_scaler.py: ``_maybe_opt_step``); a fused one can."""
        ops = self.thread_ops
        unscale = ops.code(AMP_UNSCALE_OP)
        if op is None or unscale is None:
            return False
        cpu = self.tables.cpu
        before = ops.before(op, FOUND_INF_LOOKBACK)
        hits = np.flatnonzero(cpu.name[before] == unscale)
        if not len(hits):
            return False
        last = int(before[hits[-1]])
        reads = {c for n in SCALAR_READ_OPS if (c := ops.code(n)) is not None}
        between = before[hits[-1] + 1 :]
        # the read's own parent (aten::item around aten::_local_scalar_dense) starts before it
        other = [r for r in between.tolist() if int(cpu.name[r]) in reads and cpu.end[r] < cpu.ts[op]]
        step = intervals.window_of(cpu.ts[[last, op]], self.steps.cpu_start, self.steps.cpu_end, closed=True)
        return not other and step[0] >= 0 and step[0] == step[1]

    @cached_property
    def optimizer_launched(self) -> np.ndarray:
        return self.launched_in(pt.Windows.of_rows(self.tables, self.optimizer_rows)) & self.in_step

    @cached_property
    def optimizer_kernels(self) -> np.ndarray:
        """View rows of the kernels the optimizer steps launched, collective kernels left out: those are
        communication, not the step's math that a fused optimizer replaces."""
        kernels: np.ndarray = self.optimizer_launched & self.is_kernel & ~self.comm_code[self.view.gpu.name]
        return kernels

    @cached_property
    def zero_grad_launched(self) -> np.ndarray:
        return self.launched_in(pt.Windows.of_rows(self.tables, self.zero_grad_rows)) & self.in_step

    # ------------------------------------------------------------------ syncs

    @property
    def sync_events(self) -> syncs.SyncEvents:
        return self.view.syncs  # found once by the analysis

    def copy_direction(self, row: int | None) -> str | None:
        """Direction of the memcpy launched inside a host op, if any."""
        if row is None:
            return None
        cpu = self.tables.cpu
        m = self._memcpy_launches
        if not len(m[0]):
            return None
        rows, dirs = m
        sel = (
            (cpu.pid[rows] == cpu.pid[row])
            & (cpu.tid[rows] == cpu.tid[row])
            & (cpu.ts[rows] >= cpu.ts[row])
            & (cpu.ts[rows] <= cpu.end[row])
        )
        found = dirs[sel]
        for d in ("D2H", "H2D", "D2D"):
            if (found == copies.DIRECTIONS.index(d)).any():
                return d
        return None

    @cached_property
    def _memcpy_launches(self) -> tuple[np.ndarray, np.ndarray]:
        gpu = self.tables.gpu
        launcher = self.tables.launcher
        sel = np.flatnonzero((gpu.kind == MEMCPY) & (launcher >= 0))
        direction, _ = copies.classify(self.names, self.tables.gpu_name_codes)
        return launcher[sel], direction[gpu.name[sel]]

    # ------------------------------------------------------------------ idle gaps

    @cached_property
    def gaps(self) -> Gaps:
        """GPU idle gaps over the analysed steps and what caused them (``analysis.time.idle_gaps``): the
        analysis' own (``DeviceView.gaps``, behind the report's ``gpu_idle_after_sync_share``) when it
        attributed them with these thresholds, so the waterfall and the report agree."""
        mine = self.gap_thresholds
        if self.view.gap_thresholds == mine:
            return self.view.gaps
        host = HostActivity(self.dataloader_rows, self.sync_events.rows, self.launcher, self.graph_launched)
        tol, launch_max = mine.sync_gap_tolerance_us, mine.launch_gap_max_us
        return idle_gaps(self.tables, self.steps, self.view.gpu, host, tol, launch_max)

    # ------------------------------------------------------------------ ops

    def op_count_in_steps(self, name: str) -> int:
        cpu = self.tables.cpu
        try:
            code = self.names.index(name)
        except ValueError:
            return 0
        rows = np.flatnonzero((cpu.kind == OP) & (cpu.name == code))
        return int(self.host_in_steps(cpu.ts[rows]).sum())
