"""How the tab runs its analyses, from its flags and, where a flag is not given, the environment.

Every value comes from the one options table, ``running.flags.OPTIONS``, which the CLI's
flags come from too: ``--mfu_workers`` / ``$TB_MFU_WORKERS`` (local processes, default
the usable cores, at most 8), ``--mfu_scheduler`` / ``$TB_MFU_SCHEDULER`` (a Dask scheduler
instead), ``--mfu_cache_max_bytes`` / ``$TB_MFU_CACHE_MAX_BYTES`` (the disk cache's cap),
``--mfu_worker_max_memory`` / ``$TB_MFU_WORKER_MAX_MEMORY`` (each analysis process's memory
cap, ``memory_cap``), and the analysis's own options (``--mfu_device_name``, ``--mfu_tf32``, ...).
A bad value is a ``ValueError`` naming the flag or variable; ``entry.fix_flags`` turns it into
TensorBoard's flag error before the server starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..running.flags import BY_NAME, PLUGIN, resolve
from ..running.memory_cap import memory_cap

# A leaf module (entry.fix_flags imports it at every start): the disk cache's default cap is here.
DEFAULT_CACHE_MAX_BYTES: int = BY_NAME["cache_max_bytes"].default
MEMORY_FLAG = "--mfu_worker_max_memory"


@dataclass(frozen=True)
class RunSettings:
    workers: int | None  # None: the default (flags.default_workers)
    scheduler: str | None
    cache_max_bytes: int
    worker_memory: str | None = None  # --mfu_worker_max_memory as given (memory_cap reads it)
    values: dict[str, Any] = field(default_factory=dict, compare=False)  # every option, by its dest


def settings_from_flags(flags: object) -> RunSettings:
    values = resolve(flags, PLUGIN)
    memory = getattr(flags, "mfu_worker_max_memory", None)
    memory_cap(memory, values["workers"] or 1, MEMORY_FLAG)  # a bad value fails here, before the server starts
    return RunSettings(values["workers"], values["scheduler"], values["cache_max_bytes"], memory, values)
