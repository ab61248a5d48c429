"""Hand-written hostile cases: what mutating a real trace cannot reach.

Each case is a run directory under the corpus logdir. Sizes are chosen so that
every case runs in a second or two under the default caps; ``TB_MFU_FUZZ_LONG=1``
scales the expensive ones up to the sizes reported in issue 15.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import corpus

LONG = os.environ.get("TB_MFU_FUZZ_LONG") == "1"
MiB = 1 << 20
Doc = dict[str, Any]


def _kernel(name: str, ts: float, device: int = 0, **args: Any) -> Doc:
    a = {"device": device, "stream": 7, "correlation": 1, "blocks per SM": 2.0, "est. achieved occupancy %": 50}
    a.update(args)
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": 7, "ts": ts, "dur": 5.0, "args": a}


def _tiny(events: list[Doc], **header: Any) -> bytes:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}],
        **header,
        "traceEvents": events,
    }
    return corpus.kineto_text(doc)


def _bomb(prefix: bytes, filler: bytes, total: int) -> bytes:
    """gzip of ``prefix`` then ``filler`` repeated to ``total`` bytes.

    Built as many identical gzip members (a valid gzip file, read as one stream)
    so that writing a 1 GiB bomb costs one 16 MiB compression.
    """
    block = filler * max(1, 16 * MiB // len(filler))
    member = gzip.compress(block, compresslevel=9, mtime=0)
    return gzip.compress(prefix, mtime=0) + member * max(1, total // len(block))


def _special(out: Path) -> list[Path]:
    cases = []
    d = out / "h_fifo_trace"
    d.mkdir()
    os.mkfifo(d / corpus.TRACE_NAME)
    cases.append(d)
    for name, target in (("h_devzero_gz", corpus.TRACE_NAME + ".gz"), ("h_devzero_plain", corpus.TRACE_NAME)):
        d = out / name
        d.mkdir()
        os.symlink("/dev/zero", d / target)
        cases.append(d)
    d = out / "h_dir_named_like_trace"
    (d / corpus.TRACE_NAME).mkdir(parents=True)
    cases.append(d)
    return cases


def _sidecars(out: Path, good: bytes) -> list[Path]:
    cases = []
    d = corpus.write_case(out, "h_sidecar_fifo", good)
    os.mkfifo(d / "tb_mfu.json")
    cases.append(d)
    d = corpus.write_case(out, "h_sidecar_devzero", good)
    os.symlink("/dev/zero", d / "tb_mfu.json")
    cases.append(d)
    for name, body in (
        ("deep", b'{"version": 1, "model": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
        ("huge_numbers", json.dumps({"version": 2**80, "flops_per_step": 1e308}).encode()),
        ("huge_version", json.dumps({"version": 10**30, "flops_per_step": 1e12}).encode()),
        (
            "big_ints",
            json.dumps(
                {
                    "flops_per_step": None,
                    "model": {"n_params": 1e300, "batch_size": 2**70, "seq_len": 2**70, "n_layers": 2**64},
                }
            ).encode(),
        ),
        ("inf_flops", b'{"flops_per_step": 1e400}'),
    ):
        d = corpus.write_case(out, f"h_sidecar_{name}", good)
        (d / "tb_mfu.json").write_bytes(body)
        cases.append(d)
    return cases


def _bombs(out: Path, good_doc: Doc) -> list[Path]:
    size = (4096 if LONG else 1024) * MiB
    head = corpus.kineto_text({**{k: v for k, v in good_doc.items() if k != "traceEvents"}, "traceEvents": []})
    head = head[: head.rindex(b"[") + 1]
    event = b"\n  " + json.dumps(_kernel("k", 1.0)).encode() + b","
    return [
        corpus.write_case(out, "h_gzip_bomb_zeros", _bomb(b"", b"\0", size)),
        corpus.write_case(out, "h_gzip_bomb_spaces", _bomb(head, b" ", size)),
        corpus.write_case(out, "h_gzip_bomb_events", _bomb(head, event, size)),
    ]


def _structure(out: Path, good_doc: Doc) -> list[Path]:
    events = good_doc["traceEvents"]
    one_line_events = events * (40 if LONG else 8)
    big_line = json.dumps({"traceEvents": one_line_events}).encode()
    nest = 5000
    cases = [
        corpus.write_case(out, "h_empty", b"", corpus.TRACE_NAME),
        corpus.write_case(out, "h_whitespace", b" \n\t" * 100, corpus.TRACE_NAME),
        corpus.write_case(out, "h_bom", b"\xef\xbb\xbf" + corpus.kineto_text(good_doc), corpus.TRACE_NAME),
        corpus.write_case(out, "h_utf16", corpus.kineto_text(good_doc).decode().encode("utf-16"), corpus.TRACE_NAME),
        corpus.write_case(out, "h_one_line_big", corpus.gz(big_line)),
        corpus.write_case(out, "h_bare_array_deep", b"[" * nest + b"]" * nest, corpus.TRACE_NAME),
        corpus.write_case(
            out, "h_object_deep", b'{"traceEvents": [' + b"[" * nest + b"]" * nest + b"]}", corpus.TRACE_NAME
        ),
        corpus.write_case(
            out,
            "h_header_deep",
            b'{"schemaVersion": ' + b"[" * nest + b"]" * nest + b', "traceEvents": []}',
            corpus.TRACE_NAME,
        ),
        corpus.write_case(
            out, "h_no_boundary_newlines", b'{"traceEvents": [' + b"\n" * (8 * MiB) + b"]}", corpus.TRACE_NAME
        ),
        corpus.write_case(out, "h_not_json", b"\x00\x01\x02 not a trace", corpus.TRACE_NAME),
        corpus.write_case(
            out,
            "h_invalid_utf8_names",
            _tiny([_kernel("KNAME", 1.0)]).replace(b"KNAME", b"k\xff\xfe"),
            corpus.TRACE_NAME,
        ),
        corpus.write_case(
            out, "h_surrogate_names", _tiny([_kernel("KNAME", 1.0)]).replace(b"KNAME", b"k\\udc80"), corpus.TRACE_NAME
        ),
    ]
    return cases


def _figures(out: Path, good_doc: Doc) -> list[Path]:
    """Impossible figures: overflowing byte sums, occupancy out of range, non-finite times."""
    n_names = 2 if not LONG else 4
    name_len = (10 if LONG else 2) * MiB
    specs: dict[str, list[Doc]] = {
        "bytes_overflow": [
            dict(_kernel("Memcpy HtoD (Pageable -> Device)", 10.0 * i, bytes=2**62), cat="gpu_memcpy") for i in range(8)
        ],
        "bytes_negative": [dict(_kernel("Memcpy HtoD (Pageable -> Device)", 1.0, bytes=-(2**40)), cat="gpu_memcpy")],
        "occupancy": [
            _kernel("k", 1.0, **{"est. achieved occupancy %": -10}),
            _kernel("k", 9.0, **{"est. achieved occupancy %": 1.18e19}),
        ],
        "times_huge": [dict(_kernel("k", 1e308), dur=1e308), dict(_kernel("k", -1e308), dur=-1e308)],
        "dur_negative": [dict(_kernel("k", 1.0), dur=-50.0), _kernel("k", 10.0)],
        "grid_overflow": [_kernel("k", 1.0, grid=[2**40, 2**40, 2**40], block=[2**40, 2**40, 2**40])],
        "ids_overflow": [_kernel("k", 1.0, device=2**64, stream=2**70, correlation=-(2**65))],
        "device_wraps_int32": [_kernel("k", 1.0, device=2**32), _kernel("k", 2.0, device=0)],
        "unicode_digits": [dict(_kernel("k", 1.0), pid="²", tid="١٢")],
        "long_names": [_kernel("void k<" + "x" * name_len + ">()", 10.0 * i) for i in range(n_names)],
        "many_devices": [_kernel("k", float(i), device=i) for i in range(20000 if LONG else 5000)],
    }
    cases = [corpus.write_case(out, f"h_{name}", _tiny(events), corpus.TRACE_NAME) for name, events in specs.items()]
    devices = [{"id": i, "name": "NVIDIA H200", "numSms": 132} for i in range(20000)]
    cases.append(
        corpus.write_case(
            out, "h_declared_devices", corpus.gz(corpus.kineto_text({**good_doc, "deviceProperties": devices}))
        )
    )
    # Hostile recorded shapes on a real trace's matmuls: MFU of 1e29 before issue 15.
    doc = corpus._load("fp32_no_tensor_cores")
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and str(e.get("name", "")).startswith("aten::") and "Input Dims" in e.get("args", {}):
            e["args"]["Input Dims"] = [[10**9, 10**9], [10**9, 10**9], [10**9]]
    cases.append(corpus.write_case(out, "h_input_dims_absurd", corpus.gz(corpus.kineto_text(doc))))
    gpu_only = {
        **good_doc,
        "traceEvents": [
            e for e in good_doc["traceEvents"] if isinstance(e, dict) and e.get("cat") in ("kernel", "gpu_memcpy")
        ],
    }
    cases.append(corpus.write_case(out, "h_gpu_only", corpus.gz(corpus.kineto_text(gpu_only))))
    return cases


def _mem(ts: float, nbytes: Any, allocated: Any, reserved: Any, addr: Any = 1 << 40, **args: Any) -> Doc:
    a = {
        "Total Reserved": reserved,
        "Total Allocated": allocated,
        "Bytes": nbytes,
        "Device Id": 0,
        "Device Type": 1,
        "Addr": addr,
    }
    a.update(args)
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "args": a,
    }


def _with_memory(good_doc: Doc, events: list[Doc]) -> bytes:
    return corpus.gz(corpus.kineto_text({**good_doc, "traceEvents": [*good_doc["traceEvents"], *events]}))


def _memory(out: Path, good_doc: Doc) -> list[Path]:
    """The allocator's [memory] events (issue 25) with values no allocator writes, on a real trace's
    steps: negative and overflowing totals, reserved below allocated, one address allocated twice,
    events outside every step, another device's, wrong types; and very many of them."""
    steps = [e for e in good_doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    t0 = min(e["ts"] for e in steps)
    t1 = max(e["ts"] + e["dur"] for e in steps)
    mid = (t0 + t1) / 2
    n = 200_000 if LONG else 20_000
    specs: dict[str, list[Doc]] = {
        "totals": [
            _mem(mid, 64, -(2**40), -1),
            _mem(mid + 1, 64, 2**64, 2**70),
            _mem(mid + 2, 64, 1e300, "x"),
            _mem(mid + 3, 64, [1], {"a": 1}),
            _mem(mid + 4, 64, 2**62, 2**62),
        ],
        "reserved_below": [_mem(mid + i, 64, 10**9 + i, 10**6) for i in range(5)],
        "bytes": [
            _mem(mid, -(2**63), 100, 200),
            _mem(mid + 1, 2**64, 100, 200),
            _mem(mid + 2, "12", 100, 200),
            _mem(mid + 3, None, 100, 200),
            _mem(mid + 4, True, 100, 200),
        ],
        "addr_reused": [_mem(mid + i, 1 << 30, (i + 1) << 30, 1 << 40, addr=7) for i in range(10)]
        + [_mem(mid + 20, -(1 << 30), 1 << 30, 1 << 40, addr=7)],
        "outside_steps": [_mem(t0 - 1e6, 64, 64, 128), _mem(t1 + 1e6, 64, 64, 128), _mem(-1e300, 64, 64, 128)],
        "devices": [_mem(mid, 64, 64, 128, **{"Device Id": d}) for d in (-1, 2**63, 2**64, "0", 3, None)]
        + [_mem(mid, 64, 64, 128, **{"Device Type": t}) for t in (0, -1, 2**40, "cuda", None)],
        "beyond_device": [_mem(mid, 1 << 49, 1 << 49, 1 << 49)],
        "oom": [{**_mem(mid, 1 << 45, 1 << 30, 1 << 31), "name": "[OutOfMemory]"}],
        "many": [
            _mem(t0 + (t1 - t0) * i / n, 512 if i % 2 == 0 else -512, 1 << 20, 1 << 21, addr=i // 2) for i in range(n)
        ],
    }
    cases = [corpus.write_case(out, f"h_memory_{k}", _with_memory(good_doc, v)) for k, v in specs.items()]
    only = {**good_doc, "traceEvents": specs["totals"] + specs["addr_reused"]}  # memory events and nothing else
    cases.append(corpus.write_case(out, "h_memory_only", corpus.gz(corpus.kineto_text(only))))
    return cases


def hand_written_cases(out: Path, good_doc: Doc) -> list[Path]:
    good = gzip.compress(corpus.kineto_text(good_doc), mtime=0)
    return (
        _special(out)
        + _sidecars(out, good)
        + _bombs(out, good_doc)
        + _structure(out, good_doc)
        + _figures(out, good_doc)
        + _memory(out, good_doc)
    )
