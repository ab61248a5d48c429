"""``tb-mfu``: the same RunReport as the TensorBoard tab, as tables or JSON.

This module runs the commands: it reads the flags, has ``pipeline`` analyse the
paths, and decides what goes out and the exit status. ``render`` draws the tables.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from ..analysis.fmt import counted, mfu_text
from ..analysis.options import AnalysisOptions
from ..analysis.report import Report, WorkerReport
from ..core.errors import TraceError
from ..core.escape import for_rich, json_bytes, one_line
from ..core.small_pages import prefer_small_pages
from ..core.version import __version__
from ..diagnosis import from_options as thresholds_from
from ..running.flags import (
    CLI,
    LIMITS,
    RUNNING,
    Option,
    Refused,
    analysis_options,
    default_workers,
    expects,
    help_text,
    of_face,
    positive_int,
    resolve,
)
from ..running.jobs import SchedulerError
from ..running.pipeline import analyze_paths
from ..running.shown import shown_report
from ..trace.locate.discover import other_json_files
from ..trace.locate.locations import Location
from ..trace.remote.redact import shown
from ..trace.remote.storage import use_storage_options
from . import annotate

EXIT_STATUSES = """\
exit status:
  0  done (bad files are reported, one line each, and the others analysed)
  1  no file could be analysed, compare found no analysable worker in a run, or a file
     could not be written
  2  bad usage, in one line: a missing path, a location with no trace files or that cannot
     be listed, an unknown threshold or GPU (--device-name: the nearest known are named),
     --top below 1
  3  --min-mfu: a worker's MFU is below the threshold
  4  --min-mfu: no worker is below the threshold, but a worker's MFU is unknown (no FLOP
     count, no known peak) or impossible (above 100 %), so the gate could not be checked
"""

_WHERE = (
    "a logdir, run directory or trace file: a local path, a URL (s3://, gs://, az://, http(s)://, ...) "
    "or a .zip/.tar.gz of a logdir"
)


class _Parser(argparse.ArgumentParser):
    """argparse, whose refusals are one line (the command, the reason, where the help is) with
    exit status 2, as every other refusal of ``tb-mfu``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {one_line(message)} (see {self.prog} --help)\n")


def _at_least_one(text: str) -> int:
    """``--top``: a count of rows, 1 or more."""
    try:
        return positive_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tb-mfu",
        description="Why is training slow when the GPU reads 100 % busy?",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"tb-mfu {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser(
        "analyze",
        help="analyse a logdir, a run directory or one trace file",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    a.add_argument("path", help=_WHERE)
    a.add_argument("--json", action="store_true", help="print the versioned JSON report on stdout")
    a.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report as one self-contained HTML page (the tab's Overview of every run, offline: "
        "no server, no network), e.g. to keep as a CI artifact",
    )
    a.add_argument(
        "--top", type=_at_least_one, default=10, metavar="N", help="kernels to list in the table view (default 10)"
    )
    a.add_argument(
        "--evidence",
        action="store_true",
        help="also print each finding's evidence in the table view: its figures, each in its unit",
    )
    a.add_argument(
        "--min-mfu",
        type=float,
        metavar="PCT",
        help="for CI: exit with status 3 when an analysed worker's MFU is below PCT percent, 4 when none is "
        "below but an MFU is unknown or impossible",
    )
    _add_analysis_flags(a)
    c = sub.add_parser(
        "compare",
        help="compare two runs rank by rank: each rank's figures and findings fixed or new; distributed runs "
        "or more than two runs also side by side by parallel strategy",
        description="Compares every rank of the baseline with the same rank of the other run (matched by the "
        "traces' distributed rank, else by the workers' order), then puts every run given side by side by "
        "parallel strategy.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("baseline", help="the run before (a run directory or a trace file; local, URL or archive)")
    c.add_argument("other", nargs="+", help="the run after; more runs (e.g. one per strategy) may follow")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON on stdout")
    _add_analysis_flags(c)
    e = sub.add_parser("export-scalars", help="write the per-step figures as TensorBoard scalars (Scalars, HParams)")
    e.add_argument("path", help=_WHERE)
    e.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="directory to write the event files into (one TensorBoard run per run and worker)",
    )
    e.add_argument("--replace", action="store_true", help="overwrite the event files of an earlier export in DIR")
    _add_analysis_flags(e)
    _add_analysis_flags(annotate.add_parser(sub))
    return p


def _add_analysis_flags(a: argparse.ArgumentParser) -> None:
    """The options of ``running.flags.OPTIONS`` the CLI has: the analysis's, the caps, the runners'."""
    groups = {
        LIMITS: a.add_argument_group("limits", "caps on what one trace file may cost (docs/limits.md)"),
        RUNNING: a.add_argument_group("parallelism", "trace files analysed at once (docs/scaling.md)"),
    }
    for option in of_face(CLI):
        _add_flag(groups.get(option.sets, a), option)


