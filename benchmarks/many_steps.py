#!/usr/bin/env python3
"""Write a Kineto trace of many short ProfilerSteps, for the cost-per-step benchmark.

Each step is what torch.profiler records for one tiny training or inference step, laid
out as Kineto writes it (one event per indented block, ``deviceProperties`` first, the
``Trace`` span and ``Record Window End`` last). Per step, one every 50 µs:

- by default a ``ProfilerStep#N`` ``user_annotation`` on the main thread, its
  ``cudaLaunchKernel`` ``cuda_runtime`` call, the kernel on stream 7 with the same
  correlation and external id, and the ``ac2g`` flow pair (``s`` at the launch, ``f`` at
  the kernel);
- ``--ops`` adds an ``aten::fill_`` ``cpu_op`` (with recorded shapes) around the launch
  and the step's ``gpu_user_annotation``, as a profile with ``record_shapes=True`` has;
- ``--no-gpu``: the steps (and with ``--ops`` their ``cpu_op``) with no launch and no GPU
  event, but the first: a host-only loop after one kernel (a trace with no GPU event at all
  is refused at once as CPU-only, which costs nothing per step).

usage: many_steps.py OUT --steps 100000 [--no-gpu] [--ops]     (OUT may end in .gz)
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
from pathlib import Path
from typing import IO

T0 = 5120648354000.0  # µs, a CLOCK_MONOTONIC-like origin as Kineto writes
STEP_US = 50.0  # one step every 50 µs: 20,000 steps a second
PID, TID, STREAM = 609, 609, 7

HEAD = {
    "schemaVersion": 1,
    "deviceProperties": [
        {
            "id": 0,
            "name": "NVIDIA H200",
            "totalGlobalMem": 150109880320,
            "computeMajor": 9,
            "computeMinor": 0,
            "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536,
            "warpSize": 32,
            "sharedMemPerBlock": 49152,
            "numSms": 132,
            "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 232448,
            "sharedMemPerMultiprocessor": 233472,
        }
    ],
    "cuda_driver_version": 13000,
    "cuda_runtime_version": 13000,
    "displayTimeUnit": "ms",
    "baseTimeNanoseconds": 1790857026000000000,
}

KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)

STEP_EVENT = """  {{
    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{n}", "pid": {pid}, "tid": {tid},
    "ts": {ts:.3f}, "dur": 45.000,
    "args": {{
      "External id": {ext},"Record function id": 0, "Ev Idx": {idx}
    }}
  }},
"""

OP_EVENT = """  {{
    "ph": "X", "cat": "cpu_op", "name": "aten::fill_", "pid": {pid}, "tid": {tid},
    "ts": {op_ts:.3f}, "dur": 30.000,
    "args": {{
      "External id": {op_ext},"Record function id": 0, "Concrete Inputs": ["", "0"], \
"Input type": ["float", "Scalar"], "Input Strides": [[1024, 1], []], "Input Dims": [[256, 1024], []], "Ev Idx": {op_idx}
    }}
  }},
"""

LAUNCH_EVENTS = """  {{
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {pid}, "tid": {tid},
    "ts": {rt_ts:.3f}, "dur": 8.000,
    "args": {{
      "External id": {launch_ext},      "cbid": 211, "correlation": {corr}
    }}
  }},
  {{
    "ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {rt_ts:.3f},
    "cat": "ac2g", "name": "ac2g"
  }},
  {{
    "ph": "X", "cat": "kernel", "name": "{kernel}", "pid": 0, "tid": {stream},
    "ts": {k_ts:.3f}, "dur": 12.000,
    "args": {{
      "External id": {launch_ext},      "queued": 0, "device": 0, "context": 1,      "stream": {stream}, \
"correlation": {corr},      "registers per thread": 16,      "shared memory": 0,      "blocks per SM": 15.515152,      \
"warps per SM": 62.060608,      "grid": [2048, 1, 1],      "block": [128, 1, 1],      "est. achieved occupancy %": 100
    }}
  }},
  {{
    "ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {k_ts:.3f},
    "cat": "ac2g", "name": "ac2g", "bp": "e"
  }},
"""

GPU_STEP_EVENT = """  {{
    "ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#{n}", "pid": 0, "tid": {stream},
    "ts": {k_ts:.3f}, "dur": 12.000,
    "args": {{
      "External id": {ext}
    }}
  }},
"""

TAIL = """  {{
    "name": "process_name", "ph": "M", "ts": {t0:.3f}, "pid": {pid}, "tid": 0,
    "args": {{
      "name": "python3"
    }}
  }},
  {{
    "name": "thread_name", "ph": "M", "ts": {t0:.3f}, "pid": {pid}, "tid": {tid},
    "args": {{
      "name": "thread {tid} (python3)"
    }}
  }},
  {{
    "ph": "X", "cat": "Trace", "ts": {t0:.3f}, "dur": {span:.3f},
    "pid": "Spans", "tid": "PyTorch Profiler",
    "name": "PyTorch Profiler (0)",
    "args": {{
      "Op count": 0
    }}
  }},
  {{
    "name": "Record Window End", "ph": "i", "s": "g",
    "pid": "", "tid": "", "ts": {t_end:.3f}
  }}
  ],
  "traceName": "many_steps.json"
}}
"""


def write(out: IO[str], steps: int, kernels: bool, ops: bool) -> None:
    head = json.dumps(HEAD, indent=2)[:-2]  # Kineto's top-level object, left open
    out.write(head + ',\n  "traceEvents": [\n')
    buf = io.StringIO()
    for i in range(steps):
        ts = T0 + i * STEP_US
        ext, corr = 1 + 2 * i, 1_000_000 + i
        f = dict(n=i, pid=PID, tid=TID, ts=ts, ext=ext, idx=2 * i, op_ts=ts + 5, op_ext=ext + 1, op_idx=2 * i + 1)
        # the launch's external id is that of the op it runs under: the cpu_op, else the step
        f.update(rt_ts=ts + 15, corr=corr, kernel=KERNEL, stream=STREAM, k_ts=ts + 28, launch_ext=ext + ops)
        buf.write(STEP_EVENT.format(**f))
        if ops:
            buf.write(OP_EVENT.format(**f))
        if kernels or i == 0:
            buf.write(LAUNCH_EVENTS.format(**f))
            if ops:
                buf.write(GPU_STEP_EVENT.format(**f))
        if buf.tell() > 1 << 22:
            out.write(buf.getvalue())
            buf = io.StringIO()
    out.write(buf.getvalue())
    span = steps * STEP_US + 100
    out.write(TAIL.format(t0=T0 - 10, pid=PID, tid=TID, span=span, t_end=T0 + span))


def build(path: Path, steps: int, kernels: bool, ops: bool = False) -> Path:
    """Write the trace to ``path`` (gzipped if it ends in .gz), unless it is there already."""
    if not path.exists():
        tmp = path.with_name(path.name + ".part")
        with gzip.open(tmp, "wt", compresslevel=6) if path.suffix == ".gz" else open(tmp, "w") as f:
            write(f, steps, kernels, ops)
        tmp.replace(path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--no-gpu", action="store_true", help="steps with no launch and no GPU work")
    ap.add_argument("--ops", action="store_true", help="and a cpu_op (with shapes) and a gpu_user_annotation per step")
    args = ap.parse_args()
    if args.out.exists():
        args.out.unlink()
    build(args.out, args.steps, not args.no_gpu, args.ops)
    print(f"{args.out}: {args.steps} steps, {args.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
