#!/usr/bin/env python3
"""Match validation/sm_zoo.py's torch.profiler traces with its Nsight Compute CSV, kernel by kernel, and write
one row per kernel: the trace's fields (what the product sees) beside the hardware's counters.

    python3 validation/sm_zoo_match.py DIR    # DIR: zoo/, step_*/, zoo_meta.json, ncu_cases.csv, ncu_steps.csv
                                                     # writes DIR/zoo_matched.csv.gz and prints a summary

Kernels are matched in launch order: the zoo trace's kernels of each case (first repetition; the duration
is the median over the repetitions), then each step trace's kernels, against ncu's rows in ID order. Every
pair agrees on the grid's and the block's sizes; where the sequences differ, they are aligned on those sizes
(difflib) and the kernels left unmatched are counted on stderr.
Plain Python (json, gzip, csv): it runs where the traces were recorded too.
"""

from __future__ import annotations

import csv
import difflib
import glob
import gzip
import io
import json
import os
import statistics
import sys

TRACE_FIELDS = ("blocks per SM", "warps per SM", "registers per thread", "shared memory", "est. achieved occupancy %")
NCU = {  # column in the output -> ncu metric
    "ncu_sm_active_pct": "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "ncu_duration_ns": "gpu__time_duration.sum",
    "ncu_sm_active_cycles_avg": "sm__cycles_active.avg",
    "ncu_sm_active_cycles_max": "sm__cycles_active.max",
    "ncu_sm_elapsed_cycles_avg": "sm__cycles_elapsed.avg",
    "ncu_waves_per_sm": "launch__waves_per_multiprocessor",
    "ncu_grid_size": "launch__grid_size",
    "ncu_block_size": "launch__block_size",
    "ncu_registers": "launch__registers_per_thread",
    "ncu_smem_static": "launch__shared_mem_per_block_static",
    "ncu_smem_dynamic": "launch__shared_mem_per_block_dynamic",
    "ncu_sm_count": "launch__sm_count",
    "ncu_occ_limit_blocks": "launch__occupancy_limit_blocks",
    "ncu_occ_limit_registers": "launch__occupancy_limit_registers",
    "ncu_occ_limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "ncu_occ_limit_warps": "launch__occupancy_limit_warps",
    "ncu_theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "ncu_achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "ncu_sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "ncu_dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}


def base(name: str) -> str:
    n = name[5:] if name.startswith("void ") else name
    for ch in "<(":
        n = n.split(ch, 1)[0]
    return n.strip()


def load(path: str) -> list[dict]:
    with gzip.open(path) if path.endswith(".gz") else open(path) as f:
        return json.load(f)["traceEvents"]


def kernels_by_annotation(events: list[dict], prefix: str) -> dict[str, list[list[dict]]]:
    """annotation name -> one kernel list per occurrence, through the launches' correlation ids."""
    kern = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    runtime = sorted(
        (e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})),
        key=lambda e: e["ts"],
    )
    out: dict[str, list[list[dict]]] = {}
    anns = [e for e in events if e.get("cat") == "user_annotation" and e.get("name", "").startswith(prefix)]
    for a in sorted(anns, key=lambda e: e["ts"]):
        lo, hi = a["ts"], a["ts"] + a["dur"]
        ks = [
            kern[r["args"]["correlation"]]
            for r in runtime
            if r["tid"] == a["tid"] and lo <= r["ts"] <= hi and r["args"]["correlation"] in kern
        ]
        out.setdefault(a["name"][len(prefix) :], []).append(sorted(ks, key=lambda k: k["ts"]))
    return out


def trace_rows(d: str) -> list[dict]:
    meta = json.load(open(os.path.join(d, "zoo_meta.json")))
    rows = []
    zoo = kernels_by_annotation(load(glob.glob(os.path.join(d, "zoo", "*.pt.trace.json*"))[0]), "zoo:")
    for case in meta["cases"]:
        reps = zoo.get(case, [])
        for i, k in enumerate(reps[0] if reps else []):
            durs = [r[i]["dur"] for r in reps if len(r) > i]
            rows.append(_row("zoo", case, i, k, statistics.median(durs), durs))
    for step in meta["steps"]:
        ev = load(glob.glob(os.path.join(d, step, "*.pt.trace.json*"))[0])
        ks = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])
        rows += [_row("step", step, i, k, k["dur"], [k["dur"]]) for i, k in enumerate(ks)]
    return rows


