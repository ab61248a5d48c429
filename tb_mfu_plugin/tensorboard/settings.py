"""How the tab runs its analyses, from its flags and, where a flag is not given, the environment.

``--mfu_workers`` / ``$TB_MFU_WORKERS``: local processes (default: the usable cores,
at most 8). ``--mfu_scheduler`` / ``$TB_MFU_SCHEDULER``: a Dask scheduler instead.
``--mfu_cache_max_bytes`` / ``$TB_MFU_CACHE_MAX_BYTES``: the disk cache's cap.
``--mfu_worker_max_memory`` / ``$TB_MFU_WORKER_MAX_MEMORY``: each analysis process's
memory cap (``memory_cap``; default ``max(2 GiB, 3/4 of the memory / workers)``).
A bad value is a ``ValueError`` naming the flag or variable; ``entry.fix_flags``
turns it into TensorBoard's flag error before the server starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..running.memory_cap import memory_cap
from ..trace.limits import GiB, parse_size
from .env import CACHE_MAX_BYTES_ENV, SCHEDULER_ENV, TEST_STAGGER_ENV, WORKERS_ENV

# A leaf module (entry.fix_flags imports it at every start): the disk cache's default cap is here.
DEFAULT_CACHE_MAX_BYTES = 2 * GiB
MEMORY_FLAG = "--mfu_worker_max_memory"


@dataclass(frozen=True)
class RunSettings:
    workers: int | None  # None: the default (cache.default_workers)
    scheduler: str | None
    cache_max_bytes: int
    worker_memory: str | None = None  # --mfu_worker_max_memory as given (memory_cap reads it)


def _given(flags: object, flag: str, env: str) -> tuple[str, str] | None:
    """(the value, where it came from) of a flag, else of its variable, else None."""
    value = getattr(flags, flag, None)
    if value is not None and str(value).strip() != "":
        return str(value).strip(), f"--{flag}"
    text = os.environ.get(env, "").strip()
    return (text, f"${env}") if text else None


def settings_from_flags(flags: object) -> RunSettings:
    workers = None
    given = _given(flags, "mfu_workers", WORKERS_ENV)
    if given is not None:
        text, source = given
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{source} must be a positive integer, got {text!r}")
        workers = int(text)
    given = _given(flags, "mfu_scheduler", SCHEDULER_ENV)
    scheduler = given[0] if given is not None else None
    cap = DEFAULT_CACHE_MAX_BYTES
    given = _given(flags, "mfu_cache_max_bytes", CACHE_MAX_BYTES_ENV)
    if given is not None:
        text, source = given
        try:
            cap = parse_size(text)
        except ValueError:
            raise ValueError(f"{source} must be a size in bytes (K, M, G suffixes), got {text!r}") from None
    memory = getattr(flags, "mfu_worker_max_memory", None)
    memory_cap(memory, workers or 1, MEMORY_FLAG)  # a bad value fails here, before the server starts
    return RunSettings(workers, scheduler, cap, memory)


def default_workers() -> int:
    """Processes the tab analyses with by default: the usable cores, at most 8 (each holds
    one decoded trace, about its size in memory)."""
    from ..running.jobs import usable_cores

    return min(usable_cores(), 8)


def stagger_for_tests_s() -> float:
    """The test-only publication delay of ``$TB_MFU_TEST_STAGGER_S`` (0: none)."""
    try:
        return max(0.0, float(os.environ.get(TEST_STAGGER_ENV, "0") or 0))
    except ValueError:
        return 0.0
