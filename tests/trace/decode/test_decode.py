from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.trace.decode import stream
from tb_mfu_plugin.trace.decode.decode import decode_bytes, decode_trace
from tb_mfu_plugin.trace.tables import ANNOTATION, KERNEL, MEMCPY, OP, RUNTIME


def _sample() -> TraceBuilder:
    b = TraceBuilder()
    b.step(1, 0, 100)
    ext = b.op("aten::mm", 10, 20, **{"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]})
    corr = b.runtime("cudaLaunchKernel", 12, 3, ext=ext)
    b.kernel("ampere_sgemm_128x64_nn", 20, 30, corr, ext=ext, grid=[10, 2, 1])
    c2 = b.runtime("cudaMemcpyAsync", 40, 3)
    b.memcpy("HtoD (Pageable -> Device)", 50, 10, 4096, c2)
    return b


def test_decodes_columns_and_kinds(tmp_path: Path) -> None:
    t = decode_trace(str(_sample().write(tmp_path / "a.pt.trace.json.gz")), keep_inputs=lambda n: n == "aten::mm")
    assert sorted(t.cpu.kind.tolist()) == sorted([ANNOTATION, OP, RUNTIME, RUNTIME])
    assert t.gpu.kind.tolist() == [KERNEL, MEMCPY]
    assert t.gpu.grid_blocks.tolist() == [20, -1]
    assert t.gpu.bytes.tolist() == [-1, 4096]
    assert t.gpu.blocks_per_sm[0] == pytest.approx(2.0)
    assert np.isnan(t.gpu.blocks_per_sm[1])
    assert t.meta.device_properties[0]["numSms"] == 132
    (row,) = t.cpu.input_rows
    assert t.names[t.cpu.name[row]] == "aten::mm"
    assert json.loads(t.cpu.inputs_at(row).dims) == [[4, 8], [8, 16]]  # type: ignore[union-attr,arg-type]


def test_chunked_decoding_equals_whole_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = TraceBuilder()
    for i in range(300):
        c = b.runtime("cudaLaunchKernel", i * 10.0, 1)
        b.kernel(f"k{i % 7}", i * 10.0 + 2, 5, c)
    path = b.write(tmp_path / "x.pt.trace.json", gz=False)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)  # many chunks, cuts inside events
    chunked = decode_trace(str(path))
    whole = decode_bytes(path.read_bytes())
    assert len(chunked.gpu) == len(whole.gpu) == 300
    assert np.array_equal(chunked.gpu.ts, whole.gpu.ts)
    assert [chunked.names[c] for c in chunked.gpu.name] == [whole.names[c] for c in whole.gpu.name]


def test_one_line_documents_and_bare_arrays(tmp_path: Path) -> None:
    doc = _sample().document()
    one_line = tmp_path / "one.json"
    one_line.write_text(json.dumps(doc))
    assert len(decode_trace(str(one_line)).gpu) == 2
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc["traceEvents"]))
    assert len(decode_trace(str(bare)).gpu) == 2


def test_legacy_schema_missing_cat_and_float_ns_timestamps(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 1, "tid": "25738", "ts": 1.5, "dur": 100},
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": "25738",
            "ts": 2.25,
            "dur": 1,
            "args": {"correlation": 5, "external id": 9},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "k",
            "pid": 0,
            "tid": "stream 7",
            "ts": 10.125,
            "dur": 2.5,
            "args": {"device": 0, "stream": 7, "correlation": 5, "external id": 9},
        },
        # no cat at all: classified from its args
        {
            "ph": "X",
            "name": "Memcpy DtoH (Device -> Pinned)",
            "pid": 0,
            "tid": 7,
            "ts": 20.0,
            "dur": 1.0,
            "args": {"device": 0, "stream": 7, "correlation": 6, "bytes": 8},
        },
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    ]
    p = tmp_path / "legacy.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    t = decode_trace(str(p))
    assert t.gpu.kind.tolist() == [KERNEL, MEMCPY]
    assert t.gpu.ts[0] == pytest.approx(10.125)
    assert t.gpu.external_id[0] == 9
    assert t.cpu.kind.tolist() == [ANNOTATION, RUNTIME]
    assert t.cpu.tid.tolist() == [25738, 25738]
    assert t.meta.device_properties == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"this is not json", "not a JSON trace"),
        (b'{"traceEvents": 5}', "wrong shape"),
        (b'{"traceEvents": [{"ph": "X", "ts": "soon"}]}', "wrong shape"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1', "not valid JSON"),
        (b'{"foo": 1}', "no 'traceEvents'"),
    ],
)
def test_bad_input_gives_one_line_error_naming_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    p = tmp_path / "bad.pt.trace.json"
    p.write_bytes(content)
    with pytest.raises(TraceError) as info:
        decode_trace(str(p))
    msg = str(info.value)
    assert msg.startswith(str(p) + ": ")
    assert reason in msg
    assert "\n" not in msg


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(_sample().text().encode() * 50)
    p = tmp_path / "cut.pt.trace.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="corrupt or truncated gzip"):
        decode_trace(str(p))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="file not found"):
        decode_trace(str(tmp_path / "nope.json"))
