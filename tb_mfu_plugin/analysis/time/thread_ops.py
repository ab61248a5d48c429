"""The ops of each host thread in time order, to ask what a thread ran right after an op.

Kineto exports no data flow between ops, but the op a thread runs next is often what consumed a
result: ``torch.tensor(value, device=...)`` is a copy followed by ``aten::lift_fresh``, and
transformers' eager mask's copy is followed by the ``aten::where`` that builds the mask. Each thread's
ops are sorted once, when it is first asked about. Looking back works the same way:
``torch.amp.GradScaler.step`` reads ``found_inf`` with ``.item()`` right after its unscale op.
"""

from __future__ import annotations

import numpy as np

from ...trace.tables import OP, TraceTables


class ThreadOps:
    def __init__(self, tables: TraceTables) -> None:
        self.tables = tables
        self._ops = np.flatnonzero(tables.cpu.kind == OP)
        self._threads: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._codes: dict[str, int] | None = None  # name -> code, made on the first name asked for

    def _thread(self, pid: int, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """The thread's op rows by start time (ties by row order), and their starts."""
        got = self._threads.get((pid, tid))
        if got is None:
            cpu, ops = self.tables.cpu, self._ops
            mine = ops[(cpu.pid[ops] == pid) & (cpu.tid[ops] == tid)]
            mine = mine[np.argsort(cpu.ts[mine], kind="stable")]
            got = self._threads[(pid, tid)] = (mine, cpu.ts[mine])
        return got

    def after(self, row: int, k: int) -> np.ndarray:
        """The first ``k`` ops (cpu rows) that start on ``row``'s thread once ``row`` has ended."""
        cpu = self.tables.cpu
        mine, starts = self._thread(int(cpu.pid[row]), int(cpu.tid[row]))
        at = int(np.searchsorted(starts, cpu.end[row], side="left"))
        rows: np.ndarray = mine[at : at + k]
        return rows

    def before(self, row: int, k: int) -> np.ndarray:
        """The last ``k`` ops (cpu rows) that start on ``row``'s thread before ``row`` starts, in time
        order (the ops it runs inside among them)."""
        cpu = self.tables.cpu
        mine, starts = self._thread(int(cpu.pid[row]), int(cpu.tid[row]))
        at = int(np.searchsorted(starts, cpu.ts[row], side="left"))
        rows: np.ndarray = mine[max(at - k, 0) : at]
        return rows

    def code(self, name: str) -> int | None:
        """The name's code in the trace's name table, None where no event has that name."""
        if self._codes is None:
            self._codes = {n: i for i, n in enumerate(self.tables.names)}
        return self._codes.get(name)

    def next_named(self, row: int, k: int, name: str) -> int | None:
        """The first op named ``name`` among the ``k`` ops after ``row`` on its thread, None none."""
        code = self.code(name)
        if code is None:
            return None
        later = self.after(row, k)
        hit = later[self.tables.cpu.name[later] == code]
        return int(hit[0]) if len(hit) else None