def _add_flag(a: argparse._ActionsContainer, option: Option) -> None:
    # default None: "not given", so that resolve() takes the variable, else the table's default
    names = [option.cli_flag or "", *option.aliases]
    if option.kind == "switch":
        a.add_argument(*names, dest=option.dest, action="store_true", default=None, help=help_text(option))
        return
    a.add_argument(
        *names,
        dest=option.dest,
        type=_checked(option),
        action="append" if option.kind == "list" else "store",
        default=None,
        metavar=option.metavar,
        help=help_text(option),
    )


def _checked(option: Option):  # type: ignore[no-untyped-def]
    """``option.parse`` as argparse's type: a bad value is a usage error naming the flag."""

    def parse(text: str) -> object:
        try:
            return option.parse(text)
        except Refused as exc:  # words of its own: an unknown GPU and the nearest known ones
            raise argparse.ArgumentTypeError(str(exc)) from None
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expects(option)}, got {text!r}") from None

    parse.__name__ = option.type  # argparse names the type in its message
    return parse


def main(argv: Sequence[str] | None = None, keep: list[object] | None = None) -> int:
    """Run one ``tb-mfu`` command; its exit status. ``keep``, when given, receives the reports
    (see ``run``: the process then ends without freeing them)."""
    args = build_parser().parse_args(argv)
    prefer_small_pages()
    paths = [args.baseline, *args.other] if args.command == "compare" else [args.path]
    try:
        values = resolve(args, CLI)  # the flags, else their variables ($TB_MFU_WORKERS, ...)
    except ValueError as exc:
        print(f"tb-mfu: {one_line(exc)}", file=sys.stderr)
        return 2
    options = analysis_options(values)
    where = _locations(paths, options, values["storage_options"])
    if isinstance(where, str):
        print(f"tb-mfu: {shown(where)}", file=sys.stderr)
        return 2
    run = Running(values["workers"] or default_workers(), values["scheduler"], args.worker_max_memory)
    try:
        reports = _analyse(where, options, run, show_progress=sys.stderr.isatty())
    except (TraceError, SchedulerError) as exc:  # a location that cannot be listed; Dask missing or unreachable
        print(f"tb-mfu: {shown(one_line(exc))}", file=sys.stderr)
        return 2
    shown_reports = [shown_report(r) for r in reports]  # every output below is made from these
    if keep is not None:
        keep.append(shown_reports)
    reports = [r for r, _ in shown_reports]
    for path, loc, report in zip(paths, where, reports, strict=True):
        if not any(r.workers for r in report.runs):
            print(f"tb-mfu: {shown(one_line(path))}: {one_line(_no_traces(loc))}", file=sys.stderr)
            return 2
    # Each bad file once, as one line on stderr (the tables only say that its worker failed).
    for w in (w for report in reports for r in report.runs for w in r.workers):
        if w.error:
            print(f"tb-mfu: {one_line(w.file)}: {one_line(w.error)}", file=sys.stderr)
    if args.command == "compare":
        return _compare(reports, args.json)
    if args.command == "export-scalars":
        return _export_scalars(reports[0], args.out, args.replace)
    if args.command == "annotate":
        return annotate.annotate(reports[0], where[0], args.out, options.limits)
    return _analyze(reports[0], args, shown_reports[0][1])


def _locations(paths: list[str], options: AnalysisOptions, storage_options: str | None) -> list[Location] | str:
    """The locations of the command's ``paths``, each parsed here, once (the CLI's face); or why
    the command cannot start (a password in a URL, a missing path, an unknown threshold, an
    unreadable storage options file) as one line."""
    try:
        use_storage_options(storage_options)
        where = [Location.parse(path) for path in paths]
        for path, loc in zip(paths, where, strict=True):
            if loc.is_local and not os.path.exists(loc.path):
                return one_line(TraceError(path, "no such file or directory"))
        thresholds_from(options)
    except (ValueError, TraceError) as exc:
        return one_line(exc)
    return where


def _no_traces(where: Location) -> str:
    """Why a location gave no report, with what a local folder holds instead, if anything."""
    why = "no trace files (*.pt.trace.json[.gz]) found"
    if not where.is_local or where.archive_kind is not None or not os.path.isdir(where.path):
        return why
    count, names = other_json_files(where.path)
    if not count:
        return why
    more = f" and {count - len(names)} more" if count > len(names) else ""
    files = f"{counted(count, 'other JSON file')} ({', '.join(names)}{more})"
    return f"{why}; {files}: name one to analyse it"


@dataclass(frozen=True)
class Running:
    """How the files run: ``workers`` at once, or on the Dask ``scheduler``; each process's memory
    cap as ``--worker-max-memory`` gave it (None: ``$TB_MFU_WORKER_MAX_MEMORY``, else the default)."""

    workers: int
    scheduler: str | None
    memory: str | None


