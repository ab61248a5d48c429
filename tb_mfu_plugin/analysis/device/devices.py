"""Which ``deviceProperties`` entry describes a device of the trace, and which vendor ran it.

CUDA traces number kernel devices as ``deviceProperties`` does (``id`` = CUDA ordinal).
ROCm traces do not: roctracer reports the HSA agent id, and HSA enumerates the CPU agents
(one per NUMA node) before the GPUs, so on a 2-socket host GPU 0's kernels carry device 2
while ``deviceProperties`` lists it as id 0 (pytorch/kineto#925, ROCm/roctracer#98). An id
that matches is then not proof either: device 2 of the kernels may be entry 0.

So properties are taken by id only where ids can be trusted (CUDA), and otherwise only when
the choice cannot be wrong: the trace lists one entry, or all listed entries describe the same
GPU model, or the trace's GPUs and the listed entries pair up one to one in order. Anything
else is reported as unknown, with a note, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.distinct import distinct
from ...trace.tables import DRIVER, RUNTIME, TraceTables
from .peaks import identify

# The fields that tell GPU models apart; entries equal on all of them describe the same model.
_MODEL_FIELDS = (
    "name",
    "computeMajor",
    "computeMinor",
    "numSms",
    "totalGlobalMem",
    "warpSize",
    "maxThreadsPerMultiprocessor",
)


@dataclass(frozen=True)
class DeviceProps:
    props: dict[str, Any] | None  # the deviceProperties entry, None when unknown
    how: str  # "id", "only entry", "all alike", "ordinal", "none" (no entries), "ambiguous"
    note: str | None = None  # for the report, whenever the entry was not found by a trusted id


def gpu_devices(tables: TraceTables) -> list[int]:
    """Devices that ran at least one kernel, memcpy or memset."""
    return sorted(int(d) for d in distinct(tables.gpu.device))


def is_rocm(tables: TraceTables) -> bool:
    """The trace comes from ROCm: HIP runtime calls, or AMD device properties (wavefront 64).

    Kineto files HIP calls under the ``cuda_runtime`` category, so the names tell.
    """
    for p in tables.meta.device_properties:
        if p.get("warpSize") == 64 or "AMD" in str(p.get("name") or "").upper():
            return True
    cpu = tables.cpu
    codes = distinct(cpu.name[(cpu.kind == RUNTIME) | (cpu.kind == DRIVER)])
    return any(tables.names[int(c)].startswith(("hip", "hsa")) for c in codes)


def _model(p: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(p.get(k) for k in _MODEL_FIELDS)


def display_name(props: dict[str, Any] | None) -> str | None:
    """The device's name for the report: ``deviceProperties``' own, else (an empty name, as vLLM's
    ROCm traces write) the part its architecture and SM/CU count identify (``peaks.identify``)."""
    if props is None:
        return None
    name = props.get("name")
    if isinstance(name, str) and name.strip():
        return name
    ident = identify(props)
    return ident.model.key if ident is not None else (name if isinstance(name, str) else None)


def device_properties(tables: TraceTables, device: int) -> DeviceProps:
    """The ``deviceProperties`` entry of ``device`` (a kernel event's ``device``), see the module doc;
    an entry whose name is empty but whose part ``peaks.identify`` tells carries a note saying why."""
    found = _device_properties(tables, device)
    ident = identify(found.props)
    if ident is None:
        return found
    why = f"GPU named {ident.model.key} from deviceProperties: {ident.reason}."
    return DeviceProps(found.props, found.how, f"{found.note} {why}" if found.note else why)


def _device_properties(tables: TraceTables, device: int) -> DeviceProps:
    listed = [p for p in tables.meta.device_properties if isinstance(p, dict)]
    if not listed:
        return DeviceProps(None, "none")
    rocm = is_rocm(tables)
    by_id = next((p for p in listed if p.get("id") == device), None)
    alike = len({_model(p) for p in listed}) == 1
    if by_id is not None and (not rocm or alike):
        # on ROCm an equal id may belong to another GPU, which is harmless only when all are alike
        return DeviceProps(by_id, "id")
    n = len(listed)
    where = (
        f"device {device} of the kernel events is not listed in deviceProperties (ids "
        f"{[p.get('id') for p in listed]!r})"
    )
    why = " (ROCm numbers kernel devices by HSA agent, CPUs first)" if rocm else ""
    if n == 1:
        return DeviceProps(listed[0], "only entry", f"{where}{why}; using the only entry, {listed[0].get('name')!r}.")
    if alike:
        return DeviceProps(
            listed[0], "all alike", f"{where}{why}; all {n} listed GPUs are alike ({listed[0].get('name')!r})."
        )
    ours = gpu_devices(tables)
    if rocm and len(ours) == n and device in ours:
        # HSA keeps the GPUs' order: the k-th GPU agent is the k-th HIP device
        entry = sorted(listed, key=lambda p: p.get("id", 0))[ours.index(device)]
        return DeviceProps(
            entry,
            "ordinal",
            f"ROCm device {device} mapped by order to deviceProperties id {entry.get('id')} "
            f"({entry.get('name')!r}): the trace uses all {n} listed GPUs.",
        )
    if by_id is not None:
        where = f"on ROCm, kernel device {device} need not be deviceProperties id {device}"
    return DeviceProps(
        None,
        "ambiguous",
        f"{where}{why}, and the listed GPUs differ: device properties unknown; pass --device-name for the peak.",
    )


def props_of(tables: TraceTables, device: int | None) -> dict[str, Any] | None:
    """The ``deviceProperties`` entry of ``device`` (``device_properties``); with no device (a
    report not tied to one), the trace's entry when it lists exactly one, else None."""
    if device is None:
        props = tables.meta.device_properties
        return props[0] if len(props) == 1 else None
    return device_properties(tables, device).props
