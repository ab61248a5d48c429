"""The profiler's host cost per recorded event, fitted on every single-GPU trace that has its step time
measured without the profiler, and the tables behind ``analysis.critical_path.unprofiled``'s
``PROFILER_EVENT_LAUNCHES`` (and ``PROFILER_EVENT_US``, where a trace has no launch call) and
``PROFILER_TRITON_LAUNCHES``.

For each trace: the critical-path model of its steady-state steps (``analysis.per_device``) re-timed
with each candidate cost per host event taken out of the host's segments, against the unprofiled
median step of its ground truth. The candidates are constants in µs, and shares of the trace's own
median launch call (the host's speed as the trace measures it), each with the shipped extra cost of
a Triton launch; then that extra cost's candidates, in launch calls, with the shipped cost per event,
on every trace and on those with Triton launches. Prints, per candidate, the median |error|, how many
traces land within 5 % and 10 %, and the worst; then every trace's error with the model as shipped.
Last, for ``PROFILER_COST_RANGE``: the share of a launch call an event each trace needed to meet its
truth, its percentiles over the host-bound traces, and on how many traces the truth lies inside the
range the model gives (the step re-timed at each end of the range).

    python validation/fit_profiler_drag.py [--markdown]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packed import unpacked  # noqa: E402  (a held-out host keeps its traces in traces.tar.xz)

from tb_mfu_plugin.analysis.critical_path import unprofiled  # noqa: E402
from tb_mfu_plugin.analysis.critical_path.graph import Graph  # noqa: E402
from tb_mfu_plugin.analysis.critical_path.unprofiled import (  # noqa: E402
    PROFILER_COST_RANGE,
    PROFILER_EVENT_LAUNCHES,
    PROFILER_TRITON_LAUNCHES,
)
from tb_mfu_plugin.analysis.critical_path.whatif import Model  # noqa: E402
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
# a trace is host-bound for the range's fit where the profiled model step is this much over its truth
HOST_BOUND = 0.10
# the extra cost of a Triton launch, in launch calls
TRITON_CANDIDATES = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0)


def cases(root: Path = ROOT / "validation", samples: bool = True) -> Iterator[tuple[str, Path, float]]:
    """(label, run folder, unprofiled median step µs) of every single-GPU trace with a truth in a
    ``ground_truth.json`` one level under ``root`` (mfu_truth's runs, the pairs' two sides), and the
    samples' when ``samples``."""
    for path in sorted(root.glob("*/ground_truth.json")):
        # the traces: in the tree, or unpacked from the host's traces.tar.xz (validation/packed.py)
        gt, src = json.loads(path.read_text()), Path(unpacked(str(path.parent)))
        for name, r in gt.get("runs", {}).items():
            yield f"{src.name}/{name}", src / name, r["step_time_unprofiled"]["median_us"]
        for name, p in gt.get("pairs", {}).items():
            for side in ("before", "after"):
                yield f"{src.name}/{name}/{side}", src / name / side, p[side]["step_time_unprofiled"]["median_us"]
    if not samples:
        return
    for path in sorted((ROOT / "sample_traces").glob("*/ground_truth.json")):
        g = json.loads(path.read_text())
        if g.get("world_size", 1) == 1 and g.get("step_time_us_unprofiled") is not None:
            yield f"sample_traces/{path.parent.name}", path.parent, g["step_time_us_unprofiled"]


Candidate = tuple[str, float]


@dataclasses.dataclass(frozen=True)
class Needed:
    """What one trace needed: its error with no drag taken out, the share of a launch call an event
    that meets its truth (NaN where none does), and how far the truth lies outside the model's range
    (relative to the truth; 0 inside it)."""

    label: str
    bare: float
    share: float
    outside: float


