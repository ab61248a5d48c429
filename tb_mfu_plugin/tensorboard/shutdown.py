"""The server's end on SIGTERM or Ctrl-C: within about a second, even while runs load, and with no
process of the tab's left behind (docs/scaling.md, "The first minute").

TensorBoard ends on SIGTERM through Python's own exit, which waits for every thread that is not a
daemon and for every child process of ``multiprocessing`` that is not a daemon. torch-tb-profiler's
loader has both: a thread per run that waits for one process per trace file, each of which must
first import pandas. A server stopped while it loaded the samples waited for all of them: more than
60 s on the 2-core machine (and 13 s once idle, for our own processes' end, before this module).
After Ctrl-C, which the terminal sends to every process of the job, those loader threads wait for
ever for children that died, and the server never ends.

So on SIGTERM or SIGINT the tab, before TensorBoard's own handler runs (it is chained, never
replaced):

1. kills its own analysis processes at once (``stop_now``: each cache's ``close``), and the fork
   server they come from;
2. lets TensorBoard exit as it does (it says "TensorBoard caught SIGTERM; exiting...");
3. if the process is still there ``GRACE_S`` later, ends the child processes that Python's exit
   waits for (SIGTERM, what Ctrl-C gives them too), runs the exit handlers (TensorBoard's info
   file, torch-tb-profiler's temporary folder) unless Python's exit has begun them, and ends the
   process: status 0 after SIGTERM, as TensorBoard's handler gives, 130 after Ctrl-C.

A server whose loading is over ends at step 2, and nothing of another plugin is touched.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from ..trace.remote.redact import redacting_logger

logger = redacting_logger(__name__)

T = TypeVar("T")
GRACE_S = 0.5  # what Python's exit may take on its own before the process is ended
CHILD_GRACE_S = 0.3  # what a child told to end may take before it is killed
_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_lock = threading.Lock()
_closers: list[Callable[[], None]] = []
_previous: dict[int, Any] = {}
_stopping = threading.Event()
_exit_handlers_began = threading.Event()  # Python's exit is running the atexit handlers


def on_stop(owner: T, close: Callable[[T], None]) -> None:
    """Call ``close(owner)`` at once when the server is told to stop (a weak reference: an owner gone
    before is not kept alive)."""
    ref = weakref.ref(owner)

    def call() -> None:
        o = ref()
        if o is not None:
            close(o)

    with _lock:
        _closers.append(call)


def install() -> bool:
    """Put the tab's handler before the present handlers of SIGTERM and SIGINT, once; False where
    signals cannot be handled here (not the main thread, e.g. TensorBoard started by a program)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    with _lock:
        if not _previous:
            # Registered after torch-tb-profiler's and before TensorBoard's info file: Python's exit
            # runs it after the latter, before the former (the last registered runs first).
            atexit.register(_exit_handlers_began.set)
        for sig in _SIGNALS:
            if sig not in _previous:
                _previous[sig] = signal.signal(sig, _handler)
    return True


def _handler(signum: int, frame: FrameType | None) -> None:
    previous = _previous.get(signum, signal.SIG_DFL)
    if previous is signal.SIG_IGN:  # the server was told to ignore it (nohup): so do we
        return
    stop_now(signum)
    if callable(previous):
        previous(signum, frame)  # TensorBoard's: sys.exit(0); Python's for SIGINT: KeyboardInterrupt
        return
    signal.signal(signum, signal.SIG_DFL)  # no handler before ours: the signal's own end
    os.kill(os.getpid(), signum)


def stop_now(signum: int) -> None:
    """Step 1 and the watch of step 3 (see the module); once."""
    if _stopping.is_set():
        return
    _stopping.set()
    with _lock:
        closers = list(_closers)
    for close in [*closers, _end_fork_server]:
        try:
            close()
        except Exception:  # noqa: BLE001 - one cache's failure must not keep the others' processes
            logger.exception("MFU plugin: stopping the analyses failed")
    threading.Thread(target=_end_after_grace, args=(signum,), name="mfu-exit", daemon=True).start()


def _end_fork_server() -> None:
    """The fork server our processes come from ends when the server does, but only once it has
    imported what it preloads (TensorBoard and the analysis: seconds on a busy machine): end it
    now. In TensorBoard it serves the tab alone (torch-tb-profiler spawns its processes)."""
    from multiprocessing import forkserver

    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if isinstance(pid, int) and pid > 0:
        _end(lambda: os.kill(pid, signal.SIGKILL))


def _end_after_grace(signum: int) -> None:
    """Step 3: run only when Python's exit has not ended the process within ``GRACE_S``."""
    time.sleep(GRACE_S)
    children = _children()  # what Python's exit would wait for
    for child in children:
        _end(child.terminate)
    deadline = time.monotonic() + CHILD_GRACE_S
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():  # a child that ignores SIGTERM, or has not run since
            _end(child.kill)
    if not _exit_handlers_began.is_set():  # else Python's exit is running them: once is enough
        atexit._run_exitfuncs()  # TensorBoard's info file, temporary folders (the list is then cleared)
    else:
        time.sleep(GRACE_S)  # the time to end them
    os._exit(130 if signum == signal.SIGINT else 0)  # 130: Ctrl-C's, as a shell reports it


def _children() -> list[multiprocessing.process.BaseProcess]:
    try:
        return multiprocessing.active_children()
    except RuntimeError:  # the set of children changed meanwhile (Python's exit reaps them too)
        return []


def _end(call: Callable[[], None]) -> None:
    try:
        call()
    except (OSError, ValueError):  # ended meanwhile, or already closed
        pass
