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

1. starts the watch of step 3 first, so that nothing below can keep the process alive;
2. kills its own analysis processes at once (``stop_now``: each cache's ``close``), and the fork
   server they come from, and ends the child processes that Python's exit would wait for
   (SIGTERM, what Ctrl-C gives them too): while they load, they would only take the CPU from the
   exit (they share TensorBoard's session, so its CPU share), and the exit would wait for them;
3. lets TensorBoard exit as it does (it says "TensorBoard caught SIGTERM; exiting...");
4. if the process is still there ``GRACE_S`` later (``CHILDREN_GRACE_S`` when step 2 ended children:
   their loader threads then wait for ever), kills the child processes left or started since, runs
   the exit handlers (TensorBoard's info file, torch-tb-profiler's temporary folder, multiprocessing's
   own) unless Python's exit has begun them, and ends the process ``EXIT_BY_S`` after the signal at
   the latest, whatever those handlers still wait for: status 0 after SIGTERM, as TensorBoard's
   handler gives, 130 after Ctrl-C.

Why a deadline and not a join: multiprocessing's exit handler joins every child with no time limit,
and the feeder thread of a queue whose lock a killed process held never ends (ours put into the
progress queue its processes write to). A loader thread of torch-tb-profiler may also start a
process after the children were ended. The exit handlers thus run in a thread of their own, waited
for until the deadline, and the children are ended once more just before the end.

A server that was not loading ends at step 3, and nothing of another plugin is touched.
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
CHILDREN_GRACE_S = 0.2  # the same once loading children were ended (it can then only run the handlers)
EXIT_BY_S = 1.2  # after the signal the process ends, whatever its exit handlers still wait for
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
    """Steps 1 and 2 (see the module); once."""
    if _stopping.is_set():
        return
    _stopping.set()
    t0 = time.monotonic()
    children = _children()  # taken before the watch starts: it must know whether there were any
    threading.Thread(target=_end_by_deadline, args=(signum, t0, bool(children)), name="mfu-exit", daemon=True).start()
    with _lock:
        closers = list(_closers)
    for close in [*closers, _end_fork_server]:
        try:
            close()
        except Exception:  # noqa: BLE001 - one cache's failure must not keep the others' processes
            logger.exception("MFU plugin: stopping the analyses failed")
    for child in children:
        _end(child.terminate)


def _end_fork_server() -> None:
    """The fork server our processes come from ends when the server does, but only once it has
    imported what it preloads (TensorBoard and the analysis: seconds on a busy machine): end it
    now. In TensorBoard it serves the tab alone (torch-tb-profiler spawns its processes)."""
    from multiprocessing import forkserver

    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if isinstance(pid, int) and pid > 0:
        _end(lambda: os.kill(pid, signal.SIGKILL))


def _end_by_deadline(signum: int, t0: float, had_children: bool) -> None:
    """Step 4: run only when Python's exit has not ended the process by then (see the module)."""
    try:
        _sleep_until(t0 + (CHILDREN_GRACE_S if had_children else GRACE_S))
        _kill_children()  # left, or started since by a loader thread
        if not _exit_handlers_began.is_set():  # else Python's exit is running them: once is enough
            # TensorBoard's info file, temporary folders; the list is then cleared
            handlers = threading.Thread(target=atexit._run_exitfuncs, name="mfu-exit-handlers", daemon=True)
            handlers.start()
            handlers.join(max(0.0, t0 + EXIT_BY_S - time.monotonic()))
        else:
            _sleep_until(t0 + EXIT_BY_S)
        _kill_children()
    finally:
        # whatever failed above (a child's state read while Python's exit reaps it), the deadline
        # holds: this thread is the only one that ends the process if Python's exit waits for ever
        _sleep_until(t0 + EXIT_BY_S)
        os._exit(130 if signum == signal.SIGINT else 0)  # 130: Ctrl-C's, as a shell reports it


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


def _kill_children() -> None:
    """SIGKILL every child process of ``multiprocessing`` still running; none is waited for (the
    process ends soon, and a killed child is reaped by whoever inherits it)."""
    for child in _children():
        _end(child.kill)


def _children() -> list[multiprocessing.process.BaseProcess]:
    """The running children that Python's exit would join."""
    for _ in range(5):
        try:
            return multiprocessing.active_children()
        except RuntimeError:  # the set changed meanwhile (a loader started one, or Python's exit reaped one)
            continue
    return []


def _end(call: Callable[[], None]) -> None:
    try:
        call()
    except (OSError, ValueError):  # ended meanwhile, or already closed
        pass
