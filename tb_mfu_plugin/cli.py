"""``tb-mfu analyze PATH [--json]``: the same RunReport as the TensorBoard tab, as tables or JSON."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__
from .analysis.report import KernelStats, Report, RunReport, WorkerReport
from .errors import TraceError
from .escape import for_rich, json_bytes, markup_escape, one_line
from .options import AnalysisOptions
from .pipeline import analyze_file, run_report, thresholds_from
from .trace.decode import uncompressed_size
from .trace.discover import discover_runs
from .trace.limits import DEFAULT_LIMITS, FLAGS, Limits, format_limit, parse_size


def _pct(x: float | None) -> str:
    if x is None:
        return "n/a"
    # a share or MFU above 100 % is never printed as a figure (analysis.plausibility)
    return "impossible (>100 %)" if x > 1.0 + 1e-6 else f"{100 * x:.1f} %"


def _mfu(w: WorkerReport) -> str:
    """MFU, or "impossible" where the analysis found it above 100 % and withheld it."""
    if w.summary is not None and w.summary.mfu is None and "impossible_mfu" in w.flags:
        return "impossible"
    return _pct(w.summary.mfu if w.summary is not None else None)


_CORE_SHORT = {"tensor-core": "TC", "cuda-core": "CUDA", "unknown": "?", "not-a-matmul": ""}


def _core(k: KernelStats) -> str:
    """Top-kernels cell: TC / CUDA / ? (a GEMM of unknown class) and the dtype the name gives."""
    short = _CORE_SHORT.get(k.core or "", "TC" if k.tensor_core else "")
    return f"{short} {k.dtype}" if short and k.dtype else short


def _us(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x >= 1e6:
        return f"{x / 1e6:.2f} s"
    if x >= 1e3:
        return f"{x / 1e3:.2f} ms"
    return f"{x:.1f} µs"


def _bytes(x: float | None) -> str:
    if x is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"


def _flops(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e12:.3f} TFLOP"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tb-mfu", description="Why is training slow when the GPU reads 100 % busy?")
    p.add_argument("--version", action="version", version=f"tb-mfu {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="analyse a logdir, a run directory or one trace file")
    a.add_argument("path", help="logdir, run directory, or a single trace file (.json or .json.gz)")
    a.add_argument("--json", action="store_true", help="print the versioned JSON report on stdout")
    a.add_argument("--top", type=int, default=10, help="kernels to list in the table view (default 10)")
    a.add_argument("--min-mfu", type=float, metavar="PCT",
                   help="exit with status 3 when any analysed worker's MFU is below PCT percent (for CI)")
    _add_analysis_flags(a)
    c = sub.add_parser("compare", help="compare two runs: metric deltas and findings fixed or new")
    c.add_argument("baseline", help="the run before (a run directory or a trace file)")
    c.add_argument("other", help="the run after")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON on stdout")
    _add_analysis_flags(c)
    e = sub.add_parser("export-scalars", help="write the per-step figures as TensorBoard scalars (Scalars, HParams)")
    e.add_argument("path", help="logdir, run directory, or a single trace file (.json or .json.gz)")
    e.add_argument("--out", required=True, metavar="DIR",
                   help="directory to write the event files into (one TensorBoard run per run and worker)")
    e.add_argument("--replace", action="store_true", help="overwrite the event files of an earlier export in DIR")
    _add_analysis_flags(e)
    return p


def _add_analysis_flags(a: argparse.ArgumentParser) -> None:
    a.add_argument("--peak-tflops", type=float, help="peak dense TFLOP/s to use for MFU (overrides the device)")
    a.add_argument("--device-name", help="GPU model to take the peak from, e.g. 'H100 SXM' (overrides the trace)")
    a.add_argument("--flops-per-step", type=float, help="model FLOPs per step (overrides the sidecar file)")
    a.add_argument("--tf32", action="store_true", help="fp32 matmuls ran as TF32 on tensor cores")
    a.add_argument("--tensor-core-pattern", action="append", default=[], metavar="REGEX",
                   help="also count kernels matching REGEX as tensor-core kernels (repeatable)")
    a.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE", type=_threshold,
                   help="change a diagnosis threshold, e.g. memcpy_bound_share=0.1 (repeatable; "
                        "names in docs/diagnosis.md)")
    _add_limit_flags(a)


def _add_limit_flags(a: argparse.ArgumentParser) -> None:
    g = a.add_argument_group("limits", "caps on what one trace file may cost (docs/limits.md); 0 means none for "
                                       "--max-seconds")
    for flag, (field, unit) in FLAGS.items():
        default = getattr(DEFAULT_LIMITS, field)
        suffixes = " (K, M, G suffixes)" if unit == "bytes" else ""
        g.add_argument(flag, dest=field, type=_limit_value(unit), default=default, metavar=unit.upper(),
                       help=f"default {format_limit(default, unit)}{suffixes}")


def _limit_value(unit: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float:
        try:
            value = float(parse_size(text)) if unit == "bytes" else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}") from None
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
        return value

    return parse


def _threshold(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, got {text!r}") from None


def _options(args: argparse.Namespace) -> AnalysisOptions:
    return AnalysisOptions(
        peak_tflops=args.peak_tflops,
        device_name=args.device_name,
        flops_per_step=args.flops_per_step,
        tf32=args.tf32,
        tensor_core_patterns=tuple(args.tensor_core_pattern),
        thresholds=tuple(args.threshold),
        limits=Limits(**{f: type(getattr(DEFAULT_LIMITS, f))(getattr(args, f)) for f, _ in FLAGS.values()}),
    )


def run_analysis(path: str, options: AnalysisOptions, show_progress: bool) -> Report:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    runs = discover_runs(path)
    report = Report(tool_version=__version__)
    files = [(r, w, s) for r in runs for w in r.workers for s in w.spans]
    # The bar counts decoded bytes: gzip's trailer tells each file's size up front.
    sizes = [uncompressed_size(s.path, s.size) for _, _, s in files]
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        transient=True,
        disable=not show_progress,
        console=_stderr_console(),
    )
    by_run: dict[str, list[WorkerReport]] = {}
    with progress:
        task = progress.add_task("Analysing", total=sum(sizes) or 1)
        done = 0
        for (run, worker, span), size in zip(files, sizes, strict=True):
            progress.update(task, description=markup_escape(f"{run.name} · {worker.name}"[-40:]))
            workers = by_run.setdefault(run.name, [])

            def advance(n: int, base: int = done) -> None:
                progress.update(task, completed=base + n)

            workers.extend(analyze_file(span, worker.name, options, advance if show_progress else None))
            done += size
            progress.update(task, completed=done)
    report.runs = [run_report(name, workers) for name, workers in by_run.items()]
    return report


def _stderr_console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=True)


def print_report(report: Report, top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    report = for_rich(report)  # names from traces and file names are text, never markup
    for run in report.runs:
        for w in run.workers:
            _print_worker(console, Table, run.name, w, top)
        _print_ranks(console, Table, run)


def _print_ranks(console, Table, run: RunReport) -> None:  # type: ignore[no-untyped-def]
    r = run.ranks
    if r is None:
        return
    t = Table(title=f"{run.name}: ranks side by side (world size {r.world_size})", title_justify="left")
    for col in ("rank", "worker", "median step", "GPU busy", "idle", "exposed comm / step", "MFU"):
        t.add_column(col, justify="right")
    for row in r.ranks:
        t.add_row(str(row.rank), row.worker, _us(row.step_time_us), _pct(row.gpu_busy_share), _pct(row.idle_share),
                  _us(row.exposed_communication_us_per_step), _pct(row.mfu))
    console.print(t)
    if r.straggler is not None:
        console.print(f"[bold]straggler: {r.straggler.worker}[/] — {r.straggler.reason}", highlight=False)
    console.print()


def _print_worker(console, Table, run_name: str, w: WorkerReport, top: int) -> None:  # type: ignore[no-untyped-def]
    title = f"[bold]{run_name}[/] · worker {w.name}" + (f" · span {w.span}" if w.span else "")
    if w.error:
        console.print(f"{title}\n  [red]error:[/] {w.error}  ({w.file})\n", highlight=False)
        return
    s = w.summary
    assert s is not None and w.device is not None
    dev = w.device
    console.rule(title)
    peak = f"{dev.peak_flops / 1e12:.1f} TFLOP/s {dev.dtype or ''} ({dev.peak_source})" if dev.peak_flops else "unknown"
    console.print(
        f"device {dev.index}: {dev.name or 'unknown GPU'}"
        + (f", {dev.num_sms} SMs, sm_{(dev.compute_capability or '').replace('.', '')}" if dev.num_sms else "")
        + f" · peak {peak}",
        highlight=False,
    )
    spread = s.distribution.get("step_time_us")
    console.print(
        f"{s.steps} steps, median step time {_us(s.step_time_us)}"
        + (f" (mean {_us(s.step_time_mean_us)}, min {_us(spread.min)}, max {_us(spread.max)})" if spread else ""),
        highlight=False,
    )
    t = Table(title=f"Where the step goes (time-weighted over the {s.steps} steps)", title_justify="left")
    for col in ("MFU", "GPU busy", "kernel time", "SM efficiency", "occupancy", "tensor-core kernels", "memcpy",
                "sync wait", "idle"):
        t.add_column(col, justify="right")
    t.add_row(_mfu(w), _pct(s.gpu_busy_share), _pct(s.kernel_time_share), _pct(s.sm_efficiency),
              _pct(s.achieved_occupancy), _pct(s.tensor_core_kernel_share), _pct(s.memcpy_time_share),
              _pct(s.sync_wait_share), _pct(s.idle_share))
    console.print(t)
    _print_flops(console, w)
    if w.copies:
        t = Table(title="Copies per step", title_justify="left")
        for col in ("direction", "host memory", "count", "bytes", "time", "GB/s", "< 64 KiB"):
            t.add_column(col, justify="right")
        for c in w.copies:
            t.add_row(c.direction, c.memory, f"{c.count_per_step:.1f}", _bytes(c.bytes_per_step),
                      _us(c.time_us_per_step), "n/a" if c.gbps is None else f"{c.gbps:.1f}",
                      f"{c.small_count_per_step:.1f}")
        console.print(t)
    if w.syncs:
        t = Table(title="Host-device syncs per step", title_justify="left")
        for col in ("API", "issued by", "inside", "count", "blocked"):
            t.add_column(col, justify="right")
        for y in w.syncs:
            t.add_row(y.api, y.root_op or "(no op: direct call)", y.op or "", f"{y.count_per_step:.1f}",
                      _us(y.blocked_us_per_step))
        console.print(t)
    if w.launches:
        ln = w.launches
        console.print(
            f"launches: {ln.kernels_per_step:.0f} kernels/step, median kernel {_us(ln.median_kernel_us)}, "
            f"{_pct(ln.short_kernel_share)} under 10 µs, launch API {_us(ln.launch_api_us_per_step)}/step; "
            f"GPU idle gaps {ln.idle_gaps.count_per_step:.0f}/step totalling {_us(ln.idle_gaps.total_us_per_step)}",
            highlight=False,
        )
        if ln.graph_launches_per_step:
            console.print(
                f"CUDA graph replays: {ln.graph_launches_per_step:.3g}/step running {ln.graph_kernels_per_step:.0f} "
                f"kernels (median {_us(ln.graph_median_kernel_us)}); the host launched "
                f"{ln.kernels_per_step - ln.graph_kernels_per_step:.0f} kernels/step one by one",
                highlight=False,
            )
    if w.top_kernels:
        t = Table(title=f"Top {min(top, len(w.top_kernels))} kernels", title_justify="left")
        for col, just in (("kernel", "left"), ("count", "right"), ("total", "right"), ("share", "right"),
                          ("blocks/SM", "right"), ("SM eff.", "right"), ("occupancy", "right"), ("unit", "center")):
            if col == "kernel":
                t.add_column(col, overflow="ellipsis", no_wrap=True, max_width=48)
            else:
                t.add_column(col, justify=just, no_wrap=True)
        for k in w.top_kernels[:top]:
            t.add_row(k.name, str(k.count), _us(k.total_us), _pct(k.share),
                      "n/a" if k.mean_blocks_per_sm is None else f"{k.mean_blocks_per_sm:.2f}",
                      _pct(k.sm_efficiency), _pct(k.achieved_occupancy), _core(k))
        console.print(t)
    _print_roofline(console, Table, w, top)
    _print_diagnosis(console, Table, w)
    for n in w.notes:
        console.print(f"[dim]note:[/] {n}", highlight=False)
    console.print()


def _print_roofline(console, Table, w: WorkerReport, top: int) -> None:  # type: ignore[no-untyped-def]
    """The ops that lose the most time below their roof (docs/roofline.md)."""
    r = w.roofline
    if r is None or not r.ops or not r.peak_flops or not r.peak_bandwidth:
        return
    ops = sorted(r.ops, key=lambda o: -(o.lost_us_per_step or 0.0))[:top]
    t = Table(
        title=f"Roofline: ops by time lost below their roof (peak {r.peak_flops / 1e12:.1f} TFLOP/s, HBM "
        f"{r.peak_bandwidth / 1e12:.2f} TB/s; {_pct(r.coverage)} of GPU time placed; ↑ above roof: cached)",
        title_justify="left",
    )
    t.add_column("op", overflow="ellipsis", no_wrap=True, min_width=14, max_width=40)
    for col in ("bound", "time/step", "achieved", "of roof", "lost/step"):
        t.add_column(col, no_wrap=True, justify="left" if col == "bound" else "right")
    for o in ops:
        got = (f"{(o.achieved_flops or 0) / 1e12:.1f} TFLOP/s" if o.bound == "compute"
               else f"{(o.achieved_bandwidth or 0) / 1e9:.0f} GB/s")
        share = _pct(o.roof_share) + (" ↑" if o.above_roof else "")
        t.add_row(f"{o.name} {o.shapes}", o.bound or "n/a", _us(o.us_per_step), got, share, _us(o.lost_us_per_step))
    console.print(t)


def _print_flops(console, w: WorkerReport) -> None:  # type: ignore[no-untyped-def]
    s, f = w.summary, w.flops or {}
    assert s is not None
    line = f"FLOPs per step: {_flops(s.flops_per_step)}"
    if f.get("headline_source"):
        line += f" from {f['headline_source']}"
    if f.get("achieved_tflops_while_busy") is not None:
        line += f"; achieved {f['achieved_tflops_while_busy']:.0f} TFLOP/s while the GPU is busy"
    console.print(line, highlight=False)
    imp = f.get("impossible")
    if imp:
        console.print(f"  [bold red]MFU impossible[/] (above 100 %), not shown as a figure; likely cause: "
                      f"{imp.get('explanation')}", highlight=False)
    console.print(
        f"  matmul kernels: tensor-core {_pct(s.tensor_core_kernel_share)} of kernel time, CUDA-core "
        f"{_pct(s.cuda_core_matmul_kernel_share)}, unknown unit {_pct(s.unknown_core_kernel_share)}; dtype "
        f"{f.get('kernel_dtype') or 'unknown'} by kernel names, peak dtype "
        f"{(f.get('peak') or {}).get('dtype') or 'n/a'} from {(f.get('peak') or {}).get('dtype_source') or 'n/a'}",
        highlight=False,
    )
    extra = []
    if f.get("mfu_model") is not None and f.get("hfu") is not None and abs(f["mfu_model"] - f["hfu"]) > 1e-4:
        extra.append(f"MFU without recompute {_pct(f['mfu_model'])}, HFU {_pct(f['hfu'])}")
    if f.get("mfu_user") is not None:
        extra.append(f"MFU from your model FLOPs ({f.get('user_flops_source')}) {_pct(f['mfu_user'])}")
    if f.get("unattributed_kernel_share"):
        extra.append(f"{_pct(f['unattributed_kernel_share'])} of kernel time is in ops with no FLOP formula")
    for e in extra:
        console.print(f"  {e}", highlight=False)
    if s.mfu is not None:
        console.print(
            "  [dim]MFU from a trace is a lower bound: the profiler slows host-bound steps down; "
            "the TFLOP/s while busy is the matching upper view.[/]",
            highlight=False,
        )


_SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}


def _print_diagnosis(console, Table, w: WorkerReport) -> None:  # type: ignore[no-untyped-def]
    s = w.summary
    if w.waterfall and s is not None:
        t = Table(
            title=f"GPU busy {_pct(s.gpu_busy_share)} but MFU {_mfu(w)}: where the step goes",
            title_justify="left",
        )
        t.add_column("")
        t.add_column("per step", justify="right")
        t.add_column("share", justify="right")
        for row in w.waterfall:
            kind = row.get("kind")
            label = row.get("label", "")
            style = "bold" if kind in ("total", "subtotal", "result") else None
            prefix = "  − " if kind == "loss" else ""
            t.add_row(prefix + label, _us(row.get("us_per_step")), _pct(row.get("share")), style=style)
        console.print(t)
    if w.findings:
        t = Table(title="Findings, by estimated gain", title_justify="left", show_lines=True)
        t.add_column("severity")
        t.add_column("finding", ratio=3)
        t.add_column("est. gain/step", justify="right")
        t.add_column("fix", ratio=4)
        for f in w.findings:
            sev = f.get("severity", "")
            gain = f.get("est_gain_us_per_step")
            after = f.get("est_mfu_after")
            gain_text = _us(gain) + (f"\n→ MFU {_pct(after)}" if after is not None else "")
            t.add_row(f"[{_SEVERITY_STYLE.get(sev, '')}]{sev}[/]", f"[bold]{f.get('id')}[/]\n{f.get('title', '')}",
                      gain_text, str(f.get("recommendation", "")))
        console.print(t)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    paths = [args.baseline, args.other] if args.command == "compare" else [args.path]
    for path in paths:
        if not os.path.exists(path):
            print(f"tb-mfu: {one_line(TraceError(path, 'no such file or directory'))}", file=sys.stderr)
            return 2
    options = _options(args)
    try:
        thresholds_from(options)
    except ValueError as exc:
        print(f"tb-mfu: {one_line(exc)}", file=sys.stderr)
        return 2
    reports = [run_analysis(p, options, show_progress=sys.stderr.isatty()) for p in paths]
    for path, report in zip(paths, reports, strict=True):
        if not any(r.workers for r in report.runs):
            print(f"tb-mfu: {one_line(path)}: no trace files (*.pt.trace.json[.gz]) found", file=sys.stderr)
            return 2
        for w in (w for r in report.runs for w in r.workers):
            if w.error:
                print(f"tb-mfu: {one_line(w.file)}: {one_line(w.error)}", file=sys.stderr)
    if args.command == "compare":
        if not args.json:
            reports = [for_rich(r) for r in reports]  # text in the tables, never markup
        return _compare(reports[0], reports[1], args.json)
    if args.command == "export-scalars":
        return _export_scalars(reports[0], args.out, args.replace)
    report = reports[0]
    workers = [w for r in report.runs for w in r.workers]
    if args.json:
        sys.stdout.buffer.write(json_bytes(report) + b"\n")  # file names that are not UTF-8 come escaped
        sys.stdout.flush()
    else:
        print_report(report, args.top)
    if not any(w.error is None for w in workers):
        return 1
    if args.min_mfu is not None:
        low = [w for w in workers if w.summary is not None and (w.summary.mfu or 0.0) * 100 < args.min_mfu]
        for w in low:
            mfu = "unknown" if w.summary is None else _mfu(w)
            print(f"tb-mfu: {one_line(w.file)}: MFU {mfu} is below --min-mfu {args.min_mfu} %", file=sys.stderr)
        if low:
            return 3
    return 0


def _export_scalars(report: Report, out: str, replace: bool) -> int:
    from .export_scalars import ExportError, export_report

    try:
        runs = export_report(report, out, replace)
    except (ExportError, OSError) as exc:
        print(f"tb-mfu: {exc}", file=sys.stderr)
        return 1
    for r in runs:
        print(f"{r.path}: {r.points} points from {sum(len(w.steps) for w in r.workers)} steps")
    print(f"tensorboard --logdir {out}")
    return 0


_COMPARED = (
    ("MFU", "mfu", _pct), ("median step time", "step_time_us", _us), ("GPU busy", "gpu_busy_share", _pct),
    ("kernel time", "kernel_time_share", _pct), ("SM efficiency", "sm_efficiency", _pct),
    ("tensor-core kernels", "tensor_core_kernel_share", _pct), ("idle", "idle_share", _pct),
    ("kernels / step", "kernels_per_step", lambda x: "n/a" if x is None else f"{x:.0f}"),
    ("syncs / step", "sync_count_per_step", lambda x: "n/a" if x is None else f"{x:.1f}"),
    ("FLOPs / step", "flops_per_step", _flops),
)


def _first_worker(report: Report) -> WorkerReport | None:
    return next((w for r in report.runs for w in r.workers if w.error is None and w.summary is not None), None)


def _compare(baseline: Report, other: Report, as_json: bool) -> int:
    from .diagnosis.compare import compare_findings

    a, b = _first_worker(baseline), _first_worker(other)
    if a is None or b is None:
        print("tb-mfu: compare needs one analysable worker in each run", file=sys.stderr)
        return 1
    assert a.summary is not None and b.summary is not None
    changes = compare_findings(a.findings, b.findings)
    if as_json:
        body = {
            "schema_version": 1,
            "baseline": {"file": a.file, "summary": a.summary},
            "other": {"file": b.file, "summary": b.summary},
            "findings": changes,
        }
        sys.stdout.buffer.write(json_bytes(body) + b"\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title="Compare (first worker of each run)", title_justify="left")
    for col in ("", "baseline", "other"):
        t.add_column(col, justify="right" if col else "left")
    t.add_row("file", os.path.basename(a.file), os.path.basename(b.file))
    for label, key, fmt in _COMPARED:
        if key == "mfu":  # an impossible MFU reads "impossible", not n/a
            t.add_row(label, _mfu(a), _mfu(b))
        else:
            t.add_row(label, fmt(getattr(a.summary, key)), fmt(getattr(b.summary, key)))
    console.print(t)
    t = Table(title="Findings", title_justify="left")
    for col in ("status", "finding", "gain before", "gain after"):
        t.add_column(col)
    style = {"fixed": "green", "new": "red", "remains": "dim"}
    for c in changes:
        name = c.id + (f" · {c.subject}" if c.subject else "")
        t.add_row(f"[{style[c.status]}]{c.status}[/]", name, _us(c.baseline_gain_us_per_step), _us(c.gain_us_per_step))
    console.print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
