"""What every rule reads: the analysis' facts of one device (``analysis.device_facts``: masks,
launchers, host windows, syncs, idle gaps, attention chains), plus what only the diagnosis has: the
report, the thresholds, the words for each sync's cause, and the ledger of what each fix changes.

The facts are analysis and live there; this class adds no computation of its own beyond naming
the syncs' causes, so that a rule never re-derives a figure the report already carries."""

from __future__ import annotations

from functools import cached_property

from ..analysis.critical_path.whatif import Change
from ..analysis.device_facts import SCALAR_READ_OPS, DeviceFacts
from ..analysis.device_view import DeviceView
from ..analysis.report import WorkerReport
from ..analysis.time.idle_gaps import GapThresholds
from ..analysis.time.steps import Steps
from ..trace.tables import TraceTables
from .sync_subjects import SyncCause, sync_subject
from .thresholds import Thresholds


class ReportFacts:
    """What a rule that reads only a device's report needs: the report, its mean step, its MFU, the
    thresholds, and the ledger of what each fix changes. The run-level rule (``low_bus_bandwidth``
    on bandwidths measured from every rank's arrival, ``reporting.run``) reads no more than this."""

    def __init__(self, report: WorkerReport, th: Thresholds) -> None:
        self.report, self.th = report, th
        summary = report.summary
        self.mfu = summary.mfu if summary is not None else None
        self.step_us = summary.step_time_us if summary is not None else 0.0
        # (finding id, subject) -> what its fix changes and the MFU its projection starts from: the
        # rules' Hit.change, which the engine re-times (diagnosis.whatif_gains)
        self.changes: dict[tuple[str, str | None], tuple[Change, float | None]] = {}


class Context(DeviceFacts, ReportFacts):
    """The facts of one device's analysis and its report, for the rules."""

    def __init__(
        self, report: WorkerReport, tables: TraceTables, steps: Steps, view: DeviceView, th: Thresholds
    ) -> None:
        device = report.device
        DeviceFacts.__init__(self, tables, steps, view, device.index if device is not None else None)
        ReportFacts.__init__(self, report, th)

    # The two settings of the facts come from the thresholds when a fact needs them, not here:
    # the rules' tests record which thresholds each rule reads, and a read at construction would
    # be charged to whichever rule ran first.
    @property
    def attention_max_launches_between(self) -> int:
        return self.th.attention_max_launches_between

    @property
    def gap_thresholds(self) -> GapThresholds:
        return GapThresholds(self.th.sync_gap_tolerance_us, self.th.launch_gap_max_us)

    @cached_property
    def sync_causes(self) -> list[SyncCause]:
        """One cause per sync event (same order as ``sync_events.rows``), in the user's words."""
        cpu, names = self.tables.cpu, self.names
        ev = self.sync_events
        out = []
        for r, op, root in zip(ev.rows.tolist(), ev.op, ev.root, strict=True):
            api = names[cpu.name[r]]
            op_name = names[cpu.name[op]] if op is not None else None
            root_name = names[cpu.name[root]] if root is not None else None
            copy_op = root if root is not None else op
            direction = self.copy_direction(copy_op)
            built = direction == "H2D" and self.from_host_value(copy_op)
            found_inf = (op_name in SCALAR_READ_OPS or root_name in SCALAR_READ_OPS) and self.reads_found_inf(copy_op)
            subject = sync_subject(api, op_name, root_name, direction, built, found_inf)
            out.append(SyncCause(subject, api, op_name, root_name, direction))
        return out
