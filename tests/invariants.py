"""What every report must hold, whatever the trace (issue 23), as a list of problems; the sample
traces (tests/test_sample_traces.py), the third-party fixtures (tests/test_invariants.py,
tests/test_third_party_traces.py) and the hostile corpus (tests/fuzz/test_corpus.py) all check it:

- no projected MFU above 100 %: ``est_mfu_after``, the waterfall's result, MFU itself (a figure
  above 100 % is withheld as ``impossible_mfu``, never reported);
- unknown stays unknown: FLOPs nobody counted are None (not 0), and with MFU unknown the
  waterfall's last bar has no value and no achieved FLOP/s is derived;
- the breakdown's parts are the report's figures: ``idle_after_sync`` is
  ``gpu_idle_after_sync_share``, and with ``idle_other`` it makes ``idle_share``.

It reads the JSON form (``--json``) so that the corpus' child processes' output is checked too.
"""

from __future__ import annotations

from typing import Any

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
