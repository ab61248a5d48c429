"""What every report must hold, whatever the trace (issues 23 and 32), as a list of problems. Every
report a test builds in its own process is checked (tests/conftest.py wraps the reporting layer),
and the sample traces (tests/test_sample_traces.py), the third-party fixtures (tests/test_invariants.py,
tests/test_third_party_traces.py) and the hostile corpus (tests/fuzz/test_corpus.py, whose reports
come from child processes as JSON) check it too:

- every MFU-named figure lies in (0, 1]: the summary's, each step's, the FLOPs block's, a finding's
  projection, the waterfall's, the what-if panel's, the ranks table's; the MFU's status says known
  exactly when it is a figure;
- one step aggregation (issue 32): each step's parts add up to the step, the summary's to its step,
  the waterfall's first bar is the summary's step, and a rank's row is its worker's figures;
- a distributed run's one MFU is the ranks' FLOPs over the shortest of their steps without the
  profiler and their peaks, in (0, 1] and its likely range (``rank_invariants``);
- per rank, exposed communication <= communication <= step, and the collectives' rows add up to the
  communication total (or its ``unlisted`` rest says why not);
- no finding's gain exceeds the step; a medium or high finding saves time or states its benefit in
  its own unit; a fix that saves time never lowers the projected MFU, and one that saves nothing
  projects the headline MFU itself; "all together" is at least
  the best single gain and at most the step;
- memory that grows 1 MiB or more at every analysed step is a leak finding;

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

import re
from typing import Any

from rank_invariants import job_problems
from timeline_invariants import timeline_problems

from tb_mfu_plugin.analysis.fmt import us

# "alone, its fix saves 473 µs a step" (diagnosis.whatif_gains._held_back)
_TITLE_SAVES = re.compile(r"alone, its fix saves (\S+ \S+) a step")

_TOL = 1e-9


def report_problems(report: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for run in report.get("runs", []):
        out += run_problems(run)
    return out


def run_problems(run: dict[str, Any]) -> list[str]:
    """A run's workers, and its ranks table against them."""
    out: list[str] = []
    for w in run.get("workers", []):
        if w.get("error") is None and w.get("summary") is not None:
            out += [f"{w.get('file')}: {p}" for p in worker_problems(w)]
    ranks = run.get("ranks") or {}
    by_key = {(w.get("name"), w.get("span")): w for w in run.get("workers", []) if w.get("summary")}
    for row in ranks.get("ranks", []):
        w = by_key.get((row.get("worker"), row.get("span")))
        if w is None:
            out.append(f"ranks row {row.get('worker')} has no analysed worker")
            continue
        s = w["summary"]
        if row.get("step_time_us") != s.get("step_time_us") or row.get("mfu") != s.get("mfu"):
            out.append(f"ranks row {row.get('worker')}: step or MFU is not its worker's")
        step = row.get("step_time_us") or 0.0
        exposed, comm = row.get("exposed_communication_us_per_step"), row.get("communication_us_per_step")
        if exposed is not None and comm is not None and not exposed <= comm + _US:
            out.append(f"ranks row {row.get('worker')}: exposed {exposed} > communication {comm}")
        if comm is not None and not comm <= step + _US:
            out.append(f"ranks row {row.get('worker')}: communication {comm} > step {step}")
        _in_unit(out, f"ranks row {row.get('worker')} mfu", row.get("mfu"))
    rows = [by_key.get((row.get("worker"), row.get("span"))) for row in ranks.get("ranks", [])]
    out += job_problems(ranks, [w for w in rows if w is not None])
    return out


_US = 1e-3  # sums of float µs, rounded to the nanosecond by the waterfall


def _above_one(x: Any) -> bool:
    return isinstance(x, int | float) and x > 1.0 + 1e-6


