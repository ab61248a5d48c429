"""The tab's disk cache: bounded by a byte cap with the least recently used entries going
first, and whole entries only, even with two server processes writing at once."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from pathlib import Path

from tb_mfu_plugin.tensorboard.cache import AnalysisCache
from tb_mfu_plugin.tensorboard.disk_cache import DiskCache
from tb_mfu_plugin.tensorboard.plugin import MfuPlugin

from .conftest import RUN_A, RUN_B, Served, make_context


def _entry(name: str, size: int) -> bytes:
    """A JSON entry of about ``size`` bytes that names itself, so a torn write shows."""
    body = json.dumps({"name": name, "pad": ""}).encode()
    return json.dumps({"name": name, "pad": "x" * max(0, size - len(body))}).encode()


def _age(cache: DiskCache, name: str, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(cache.path(name), (t, t))


def test_the_least_recently_used_entries_go_first(tmp_path: Path) -> None:
    cache = DiskCache(str(tmp_path), max_bytes=3500)
    for i, name in enumerate(["a", "b", "c"]):
        cache.write(name, _entry(name, 1000))
        _age(cache, name, 100 - i)  # a oldest, then b, then c
    assert cache.read("a") is not None  # a used now: b is the least recently used
    cache.write("d", _entry("d", 1000))
    assert cache.read("b") is None
    assert all(cache.read(n) is not None for n in "acd")
    assert cache.size() <= 3500


def test_an_entry_over_the_cap_alone_is_not_kept(tmp_path: Path) -> None:
    cache = DiskCache(str(tmp_path), max_bytes=500)
    cache.write("small", _entry("small", 400))
    cache.write("big", _entry("big", 1000))
    assert cache.read("big") is None and cache.read("small") is None
    assert cache.size() == 0


def test_stale_temporary_files_of_a_dead_server_are_removed(tmp_path: Path) -> None:
    cache = DiskCache(str(tmp_path), max_bytes=10_000)
    stale, fresh = tmp_path / ".tmp-dead.json", tmp_path / ".tmp-writing.json"
    stale.write_bytes(b"{")
    fresh.write_bytes(b"{")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    cache.write("x", _entry("x", 100))
    assert not stale.exists() and fresh.exists()  # another server may be writing that one


def _writer(directory: str, who: int, rounds: int, cap: int) -> None:
    cache = DiskCache(directory, max_bytes=cap)
    for i in range(rounds):
        cache.write(f"shared{i % 7}", _entry(f"shared{i % 7}", 3000 + 500 * who))  # the same names at once
        cache.write(f"own{who}-{i}", _entry(f"own{who}-{i}", 2000))
        cache.read(f"shared{(i + 3) % 7}")


def test_two_processes_writing_at_once_leave_whole_entries_under_the_cap(tmp_path: Path) -> None:
    cap = 40_000
    ctx = mp.get_context("spawn")  # two servers: nothing shared but the directory
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), who, 60, cap)) for who in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    names = sorted(os.listdir(tmp_path))
    assert names and not [n for n in names if n.startswith(".tmp-")]
    for n in names:
        body = json.loads((tmp_path / n).read_bytes())  # every entry whole: no torn write
        assert n == body["name"] + ".json"
    DiskCache(str(tmp_path), max_bytes=cap).evict()
    # The cap holds once both are done (racing evictions may leave it briefly over, never torn).
    assert DiskCache(str(tmp_path), max_bytes=cap).size() <= cap


def test_the_tab_bounds_its_disk_cache(serve, two_runs, tmp_path: Path) -> None:
    s = serve(two_runs, cache_dir=str(tmp_path / "sizes"))
    s.settle()
    sizes = sorted(os.path.getsize(tmp_path / "sizes" / n) for n in os.listdir(tmp_path / "sizes"))
    assert len(sizes) == 2
    # A cap that holds the bigger entry only: after both runs, one entry is left.
    capped = AnalysisCache(None, str(tmp_path / "capped"), max_bytes=sizes[1] + 10)
    s2 = Served(MfuPlugin(make_context(str(two_runs), cache_dir=str(tmp_path / "capped")), cache=capped))
    s2.settle()
    left = os.listdir(tmp_path / "capped")
    assert len(left) == 1 and os.path.getsize(tmp_path / "capped" / left[0]) <= sizes[1] + 10
    assert {r["name"] for r in s2.json("/runs")["runs"]} == {RUN_A, RUN_B}
