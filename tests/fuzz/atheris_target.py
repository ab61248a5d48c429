"""Coverage-guided fuzzing of decode + analysis with atheris (libFuzzer), for long runs.

Not part of the test suite (atheris is not a test dependency). To run it::

    pip install atheris
    mkdir -p /tmp/tb_mfu_seeds && python tests/fuzz/atheris_target.py --write-seeds /tmp/tb_mfu_seeds
    PYTHONPATH=$PWD python tests/fuzz/atheris_target.py /tmp/tb_mfu_seeds -max_total_time=3600 -rss_limit_mb=2048

Any exception other than ``TraceError`` (or a report breaking its contract) is a
crash: libFuzzer writes the input to ``crash-*`` in the working directory; replay it
with ``python tests/fuzz/atheris_target.py crash-<id>``. A trace of real size is
too big for libFuzzer's mutations, so the seeds are the small sample traces.
"""

from __future__ import annotations

import gzip
import math
import os
import sys
import tempfile
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
SEEDS = ("low_sm_efficiency", "pageable_copy_loop")


def write_seeds(out: Path) -> None:
    for name in SEEDS:
        (src,) = (SAMPLES / name).glob("rank0.*.pt.trace.json.gz")
        (out / f"{name}.json").write_bytes(gzip.decompress(src.read_bytes()))


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--write-seeds":
        write_seeds(Path(sys.argv[2]))
        return
    import atheris  # type: ignore[import-not-found]
    import msgspec  # noqa: F401 - imported first: only our own modules are instrumented
    import numpy  # noqa: F401

    with atheris.instrument_imports(include=["tb_mfu_plugin"]):
        from tb_mfu_plugin.analysis.options import AnalysisOptions
        from tb_mfu_plugin.core.errors import TraceError
        from tb_mfu_plugin.reporting.trace import trace_reports
        from tb_mfu_plugin.trace.decode.decode import decode_trace
        from tb_mfu_plugin.trace.limits import Limits

    options = AnalysisOptions(limits=Limits(max_trace_bytes=64 << 20, max_devices=4, max_seconds=20))
    path = os.path.join(tempfile.mkdtemp(prefix="tb_mfu_fuzz_"), "rank0.1.pt.trace.json")

    def one_input(data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)
        try:
            tables = decode_trace(path, limits=options.limits)
        except TraceError:
            return
        for r in trace_reports(tables, "w", "", options):
            assert r.error is None or "\n" not in r.error
            s = r.summary
            if s is not None:
                assert 0 <= s.gpu_busy_share <= 1 and s.h2d_bytes_per_step >= 0
                assert s.mfu is None or math.isfinite(s.mfu)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
