"""Where one core's time goes on a big trace: each phase alone, in a child process of its own.

    python benchmarks/bench_decode_phases.py TRACE.json [--rounds 2] [--pin 0]

The phases, each measured from the file on disk (uncompressed JSON), one process each:

- ``read``: the bytes through the trace layer's ``Source`` (no parsing);
- ``msgspec``: the same, cut at event boundaries and decoded to typed events by msgspec
  (``EventStream``), the events then dropped: the floor the decoder stands on;
- ``decode``: ``decode_trace``, the columns and tables included;
- ``analyze``: ``decode_trace`` then ``trace_reports`` (metrics, FLOPs, roofline,
  diagnosis), that is the CLI's work short of printing;
- ``pyarrow``: for reference, where pyarrow is installed and the trace has one event a line
  (``scale_trace.py``'s output): Arrow's C++ JSON reader on one thread with an explicit
  schema of the fields we read, commas between events blanked first (it reads JSON lines).

Each line gives the phase's seconds (the child's imports left out), MB/s of JSON and the
child's peak RSS. ``--pin`` pins the
children to one core (``os.sched_setaffinity``), as "one core" means in issue 11.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("read", "msgspec", "decode", "analyze", "pyarrow")


def run_phase(phase: str, path: str) -> str:
    """The phase's work in this process; returns a short description of what it produced."""
    sys.path.insert(0, str(ROOT))
    if phase == "read":
        from tb_mfu_plugin.trace.decode.stream import Source
        from tb_mfu_plugin.trace.limits import DEFAULT_LIMITS, Deadline

        with Source(path, DEFAULT_LIMITS, Deadline(path, 3600)) as src:
            while src.block():
                pass
            return f"{src.read:,} bytes"
    if phase == "msgspec":
        return _msgspec_only(path)
    if phase == "pyarrow":
        return _pyarrow(path)
    from tb_mfu_plugin.running import pipeline
    from tb_mfu_plugin.trace.decode.decode import decode_trace
    from tb_mfu_plugin.trace.locate.discover import SpanFile

    if phase == "decode":
        # as analyze_file decodes: the recorded shapes of the ops with FLOP formulas kept
        tables = decode_trace(path, keep_inputs=pipeline._keep_inputs)
        return f"{len(tables.cpu):,} cpu rows, {len(tables.gpu):,} gpu rows"
    if phase == "analyze":
        reports = pipeline.analyze_file(SpanFile("", path, os.path.getsize(path), 0.0), "bench")
        summary = reports[0].summary
        return f"{len(reports)} report(s), MFU {summary.mfu if summary else None}"
    raise SystemExit(f"unknown phase {phase}")


def _msgspec_only(path: str) -> str:
    import gc
    import re

    from tb_mfu_plugin.trace.decode.stream import EventStream, Source
    from tb_mfu_plugin.trace.limits import DEFAULT_LIMITS, Deadline
    from tb_mfu_plugin.trace.locate.locations import Location

    os.environ["TB_MFU_FAST_DECODE"] = "0"  # this phase is msgspec's parse (bench_decoders.py has the compiled one)
    gc.disable()  # as decode_trace does
    with Source(Location.parse(path), DEFAULT_LIMITS, Deadline(path, 3600)) as src:
        head = bytearray()
        while (m := re.search(rb'"traceEvents"\s*:\s*\[', head)) is None:
            head += src.block()
        rest = head[m.end() :]
        first = re.match(rb"\s*?(\n[ \t]*)?\{", rest)
        indent = first.group(1) if first and first.group(1) else b"\n"
        events = sum(len(chunk) for chunk in EventStream(src, b" " + rest, indent + b"{"))
    return f"{events:,} complete events"


def _pyarrow(path: str) -> str:
    import pyarrow as pa
    import pyarrow.json as pj

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    data = Path(path).read_bytes()
    body = data[data.index(b"[", data.index(b'"traceEvents"')) + 1 : data.rindex(b"]")].replace(b"},\n{", b"}\n{")
    i, f, s = pa.int64(), pa.float64(), pa.string()
    args = pa.struct(
        [("External id", i), ("correlation", i), ("device", i), ("stream", i), ("blocks per SM", f)]
        + [("est. achieved occupancy %", f), ("bytes", i), ("grid", pa.list_(i)), ("block", pa.list_(i))]
        + [("Input Dims", pa.list_(pa.list_(i))), ("Input type", pa.list_(s)), ("Concrete Inputs", pa.list_(s))]
    )
    # pid and tid are left out: Kineto writes both numbers and strings there, which Arrow refuses
    schema = pa.schema([("ph", s), ("cat", s), ("name", s), ("ts", f), ("dur", f), ("args", args)])
    table = pj.read_json(
        pa.py_buffer(body),
        read_options=pj.ReadOptions(use_threads=False, block_size=16 << 20),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    return f"{table.num_rows:,} events (all phases)"


def child(phase: str, path: str, pin: int | None) -> tuple[float, int, str]:
    """Seconds of the phase itself (imports left out), peak RSS in bytes and the description of
    one phase, run in a fresh process."""
    cmd = [sys.executable, __file__, path, "--phase", phase] + ([] if pin is None else ["--pin", str(pin)])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        return 0.0, 0, "failed: " + (out.stderr.strip().splitlines() or ["?"])[-1]
    seconds, rss_kib, what = out.stdout.strip().split("\t", 2)
    return float(seconds), int(rss_kib) * 1024, what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--pin", type=int, help="pin the children to this core")
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--phase", help=argparse.SUPPRESS)  # internal: run one phase here
    args = ap.parse_args()
    if args.phase:
        if args.pin is not None:
            os.sched_setaffinity(0, {args.pin})
        t0 = time.perf_counter()
        what = run_phase(args.phase, args.trace)
        seconds = time.perf_counter() - t0
        print(f"{seconds}\t{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\t{what}")
        return
    size = os.path.getsize(args.trace)
    print(f"{args.trace}: {size / 1e6:,.0f} MB of JSON, {os.cpu_count()} cores, pinned to {args.pin}")
    print(f"{'phase':<10} {'s':>7} {'MB/s':>7} {'peak RSS':>10}  what")
    for _ in range(args.rounds):
        for phase in args.phases.split(","):
            if phase == "pyarrow":
                try:
                    import pyarrow  # noqa: F401
                except ImportError:
                    print(f"{phase:<10} skipped: pyarrow is not installed")
                    continue
            secs, rss, what = child(phase, args.trace, args.pin)
            print(
                f"{phase:<10} {secs:7.2f} {size / 1e6 / max(secs, 1e-9):7.1f} {rss / 1e6:8.0f} MB  {what}", flush=True
            )


if __name__ == "__main__":
    main()
