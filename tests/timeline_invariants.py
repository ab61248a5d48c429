"""What every report's timeline block must hold (issue 36; ``tests/invariants.py`` runs it on every
report the tests build): its lanes add up to the figures the report states for that step, its
critical path to the step and to the critical-path block, every finding has a mark, and the block
stays under 1 MB.

Times in the block are rounded to the nanosecond, so sums are compared within a nanosecond per
term (and 1e-6 of the step for float rounding).
"""

from __future__ import annotations

import json
from typing import Any

MAX_BYTES = 1_000_000


def timeline_problems(w: dict[str, Any]) -> list[str]:
    t = w.get("timeline")
    if t is None:
        return []
    out = _shape_problems(t)
    if out:
        return out  # the sums below would index out of range
    step = next((s for s in w.get("steps", []) if s.get("step") == t["step"]), None)
    if step is None:
        return [f"timeline: step {t['step']} is not among the analysed steps"]
    out += _lane_sum_problems(t, step)
    out += _path_problems(t, w.get("critical_path"))
    out += _mark_problems(t, w.get("findings", []))
    size = len(json.dumps(t, separators=(",", ":")))
    if size > MAX_BYTES:
        out.append(f"timeline: {size} bytes > {MAX_BYTES}")
    return out


def _shape_problems(t: dict[str, Any]) -> list[str]:
    iv = t["intervals"]
    n = len(iv["lane"])
    out = [
        f"timeline: intervals.{k} has {len(v)} entries, lane {n}"
        for k, v in iv.items()
        if not k.startswith("bin") and len(v) != n
    ]
    if not len(iv["bins"]) == len(iv["bin_count"]) == len(iv["bin_busy_us"]):
        out.append("timeline: the bin columns differ in length")
    lanes, names, classes = len(t["lanes"]), len(t["names"]), len(t["classes"])
    tol = 1e-3 + 1e-9 * t["dur_us"]
    for k in range(n):
        if not 0 <= iv["lane"][k] < lanes or not 0 <= iv["cls"][k] < classes or not 0 <= iv["name"][k] < names:
            out.append(f"timeline: interval {k} points outside the lanes, classes or names")
        elif iv["start_us"][k] < -tol or iv["start_us"][k] + iv["dur_us"][k] > t["dur_us"] + 2 * tol:
            out.append(f"timeline: interval {k} lies outside the step")
        if not -1 <= iv["op"][k] < names:
            out.append(f"timeline: interval {k}'s op points outside the names")
        if len(out) > 5:
            break
    return out


def _event_time(t: dict[str, Any]) -> list[float]:
    """Each interval's time: its duration, a bin's events' time."""
    iv = t["intervals"]
    time = list(iv["dur_us"])
    for k, busy in zip(iv["bins"], iv["bin_busy_us"], strict=True):
        time[k] = busy
    return time


def _near(a: float, b: float, terms: int, dur: float) -> bool:
    return abs(a - b) <= 1e-3 * (terms + 1) + 1e-6 * dur


def _lane_sum_problems(t: dict[str, Any], step: dict[str, Any]) -> list[str]:
    iv, lanes, dur = t["intervals"], t["lanes"], t["dur_us"]
    out = []
    if not _near(dur, step["dur_us"], 0, dur):
        out.append(f"timeline: step {t['step']} lasts {dur} µs, the report says {step['dur_us']}")
    time = _event_time(t)
    per_lane = [0.0] * len(lanes)
    terms = [0] * len(lanes)
    for lane, x in zip(iv["lane"], time, strict=True):
        per_lane[lane] += x
        terms[lane] += 1
    for j, ln in enumerate(lanes):
        if not _near(per_lane[j], ln["busy_us"], terms[j], dur):
            out.append(f"timeline: lane {ln['name']} holds {per_lane[j]} µs, its busy_us says {ln['busy_us']}")
    idle = [j for j, ln in enumerate(lanes) if ln["kind"] == "idle"]
    idle_us = step["idle_share"] * step["dur_us"]
    if len(idle) != 1 or not _near(sum(per_lane[j] for j in idle), idle_us, sum(terms[j] for j in idle), dur):
        out.append(f"timeline: the idle lane holds {[per_lane[j] for j in idle]} µs, the step's idle time is {idle_us}")
    # a sync that returns after the step's end (a cut trace) counts whole in the step's figure and is
    # drawn to the step's end, so the lanes hold at most the figure (tests/analysis/test_timeline.py
    # checks them equal on the samples)
    sync = sum(
        x
        for lane, c, x in zip(iv["lane"], iv["cls"], time, strict=True)
        if t["classes"][c] == "sync_wait" and lanes[lane]["kind"] == "host"
    )
    blocked = step["host_sync_blocked_share"] * step["dur_us"]
    if sync > blocked + 1e-3 * (len(time) + 1) + 1e-6 * dur:
        out.append(f"timeline: host lanes wait {sync} µs in syncs, more than the step's {blocked} µs blocked")
    if not iv["bins"]:
        out += _union_problems(t, step)
    return out


