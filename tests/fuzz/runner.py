"""Run ``tb-mfu analyze CASE --json`` on corpus cases in this process, one JSON line per case.

Usage: ``python runner.py CASE_DIR...``. Started in a subprocess by the fuzz tests,
so that a hang or a memory blow-up costs that subprocess, not pytest. A case that
runs past ``TB_MFU_FUZZ_CASE_S`` seconds makes faulthandler print where it hangs
and exit the process: the parent sees the missing result line and names the case.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import resource
import sys
import time
import traceback

from tb_mfu_plugin import cli

CASE_SECONDS = float(os.environ.get("TB_MFU_FUZZ_CASE_S", "60"))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(path: str) -> dict[str, object]:
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    t0 = time.perf_counter()
    crash = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(["analyze", path, "--json"])
        except BaseException:  # noqa: BLE001 - any escape is the failure we are looking for
            rc, crash = -1, traceback.format_exc()
        stdout.flush()
    return {
        "case": path,
        "rc": rc,
        "seconds": round(time.perf_counter() - t0, 3),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "stderr": err.getvalue(),
        "stdout": out.getvalue().decode("utf-8", "replace"),
        "crash": crash,
    }


def main(paths: list[str]) -> None:
    for path in paths:
        faulthandler.dump_traceback_later(CASE_SECONDS, exit=True)
        result = run_case(path)
        faulthandler.cancel_dump_traceback_later()
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