def models(held_out: Path | None) -> Iterator[tuple[str, Model, float]]:
    """(label, the critical-path model of its analysed steps, unprofiled median step µs) per trace."""
    found = cases(held_out, samples=False) if held_out is not None else cases()
    for label, folder, truth in found:
        files = sorted(glob.glob(str(folder / "*.pt.trace.json*")))
        if not files:  # a truth whose traces are kept in git history only (the set's README says where)
            print(f"{label}: no trace in {folder}, left out", file=sys.stderr)
            continue
        tables = decode_trace(files[0], keep_inputs=_keep_inputs)
        a = analyze_device(tables, int(tables.gpu.device[0]), AnalysisOptions())
        if a.view is None or a.view.critical is None:
            continue
        yield label, a.view.critical, truth


def _retimed(model: Model, event: Callable[[Graph], float], triton: float = PROFILER_TRITON_LAUNCHES) -> float:
    """The model's step without the profiler at ``event`` µs an event and ``triton`` launch calls more
    a Triton launch (the module's cost per event and Triton constant, as the model reads them)."""
    setattr(unprofiled, "profiler_event_us", event)  # noqa: B010
    unprofiled.PROFILER_TRITON_LAUNCHES = triton
    try:
        return Model(dataclasses.replace(model.g), len(model.view_pos)).unprofiled_step_us
    finally:
        setattr(unprofiled, "profiler_event_us", SHIPPED_EVENT)  # noqa: B010
        unprofiled.PROFILER_TRITON_LAUNCHES = PROFILER_TRITON_LAUNCHES


def _error(model: Model, truth: float, share: float) -> float:
    return _retimed(model, _event_cost("launch", share)) / truth - 1.0


def needed(held_out: Path | None = None) -> list[Needed]:
    """Each trace's ``Needed``: the share by bisection over 0-4 launch calls (the step only shortens
    as the share grows), the inside test on the shipped model's ``unprofiled_step_range_us``."""
    out = []
    for label, model, truth in models(held_out):
        err = functools.partial(_error, model, truth)
        lo, hi, share = 0.0, 4.0, float("nan")
        if err(lo) >= 0 >= err(hi):
            for _ in range(24):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if err(mid) > 0 else (lo, mid)
            share = (lo + hi) / 2
        short, long = model.unprofiled_step_range_us
        out.append(Needed(label, err(0.0), share, max(short - truth, truth - long, 0.0) / truth))
    return out


def errors(held_out: Path | None = None) -> tuple[list[str], list[bool], dict[Candidate, list[float]]]:
    """Each trace's label, whether it has Triton launches, and its error under each candidate (the
    event candidates, then ``("triton", k)`` for each extra cost of a Triton launch)."""
    labels: list[str] = []
    triton: list[bool] = []
    every = (*CANDIDATES, *(("triton", k) for k in TRITON_CANDIDATES))
    out: dict[Candidate, list[float]] = {c: [] for c in every}
    for label, model, truth in models(held_out):
        labels.append(label)
        triton.append(bool(model.g.host.triton.sum()))
        for kind, c in every:
            extra = c if kind == "triton" else PROFILER_TRITON_LAUNCHES
            out[(kind, c)].append(_retimed(model, _event_cost(kind, c), extra) / truth - 1.0)
    return labels, triton, out


SHIPPED_EVENT = unprofiled.profiler_event_us


def _event_cost(kind: str, c: float) -> Callable[[Graph], float]:
    """The cost per event of an event candidate (the shipped one for a Triton candidate)."""

    def constant(g: Graph) -> float:
        return c

    def share(g: Graph) -> float:
        # as the shipped model: a trace with no single launch call (a step that only replays a CUDA
        # graph) takes the constant instead
        launch = g.launch_call_us
        return c * launch if np.isfinite(launch) else unprofiled.PROFILER_EVENT_US

    return constant if kind == "µs" else share if kind == "launch" else SHIPPED_EVENT


