"""What ``tb-mfu`` prints about device memory (``WorkerReport.memory``; docs/memory.md): the peak
against the device, the headroom, checkpointing's trade, the steps and the ops alive at the peak.

Rendering only, from reports already made safe by ``escape.for_rich``. A trace without memory
events prints nothing here (its JSON report says why: ``memory.unavailable``).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analysis.definitions import label
from ..analysis.fmt import count, figure, nbytes, pct, us
from ..analysis.memory.types import Memory, MemoryOp
from ..analysis.report import WorkerReport

_STEP_COLUMNS = (
    "memory.steps.peak_allocated_bytes",
    "memory.steps.peak_reserved_bytes",
    "memory.steps.allocated_start_bytes",
    "memory.steps.allocated_end_bytes",
    "memory.steps.growth_bytes",
    "memory.steps.reserved_minus_allocated_bytes",
)


def print_memory(console: Console, w: WorkerReport) -> None:
    m = w.memory
    if m is None or m.unavailable is not None:
        return
    console.print(_headline(m), highlight=False)
    h = m.headroom
    if h is not None:
        console.print(
            f"  {label('memory.headroom.batch_factor')} {figure('memory.headroom.batch_factor', h.batch_factor)} "
            f"({label('memory.headroom.batch_factor_at_90')}: "
            f"{figure('memory.headroom.batch_factor_at_90', h.batch_factor_at_90)}): "
            f"{label('memory.headroom.fixed_bytes').lower()} {nbytes(h.fixed_bytes)}, "
            f"{label('memory.headroom.batch_scaled_bytes').lower()} {nbytes(h.batch_scaled_bytes)}",
            highlight=False,
        )
    r = m.recompute
    if r is not None:
        console.print(
            f"  activation checkpointing: {label('memory.recompute.us_per_step')} {us(r.us_per_step)} "
            f"(host {us(r.host_us_per_step)}, GPU {us(r.gpu_us_per_step)}, {count(r.regions_per_step)} regions), "
            f"{label('memory.recompute.saved_bytes')} {nbytes(r.saved_bytes)}",
            highlight=False,
        )
    _print_steps(console, m)
    _print_ops(console, f"Alive at the peak (step {m.peak_step}), by the op that allocated", m.top_ops)
    _print_ops(console, "Kept from step to step (allocated, never freed), per step", m.kept_ops)
    for n in m.notes:
        console.print(f"[dim]note:[/] {n}", highlight=False)


def _headline(m: Memory) -> str:
    where = ""
    if m.peak_phase or m.peak_op:
        where = f", in {m.peak_phase or 'an unknown phase'}" + (f" at {m.peak_op}" if m.peak_op else "")
    device = f" of {nbytes(m.device_total_bytes)} ({pct(m.peak_share)})" if m.device_total_bytes else ""
    return (
        f"[bold]Memory[/]: {label('memory.peak_allocated_bytes')} {nbytes(m.peak_allocated_bytes)}{device}{where}; "
        f"{label('memory.peak_reserved_bytes')} {nbytes(m.peak_reserved_bytes)}, "
        f"{label('memory.reserved_minus_allocated_bytes')} {nbytes(m.reserved_minus_allocated_bytes)}; "
        f"{label('memory.growth_per_step_bytes')} {nbytes(m.growth_per_step_bytes)}"
        + (f"; {count(m.oom_events)} out-of-memory events" if m.oom_events else "")
    )


def _print_steps(console: Console, m: Memory) -> None:
    t = Table(title="Memory per step", title_justify="left")
    t.add_column("step", justify="right")
    for k in _STEP_COLUMNS:
        t.add_column(label(k), justify="right")
    t.add_column("peak in", justify="left")
    t.add_column("peak op", justify="left", overflow="ellipsis", max_width=40)
    for s in m.steps:
        values = (getattr(s, k.rsplit(".", 1)[1]) for k in _STEP_COLUMNS)
        cells = [figure(k, v) if v is not None else "n/a" for k, v in zip(_STEP_COLUMNS, values, strict=True)]
        t.add_row(str(s.step), *cells, s.peak_phase or "", s.peak_op or "")
    console.print(t)


def _print_ops(console: Console, title: str, ops: list[MemoryOp]) -> None:
    if not ops:
        return
    t = Table(title=title, title_justify="left")
    t.add_column("op", overflow="ellipsis", max_width=44)
    t.add_column("inside", overflow="ellipsis", max_width=44)
    t.add_column("bytes", justify="right")
    t.add_column("allocations", justify="right")
    for o in ops:
        t.add_row(o.name, o.root_op or "", nbytes(o.bytes), count(o.count) if o.count else "")
    console.print(t)