def _row(source: str, case: str, i: int, k: dict, dur: float, durs: list) -> dict:
    a = k["args"]
    g, b = a.get("grid", [0, 0, 0]), a.get("block", [0, 0, 0])
    row = {
        "source": source,
        "case": case,
        "index": i,
        "kernel": base(k["name"]),
        "grid": "x".join(map(str, g)),
        "block": "x".join(map(str, b)),
        "grid_blocks": g[0] * g[1] * g[2],
        "block_threads": b[0] * b[1] * b[2],
        "trace_dur_us": dur,
        "trace_dur_us_reps": ";".join(f"{x:g}" for x in durs),
        "stream": a.get("stream"),
    }
    for f in TRACE_FIELDS:
        row["trace_" + f.replace(" ", "_").replace(".", "").replace("%", "pct")] = a.get(f)
    row["_name"] = k["name"]
    return row


def ncu_rows(path: str) -> list[dict]:
    with gzip.open(path, "rt", errors="replace") if path.endswith(".gz") else open(path, errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        print(f"{path}: no ncu rows", file=sys.stderr)
        return []
    rows = list(csv.DictReader(lines[start:]))
    return [r for r in rows if r.get("ID", "").strip().isdigit()]  # drops the units row


def _num(v: str):
    try:
        return float(v.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def match(d: str) -> list[dict]:
    parts = [os.path.join(d, f + gz) for f in ("ncu.csv", "ncu_cases.csv", "ncu_steps.csv") for gz in ("", ".gz")]
    tr, nc = trace_rows(d), [r for p in parts if os.path.exists(p) for r in ncu_rows(p)]
    key_t = [(t["grid_blocks"], t["block_threads"]) for t in tr]
    key_n = [(_num(n.get(NCU["ncu_grid_size"], "")), _num(n.get(NCU["ncu_block_size"], ""))) for n in nc]
    pairs = list(zip(range(len(tr)), range(len(nc)), strict=False))
    if key_t != key_n:  # align on (grid, block) sizes; report what stays unmatched
        sm = difflib.SequenceMatcher(a=key_t, b=key_n, autojunk=False)
        pairs = [(b.a + i, b.b + i) for b in sm.get_matching_blocks() for i in range(b.size)]
        print(f"trace {len(tr)} kernels, ncu {len(nc)}: {len(pairs)} matched by order and size", file=sys.stderr)
    out = []
    for ti, ni in pairs:
        t, n = tr[ti], nc[ni]
        row = {k: v for k, v in t.items() if k != "_name"}
        row["ncu_id"] = int(n["ID"])
        for col, metric in NCU.items():
            row[col] = _num(n.get(metric, ""))
        row["kernel_full_name"] = t["_name"][:300]
        out.append(row)
    return out


def main():
    d = sys.argv[1]
    rows = match(d)
    # gzipped without a timestamp (the same rows give the same bytes): an eighth of the bytes, in a tree
    # that must stay under the 64 MiB a device call carries
    with (
        gzip.GzipFile(os.path.join(d, "zoo_matched.csv.gz"), "wb", mtime=0) as gz,
        io.TextIOWrapper(gz, newline="") as f,
    ):
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    sms = json.load(open(os.path.join(d, "zoo_meta.json")))["num_sms"]
    print(f"{len(rows)} kernels matched; num_sms {sms}")
    for r in rows:
        if r["source"] != "zoo":
            continue
        tb = min(1.0, r["grid_blocks"] / sms)
        ncu_us, hw = (r["ncu_duration_ns"] or 0) / 1e3, (r["ncu_sm_active_pct"] or 0) / 100
        print(
            f"{r['case'][:30]:30s} {r['kernel'][:38]:38s} blocks {r['grid_blocks']:>8d} "
            f"dur {r['trace_dur_us']:>9.1f} us  ncu {ncu_us:>9.1f} us  tb {tb:.2f}  hw {hw:.2f}"
        )
    for step in sorted({r["case"] for r in rows if r["source"] == "step"}):
        ks = [r for r in rows if r["case"] == step]
        tot = sum(r["trace_dur_us"] for r in ks)
        hw = sum(r["trace_dur_us"] * (r["ncu_sm_active_pct"] or 0) / 100 for r in ks) / tot
        tb = sum(r["trace_dur_us"] * min(1.0, r["grid_blocks"] / sms) for r in ks) / tot
        print(f"{step}: {len(ks)} kernels, {tot:.0f} us; time-weighted hw {hw:.3f}, min(1, blocks/SM) {tb:.3f}")


if __name__ == "__main__":
    main()
