"""Step windows: ``ProfilerStep#N`` on the host, extended to the GPU work it launched.

A step starts where its host annotation starts (or earlier, if its first GPU work
does) but never before the previous step ended, and ends when both its host
annotation and the last GPU work launched inside it have ended. This follows
torch-tb-profiler, so "GPU utilization" means the same thing in both tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...trace.tables import ANNOTATION, STEP_PREFIX, Names, TraceTables
from .. import fmt
from ..kernels.name_patterns import launch_call_rows
from ..per_trace import once_per_trace
from . import intervals

# ASCII digits only (\d also matches other scripts' digits), and at most 18 of them, so
# that every step number fits int64; other "ProfilerStep#..." names are not markers.
_STEP_NAME = re.compile(r"^ProfilerStep#([0-9]{1,18})$", re.ASCII)


@dataclass(frozen=True)
class Steps:
    number: np.ndarray  # int64, N of ProfilerStep#N (0.. when synthetic)
    start: np.ndarray  # float64 µs, device-extended window
    end: np.ndarray
    cpu_start: np.ndarray
    cpu_end: np.ndarray
    synthetic: bool = False  # no step markers: the whole trace is one step
    dropped: list[str] = field(default_factory=list)  # why steps were left out
    # leading steps left out of the steady state (``steady_state``): (number, duration µs, why)
    warmup: list[tuple[int, float, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.number)

    @property
    def dur(self) -> np.ndarray:
        dur: np.ndarray = self.end - self.start
        return dur


def _step_numbers(tables: TraceTables) -> np.ndarray:
    """Per name code: N of a ``ProfilerStep#N`` marker (``_STEP_NAME``), -1 for other names.

    A trace has a marker name per step: the names table has read their numbers
    (``Names.marker_numbers``: ``ProfilerStep#<1 to 18 ASCII digits>``, which the regex accepts);
    the regex judges the other names of that prefix (a trailing newline, which ``$`` allows)."""
    names = tables.names
    out = np.full(len(names), -1, np.int64)
    out[names.markers] = names.marker_numbers
    for code in _unread(names):
        m = _STEP_NAME.match(names[code])
        if m is not None:
            out[code] = int(m.group(1))
    return out


def _unread(names: Names) -> list[int]:
    """Codes of the "ProfilerStep#..." names whose number ``Names`` did not read, ascending."""
    others = [c for c in np.flatnonzero(~names.is_marker).tolist() if names[c].startswith(STEP_PREFIX)]
    return sorted(names.markers[names.marker_numbers < 0].tolist() + others)


_step_numbers_cached = once_per_trace(_step_numbers)


def _markers(tables: TraceTables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cpu = tables.cpu
    step_of_name = _step_numbers_cached(tables)
    rows = np.flatnonzero((cpu.kind == ANNOTATION) & (step_of_name[cpu.name] >= 0))
    numbers = step_of_name[cpu.name[rows]]
    # One marker per step number: several threads may record the same step.
    _, first = np.unique(numbers, return_index=True)
    rows = rows[first]
    rows = rows[np.argsort(cpu.ts[rows], kind="stable")]
    return step_of_name[cpu.name[rows]], cpu.ts[rows], cpu.end[rows]


def _no_overlap(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each step after the first starts no earlier than the one before ends, and ends no earlier
    than it starts: ``end[i] = max(end[i], start[i], end[i - 1])`` is a running maximum, and max is
    exact, so this is the loop over the steps it replaced bit for bit."""
    lifted = np.maximum(start, end)
    lifted[:1] = end[:1]  # the first step keeps its own end
    end = np.maximum.accumulate(lifted)
    start = start.copy()
    start[1:] = np.maximum(start[1:], end[:-1])
    return start, end


def find_steps(tables: TraceTables, device: int, launcher: np.ndarray | None = None) -> Steps:
    """Step windows for one device. ``launcher`` is ``tables.launcher``, if known."""
    cpu, gpu = tables.cpu, tables.gpu
    if launcher is None:
        launcher = tables.launcher
    on_dev = gpu.device == device
    numbers, cpu_start, cpu_end = _markers(tables)
    if len(numbers) == 0:
        steps = _whole_trace(tables, on_dev, launcher)
        steps.dropped.extend(_malformed_markers(tables))
        return steps

    # Which step launched each GPU event of this device (by the host time of its launch).
    dev_rows = np.flatnonzero(on_dev & (launcher >= 0))
    launch_ts = cpu.ts[launcher[dev_rows]]
    idx = intervals.window_of(launch_ts, cpu_start, cpu_end, closed=True)
    inside = idx >= 0
    dev_rows, idx = dev_rows[inside], idx[inside]
    n = len(numbers)
    dev_first = np.full(n, np.inf)
    dev_last = np.full(n, -np.inf)
    np.minimum.at(dev_first, idx, gpu.ts[dev_rows])
    np.maximum.at(dev_last, idx, gpu.end[dev_rows])

    start = np.minimum(cpu_start, dev_first)
    end = np.maximum(cpu_end, dev_last)
    start, end = _no_overlap(start, end)

    dropped: list[str] = []
    keep = np.ones(n, bool)
    missing = _unrecorded_launches(tables, launcher, cpu_start, cpu_end)
    # Some launches never get a GPU record in any step (CUPTI skips empty memsets), so
    # a step is cut short only when it misses more than the steadiest step does.
    baseline = missing.min() if n else 0
    for i in range(n - 1, 0, -1):  # only trailing steps can be cut short by the trace's end
        if missing[i] > baseline:
            keep[i] = False
            lost = missing[i] - baseline
            dropped.append(f"step {numbers[i]}: {lost} launched GPU operations missing (trace cut short)")
        else:
            break
    dropped = _malformed_markers(tables) + dropped[::-1]
    empty = keep & ~(end > start)  # a step of no length has no time to share out: every figure would be 0/0
    if empty.any():
        keep &= ~empty
        dropped.append(f"{int(empty.sum())} step(s) of no length ({_numbers(numbers[empty])})")
    return Steps(numbers[keep], start[keep], end[keep], cpu_start[keep], cpu_end[keep], False, dropped)


def _numbers(numbers: np.ndarray) -> str:
    shown = ", ".join(f"#{k}" for k in numbers[:5].tolist())
    return shown + (f" and {len(numbers) - 5} more" if len(numbers) > 5 else "")


# A leading step is warm-up, not steady state, when it is longer than every later step and more
# than this much longer than their median: the first profiled step still drains the warm-up's GPU
# work, fills the allocator's cache or pays one-time host costs (up to 1.9x the others on the
# third-party models of issue 33, 10-60 % on most samples).
WARMUP_EXCESS = 0.05


def steady_state(steps: Steps) -> Steps:
    """``steps`` without the leading steps that are still warming up (``WARMUP_EXCESS``), each
    named in ``warmup`` with why. At least two steps and half of them (rounded up) are kept, so a
    short window keeps most of what it recorded; a window of one or two steps is kept as it is."""
    n = len(steps)
    dur = steps.end - steps.start
    out = 0
    while out < n - max(2, -(-n // 2)):
        later = dur[out + 1 :]
        median = float(np.median(later))
        if not (dur[out] > later.max() and dur[out] > (1 + WARMUP_EXCESS) * median):
            break
        out += 1
    if not out:
        return steps
    warmup = [
        (
            int(steps.number[i]),
            float(dur[i]),
            f"{fmt.us(float(dur[i]))}, {fmt.factor(float(dur[i] / np.median(dur[i + 1 :])))} the median of the "
            "steps after it: still warming up (the first profiled steps drain the warm-up's GPU work and pay "
            "one-time costs)",
        )
        for i in range(out)
    ]
    keep = slice(out, n)
    return Steps(
        steps.number[keep],
        steps.start[keep],
        steps.end[keep],
        steps.cpu_start[keep],
        steps.cpu_end[keep],
        steps.synthetic,
        steps.dropped,
        warmup,
    )


def _malformed_markers(tables: TraceTables) -> list[str]:
    """Why "ProfilerStep#..." names that are not ``ProfilerStep#<int64>`` were left out."""
    number, names = _step_numbers_cached(tables), tables.names
    bad = [names[c] for c in _unread(names) if number[c] < 0]
    if not bad:
        return []
    example = bad[0] if len(bad[0]) <= 60 else bad[0][:60] + "…"
    return [
        f"{len(bad)} step marker name(s) such as {example!r}: the step number is not a decimal integer "
        "that fits 64 bits, so they were not used as steps"
    ]


def assign(steps: Steps, gpu_ts: np.ndarray, launch_ts: np.ndarray) -> np.ndarray:
    """Step index of each GPU row (-1: in no step).

    A row belongs to the step whose host window ``[cpu_start, cpu_end]`` holds its launch,
    so work that a previous step queued and that still runs when the next step begins
    stays with the step that asked for it. Rows with no known launch (NaN) go by their
    start time, in the device-extended window ``[start, end)``.
    """
    out = np.full(len(gpu_ts), -1, np.int64)
    if len(steps) == 0:
        return out
    launched = ~np.isnan(launch_ts)
    out[launched] = intervals.window_of(launch_ts[launched], steps.cpu_start, steps.cpu_end, closed=True)
    rest = ~launched
    out[rest] = intervals.window_of(gpu_ts[rest], steps.start, steps.end, closed=False)
    return out


def launched_in_steps(tables: TraceTables, steps: Steps, device: int | None) -> np.ndarray:
    """Per row of ``tables.gpu``: whether ``assign`` puts it in a step (rows of other devices: no)."""
    gpu = tables.gpu
    rows = np.flatnonzero(gpu.device == device) if device is not None else np.arange(len(gpu))
    launcher = tables.launcher[rows]
    launch_ts = np.full(len(rows), np.nan)
    launch_ts[launcher >= 0] = tables.cpu.ts[launcher[launcher >= 0]]
    out = np.zeros(len(gpu), bool)
    out[rows] = assign(steps, gpu.ts[rows], launch_ts) >= 0
    return out


def _unrecorded_launches(
    tables: TraceTables, launcher: np.ndarray, cpu_start: np.ndarray, cpu_end: np.ndarray
) -> np.ndarray:
    """Per step: its launch calls (host windows ``[cpu_start, cpu_end]``) that no GPU event records."""
    cpu = tables.cpu
    rows = launch_call_rows(tables)
    recorded = np.zeros(len(cpu), bool)
    recorded[launcher[launcher >= 0]] = True
    rows = rows[~recorded[rows]]
    idx = intervals.window_of(cpu.ts[rows], cpu_start, cpu_end, closed=True)
    return np.bincount(idx[idx >= 0], minlength=len(cpu_start))


def _whole_trace(tables: TraceTables, on_dev: np.ndarray, launcher: np.ndarray) -> Steps:
    gpu, cpu = tables.gpu, tables.cpu
    if not on_dev.any():
        empty = np.empty(0)
        return Steps(empty.astype(np.int64), empty, empty, empty, empty, synthetic=True)
    lo = float(gpu.ts[on_dev].min())
    hi = float(gpu.end[on_dev].max())
    launched = launcher[on_dev]
    launched = launched[launched >= 0]
    if len(launched):
        lo = min(lo, float(cpu.ts[launched].min()))
    if not hi > lo:  # GPU work of no length (and no host launch before it): nothing to share out
        empty = np.empty(0)
        return Steps(empty.astype(np.int64), empty, empty, empty, empty, True, ["the trace's GPU work takes no time"])
    start, end = np.array([lo]), np.array([hi])
    return Steps(np.array([0]), start, end, start.copy(), end.copy(), synthetic=True)
