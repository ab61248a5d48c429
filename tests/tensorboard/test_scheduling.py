"""Which files the tab's analysis threads take: remote files never take all of them, so a
local run is analysed at once beside remote sources that are slow (issue 22, section 4)."""

from __future__ import annotations

import threading
from pathlib import Path

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.tensorboard.cache import DONE, LOADING, QUEUED, AnalysisCache
from tb_mfu_plugin.tensorboard.file_queue import FileQueue, remote_slots
from tb_mfu_plugin.trace.locate.discover import SpanFile
from tb_mfu_plugin.trace.locate.locations import Location

from .conftest import sample_file, wait_idle


def test_remote_files_are_urls_and_members_of_remote_archives():
    """The cache's queue sends a key to the remote lane by its location's ``is_url``."""

    def is_remote_file(text: str) -> bool:
        return Location.parse(text).is_url

    assert is_remote_file("http://h/logs/run/w.1.pt.trace.json.gz")
    assert is_remote_file("s3://b/run/w.1.pt.trace.json.gz")
    assert is_remote_file("zip://run/w.1.pt.trace.json.gz::s3://b/team.zip")
    assert not is_remote_file("/logs/run/w.1.pt.trace.json.gz")
    assert not is_remote_file("zip://run/w.1.pt.trace.json.gz::/logs/team.zip")
    assert [remote_slots(n) for n in (1, 2, 3, 8)] == [1, 1, 2, 7]


def test_the_queue_keeps_a_lane_for_local_keys():
    q: FileQueue[str] = FileQueue(lambda k: k.startswith("r"), slots=1)
    for key in ("r1", "r2", "r3"):
        q.put(0, key)
    q.put(2, "local")  # asked for later, and with a lower priority than the remote ones
    assert q.get() == "r1"
    assert q.get() == "local"  # r2 would be a second remote key out: it waits
    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    t.join(0.2)
    assert t.is_alive() and not got  # nothing it may take: it waits
    q.done("r1")
    t.join(5)
    assert got == ["r2"] and q.remote_running() == 1


def test_slow_remote_files_leave_a_worker_to_the_local_run(tmp_path: Path):
    """Three remote files that never end (as a server trickling a byte a second) held both
    workers, and the local run waited for ever. Now they hold one; the local run is analysed
    at once, with the figures it has alone."""
    released = threading.Event()
    started: list[Location] = []

    def analyze(span, worker, options, progress):  # type: ignore[no-untyped-def]
        if span.path.text.startswith("http://"):
            started.append(span.path)
            assert released.wait(60)
            return []
        return analyze_file(span, worker, options, progress)

    cache = AnalysisCache(AnalysisOptions(), None, 2, analyze=analyze)
    remote = [
        cache.key(
            SpanFile("1", Location.parse(f"http://127.0.0.1:9/slow/r{i}/w.1.pt.trace.json.gz"), 100, 0.0), f"r{i}", "w"
        )
        for i in range(3)
    ]
    for key in remote:
        cache.request(key, priority=0)
    src = sample_file()
    local = cache.key(SpanFile("", Location.local(str(src)), src.stat().st_size, src.stat().st_mtime), "good", "rank0")
    try:
        st = cache.request(local, priority=2)
        deadline = threading.Event()
        for _ in range(600):
            if st.state == DONE:
                break
            deadline.wait(0.1)
        assert st.state == DONE and not st.errors()
        assert len(started) == 1
        assert sorted(cache.get(k).state for k in remote) == [LOADING, QUEUED, QUEUED]  # type: ignore[union-attr]
        alone = analyze_file(
            SpanFile("", Location.local(str(src)), src.stat().st_size, src.stat().st_mtime), "rank0", AnalysisOptions()
        )
        assert to_json(st.reports) == to_json(alone)
    finally:
        released.set()
        assert wait_idle(cache, 60)
    assert len(started) == 3