def _table(bar: str, markdown: bool, head: str, rows: dict[str, list[float]]) -> None:
    print(f"{bar} {head} {bar} median abs error {bar} within 5 % {bar} within 10 % {bar} worst {bar}")
    if markdown:
        print("|---|---:|---:|---:|---:|")
    for name, e in rows.items():
        a = np.abs(np.array(e))
        print(
            f"{bar} {name} {bar} {np.median(a):.1%} {bar} {int((a <= 0.05).sum())} of {len(a)} {bar} "
            f"{int((a <= 0.10).sum())} of {len(a)} {bar} {a.max():.1%} {bar}"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    parser.add_argument(
        "--held-out",
        nargs="?",
        const="validation/h100",
        default=None,
        help="a folder of traces the fit never saw, with their truth (default validation/h100; also "
        "validation/h100_again)",
    )
    args = parser.parse_args()
    held_out = ROOT / args.held_out if args.held_out is not None else None
    labels, triton, out = errors(held_out)
    bar = "|" if args.markdown else " "

    def named(c: Candidate) -> str:
        return f"{c[1]:g} µs" if c[0] == "µs" else f"{c[1]:g} x the median launch call"

    _table(bar, args.markdown, "cost per event", {named(c): out[c] for c in CANDIDATES})
    tri = {f"{k:g} launch calls": out[("triton", k)] for k in TRITON_CANDIDATES}
    _table(bar, args.markdown, "a Triton launch's extra cost, every trace", tri)
    _table(
        bar,
        args.markdown,
        f"a Triton launch's extra cost, the {sum(triton)} traces with Triton launches",
        {name: [x for x, t in zip(e, triton, strict=True) if t] for name, e in tri.items()},
    )
    shipped = out[("triton", PROFILER_TRITON_LAUNCHES)]
    print(
        f"{bar} trace {bar} error at {PROFILER_EVENT_LAUNCHES:g} x its median launch call an event, "
        f"{PROFILER_TRITON_LAUNCHES:g} more a Triton launch {bar}"
    )
    if args.markdown:
        print("|---|---:|")
    for label, e in zip(labels, shipped, strict=True):
        print(f"{bar} {label} {bar} {e:+.1%} {bar}")
    print()
    _range_table(bar, args.markdown, needed(held_out))


def _range_table(bar: str, markdown: bool, rows: list[Needed]) -> None:
    """The share each host-bound trace needed, and how often the truth lies inside the model's range."""
    host_bound = [r for r in rows if r.bare > HOST_BOUND]
    shares = np.array([r.share for r in host_bound if np.isfinite(r.share)])
    p10, p50, p90 = np.percentile(shares, [10, 50, 90]) if len(shares) else (np.nan,) * 3
    lo, hi = PROFILER_COST_RANGE
    print(
        f"The {len(host_bound)} traces whose step under the profiler is over {HOST_BOUND:.0%} longer than their "
        f"truth; on the {len(shares)} where some share of a launch call an event meets the truth, that share's "
        f"10th percentile is {p10:.2f}, its median {p50:.2f}, its 90th {p90:.2f}. PROFILER_COST_RANGE "
        f"{lo:g}-{hi:g} x the estimate is {lo * PROFILER_EVENT_LAUNCHES:.2f}-{hi * PROFILER_EVENT_LAUNCHES:.2f}."
    )
    print()
    print(f"{bar} traces {bar} truth inside the step range {bar} within 2 % of it {bar} within 5 % {bar}")
    if markdown:
        print("|---|---:|---:|---:|")
    for name, group in (("host-bound", host_bound), ("every trace", rows)):
        n = [sum(r.outside <= tol for r in group) for tol in (0.0, 0.02, 0.05)]
        print(f"{bar} {name} {bar} " + f" {bar} ".join(f"{k} of {len(group)}" for k in n) + f" {bar}")
    print()
    print(f"{bar} trace {bar} error with no drag taken out {bar} share needed {bar} truth outside the range by {bar}")
    if markdown:
        print("|---|---:|---:|---:|")
    for r in rows:
        print(f"{bar} {r.label} {bar} {r.bare:+.1%} {bar} {r.share:.2f} {bar} {r.outside:.1%} {bar}")


if __name__ == "__main__":
    main()
