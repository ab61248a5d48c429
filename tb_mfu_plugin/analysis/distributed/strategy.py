"""Which parallelism a rank's collectives serve: DP, DDP, FSDP (or ZeRO), TP, PP, EP.

Each process group gets one role, from the strongest signal the trace has:

1. the group's description when it names a mesh dimension (``mesh_tp``, ``mesh_dp``,
   torchtitan's ``dp_shard``/``dp_replicate``, ``pp``, ``ep``), refined by what runs on it
   (a data-parallel group that all-gathers and reduce-scatters is FSDP);
2. else the kinds of its collectives: all-gather with reduce-scatter is FSDP, all-to-all is EP,
   send/recv alone is PP, all-reduce is TP when DTensor redistributes run on the host, DDP when
   ``DistributedDataParallel.forward`` does, else plain DP (a hand-written gradient all-reduce);
3. host annotations break the ties that kinds leave: NCCL runs an all-to-all as send/recv
   kernels, so send/recv beside ``c10d::alltoall`` ops is EP, not PP.

A run's strategy is the union over its ranks, in the order of ``ORDER``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from ...trace.tables import CommArgs, TraceTables
from . import collectives as co

DP, DDP, FSDP, TP, PP, EP = "DP", "DDP", "FSDP", "TP", "PP", "EP"
ORDER = (DP, DDP, FSDP, TP, PP, EP)

_MARKERS = {
    DDP: re.compile(r"^DistributedDataParallel\.|^DDP::"),
    FSDP: re.compile(r"^FSDP::|FullyShardedDataParallel|DeepSpeedZero|^ZeRO|zero_stage", re.IGNORECASE),
    TP: re.compile(r"^Redistribute$|RedistributeBackward|^_c10d_functional::(all_reduce|reduce_scatter)"),
    PP: re.compile(r"^PP:\d+(F|B|I|W)\d*$|^(Forward|Backward) \d+$|PipelineStage|PipelineSchedule"),
    EP: re.compile(r"^c10d::alltoall|^nccl:all_to_all|^_c10d_functional::all_to_all"),
}
# A mesh dimension's name at the end of a group description: "mesh_tp", "dp_shard", "pp".
_MESH = re.compile(r"(?:^|_)(dp_shard(?:_cp)?|dp_replicate|fsdp|ddp|dp|tp|pp|ep|cp)$", re.IGNORECASE)
_MESH_ROLE = {"dp_shard": FSDP, "dp_shard_cp": FSDP, "fsdp": FSDP, "tp": TP, "pp": PP, "ep": EP}
_DATA_PARALLEL = frozenset({"dp", "ddp", "dp_replicate"})


@dataclass(frozen=True)
class Roles:
    strategy: list[str]  # in ORDER
    by_group: dict[str, str] = field(default_factory=dict)  # collectives.group_key -> role
    evidence: list[str] = field(default_factory=list)


def host_markers(tables: TraceTables) -> set[str]:
    """The strategies whose annotations or ops appear anywhere in the trace."""
    found = set()
    for role, pattern in _MARKERS.items():
        if any(pattern.search(n) for n in tables.names):
            found.add(role)
    return found


def _data_parallel(kinds: set[str], markers: set[str]) -> tuple[str, str]:
    if {co.ALLGATHER, co.REDUCESCATTER} & kinds:
        return FSDP, "all-gathers and reduce-scatters parameters and gradients"
    if DDP in markers:
        return DDP, "all-reduces beside DistributedDataParallel.forward"
    return DP, "all-reduces with no DDP annotation (a hand-written data-parallel loop)"


def group_role(desc: str | None, kinds: set[str], markers: set[str]) -> tuple[str | None, str]:
    """The role of one group (None: nothing to say, e.g. a lone broadcast) and why."""
    m = _MESH.search(desc or "")
    if m:
        dim = m.group(1).lower()
        if dim in _DATA_PARALLEL:
            role, why = _data_parallel(kinds, markers)
            return role, f"a data-parallel mesh dimension that {why}"
        if dim in _MESH_ROLE:
            return _MESH_ROLE[dim], f"the mesh dimension {dim!r}"
        return None, f"the mesh dimension {dim!r} (context parallelism, not one of {', '.join(ORDER)})"
    if co.ALLTOALL in kinds:
        return EP, "all-to-all (expert parallelism's token exchange)"
    if kinds and kinds <= co.P2P and EP in markers and PP not in markers:
        return EP, "send/recv kernels beside c10d::alltoall ops (NCCL runs an all-to-all as send/recv)"
    if kinds and kinds <= co.P2P:
        return PP, "send/recv only (pipeline stages passing activations)"
    if co.REDUCESCATTER in kinds or (co.ALLGATHER in kinds and FSDP in markers):
        return FSDP, "all-gathers parameters and reduce-scatters gradients"
    if co.ALLREDUCE in kinds or co.ALLGATHER in kinds:
        if TP in markers:
            return TP, "collectives on activations from DTensor redistributes / functional collectives"
        return _data_parallel(kinds, markers)
    return None, "no collective that names a strategy (broadcasts only)"


def detect_roles(tables: TraceTables, kinds: list[str], args: list[CommArgs | None]) -> Roles:
    """Roles of the groups the collective kernels ran on (``kinds``/``args`` per kernel)."""
    markers = host_markers(tables)
    by_group: dict[str, set[str]] = defaultdict(set)
    desc: dict[str, str | None] = {}
    for kind, a in zip(kinds, args, strict=True):
        key = co.group_key(a) or ""  # kernels that carry no args form one anonymous group
        by_group[key].add(kind)
        desc.setdefault(key, a.group_desc if a is not None else None)
    roles: dict[str, str] = {}
    evidence = []
    for key, ks in by_group.items():
        role, why = group_role(desc[key], ks, markers)
        name = desc[key] or ("collectives without process-group args" if key == "" else key)
        evidence.append(f"{name}: {', '.join(sorted(ks))} -> {role or 'no role'} ({why})")
        if role is not None:
            roles[key] = role
    found = set(roles.values())
    if DDP in found:
        found.discard(DP)
    return Roles(strategy=[r for r in ORDER if r in found], by_group=roles, evidence=evidence)


def run_strategy(per_worker: list[list[str]]) -> list[str]:
    """A run's strategy: the union of its ranks'."""
    found = {s for w in per_worker for s in w}
    if DDP in found:
        found.discard(DP)
    return [r for r in ORDER if r in found]
