"""The decoder reads a caller's file object (an upload, an archive member) as it reads a path:
the same tables, under the same caps, and the object is left open."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import pytest

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.limits import Limits

from .test_parallel import _assert_same

SAMPLE = next((Path(__file__).resolve().parents[3] / "sample_traces" / "ddp_2gpu").glob("rank0.*.pt.trace.json.gz"))


class OneWay(io.RawIOBase):
    """A stream that can only be read forward (a socket, a pipe): no seek, no tell, no peek."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._data), 65536)
        buffer[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


@pytest.mark.parametrize("make", [io.BytesIO, OneWay], ids=["seekable", "one-way"])
@pytest.mark.parametrize("gzipped", [True, False], ids=["gzip", "plain"])
def test_a_file_object_decodes_as_the_path_does(make: Any, gzipped: bool) -> None:
    data = SAMPLE.read_bytes() if gzipped else gzip.decompress(SAMPLE.read_bytes())
    f = make(data)
    got = decode_trace(str(SAMPLE), fileobj=f)
    assert not f.closed  # the caller's
    _assert_same(got, decode_trace(str(SAMPLE)))
    assert got.meta.path == str(SAMPLE) and len(got.gpu) > 1000


def test_a_file_object_is_held_to_the_caps() -> None:
    with pytest.raises(TraceError, match=r"^upload.json.gz: more than 1000 B decompressed: over the max_trace_bytes"):
        decode_trace("upload.json.gz", fileobj=io.BytesIO(SAMPLE.read_bytes()), limits=Limits(max_trace_bytes=1000))
    with pytest.raises(TraceError, match=r"^upload.json: not a JSON trace"):
        decode_trace("upload.json", fileobj=OneWay(b"<html>not a trace</html>"))