def _in_unit(out: list[str], what: str, x: Any) -> None:
    """An MFU-named figure is unknown (None) or in (0, 1]: never 0 (a tiny MFU is a small number)
    and never above 100 %."""
    if x is None:
        return
    if not isinstance(x, int | float) or not 0.0 < x <= 1.0 + 1e-6:
        out.append(f"{what} = {x} outside (0, 1]")


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
    out += mfu_problems(w)
    out += aggregation_problems(w)
    out += communication_problems(w)
    out += finding_problems(w)
    out += whatif_problems(w)
    out += timeline_problems(w)
    return out


def mfu_problems(w: dict[str, Any]) -> list[str]:
    """Every MFU-named figure in (0, 1], and the status that says whether the headline is one."""
    out: list[str] = []
    s = w["summary"]
    _in_unit(out, "summary.mfu", s.get("mfu"))
    for st in w.get("steps", []):
        _in_unit(out, f"step {st.get('step')} mfu", st.get("mfu"))
    fl = w.get("flops") or {}
    for k in ("hfu", "mfu_model", "mfu_user", "mfu_at_bf16_peak"):
        _in_unit(out, f"flops.{k}", fl.get(k))
    for f in w.get("findings", []):
        _in_unit(out, f"finding {f['id']} est_mfu_after", f.get("est_mfu_after"))
    bars = w.get("waterfall", [])
    if bars:
        _in_unit(out, "waterfall mfu", bars[-1].get("mfu"))
    wi = w.get("whatif") or {}
    for c in [*wi.get("cases", []), *([wi["combined"]] if wi.get("combined") else [])]:
        _in_unit(out, "whatif case mfu", c.get("mfu"))
    status = (s.get("mfu_status") or {}).get("state")
    if status is None:
        out.append("summary.mfu_status missing")
    elif (status == "known") != (s.get("mfu") is not None):
        out.append(f"mfu_status {status} but summary.mfu is {s.get('mfu')}")
    return out + _range_problems(s) + _uneven_problems(w)


def _uneven_problems(w: dict[str, Any]) -> list[str]:
    """A likely range over steps far apart says why it is wide, and only there: the note names the
    analysed steps' spread exactly where it passes ``UNEVEN_STEPS``."""
    from tb_mfu_plugin.analysis.device.mfu_notes import UNEVEN_STEPS

    dur = [st["dur_us"] for st in w.get("steps", []) if st.get("dur_us")]
    if (w["summary"] or {}).get("mfu_range") is None or not dur or min(dur) <= 0:
        return []
    uneven = max(dur) / min(dur) > UNEVEN_STEPS
    noted = any("apart: the headline MFU is over their mean" in n for n in w.get("notes", []))
    return [] if uneven == noted else [f"steps {min(dur):.0f}-{max(dur):.0f} µs but the spread note is {noted}"]


def _range_problems(s: dict[str, Any]) -> list[str]:
    """An estimate's likely range holds the estimate and exists only beside it: the step without the
    profiler's between its ends, which are no longer than the traced step; the MFU's likewise, only
    for a headline over that step, and inside (0, 1]."""
    out: list[str] = []
    step, rng = s.get("step_time_unprofiled_us"), s.get("step_time_unprofiled_range_us")
    if (step is None) != (rng is None):
        out.append(f"step_time_unprofiled_us {step} but its range {rng}")
    elif rng is not None:
        eps = 1e-6 * max(s["step_time_us"], 1.0)
        if not rng["low"] - eps <= step <= rng["high"] + eps:
            out.append(f"step without the profiler {step} outside its range {rng}")
        if rng["high"] > s["step_time_us"] + eps:
            out.append(f"step without the profiler's range {rng} past the traced step {s['step_time_us']}")
    mfu, mr = s.get("mfu"), s.get("mfu_range")
    basis = (s.get("mfu_status") or {}).get("basis")
    if mr is not None:
        if mfu is None or basis != "without_profiler" or rng is None:
            out.append(f"mfu_range {mr} beside an MFU {mfu} over the {basis} step")
        elif not mr["low"] - 1e-9 <= mfu <= mr["high"] + 1e-9:
            out.append(f"summary.mfu {mfu} outside its range {mr}")
        _in_unit(out, "mfu_range.low", mr["low"])
        _in_unit(out, "mfu_range.high", mr["high"])
    return out


