"""Build small Kineto-shaped traces by hand, with answers worked out in the tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

H100 = {
    "id": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "computeMajor": 9,
    "computeMinor": 0,
    "numSms": 132,
    "maxThreadsPerMultiprocessor": 2048,
}


class TraceBuilder:
    """Events in torch 2.x form; each launch links a runtime call to GPU work by correlation."""

    def __init__(self, devices: list[dict[str, Any]] | None = None, pid: int = 100, tid: int = 100) -> None:
        self.events: list[dict[str, Any]] = []
        self.devices = [H100] if devices is None else devices
        self.pid, self.tid = pid, tid
        self._corr = 1000
        self._ext = 1
        self.extra: dict[str, Any] = {}

    def step(self, n: int, ts: float, dur: float) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{n}",
                "pid": self.pid,
                "tid": self.tid,
                "ts": ts,
                "dur": dur,
                "args": {"External id": self._next_ext()},
            }
        )

    def annotation(self, name: str, ts: float, dur: float) -> None:
        """A ``record_function`` range on the host (``user_annotation``)."""
        self.events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": name,
                "pid": self.pid,
                "tid": self.tid,
                "ts": ts,
                "dur": dur,
                "args": {"External id": self._next_ext()},
            }
        )

    def op(self, name: str, ts: float, dur: float, **args: Any) -> int:
        ext = self._next_ext()
        self.events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": self.pid,
                "tid": self.tid,
                "ts": ts,
                "dur": dur,
                "args": {"External id": ext, **args},
            }
        )
        return ext

    def runtime(self, name: str, ts: float, dur: float, ext: int = 0, corr: int | None = None) -> int:
        corr = self._next_corr() if corr is None else corr
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": self.pid,
                "tid": self.tid,
                "ts": ts,
                "dur": dur,
                "args": {"External id": ext, "correlation": corr},
            }
        )
        return corr

    def kernel(
        self,
        name: str,
        ts: float,
        dur: float,
        corr: int,
        device: int = 0,
        stream: int = 7,
        blocks_per_sm: float | None = 2.0,
        occupancy: float | None = 50,
        grid: list[int] | None = None,
        ext: int = 0,
    ) -> None:
        args: dict[str, Any] = {"External id": ext, "device": device, "stream": stream, "correlation": corr}
        if blocks_per_sm is not None:
            args["blocks per SM"] = blocks_per_sm
        if occupancy is not None:
            args["est. achieved occupancy %"] = occupancy
        if grid is not None:
            args["grid"] = grid
            args["block"] = [128, 1, 1]
        self.events.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": args}
        )

    def memcpy(self, kind: str, ts: float, dur: float, nbytes: int, corr: int, device: int = 0) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": f"Memcpy {kind}",
                "pid": device,
                "tid": 7,
                "ts": ts,
                "dur": dur,
                "args": {
                    "device": device,
                    "stream": 7,
                    "correlation": corr,
                    "bytes": nbytes,
                    "memory bandwidth (GB/s)": nbytes / dur / 1e3,
                },
            }
        )

    def launch_kernel(self, name: str, cpu_ts: float, gpu_ts: float, dur: float, **kw: Any) -> None:
        corr = self.runtime("cudaLaunchKernel", cpu_ts, 2.0)
        self.kernel(name, gpu_ts, dur, corr, **kw)

    def kernel_steps(self, kernel: str, steps: int = 3, t0: float = 1000.0) -> TraceBuilder:
        """``steps`` profiler steps of 900 µs, 1 ms apart, each launching ``kernel`` for 400 µs:
        the smallest analysable trace that carries a given kernel name."""
        for i in range(steps):
            ts = t0 + i * 1000
            self.step(i + 1, ts, 900)
            self.launch_kernel(kernel, ts + 10, ts + 50, 400)
        return self

    def graph_launch(
        self, cpu_ts: float, kernels: list[tuple[str, float, float]], api: str = "cudaGraphLaunch", **kw: Any
    ) -> int:
        """One graph replay as CUPTI records it: one launch call, and every kernel of the replay
        carrying that call's correlation id. ``kernels``: (name, gpu start, duration)."""
        corr = self.runtime(api, cpu_ts, 10.0)
        for name, ts, dur in kernels:
            self.kernel(name, ts, dur, corr, **kw)
        return corr

    def memory(
        self,
        ts: float,
        nbytes: Any,
        allocated: Any,
        reserved: Any,
        addr: Any = 1 << 40,
        device: Any = 0,
        device_type: Any = 1,
        tid: int | None = None,
        name: str = "[memory]",
    ) -> None:
        """One of the caching allocator's instant events (``profile_memory=True``)."""
        self.events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": name,
                "pid": self.pid,
                "tid": self.tid if tid is None else tid,
                "ts": ts,
                "args": {
                    "Total Reserved": reserved,
                    "Total Allocated": allocated,
                    "Bytes": nbytes,
                    "Device Id": device,
                    "Device Type": device_type,
                    "Addr": addr,
                },
            }
        )

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _next_ext(self) -> int:
        self._ext += 1
        return self._ext

    def document(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "deviceProperties": self.devices,
            **self.extra,
            "traceEvents": self.events,
            "traceName": "test",
        }

    def text(self) -> str:
        """Kineto's own layout: one event per indented block."""
        head = {k: v for k, v in self.document().items() if k not in ("traceEvents", "traceName")}
        body = ",\n".join("  " + json.dumps(e) for e in self.events)
        inner = json.dumps(head)[1:-1]
        return "{\n  " + inner + ',\n  "traceEvents": [\n' + body + '\n  ],\n  "traceName": "test"\n}\n'

    def write(self, path: Path, gz: bool = True) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.text().encode()
        path.write_bytes(gzip.compress(data) if gz else data)
        return path


# NCCL kernel names by collective, as NCCL >= 2.19 names its entry points.
NCCL_KERNELS = {
    "allreduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "_allgather_base": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "_reduce_scatter_base": "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "send": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    "recv": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    "alltoall_base": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
}


def nccl_args(
    collective: str,
    in_nelems: int,
    out_nelems: int | None = None,
    *,
    dtype: str = "Float",
    ranks: tuple[int, ...] = (0, 1),
    group: str = "0",
    desc: str = "default_pg",
) -> dict[str, Any]:
    """The args torch 2.x writes on an NCCL kernel."""
    return {
        "Collective name": collective,
        "In msg nelems": in_nelems,
        "Out msg nelems": in_nelems if out_nelems is None else out_nelems,
        "Group size": len(ranks),
        "dtype": dtype,
        "In split size": "[]",
        "Out split size": "[]",
        "Process Group Name": group,
        "Process Group Description": desc,
        "Process Group Ranks": str(list(ranks)),
    }


class DistBuilder(TraceBuilder):
    """A rank of a distributed run: ``distributedInfo`` and NCCL kernels with their args."""

    def __init__(self, rank: int = 0, world_size: int = 2, **kw: Any) -> None:
        super().__init__(**kw)
        self.extra["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}

    def collective(self, cpu_ts: float, gpu_ts: float, dur: float, args: dict[str, Any], stream: int = 20) -> None:
        """One NCCL kernel, launched at ``cpu_ts``, running ``[gpu_ts, gpu_ts + dur)`` on ``stream``."""
        corr = self.runtime("cudaLaunchKernel", cpu_ts, 2.0)
        self.kernel(NCCL_KERNELS[args["Collective name"]], gpu_ts, dur, corr, stream=stream, blocks_per_sm=0.2)
        self.events[-1]["args"].update(args)
