"""Child processes of one file's decode: how they start, and how a result or an error comes back.

A child sends ``("ok", value)``, or its exception: a ``TraceError`` as its path and
reason (its pickling would lose them), anything else as itself (or as its text when
it cannot be pickled). ``receive`` raises the same error in the parent, so a file
decoded with helpers fails with the one-line error a serial decode would give.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import pickle
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from ...core.errors import TraceError
from ..limits import Deadline

# Starting a child fails with these: no fork here, an argument that cannot be pickled
# (spawn/forkserver), or a daemon process (which may have no children).
START_ERRORS = (OSError, pickle.PicklingError, TypeError, AttributeError, AssertionError)


def context() -> Any:
    """fork where it is safe (a process with one thread: the CLI), which starts at once and
    needs nothing pickled; forkserver or spawn otherwise (the TensorBoard server's threads)."""
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return mp.get_context("fork")
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


def remaining(deadline: Deadline) -> float:
    """The seconds left to a child (0: no limit); the cap error if none are left."""
    deadline.check()
    left = deadline.end - time.monotonic()
    return 0.0 if math.isinf(left) else max(left, 1e-9)


def reply(conn: Connection, work: Callable[[], Any]) -> None:
    """Run ``work`` in a child and send its value or its error back, then close ``conn``."""
    message: tuple[str, Any]
    try:
        message = ("ok", work())
    except TraceError as exc:
        message = ("trace_error", (exc.path, exc.reason))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        message = ("raise", exc)
    try:
        conn.send(message)
    except (pickle.PicklingError, TypeError, AttributeError):
        conn.send(("raise", RuntimeError(f"{type(message[1]).__name__}: {message[1]}")))
    finally:
        conn.close()


def receive(conn: Connection) -> Any:
    """A child's value, or its error raised here."""
    status, value = conn.recv()
    if status == "trace_error":
        raise TraceError(*value)
    if status == "raise":
        raise value
    return value


def stop(proc: Any, conn: Connection) -> None:
    """Close the pipe and end the child (killed if it is still working: the parent gave up)."""
    conn.close()
    if proc.pid is not None:
        if proc.is_alive():
            proc.kill()
        proc.join()