def aggregation_problems(w: dict[str, Any]) -> list[str]:
    """One step aggregation: each step's parts add up to it, the summary's to its step (the mean of
    the steps), the waterfall starts from that step."""
    out: list[str] = []
    s = w["summary"]
    steps = w.get("steps", [])
    for st in steps:
        parts = st.get("breakdown_us") or {}
        if parts and abs(sum(parts.values()) - st["dur_us"]) > _US + 1e-9 * st["dur_us"]:
            out.append(f"step {st.get('step')}: parts {sum(parts.values())} µs != its {st['dur_us']} µs")
    step = s["step_time_us"]
    if steps and abs(step - sum(st["dur_us"] for st in steps) / len(steps)) > _US + 1e-9 * step:
        out.append(f"summary.step_time_us {step} is not the mean of its steps")
    if steps and s.get("steps") != len(steps):
        out.append(f"summary.steps {s.get('steps')} != {len(steps)} steps")
    parts = s.get("breakdown_us_per_step") or {}
    if parts and abs(sum(parts.values()) - step) > _US + 1e-6 * step:
        out.append(f"summary parts {sum(parts.values())} µs != step {step} µs")
    bars = w.get("waterfall", [])
    if bars and abs(bars[0]["us_per_step"] - step) > _US + 1e-9 * step:
        out.append(f"waterfall step {bars[0]['us_per_step']} != summary step {step}")
    basis = s.get("basis")
    if basis is None or basis.get("steps") != s.get("steps"):
        out.append("summary.basis does not name the analysed steps")
    return out


def communication_problems(w: dict[str, Any]) -> list[str]:
    """Exposed <= communication <= step, and the collectives' rows add up to the total."""
    c = w.get("communication")
    if c is None:
        return []
    out: list[str] = []
    step = w["summary"]["step_time_us"]
    total, exposed = c["communication_us_per_step"], c["exposed_us_per_step"]
    if not exposed <= total + _US:
        out.append(f"communication: exposed {exposed} > total {total}")
    if not total <= step + _US:
        out.append(f"communication: total {total} > step {step}")
    rest = c.get("unlisted") or {"us_per_step": 0.0, "exposed_us_per_step": 0.0}
    rows = sum(x["us_per_step"] for x in c.get("collectives", [])) + rest["us_per_step"]
    rows_exposed = sum(x["exposed_us_per_step"] for x in c.get("collectives", [])) + rest["exposed_us_per_step"]
    if abs(rows - total) > _US + 1e-6 * total or abs(rows_exposed - exposed) > _US + 1e-6 * total:
        out.append(
            f"communication: rows add up to {rows} µs ({rows_exposed} exposed), the total is {total} ({exposed})"
        )
    return out


def finding_problems(w: dict[str, Any]) -> list[str]:
    """Gains within the step, a medium or high finding worth something, projections that follow the
    gain, "all together" between the best single gain and the step, every leak raised."""
    out: list[str] = []
    s = w["summary"]
    step, mfu = s["step_time_us"], s.get("mfu")
    findings = w.get("findings", [])
    for f in findings:
        gain = f["est_gain_us_per_step"]
        if gain > step + _US:
            out.append(f"finding {f['id']} gains {gain} µs of a {step} µs step")
        if f["severity"] in ("high", "medium") and gain <= 0 and f.get("benefit") is None:
            out.append(f"{f['severity']} finding {f['id']} saves nothing and states no benefit")
        after = f.get("est_mfu_after")
        if mfu is not None and after is not None and gain > 0 and after < mfu * (1 - 1e-3):
            out.append(f"finding {f['id']} saves {gain} µs but projects MFU {after} below {mfu}")
        if mfu is not None and after is not None and gain == 0 and abs(after - mfu) > 1e-9 * mfu:
            out.append(f"finding {f['id']} saves nothing but projects MFU {after}, not the headline's {mfu}")
        # a title that says what the fix alone saves says the headline's figure, as every face prints it
        said = _TITLE_SAVES.search(f["title"])
        if said and said.group(1) != us(gain):
            out.append(f"finding {f['id']}'s title says its fix saves {said.group(1)}, its headline {us(gain)}")
    combined = w.get("combined_gain_us_per_step")
    if findings and combined is not None:
        best = max(f["est_gain_us_per_step"] for f in findings)
        if not best - 0.11 <= combined <= step + _US:  # gains are rounded to 0.1 µs
            out.append(f"all together {combined} µs is not between the best single gain {best} and the step {step}")
    wi = w.get("whatif") or {}
    if wi.get("combined") and wi["combined"]["gain_us_per_step"] > wi["step_us"] + _US:
        out.append("the what-if's all-together gain exceeds its step")
    m = w.get("memory") or {}
    growth = [x.get("growth_bytes") for x in m.get("steps", []) if x.get("growth_bytes") is not None]
    if len(growth) >= 2 and min(growth) >= 1 << 20 and not any(f["id"] == "memory_leak" for f in findings):
        out.append(f"memory grows {min(growth)} B or more every step and no memory_leak finding says so")
    return out


