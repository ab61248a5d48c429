"""The ``tb-mfu`` process's end: the command's status, without freeing what it built.

A report of 100,000 steps is millions of Python objects, and freeing them one by one at exit
took ~0.2 s of the command's ~5 s (``benchmarks/bench_many_steps.py``) for nothing: the
process is about to end. So, as mypy's ``util.hard_exit`` does, the console entry flushes its
output, runs the exit handlers (multiprocessing's, fsspec's, temporary files') and leaves with
``os._exit``. ``main`` itself returns normally: tests and other callers in a process that
goes on are not affected.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

from .main import main


def run() -> NoReturn:
    """The ``tb-mfu`` console command and ``python -m tb_mfu_plugin.cli``."""
    keep: list[object] = []  # alive until os._exit: freeing it is the cost this skips
    try:
        code = main(None, keep)
    except BrokenPipeError:
        # The reader went away (``tb-mfu analyze --json | head``): no traceback, status 1, as
        # Python's docs advise (https://docs.python.org/3/library/signal.html#note-on-sigpipe)
        code = 1
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` after flushing stdout/stderr and running the atexit handlers."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: what could not be written is lost, not the status
        code = code or 1
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is not None:
        run_exit_handlers()
    os._exit(code)
