"""The notebook API: the CLI's report, as pandas DataFrames.

::

    import tb_mfu_plugin as tm

    r = tm.analyze("./logs/run_a")          # what `tb-mfu analyze --json` reports
    r.steps()                               # one row per (run, worker, span, gpu, step)
    r2 = tm.Report.from_json("report.json")  # a CI artefact: the same frames

``analyze`` takes what ``tb-mfu analyze`` takes: a logdir, run directory or trace file, local,
a URL (``s3://``, ``gs://``, ``az://``, ``https://``, ...) or an archive. What it returns is shown
as the CLI shows it: a signed URL's signature and the storage options' secrets are blanked, since a
notebook's outputs are saved and shared. The column definitions are in
``tb_mfu_plugin.notebook.frames`` and docs/notebook.md.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import msgspec

from ..analysis import report as report_types
from ..analysis.options import AnalysisOptions
from ..core.errors import TraceError
from . import frames

if TYPE_CHECKING:
    import pandas as pd


class Report:
    """A report (``tb_mfu_plugin.analysis.report.Report``) with DataFrame accessors.

    ``.report`` is the underlying struct, exactly what ``--json`` serialises.
    """

    def __init__(self, report: report_types.Report) -> None:
        self.report = report

    @classmethod
    def from_json(cls, source: str | os.PathLike[str] | bytes) -> Report:
        """A report from ``tb-mfu analyze --json`` output: a file path, or the JSON bytes.

        Keys a newer version added are ignored; a file that is not such a report is a
        ``ValueError`` naming it and the reason.
        """
        if isinstance(source, bytes):
            data, name = source, "<bytes>"
        else:
            name = os.fspath(source)
            with open(name, "rb") as f:
                data = f.read()
        try:
            decoded = msgspec.json.decode(data, type=report_types.Report)
        except msgspec.DecodeError as exc:  # ValidationError too
            raise ValueError(f"{name}: not a tb-mfu analyze --json report: {exc}") from None
        return cls(decoded)

    def to_json(self, path: str | os.PathLike[str] | None = None) -> bytes:
        """The ``--json`` bytes; also written to ``path`` when given."""
        data = report_types.to_json(self.report)
        if path is not None:
            with open(path, "wb") as f:
                f.write(data + b"\n")
        return data

    def __repr__(self) -> str:
        workers = [w for r in self.report.runs for w in r.workers]
        bad = sum(1 for w in workers if w.error)
        return (
            f"<tb_mfu_plugin Report: {len(self.report.runs)} run(s), {len(workers)} worker report(s)"
            + (f", {bad} with errors" if bad else "")
            + ">"
        )

    def workers(self) -> pd.DataFrame:
        """One row per worker report (run, worker, span, gpu): device, peak, the summary
        (time-weighted over the analysed steps, as ``mfu``; ``step_time_us`` the median step),
        ``hfu``, the achieved TFLOP/s while busy, and ``error`` for a file that could not be analysed."""
        rows, extra = frames.workers_rows(self.report)
        return frames.frame(rows, frames.WORKERS, extra)

    def steps(self) -> pd.DataFrame:
        """One row per analysed profiler step: ``step`` (``ProfilerStep#N``), ``start_us``,
        ``dur_us``, the step's metrics and its ``breakdown_*`` shares."""
        rows, extra = frames.steps_rows(self.report)
        return frames.frame(rows, frames.STEPS, extra)

    def kernels(self) -> pd.DataFrame:
        """The top kernels of each worker by total time (the report keeps the top 50)."""
        return frames.frame(frames.kernels_rows(self.report), frames.KERNELS)

    def copies(self) -> pd.DataFrame:
        """Copies per step by direction and host-memory kind."""
        return frames.frame(frames.copies_rows(self.report), frames.COPIES)

    def syncs(self) -> pd.DataFrame:
        """Host-device synchronisations per step by API and the op that issued them."""
        return frames.frame(frames.syncs_rows(self.report), frames.SYNCS)

    def findings(self) -> pd.DataFrame:
        """The diagnosis' findings, by estimated gain within each worker; ``evidence`` is a dict."""
        return frames.frame(frames.findings_rows(self.report), frames.FINDINGS)

    def evidence(self) -> pd.DataFrame:
        """Each finding's evidence, one row per value: ``path`` in the evidence's JSON, ``label``,
        ``unit``, ``value`` and ``text`` (the value in its unit, as the tab and ``tb-mfu analyze
        --evidence`` write it)."""
        return frames.frame(frames.evidence_rows(self.report), frames.EVIDENCE)

    def critical_path(self) -> pd.DataFrame:
        """One row per modelled step: µs of its critical path in each class (``host``, ``launch``,
        ``sync``, ``kernel_matmul``, ...; docs/diagnosis.md), adding up to ``dur_us``."""
        return frames.frame(frames.critical_path_rows(self.report), frames.CRITICAL_PATH)

    def whatif(self) -> pd.DataFrame:
        """The what-if re-timings: one row per set of findings applied together (every subset of the
        panel's findings, and ``combined``: every re-timed finding), the simulated step, gain and MFU."""
        return frames.frame(frames.whatif_rows(self.report), frames.WHATIF)

    def ranks(self) -> pd.DataFrame:
        """Distributed runs' ranks side by side, ``straggler`` marking the one the others wait
        for, with each rank's overlap, pipeline bubble and clock shift; empty for single-GPU runs."""
        return frames.frame(frames.ranks_rows(self.report), frames.RANKS)

    def memory(self) -> pd.DataFrame:
        """Device memory per analysed step of the traces recorded with ``profile_memory=True``: peak
        allocated and reserved, allocated at the step's start and end, growth, reserved minus
        allocated, where the peak falls (phase, op), with the device's memory and the batch headroom
        (docs/memory.md); no rows for traces without memory events."""
        return frames.frame(frames.memory_rows(self.report), frames.MEMORY)

    def collectives(self) -> pd.DataFrame:
        """Every worker's collectives by kind, process group and dtype: count, bytes and kernel time
        per step, exposed time, and the nccl-tests bandwidths against the link's peak."""
        return frames.frame(frames.collectives_rows(self.report), frames.COLLECTIVES)


def analyze(
    path: str | os.PathLike[str],
    *,
    peak_tflops: float | None = None,
    device_name: str | None = None,
    flops_per_step: float | None = None,
    tf32: bool = False,
    storage_options: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Report:
    """Analyse a logdir, run directory or trace file (local, a URL or an archive), as
    ``tb-mfu analyze`` does.

    The keywords are the CLI's flags (``--peak-tflops`` …, ``--storage-options FILE`` as
    ``storage_options=``, else ``$TB_MFU_STORAGE_OPTIONS``); any other ``AnalysisOptions`` field
    may be given too. A file that cannot be analysed shows up in ``workers()`` with its
    ``error``; a path that does not exist, or a location that cannot be listed, raises
    ``FileNotFoundError``. Signed URLs' signatures and storage secrets are blanked in the report.
    """
    from ..running.pipeline import analyze_path
    from ..running.shown import shown_report
    from ..trace.locate.locations import Location
    from ..trace.remote.redact import shown
    from ..trace.remote.storage import use_storage_options

    opts = AnalysisOptions(
        peak_tflops=peak_tflops, device_name=device_name, flops_per_step=flops_per_step, tf32=tf32, **options
    )
    try:
        if storage_options is not None:
            use_storage_options(os.fspath(storage_options))
        where = Location.parse(os.fspath(path))  # the notebook's face: parsed once
        return Report(shown_report(analyze_path(where, opts))[0])
    except TraceError as exc:
        raise FileNotFoundError(shown(str(exc))) from None
