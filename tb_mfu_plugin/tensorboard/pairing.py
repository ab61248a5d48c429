"""Which runs Compare and Strategies start with, before the user picks (the ``/runs`` body's
``suggested_compare`` and ``suggested_strategies``).

Two runs in alphabetical order are rarely a comparison anyone wants (``dataloader_stall``
against ``ddp_2gpu``). A comparison means something between runs of one model, and a table of
strategies between runs on the same GPUs, so:

- Compare starts with two runs of one model: the same FLOPs per step within ``FLOPS_TOLERANCE``
  (both counted), or, where a count is missing, mostly the same kernels. Among such pairs it
  prefers runs with as many workers and the same strategy (Compare puts one worker of each side
  by side), then the closest FLOPs, then the longest common name prefix.
- Strategies starts with the distributed runs of one GPU count on one GPU model under the most
  distinct strategies; else the runs of one strategy at several GPU counts.
- Otherwise nothing is picked, and the reason says what to pick.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import msgspec

from ..analysis.distributed.strategy import run_strategy
from ..analysis.fmt import flops as flops_text
from ..analysis.report import RunReport

FLOPS_TOLERANCE = 0.03  # FLOPs per step this close (relative) count as one model
KERNEL_OVERLAP = 0.6  # Jaccard overlap of the top kernels' names that counts as one model
TOP_KERNELS = 10


class Suggestion(msgspec.Struct, kw_only=True):
    """The runs to start with (none where nothing fits), and why, in one line for the tab."""

    runs: list[str]
    reason: str


@dataclass(frozen=True)
class _Print:
    """What identifies a run's model and setup, from its first analysed worker."""

    name: str
    workers: int
    flops: float | None
    device: str | None
    strategy: tuple[str, ...]
    kernels: frozenset[str]


def _print(run: RunReport) -> _Print | None:
    ok = [w for w in run.workers if w.error is None and w.summary is not None]
    if not ok:
        return None
    first = ok[0]
    assert first.summary is not None
    strategy = run.strategy or run_strategy([w.communication.strategy for w in ok if w.communication is not None])
    return _Print(
        name=run.name,
        workers=len(ok),
        flops=first.summary.flops_per_step or None,
        device=first.device.name if first.device is not None else None,
        strategy=tuple(strategy),
        kernels=frozenset(k.name for k in first.top_kernels[:TOP_KERNELS]),
    )


def _one_model(a: _Print, b: _Print) -> tuple[float, str] | None:
    """How far apart two runs of one model are (0 the closest) and what shows it, or None."""
    if a.flops is not None and b.flops is not None:
        diff = abs(a.flops - b.flops) / max(a.flops, b.flops)
        return (diff, f"the same FLOPs per step, {flops_text(a.flops)}") if diff <= FLOPS_TOLERANCE else None
    if a.kernels and b.kernels:
        overlap = len(a.kernels & b.kernels) / len(a.kernels | b.kernels)
        return (1 - overlap, "mostly the same kernels") if overlap >= KERNEL_OVERLAP else None
    return None


def suggest_compare(runs: Sequence[RunReport]) -> Suggestion:
    """Two runs of one model to compare, the baseline first (see the module's doc)."""
    prints = [p for p in map(_print, runs) if p is not None]
    best: tuple[tuple[object, ...], _Print, _Print, str] | None = None
    for a, b in combinations(prints, 2):
        same = _one_model(a, b)
        if same is None:
            continue
        prefix = len(os.path.commonprefix([a.name, b.name]))
        key = (a.workers != b.workers, a.strategy != b.strategy, a.device != b.device, same[0], -prefix, a.name, b.name)
        if best is None or key < best[0]:
            best = (key, a, b, same[1])
    if best is None:
        why = "No two analysed runs look like one model yet (their FLOPs per step and kernels differ)"
        if len(prints) < 2:
            why = "Fewer than two runs are analysed yet"
        return Suggestion(runs=[], reason=f"{why}: pick two or more runs. The first one picked is the baseline.")
    _, a, b, evidence = best
    return Suggestion(runs=[a.name, b.name], reason=f"Runs of one model ({evidence}); the first is the baseline.")


def _gpus(n: int) -> str:
    return f"{n}-GPU"


def suggest_strategies(runs: Sequence[RunReport], max_runs: int = 8) -> Suggestion:
    """The distributed runs to put side by side by strategy (see the module's doc)."""
    dist = [p for p in map(_print, runs) if p is not None and (p.workers > 1 or p.strategy)]
    by_setup: dict[tuple[int, str | None], list[_Print]] = {}
    for p in dist:
        by_setup.setdefault((p.workers, p.device), []).append(p)
    mixed = [(k, g) for k, g in by_setup.items() if len({p.strategy for p in g}) >= 2]
    if mixed:
        (gpus, device), group = min(mixed, key=lambda kg: (-len({p.strategy for p in kg[1]}), -len(kg[1]), kg[0][0]))
        kinds = len({p.strategy for p in group})
        on = f" on {device}" if device else ""
        return Suggestion(
            runs=[p.name for p in group][:max_runs],
            reason=f"The {_gpus(gpus)} runs{on} under {kinds} strategies.",
        )
    by_strategy: dict[tuple[str, ...], list[_Print]] = {}
    for p in dist:
        by_strategy.setdefault(p.strategy, []).append(p)
    scaled = [g for s, g in by_strategy.items() if s and len({p.workers for p in g}) >= 2]
    if scaled:
        biggest: list[_Print] = max(scaled, key=len)
        chosen = sorted(biggest, key=lambda p: (p.workers, p.name))
        counts = " and ".join(str(n) for n in sorted({p.workers for p in chosen}))
        return Suggestion(
            runs=[p.name for p in chosen][:max_runs],
            reason=f"The {' × '.join(chosen[0].strategy)} runs at {counts} GPUs.",
        )
    return Suggestion(
        runs=[],
        reason="No analysed runs of one GPU count differ in strategy yet: pick runs of one model under "
        "different parallel strategies.",
    )
