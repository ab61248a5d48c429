"""Run ``tb-mfu`` on probe cases in this process, one JSON line per case.

Usage: ``python cli_runner.py CASES_JSON``, a list of ``{"name": ..., "argv": [...], "env": {...}}``
(``env``: variables set for that case only).
Started in a subprocess by the probe tests (as tests/fuzz/runner.py is by the fuzz
suite), so that a hang or a memory blow-up costs this process, not pytest, and one
interpreter start serves every case. Each line holds the case's exit status, wall time,
stdout, stderr, any exception that escaped ``cli.main``, and the process's peak RSS so
far (``VmHWM``: a high-water mark, so it bounds every case run before it). A case
that runs past ``TB_MFU_PROBE_CASE_S`` makes faulthandler print where it hangs and end
the process: the parent sees the missing line and names the case.
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

CASE_SECONDS = float(os.environ.get("TB_MFU_PROBE_CASE_S", "60"))


def peak_rss_mb() -> float:
    """This process's peak RSS so far. VmHWM belongs to the address space, which exec makes anew;
    getrusage's ru_maxrss survives exec on Linux, so a runner started by a big pytest process would
    report pytest's peak instead of its own."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(name: str, argv: list[str]) -> dict[str, object]:
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    t0 = time.perf_counter()
    crash = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except BaseException:  # noqa: BLE001 - any escape is what the probe looks for
            rc, crash = -1, traceback.format_exc()
        stdout.flush()
    return {
        "name": name,
        "rc": rc,
        "seconds": round(time.perf_counter() - t0, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "stdout": out.getvalue().decode("utf-8", "replace"),
        "stderr": err.getvalue(),
        "crash": crash,
    }


def main(cases: list[dict[str, object]]) -> None:
    for case in cases:
        saved = dict(os.environ)
        os.environ.update({str(k): str(v) for k, v in dict(case.get("env") or {}).items()})  # type: ignore[call-overload]
        faulthandler.dump_traceback_later(CASE_SECONDS, exit=True)
        result = run_case(str(case["name"]), [str(a) for a in case["argv"]])  # type: ignore[attr-defined]
        faulthandler.cancel_dump_traceback_later()
        os.environ.clear()
        os.environ.update(saved)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