def whatif_problems(w: dict[str, Any]) -> list[str]:
    """The what-if panel and the findings say one thing. A fix alone reads its finding's gain and
    projected MFU (a page once read "→ MFU 46.3 %" on a finding and 42.5 % for the same fix in the
    panel); no re-timing that saves time projects an MFU below the headline; every finding's share,
    the all-together share and the panel's shares are of one step (a pipeline run read "all findings
    together: 40.5 % of the step" under a finding of 45.3 %)."""
    out: list[str] = []
    s = w["summary"]
    mfu = s.get("mfu")
    wi = w.get("whatif") or {}
    findings = w.get("findings", [])
    by_key = {(f["id"], f.get("subject")): f for f in findings}
    cases = wi.get("cases", [])
    for k, fd in enumerate(wi.get("findings", [])):
        case = next((c for c in cases if c["mask"] == 1 << k), None)
        f = by_key.get((fd["id"], fd.get("subject")))
        if case is None or f is None:
            out.append(f"what-if finding {fd['id']} has no case of its own or no finding")
            continue
        gain = case.get("unprofiled_gain_us_per_step")
        if gain is None or abs(gain - f["est_gain_us_per_step"]) > 0.051:  # gains are rounded to 0.1 µs
            out.append(f"what-if {fd['id']} alone gains {gain} µs, its finding {f['est_gain_us_per_step']} µs")
        after, mine = case.get("mfu"), f.get("est_mfu_after")
        if (after is None) != (mine is None) or (after is not None and abs(after - mine) > 1e-9):
            out.append(f"what-if {fd['id']} alone projects MFU {after}, its finding {mine}")
    for c in [*cases, *([wi["combined"]] if wi.get("combined") else [])]:
        gain, after = c.get("unprofiled_gain_us_per_step"), c.get("mfu")
        if gain is None or c.get("unprofiled_step_us") is None:
            out.append(f"what-if case {c['mask']} has no re-timing without the profiler")
        elif mfu is not None and after is not None and after < mfu * (1 - 1e-9):
            out.append(f"what-if case {c['mask']} saves {gain} µs but projects MFU {after} below {mfu}")
    step = wi["unprofiled_step_us"] if wi else s["step_time_us"]
    tol = 1e-4 + 0.1 / step if step > 0 else 0.0
    shares = [(f"finding {f['id']}", f["est_gain_us_per_step"], f["est_gain_share"]) for f in findings]
    if w.get("combined_gain_share") is not None:
        shares.append(("all together", w["combined_gain_us_per_step"], w["combined_gain_share"]))
    shares += [
        (f"what-if case {c['mask']}", c["unprofiled_gain_us_per_step"], c.get("unprofiled_gain_share")) for c in cases
    ]
    for what, gain, share in shares:
        if step > 0 and share is not None and gain is not None and abs(share - gain / step) > tol:
            out.append(f"{what}: share {share} is not {gain} µs of the step the gains are of, {step} µs")
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
