#!/usr/bin/env python3
"""The MFU tab on a long profiling window: a real TensorBoard and a real headless Chromium.

Builds the 100,000-step trace of benchmarks/many_steps.py (one kernel per step), lets TensorBoard
analyse it once (the disk cache then serves it), and times, in a fresh page: the ``/report``
answer (bytes, seconds, MB/s) and the time from that answer to the per-step chart's canvas,
with Chromium's JS heap after drawing (CDP ``Performance.getMetrics``) and the server's peak RSS.

Measured here (2 cores, other work running), 100,000 steps, 85.9 MB of JSON: with one ECharts
element per bar, 63.5 s from the report's arrival to the chart and a 752 MB JS heap; drawing each
series as one path (ECharts' large mode, above 2,000 steps) with a zoom, 6.7 s and 109 MB.

usage: python benchmarks/bench_tab_many_steps.py [--steps 100000] [--chromium /usr/bin/chromium]
(TensorBoard runs the package that ``import tb_mfu_plugin`` finds: set PYTHONPATH to a checkout to
measure that one.)
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from many_steps import build  # noqa: E402

from tests.e2e.conftest import CHROMIUM_ARGS, TensorBoard  # noqa: E402


def _peak_rss_mb(pid: int) -> float:
    """The server's peak RSS (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--limit-s", type=float, default=600)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tb_mfu_tab_bench_"))
    run = work / "logs" / f"steps_{args.steps}"
    run.mkdir(parents=True)
    trace = build(Path(tempfile.gettempdir()) / f"tb_mfu_bench_{args.steps}_steps.pt.trace.json.gz", args.steps, True)
    (run / "w.1.pt.trace.json.gz").symlink_to(trace)
    tb = TensorBoard(run.parent, work / "cache")
    try:
        tb.wait_analysed(timeout=args.limit_s)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            answered: dict[str, float] = {}
            reports: list[object] = []

            def on_done(request: object) -> None:
                if "/report?" in request.url:  # type: ignore[attr-defined]
                    answered["t"] = time.perf_counter()
                    reports.append(request)

            page.on("requestfinished", on_done)
            t0 = time.perf_counter()
            page.goto(tb.url + "/#mfu")
            frame = None
            while frame is None and time.perf_counter() - t0 < args.limit_s:
                frame = next((f for f in page.frames if f.locator("[data-testid=steps-chart] canvas").count()), None)
                time.sleep(0.05)
            drawn = time.perf_counter()
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            for request in reports[:1]:  # read after the drawing, not inside the event
                answered["sent"] = request.sizes()["responseBodySize"]  # type: ignore[attr-defined]
                # Chromium evicts a body this large from its inspector cache: ask the server again
                with urllib.request.urlopen(request.url) as answer:  # type: ignore[attr-defined]
                    answered["bytes"] = len(answer.read())
            heap = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}["JSHeapUsedSize"]
            browser.close()
        if frame is None or "t" not in answered:
            sys.exit(f"the chart did not draw within {args.limit_s:.0f} s")
        mb = answered["bytes"] / 1e6
        sent = answered["sent"] / 1e6
        got, took = answered["t"] - t0, drawn - answered["t"]
        print(f"{args.steps:,} steps: /report {mb:.1f} MB of JSON ({sent:.1f} MB sent), {got:.1f} s from navigation")
        print(f"  chart drawn {took:.1f} s after the report arrived ({mb / took:.1f} MB/s)")
        print(f"  Chromium JS heap {heap / 1e6:.0f} MB; TensorBoard peak RSS {_peak_rss_mb(tb.proc.pid):.0f} MB")
        print(f"  this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    finally:
        tb.stop()


if __name__ == "__main__":
    main()
