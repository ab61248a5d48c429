"""The profiler's host cost per recorded event, fitted on every single-GPU trace that has its step time
measured without the profiler, and the table behind ``analysis.critical_path.whatif``'s
``PROFILER_EVENT_LAUNCHES`` (and ``PROFILER_EVENT_US``, where a trace has no launch call).

For each trace: the critical-path model of its steady-state steps (``analysis.per_device``) re-timed
with each candidate cost per host event taken out of the host's segments, against the unprofiled
median step of its ground truth. The candidates are constants in µs, and shares of the trace's own
median launch call (the host's speed as the trace measures it). Prints, per candidate, the median
|error|, how many traces land within 5 % and 10 %, and the worst; then every trace's error with the
model as shipped.

    python validation/fit_profiler_drag.py [--markdown]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_mfu_plugin.analysis.critical_path import whatif  # noqa: E402
from tb_mfu_plugin.analysis.critical_path.whatif import PROFILER_EVENT_LAUNCHES, PROFILER_EVENT_US, Model  # noqa: E402
from tb_mfu_plugin.analysis.options import AnalysisOptions  # noqa: E402
from tb_mfu_plugin.analysis.per_device import analyze_device  # noqa: E402
from tb_mfu_plugin.running.pipeline import _keep_inputs  # noqa: E402
from tb_mfu_plugin.trace.decode.decode import decode_trace  # noqa: E402

# ("µs", c): c µs an event; ("launch", k): k x the trace's median launch call an event
CANDIDATES = (
    *(("µs", c) for c in (2.0, 3.0, 3.5, 4.0, 4.5, 5.0)),
    *(("launch", k) for k in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)),
)
SHIPPED = ("launch", PROFILER_EVENT_LAUNCHES)


def cases(root: Path = ROOT / "validation", samples: bool = True) -> Iterator[tuple[str, Path, float]]:
    """(label, run folder, unprofiled median step µs) of every single-GPU trace with a truth under
    ``root`` (its mfu_truth, gain_pairs and whatif_pairs), and the samples' when ``samples``."""
    gt = json.loads((root / "mfu_truth/ground_truth.json").read_text())
    for name, r in gt["runs"].items():
        yield f"mfu_truth/{name}", root / "mfu_truth" / name, r["step_time_unprofiled"]["median_us"]
    for src in ("gain_pairs", "whatif_pairs"):
        gt = json.loads((root / src / "ground_truth.json").read_text())
        for name, p in gt["pairs"].items():
            for side in ("before", "after"):
                u = p[side]["step_time_unprofiled"]
                yield f"{src}/{name}/{side}", root / src / name / side, u["median_us"]
    if not samples:
        return
    for path in sorted((ROOT / "sample_traces").glob("*/ground_truth.json")):
        g = json.loads(path.read_text())
        if g.get("world_size", 1) == 1 and g.get("step_time_us_unprofiled") is not None:
            yield f"sample_traces/{path.parent.name}", path.parent, g["step_time_us_unprofiled"]


def errors(held_out: bool = False) -> tuple[list[str], dict[tuple[str, float], list[float]]]:
    labels: list[str] = []
    out: dict[tuple[str, float], list[float]] = {c: [] for c in CANDIDATES}
    found = cases(ROOT / "validation/h100", samples=False) if held_out else cases()
    for label, folder, truth in found:
        files = sorted(glob.glob(str(folder / "*.pt.trace.json*")))
        if not files:
            continue
        tables = decode_trace(files[0], keep_inputs=_keep_inputs)
        a = analyze_device(tables, int(tables.gpu.device[0]), AnalysisOptions())
        model = a.view.critical if a.view is not None else None
        if model is None:
            continue
        labels.append(label)
        for kind, c in CANDIDATES:
            # the module's constants, as the model reads them: a constant is a share of no launch call
            g = model.g if kind == "launch" else dataclasses.replace(model.g, launch_call_us=float("nan"))
            shares, constant = (c, PROFILER_EVENT_US) if kind == "launch" else (0.0, c)
            whatif.PROFILER_EVENT_LAUNCHES, whatif.PROFILER_EVENT_US = shares, constant
            again = Model(dataclasses.replace(g), len(a.view.gpu))
            out[(kind, c)].append(again.unprofiled_step_us / truth - 1.0)
        whatif.PROFILER_EVENT_LAUNCHES, whatif.PROFILER_EVENT_US = PROFILER_EVENT_LAUNCHES, PROFILER_EVENT_US
    return labels, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    parser.add_argument(
        "--held-out", action="store_true", help="the H100 traces of validation/h100, which the fit never saw"
    )
    args = parser.parse_args()
    labels, out = errors(args.held_out)
    bar = "|" if args.markdown else " "
    print(f"{bar} cost per event {bar} median abs error {bar} within 5 % {bar} within 10 % {bar} worst {bar}")
    if args.markdown:
        print("|---|---:|---:|---:|---:|")
    for c, e in out.items():
        a = np.abs(np.array(e))
        name = f"{c[1]:g} µs" if c[0] == "µs" else f"{c[1]:g} x the median launch call"
        print(
            f"{bar} {name} {bar} {np.median(a):.1%} {bar} {int((a <= 0.05).sum())} of {len(a)} {bar} "
            f"{int((a <= 0.10).sum())} of {len(a)} {bar} {a.max():.1%} {bar}"
        )
    print()
    print(f"{bar} trace {bar} error at {PROFILER_EVENT_LAUNCHES:g} x its median launch call an event {bar}")
    if args.markdown:
        print("|---|---:|")
    for label, e in zip(labels, out[SHIPPED], strict=True):
        print(f"{bar} {label} {bar} {e:+.1%} {bar}")


if __name__ == "__main__":
    main()