def _analyse(paths: list[Location], options: AnalysisOptions, run: Running, show_progress: bool) -> list[Report]:
    """The pipeline's reports of ``paths``, their files run ``run.workers`` at once or on Dask,
    with one progress bar over all of them on a terminal's stderr."""
    if not show_progress:
        return analyze_paths(paths, options, None, run.workers, run.scheduler, run.memory, _warn)
    from .render import progress_bar

    with progress_bar() as show:
        return analyze_paths(paths, options, show, run.workers, run.scheduler, run.memory, _warn)


def _warn(line: str) -> None:
    """What a listing left out (a part it could not read, what a cap left out): one line on stderr."""
    print(f"tb-mfu: {shown(one_line(line))}", file=sys.stderr)


def _analyze(report: Report, args: argparse.Namespace, encoded: bytes | None = None) -> int:
    """``tb-mfu analyze``: the report as JSON or tables, and as an HTML page with ``--html``;
    1 when no file was analysed or the page cannot be written, else the ``--min-mfu`` gate's."""
    workers = [w for r in report.runs for w in r.workers]
    if args.json:
        # file names that are not UTF-8 come escaped
        sys.stdout.buffer.write(encoded if encoded is not None else json_bytes(report))
        sys.stdout.buffer.write(b"\n")
        sys.stdout.flush()
    else:
        from .render import print_report

        print_report(report, args.top, evidence=args.evidence)
    if args.html is not None and not _write_html(report, args.path, args.html):
        return 1
    if not any(w.error is None for w in workers):
        return 1
    return 0 if args.min_mfu is None else _min_mfu_gate(workers, args.min_mfu)


def _write_html(report: Report, path: str, out: str) -> bool:
    """The offline page of every run of ``report`` into ``out``; False (said on stderr) if it cannot be."""
    from ..tensorboard.offline import cli_page

    try:
        page = cli_page(report, path)
        with open(out, "wb") as f:
            f.write(page)
    except OSError as exc:  # the file, or the bundle when it is not built
        print(f"tb-mfu: {one_line(out)}: cannot write the HTML report ({one_line(exc)})", file=sys.stderr)
        return False
    runs = len(report.runs)
    print(f"tb-mfu: wrote {one_line(out)} ({counted(runs, 'run')})", file=sys.stderr)
    return True


def _min_mfu_gate(workers: list[WorkerReport], min_mfu: float) -> int:
    """For CI: 3 when an analysed worker's MFU is below ``min_mfu`` percent, else 4 when one's MFU
    is unknown or impossible (the gate cannot be checked on it), else 0; each such worker named."""
    analysed = [w for w in workers if w.error is None and w.summary is not None]
    low = [w for w in analysed if w.summary is not None and w.summary.mfu is not None and w.summary.mfu * 100 < min_mfu]
    for w in low:
        print(f"tb-mfu: {one_line(w.file)}: MFU {mfu_text(w)} is below --min-mfu {min_mfu} %", file=sys.stderr)
    if low:
        return 3
    unknown = [w for w in analysed if w.summary is not None and w.summary.mfu is None]
    for w in unknown:
        why = "impossible (above 100 %)" if mfu_text(w) == "impossible" else "unknown"
        print(
            f"tb-mfu: {one_line(w.file)}: MFU is {why}, so --min-mfu {min_mfu} % cannot be checked "
            "(give --flops-per-step or --peak-tflops, or see the report's notes)",
            file=sys.stderr,
        )
    return 4 if unknown else 0


def _export_scalars(report: Report, out: str, replace: bool) -> int:
    from ..scalars.export_scalars import ExportError, export_report

    try:
        runs = export_report(report, out, replace)
    except (ExportError, OSError) as exc:
        print(f"tb-mfu: {exc}", file=sys.stderr)
        return 1
    for r in runs:
        print(f"{r.path}: {r.points} points from {counted(sum(len(w.steps) for w in r.workers), 'step')}")
    print(f"tensorboard --logdir {out}")
    return 0


def _compare(reports: list[Report], as_json: bool) -> int:
    """``tb-mfu compare``: every path after the first against the first (the baseline), rank by
    rank, figures and findings; with a distributed run or more than two paths, every run side by
    side by strategy."""
    from ..analysis.run.compare import analysed, compare_all
    from ..analysis.run.strategies import strategy_table

    if not as_json:  # text in the tables, never markup; the findings are matched as shown
        reports = [for_rich(r) for r in reports]
    if not all(analysed(r) for r in reports):
        print("tb-mfu: compare needs one analysable worker in each run", file=sys.stderr)
        return 1
    comparison = compare_all(reports[0], reports[1:])
    runs = [run for r in reports for run in r.runs]
    if len(reports) > 2 or any(run.strategy for run in runs):
        comparison.strategies = strategy_table(runs)
    if as_json:
        sys.stdout.buffer.write(json_bytes(comparison) + b"\n")
        return 0
    from .render import print_comparison

    print_comparison(comparison)
    if comparison.strategies:
        from .render_dist import print_strategies

        print_strategies(comparison.strategies)
    return 0
