"""The report's ``timeline`` block (``WorkerReport.timeline``): one representative step drawn as
lanes of intervals, with the critical path and the findings pinned on it (docs/timeline.md).

The intervals are columns (one list per field, one entry per interval) rather than a list of
objects: a step of 10,000 kernels is some 30,000 intervals, and a key per value would triple the
block. Times are µs from the step's start (``Timeline.start_us`` on the trace's clock), rounded
to the nanosecond, as the trace writes them.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# host: a thread that launched the step's GPU work (or synchronised with it); stream: a GPU stream's
# kernels; communication: a stream whose kernels are mostly collectives; copies: every memcpy and
# memset of the device; idle: the stretches with nothing running on the device.
LaneKind = Literal["host", "stream", "communication", "copies", "idle"]

# The classes of the intervals, in this order (``Timeline.classes``; ``classes.py`` says what each
# holds). A bin takes the class that has most of its time.
CLASSES: tuple[str, ...] = (
    "matmul",
    "attention",
    "elementwise",
    "kernel",
    "communication",
    "copy",
    "memset",
    "host_op",
    "launch",
    "runtime",
    "sync_wait",
    "gpu_gap",
)


class TimelineLane(msgspec.Struct, kw_only=True):
    name: str  # "thread 609", "stream 7", "stream 20 · collectives", "copies and memsets", "GPU idle"
    kind: LaneKind
    # where the lane's events are in the trace: a thread's pid and tid; a stream's device and stream
    # (Kineto's pid and tid of GPU events); None for the copies and idle lanes, which gather several
    pid: int | None = None
    tid: int | None = None
    events: int  # the step's events drawn on it (a bin counts the events merged into it)
    busy_us: float  # the time of those events inside the step (a bin's: its events' time)


class TimelineIntervals(msgspec.Struct, kw_only=True):
    """One entry per interval in each list, sorted by lane, then by start."""

    lane: list[int]  # index into Timeline.lanes
    start_us: list[float]  # from the step's start
    dur_us: list[float]
    cls: list[int]  # index into Timeline.classes
    name: list[int]  # index into Timeline.names: the kernel, copy, call or op (a bin: its longest event's)
    op: list[int]  # index into Timeline.names: the host op that launched it / that it lies in; -1 none
    # min(1, blocks per SM) of a kernel (a bin: time-weighted over its kernels that report it); None
    # where unknown (no grid, ROCm, a copy, a host interval)
    sm_efficiency: list[float | None]
    # The bins among them (most steps have none), as three more lists with an entry per bin: the
    # bin's index above, how many events it merges, and their time (an event's time is its dur_us).
    bins: list[int] = []
    bin_count: list[int] = []
    bin_busy_us: list[float] = []


class TimelineMark(msgspec.Struct, kw_only=True):
    """A finding pinned to a moment of the step: where its cost lies (the time its rule claims,
    ``diagnosis.cost_time``), or the call that causes it."""

    # the finding's id and subject, unique in a report (the run's diagnosis may re-sort the findings
    # and add some after the device's, so a mark names its finding rather than its index)
    id: str
    subject: str | None = None
    lane: int | None  # index into Timeline.lanes; None: the whole step (a finding with no moment in it)
    start_us: float
    dur_us: float
    what: str  # the mark in words: "host blocked 1.2 ms in cudaStreamSynchronize (aten::item)"


class TimelinePath(msgspec.Struct, kw_only=True):
    """The step's critical path (``analysis.critical_path``) as the stretches it runs through, in
    time order. They add up to the step, and by class to ``critical_path.steps``' entry, unless
    stretches were merged (``merged_us``)."""

    classes: list[str]  # the critical path's classes (CriticalPath.classes)
    lane: list[int]  # the lane of the work (an edge: of the work that waited)
    start_us: list[float]
    dur_us: list[float]
    cls: list[int]  # index into classes
    # consecutive stretches on one lane shorter than this were merged into one, of the class with
    # most of their time (a path of more than block.MAX_PATH stretches); None: none were
    merged_us: float | None = None


class Timeline(msgspec.Struct, kw_only=True):
    """One analysed step of the device, as lanes of intervals (docs/timeline.md)."""

    step: int  # N of ProfilerStep#N
    why: str  # why this step: "the step closest to the median step time (...)"
    start_us: float  # the step's start on the trace's clock (the ``ts`` of its events, µs)
    dur_us: float
    classes: list[str]  # CLASSES
    names: list[str]  # the names the intervals point at (long ones cut)
    lanes: list[TimelineLane]
    intervals: TimelineIntervals
    marks: list[TimelineMark] = []
    critical_path: TimelinePath | None = None  # None where the step has no critical-path model
    # events shorter than this were merged into bins (the step had more than the block keeps);
    # None: every event is drawn as it is
    bin_us: float | None = None
    events: int = 0  # the step's events before any merging
    notes: list[str] = []
