"""What every report must hold, whatever the trace (issue 23), as a list of problems; the sample
traces (tests/test_sample_traces.py), the third-party fixtures (tests/test_invariants.py,
tests/test_third_party_traces.py) and the hostile corpus (tests/fuzz/test_corpus.py) all check it:

- no projected MFU above 100 %: ``est_mfu_after``, the waterfall's result, MFU itself (a figure
  above 100 % is withheld as ``impossible_mfu``, never reported);
- unknown stays unknown: FLOPs nobody counted are None (not 0), and with MFU unknown the
  waterfall's last bar has no value and no achieved FLOP/s is derived;
- the breakdown's parts are the report's figures: ``idle_after_sync`` is
  ``gpu_idle_after_sync_share``, and with ``idle_other`` it makes ``idle_share``;
- the memory block (issue 25) holds no negative or impossible figure (``memory_problems``);
- the timeline (issue 36) adds up to the step's figures, marks every finding and stays under 1 MB
  (``timeline_invariants``).

It reads the JSON form (``--json``) so that the corpus' child processes' output is checked too.
"""

from __future__ import annotations

from typing import Any

from timeline_invariants import timeline_problems

_TOL = 1e-9


def report_problems(report: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for run in report.get("runs", []):
        for w in run.get("workers", []):
            if w.get("error") is None and w.get("summary") is not None:
                out += [f"{w.get('file')}: {p}" for p in worker_problems(w)]
    return out


def _above_one(x: Any) -> bool:
    return isinstance(x, int | float) and x > 1.0 + 1e-6


def worker_problems(w: dict[str, Any]) -> list[str]:
    out: list[str] = []
    s = w["summary"]
    for f in w.get("findings", []):
        if _above_one(f.get("est_mfu_after")):
            out.append(f"finding {f['id']} projects MFU {f['est_mfu_after']} > 100 %")
    for where in [s, *w.get("steps", [])]:
        if _above_one(where.get("mfu")):
            out.append(f"MFU {where['mfu']} > 100 % reported as a figure")
    bars = w.get("waterfall", [])
    result = bars[-1] if bars else None
    if result is not None:
        if _above_one(result.get("mfu")):
            out.append(f"waterfall result MFU {result['mfu']} > 100 %")
        if s.get("mfu") is None and (result.get("us_per_step") is not None or result.get("share") is not None):
            out.append(f"MFU unknown but the waterfall's last bar has a value: {result}")
    out += _unknown_problems(w, s)
    out += _breakdown_problems(s, w.get("steps", []))
    out += memory_problems(w)
    out += timeline_problems(w)
    return out


def _unknown_problems(w: dict[str, Any], s: dict[str, Any]) -> list[str]:
    out: list[str] = []
    fl = w.get("flops")
    if fl is not None and fl.get("source") is None:
        for k in ("flops_per_step", "executed_flops_per_step", "model_flops_per_step"):
            if fl.get(k) == 0:
                out.append(f"flops.{k} is 0 where no FLOPs were counted (unknown, not 0)")
    if s.get("flops_per_step") is None and s.get("achieved_flops") is not None:
        out.append("achieved FLOP/s without a FLOP count")
    if s.get("mfu") is None and "impossible_mfu" in w.get("flags", []) and s.get("achieved_flops") is not None:
        out.append("achieved FLOP/s shown beside an impossible MFU")
    return out


def _breakdown_problems(s: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for where, m in [("summary", s), *((f"step {st.get('step')}", st) for st in steps)]:
        b = m.get("breakdown") or {}
        if not b:
            continue
        if abs(sum(b.values()) - 1.0) > 1e-6:
            out.append(f"{where}: breakdown sums to {sum(b.values())}")
        after, other = b.get("idle_after_sync"), b.get("idle_other")
        if after is None or other is None:
            out.append(f"{where}: breakdown lacks idle_after_sync / idle_other: {sorted(b)}")
            continue
        if abs(after - m.get("gpu_idle_after_sync_share", 0.0)) > 1e-6:
            out.append(f"{where}: breakdown idle_after_sync {after} != gpu_idle_after_sync_share")
        if abs(after + other - m["idle_share"]) > 1e-6:
            out.append(f"{where}: idle_after_sync + idle_other != idle_share")
        if m.get("gpu_idle_after_sync_share", 0.0) > m["idle_share"] + 1e-6:
            out.append(f"{where}: more GPU idle after syncs than GPU idle")
    return out


_MEMORY_BYTES = (
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "allocated_start_bytes",
    "reserved_minus_allocated_bytes",
    "device_total_bytes",
)
_STEP_BYTES = (
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "allocated_start_bytes",
    "allocated_end_bytes",
    "reserved_minus_allocated_bytes",
)


def memory_problems(w: dict[str, Any]) -> list[str]:
    """The memory block (issue 25) never holds a negative or impossible figure: bytes >= 0 (growth
    aside, which may fall), shares in 0-1, a step's peak at least its start and end, the ops alive at
    the peak within it, a headroom >= 0, a timeline of equal columns; no figure beside ``unavailable``."""
    m = w.get("memory")
    if m is None:
        return []
    out: list[str] = []
    if m.get("unavailable") is not None:
        if m.get("peak_allocated_bytes") is not None or m.get("steps"):
            out.append("memory figures beside memory.unavailable")
        return out
    for k in _MEMORY_BYTES:
        v = m.get(k)
        if v is not None and not 0 <= v < 2**62:
            out.append(f"memory.{k} = {v}")
    for k in ("peak_share", "peak_reserved_share"):
        v = m.get(k)
        if v is not None and not 0 <= v <= 1:
            out.append(f"memory.{k} = {v} outside 0-1")
    for s in m.get("steps", []):
        for k in _STEP_BYTES:
            v = s.get(k)
            if v is not None and v < 0:
                out.append(f"memory step {s.get('step')}: {k} = {v}")
        peak = s.get("peak_allocated_bytes")
        for k in ("allocated_start_bytes", "allocated_end_bytes"):
            if peak is not None and s.get(k) is not None and s[k] > peak:
                out.append(f"memory step {s.get('step')}: {k} {s[k]} above the step's peak {peak}")
    peak = m.get("peak_allocated_bytes")
    ops = m.get("top_ops", [])
    if any(o["bytes"] < 0 or o["count"] < 0 for o in ops + m.get("kept_ops", [])):
        out.append("memory ops with negative bytes or counts")
    if peak is not None and sum(o["bytes"] for o in ops) > peak:
        out.append(f"memory.top_ops hold {sum(o['bytes'] for o in ops)} B, above the peak {peak}")
    h = m.get("headroom")
    if h is not None:
        for k in ("fixed_bytes", "batch_scaled_bytes", "batch_factor", "batch_factor_at_90"):
            if h.get(k) is not None and h[k] < 0:
                out.append(f"memory.headroom.{k} = {h[k]}")
    r = m.get("recompute")
    if r is not None and any(isinstance(v, int | float) and v < 0 for v in r.values()):
        out.append(f"memory.recompute negative: {r}")
    t = m.get("timeline")
    if t is not None:
        if not len(t["t_us"]) == len(t["allocated"]) == len(t["reserved"]):
            out.append("memory.timeline columns of different lengths")
        if any(a < 0 for a in t["allocated"]) or any(r is not None and r < 0 for r in t["reserved"]):
            out.append("memory.timeline with negative bytes")
        if peak is not None and t["allocated"] and max(t["allocated"]) > peak:
            out.append("memory.timeline above the peak")
    return out