def _union(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for s, e in sorted(spans):
        if e <= reach:
            continue
        total += e - max(s, reach)
        reach = e
    return total


def _union_problems(t: dict[str, Any], step: dict[str, Any]) -> list[str]:
    """Without bins every event is drawn as it is: the GPU lanes' union is the step's busy time and
    the kernels' union its kernel time."""
    iv, lanes, dur = t["intervals"], t["lanes"], t["dur_us"]
    work = [
        (s, s + d, c)
        for lane, s, d, c in zip(iv["lane"], iv["start_us"], iv["dur_us"], iv["cls"], strict=True)
        if lanes[lane]["kind"] in ("stream", "communication", "copies")
    ]
    kernel = {t["classes"].index(c) for c in ("matmul", "attention", "elementwise", "kernel", "communication")}
    out = []
    busy = _union([(s, e) for s, e, _ in work])
    if not _near(busy, step["gpu_busy_share"] * step["dur_us"], len(work), dur):
        out.append(
            f"timeline: GPU lanes cover {busy} µs, the step is busy {step['gpu_busy_share'] * step['dur_us']} µs"
        )
    k = _union([(s, e) for s, e, c in work if c in kernel])
    if not _near(k, step["kernel_time_share"] * step["dur_us"], len(work), dur):
        out.append(
            f"timeline: kernels cover {k} µs, the step's kernel time is {step['kernel_time_share'] * step['dur_us']} µs"
        )
    return out


def _path_problems(t: dict[str, Any], cp: dict[str, Any] | None) -> list[str]:
    path = t.get("critical_path")
    if path is None:
        return []
    n = len(path["lane"])
    if not all(len(path[k]) == n for k in ("start_us", "dur_us", "cls")):
        return ["timeline: critical_path columns differ in length"]
    out = []
    if any(not 0 <= lane < len(t["lanes"]) for lane in path["lane"]):
        out.append("timeline: a critical-path stretch points outside the lanes")
    entry = next((s for s in (cp or {}).get("steps", []) if s["step"] == t["step"]), None)
    # the walk's stretches add up to the step; on a hostile trace its sum may not, and then the path
    # adds up to the walk's own sum (a stream's ops that overlap give its queue a negative class)
    total = sum(entry["us"].values()) if entry is not None else t["dur_us"]
    if not _near(sum(path["dur_us"]), total, n, t["dur_us"]):
        out.append(f"timeline: the critical path adds up to {sum(path['dur_us'])} µs, the walk to {total}")
    if entry is not None and path.get("merged_us") is None and min(entry["us"].values(), default=0.0) >= 0:
        by: dict[str, float] = {}
        for c, d in zip(path["cls"], path["dur_us"], strict=True):
            by[path["classes"][c]] = by.get(path["classes"][c], 0.0) + d
        for c in set(by) | set(entry["us"]):
            if not _near(by.get(c, 0.0), entry["us"].get(c, 0.0), n, t["dur_us"]):
                out.append(
                    f"timeline: the critical path holds {by.get(c, 0.0)} µs of {c}, the block {entry['us'].get(c, 0.0)}"
                )
    return out


def _mark_problems(t: dict[str, Any], findings: list[dict[str, Any]]) -> list[str]:
    keys = {(f["id"], f.get("subject")) for f in findings}
    marked = {(m["id"], m.get("subject")) for m in t.get("marks", [])}
    out = [f"timeline: finding {k} has no mark" for k in sorted(keys - marked, key=str)]
    out += [f"timeline: mark of {k}, which is no finding of the report" for k in sorted(marked - keys, key=str)]
    tol = 1e-3 + 1e-9 * t["dur_us"]
    for m in t.get("marks", []):
        if m["lane"] is not None and not 0 <= m["lane"] < len(t["lanes"]):
            out.append(f"timeline: mark of {m['id']} points outside the lanes")
        if m["start_us"] < -tol or m["start_us"] + m["dur_us"] > t["dur_us"] + 2 * tol:
            out.append(f"timeline: mark of {m['id']} lies outside the step")
    return out
