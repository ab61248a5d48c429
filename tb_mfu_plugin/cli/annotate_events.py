"""The events ``tb-mfu annotate`` adds to a trace: Chrome trace-event JSON that Perfetto and
chrome://tracing draw beside the trace's own (docs/timeline.md).

Per device (a ``WorkerReport``):

- counter tracks on the GPU's process, one sample per analysed step at its start: MFU, SM
  efficiency, GPU busy (percent) and the step's peak allocated memory (GB, for traces recorded with
  profile_memory=True); a step whose figure is unknown has no sample;
- the findings of the representative step (``WorkerReport.timeline``): an instant event on the
  lane where each mark is (a host thread, a GPU stream; process-wide on the GPU for the copy and
  idle lanes), with the finding's words and gain in ``args``, and the marks as spans on tracks of
  their own, one per finding ("tb-mfu: <id>"; a second row where its marks overlap, as Perfetto
  draws only properly nested slices on one track);
- the critical path of that step as spans on a track of its own ("tb-mfu: critical path").

Kineto writes a GPU's events with ``pid`` = the device index and ``tid`` = the stream, so the new
tracks sit in the GPU's process; their thread ids are far above any stream's.
"""

from __future__ import annotations

from typing import Any

from ..analysis.report import Finding, WorkerReport
from ..analysis.timeline.types import Timeline, TimelineMark

CAT = "tb-mfu"
PATH_TID = 2_000_000_000  # the critical-path track's thread id on the GPU's process
MARKS_TID = PATH_TID + 1  # the first finding's spans, then ROWS ids per finding
ROWS = 4  # rows of one finding's spans at most (its host calls, the drains, the idle: 3)


def extra_events(reports: list[WorkerReport]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for w in reports:
        if w.error is not None or w.device is None or w.device.index is None:
            continue
        gpu = w.device.index
        out += _counters(w, gpu)
        if w.timeline is not None:
            out += _marks(w, w.timeline, gpu)
            out += _path(w.timeline, gpu)
    return out


def _thread(pid: int, tid: int, name: str, sort: int) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
        {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": sort}},
    ]


def _counters(w: WorkerReport, gpu: int) -> list[dict[str, Any]]:
    peaks = {s.step: s.peak_allocated_bytes for s in w.memory.steps} if w.memory is not None else {}
    out = []
    for s in w.steps:
        # (name, unit, value): chrome://tracing draws a track per name with the unit as its series,
        # Perfetto a track named "name unit"
        series = (
            ("tb-mfu MFU", "%", None if s.mfu is None else 100 * s.mfu),
            ("tb-mfu SM efficiency", "%", None if s.sm_efficiency is None else 100 * s.sm_efficiency),
            ("tb-mfu GPU busy", "%", 100 * s.gpu_busy_share),
            ("tb-mfu memory allocated, step peak", "GB", _gb(peaks.get(s.step))),
        )
        for name, unit, value in series:
            if value is not None:
                out.append({"ph": "C", "cat": CAT, "name": name, "pid": gpu, "ts": s.start_us, "args": {unit: value}})
    return out


def _gb(nbytes: int | None) -> float | None:
    return None if nbytes is None else nbytes / 1e9


def _finding(w: WorkerReport, m: TimelineMark) -> Finding | None:
    return next((f for f in w.findings if f.id == m.id and f.subject == m.subject), None)


def _marks(w: WorkerReport, t: Timeline, gpu: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rows: dict[tuple[str, str | None], list[float]] = {}  # per finding, where each of its rows ends
    for m in sorted(t.marks, key=lambda m: m.start_us):
        f = _finding(w, m)
        if f is None:
            continue
        ts = t.start_us + m.start_us
        args = {
            "finding": f.id,
            "subject": f.subject,
            "severity": f.severity,
            "title": f.title,
            "est_gain_us_per_step": f.est_gain_us_per_step,
            "est_gain_share": f.est_gain_share,
            "recommendation": f.recommendation,
            "what": m.what,
            "dur_us": m.dur_us,
        }
        lane = t.lanes[m.lane] if m.lane is not None else None
        instant: dict[str, Any] = {"ph": "i", "cat": CAT, "name": f"{f.id}: {f.title}", "ts": ts, "args": args}
        if lane is not None and lane.pid is not None and lane.tid is not None:
            instant.update(s="t", pid=lane.pid, tid=lane.tid)
        else:
            instant.update(s="p", pid=gpu, tid=MARKS_TID)
        out.append(instant)
        ends = rows.setdefault((f.id, f.subject), [])
        row = next((k for k, end in enumerate(ends) if end <= m.start_us), len(ends))
        if row >= ROWS:
            continue
        tid = MARKS_TID + ROWS * list(rows).index((f.id, f.subject)) + row
        if row == len(ends):
            ends.append(0.0)
            name = f"tb-mfu: {f.id}" + (f" ({f.subject})" if f.subject else "") + f", ProfilerStep#{t.step}"
            out += _thread(gpu, tid, name, -2 - tid + MARKS_TID)
        ends[row] = m.start_us + m.dur_us
        out.append(
            {"ph": "X", "cat": CAT, "name": f.id, "pid": gpu, "tid": tid, "ts": ts, "dur": m.dur_us, "args": args}
        )
    return out


def _path(t: Timeline, gpu: int) -> list[dict[str, Any]]:
    p = t.critical_path
    if p is None:
        return []
    out = _thread(gpu, PATH_TID, f"tb-mfu: critical path (ProfilerStep#{t.step})", -1)
    for lane, start, dur, c in zip(p.lane, p.start_us, p.dur_us, p.cls, strict=True):
        out.append(
            {
                "ph": "X",
                "cat": CAT,
                "name": p.classes[c],
                "pid": gpu,
                "tid": PATH_TID,
                "ts": t.start_us + start,
                "dur": dur,
                "args": {"on": t.lanes[lane].name},
            }
        )
    return out
