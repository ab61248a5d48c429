"""The fork server of the analysis processes moves into a session of its own as it imports this
module, its first preload (``executors.process_context``), before it imports anything heavy; it
and every process it forks then share one session, apart from the server's.

Why: on Linux with autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, which acts
where processes sit in the root CPU cgroup, as on our 2-core development machine), the kernel shares
the CPU between sessions first, then between the processes of each. torch-tb-profiler's loader
starts one process per trace file inside TensorBoard's session (36 for our samples): among them,
each of our processes had a thirty-eighth of TensorBoard's share, and the fork server took a minute
to import what it preloads. One session for all of ours, not one each, so the tab takes no more
than any other program. Without autogroup nothing changes.

The fork server imports the main module before any other preload, so ``"__main__"`` is left out of
the preload and imported here, after the move, as the fork server would have (its path is in the
fork server's own command line); its children then find it imported, as before.

Nothing happens but in a fork server (a process started by ``multiprocessing.forkserver``), so
importing this module elsewhere (a test, a tool) is harmless. The fork server ignores SIGINT, its
processes die with it (``executors._die_with_parent``), and it ends when the process that started it
does; the tab also ends it on SIGTERM and Ctrl-C (``tensorboard.shutdown``).
"""

from __future__ import annotations

import ast
import os
import sys

_SERVER_MAIN = "multiprocessing.forkserver import main"


def _fork_server_command() -> str | None:
    """The ``-c`` command this process runs, if it is ``multiprocessing.forkserver``'s main."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return next((a for a in argv if _SERVER_MAIN in a), None)


def _main_path(command: str) -> str | None:
    """``main_path`` of ``forkserver.main(..., **{'main_path': ...})`` in the fork server's command."""
    try:
        for node in ast.walk(ast.parse(command)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "main":
                for kw in node.keywords:
                    given = ast.literal_eval(kw.value)
                    if kw.arg is None and isinstance(given, dict):
                        path = given.get("main_path")
                        return path if isinstance(path, str) else None
    except (SyntaxError, ValueError):
        pass
    return None


def move() -> bool:
    """In a fork server: a new session, then the main module imported; True if it moved."""
    command = _fork_server_command()
    if command is None or not hasattr(os, "setsid"):
        return False
    moved = False
    if os.getsid(0) != os.getpid():
        try:
            os.setsid()
            moved = True
        except OSError:  # already a process group leader: left where it is
            pass
    main_path = _main_path(command)
    if main_path is not None:  # what forkserver.main does for "__main__" in its preload
        from multiprocessing import process, spawn

        process.current_process()._inheriting = True  # type: ignore[attr-defined]
        try:
            spawn.import_main_path(main_path)
        finally:
            del process.current_process()._inheriting  # type: ignore[attr-defined]
    return moved


move()
