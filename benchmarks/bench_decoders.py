#!/usr/bin/env python3
"""Decoder candidates on one trace, in one run: MB/s, CPU time and peak RSS of each, one core.

Each candidate runs in its own child process pinned to one core (``bench_big_trace.measure``):

- **ours, end to end** (``tb-mfu analyze FILE --json --jobs 1``, one decode process), with the
  compiled column decoder (``trace/decode/_kineto.c``) and with it turned off
  (``$TB_MFU_FAST_DECODE=0``: the msgspec path); ``--compare CHECKOUT`` adds another checkout (the
  code before). Their JSON reports must be byte-identical: the benchmark stops if they are not.
- **parse floors** of the compiled JSON parsers on PyPI (``--floors``): what each costs to parse
  the file and read one field of every event, before any column is built. A candidate whose
  floor is slower than our whole end-to-end run cannot be the decoder. They run with
  ``--floors-python`` (a venv holding the wheels; a parser that is not installed is skipped):
  orjson (the whole document into Python objects), msgspec (the typed structs of the msgspec
  path, chunk by chunk, nothing kept), pysimdjson (a tape, each event's ts read through its
  proxy), polars (``read_json`` of the event array).

``--rounds N`` repeats the whole set, candidates alternated, and prints each one's median. MB/s is
uncompressed JSON per second of wall time; RSS is the peak of the process tree (× the file size).

usage: python benchmarks/bench_decoders.py TRACE [--rounds 5] [--compare CHECKOUT] [--floors]
           [--floors-python PY]
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_big_trace import ROOT, Run, child_env, measure, warm  # noqa: E402 - the benchmarks' own helpers

FLOORS = {
    "orjson.loads, whole document": """
import orjson, sys
doc = orjson.loads(open(sys.argv[1], "rb").read())
n = sum(1 for e in doc["traceEvents"] if e.get("ts") is not None)
""",
    "msgspec typed structs, chunk by chunk": """
import os, re, sys
os.environ["TB_MFU_FAST_DECODE"] = "0"
from tb_mfu_plugin.trace.decode.stream import EventStream, Source
from tb_mfu_plugin.trace.limits import DEFAULT_LIMITS, Deadline
from tb_mfu_plugin.trace.locate.locations import Location
with Source(Location.parse(sys.argv[1]), DEFAULT_LIMITS, Deadline(sys.argv[1], 1e9)) as src:
    head = src.block()
    m = re.search(rb'"traceEvents"\\s*:\\s*\\[(\\s*?\\n([ \\t]*))\\{', head)
    n = sum(len(c) for c in EventStream(src, b" " + head[m.end(1):], b"\\n" + m.group(2) + b"{"))
""",
    "pysimdjson tape, ts of every event": """
import simdjson, sys
doc = simdjson.Parser().parse(open(sys.argv[1], "rb").read())
n = sum(1 for e in doc["traceEvents"] if e.get("ts") is not None)
""",
    "polars read_json of the event array": """
import io, sys, polars as pl
data = open(sys.argv[1], "rb").read()
start = data.index(b"[", data.index(b'"traceEvents"'))
end = data.rindex(b"]")
frame = pl.read_json(io.BytesIO(data[start : end + 1]), infer_schema_length=None)
n = frame.height
""",
}
FLOOR_NEEDS = {"orjson.loads": "orjson", "msgspec": "msgspec", "pysimdjson": "simdjson", "polars": "polars"}


def ours(trace: Path, checkout: Path, fast: bool, out: Path, label: str) -> Run:
    env = {**child_env(checkout), "TB_MFU_DECODE_PROCESSES": "1", "TB_MFU_FAST_DECODE": "1" if fast else "0"}
    cli = f"exec {sys.executable} -m tb_mfu_plugin.cli analyze {trace} --json --jobs 1 > {out}"
    return measure(label, ["sh", "-c", cli], env, {0}, cwd=checkout)


def floor(trace: Path, py: str, label: str, script: str, tmp: Path) -> Run | None:
    module = next(v for k, v in FLOOR_NEEDS.items() if label.startswith(k))
    env = child_env(ROOT)
    if os.system(f"PYTHONPATH={ROOT} {py} -c 'import {module}' 2>/dev/null") != 0:
        print(f"{label}: {module} is not installed in {py}, skipped")
        return None
    path = tmp / "floor.py"
    path.write_text(script)
    return measure(label, [py, str(path), str(trace)], env, {0}, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--compare", type=Path, help="also run this checkout (the code before), end to end")
    ap.add_argument("--floors", action="store_true", help="also the parse floors of other parsers")
    ap.add_argument("--floors-python", default=sys.executable, help="the python that runs the floors")
    args = ap.parse_args()
    size = args.trace.stat().st_size
    tmp = Path(tempfile.mkdtemp(prefix="tb_mfu_bench_decoders_"))
    print(f"trace: {args.trace} ({size / 1e6:.0f} MB of JSON), {os.cpu_count()} cores, {time.strftime('%F %T')}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print(f"{'':<52} {'wall s':>7} {'CPU s':>7} {'MB/s':>7} {'peak RSS (tree)':>22}", flush=True)
    for checkout in (args.compare, ROOT) if args.compare else (ROOT,):
        warm(checkout)
    runs: dict[str, list[Run]] = {}
    reports: list[Path] = []
    for _ in range(args.rounds):
        cases = [(ROOT, False, "this checkout, msgspec path (TB_MFU_FAST_DECODE=0)")]
        cases.append((ROOT, True, "this checkout, compiled columns (_kineto)"))
        if args.compare:
            cases.insert(0, (args.compare, True, f"{args.compare.name} (before)"))
        for checkout, fast, label in cases:
            out = tmp / f"report_{len(reports)}.json"
            reports.append(out)
            run = ours(args.trace, checkout, fast, out, label)
            runs.setdefault(label, []).append(run)
            print(f"{run.line(size)}  load {os.getloadavg()[0]:.1f}", flush=True)
        if args.floors:
            for label, script in FLOORS.items():
                got = floor(args.trace, args.floors_python, label, script, tmp)
                if got is not None:
                    runs.setdefault(label, []).append(got)
                    print(f"{got.line(size)}  load {os.getloadavg()[0]:.1f}", flush=True)
    same = all(filecmp.cmp(reports[0], p, shallow=False) for p in reports[1:])
    print(f"\nJSON reports of every end-to-end run identical: {same}")
    if args.rounds > 1:
        print(f"\nmedians of {args.rounds} rounds:")
        for label, rs in runs.items():
            wall = statistics.median(r.wall_s for r in rs)
            cpu = statistics.median(r.cpu_s for r in rs)
            rss = statistics.median(r.rss_tree for r in rs)
            print(f"{label:<52} {wall:7.2f} {cpu:7.2f} {size / 1e6 / wall:7.1f} {rss / 1e6:9.0f} MB {rss / size:4.2f}x")
    for p in reports:
        p.unlink()
    if not same:
        sys.exit("the reports differ")


if __name__ == "__main__":
    main()
