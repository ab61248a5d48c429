"""Logdirs in a bucket of a real S3 API on loopback (moto's server): the CLI and the tab
read them as they read a local folder, with the same numbers, field for field."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest
from located import reports_at, runs_by_name

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.locate.listing import discover
from tb_mfu_plugin.trace.locate.locations import Location

from .conftest import RUNS, Bucket
from .scenarios import check_tab_mixes_it_with_local, cli, open_twice_unchanged

PLUGIN_PREFIX = "/data/plugin/mfu"


def by_run(doc: dict, root: str) -> dict[str, dict]:
    return runs_by_name(doc, root)


def local_reports(logdir: Path) -> dict[str, dict]:
    return reports_at(logdir)


def test_cli_analyze_s3_equals_the_local_run(bucket: Bucket, logdir: Path):
    bucket.upload_dir(logdir, "team/logs")
    out = cli("analyze", bucket.url("team/logs"), "--json")
    assert out.returncode == 0, out.stderr
    remote = by_run(json.loads(out.stdout), bucket.url("team/logs"))
    assert sorted(remote) == sorted(RUNS)
    assert all(not w["error"] for r in remote.values() for w in r["workers"])
    assert remote == local_reports(logdir)
    # the run's sidecar was read from the bucket too
    flops = remote[RUNS[0]]["workers"][0]["flops"]
    assert flops["user_flops_source"] == f"test sidecar (<root>/{RUNS[0]}/tb_mfu.json)"


def test_cli_compare_two_urls_equals_the_local_compare(bucket: Bucket, logdir: Path):
    bucket.upload_dir(logdir, "logs")
    a, b = RUNS[0], RUNS[1]
    remote = cli("compare", bucket.url(f"logs/{a}"), bucket.url(f"logs/{b}/"), "--json")
    local = cli("compare", str(logdir / a), str(logdir / b), "--json")
    assert remote.returncode == local.returncode == 0, remote.stderr
    r = json.loads(remote.stdout.replace(bucket.url("logs"), "<root>"))
    assert r["ranks"][0]["baseline"]["file"].startswith(f"<root>/{a}/")
    assert r == json.loads(local.stdout.replace(str(logdir), "<root>"))


def test_progress_follows_the_decoded_bytes_as_for_local_files(bucket: Bucket, logdir: Path):
    """The CLI's bar over a bucket: from 0 to the decoded size of every object (gzip's ISIZE,
    read with one 4-byte range), never backwards, as for the same local files."""
    from tb_mfu_plugin.trace.locate.files import uncompressed_size

    bucket.upload_dir(logdir / "ddp_2gpu", "ddp")
    calls: list[tuple[str, str, int, int]] = []
    analyze_path(bucket.url("ddp"), progress=lambda *a: calls.append(a))
    files = sorted((logdir / "ddp_2gpu").glob("*.pt.trace.json.gz"))
    total = sum(uncompressed_size(str(f), f.stat().st_size) for f in files)
    assert {c[3] for c in calls} == {total}
    done = [c[2] for c in calls]
    assert done[0] == 0 and done[-1] == total and done == sorted(done)


def test_one_trace_object_named_directly(bucket: Bucket, logdir: Path):
    f = next((logdir / RUNS[0]).glob("*.pt.trace.json.gz"))
    bucket.upload_dir(logdir / RUNS[0], "x")  # the trace and its sidecar
    remote = runs_by_name(to_json(analyze_path(bucket.url(f"x/{f.name}"))), bucket.url("x"))
    assert remote[f.name]["workers"][0]["file"] == f"<root>/{f.name}"
    assert remote == runs_by_name(to_json(analyze_path(str(f))), str(f.parent))


def test_a_zip_in_the_bucket_is_a_logdir(bucket: Bucket, logdir: Path, tmp_path: Path):
    import zipfile

    arc = tmp_path / "team.zip"
    with zipfile.ZipFile(arc, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(p for p in logdir.rglob("*") if p.is_file()):
            zf.write(f, f.relative_to(logdir).as_posix())
    bucket.put("shared/team.zip", arc.read_bytes())
    remote = reports_at(bucket.url("shared/team.zip"))
    assert remote[RUNS[0]]["workers"][0]["file"].startswith(f"<root>/{RUNS[0]}/rank0.")
    assert remote == local_reports(logdir)


def test_missing_bucket_and_key_are_one_line_errors(bucket: Bucket):
    out = cli("analyze", bucket.url("nothing/here"))
    assert out.returncode == 2
    assert out.stderr.strip() == f"tb-mfu: {bucket.url('nothing/here')}: no such folder or file"
    with pytest.raises(TraceError, match=r"x.pt.trace.json.gz: not found$"):
        discover(Location.parse(bucket.url("nothing/x.pt.trace.json.gz")))
    # a bucket that no storage options reach, with no AWS credentials anywhere
    with pytest.raises(TraceError, match="no credentials found .* storage options file"):
        discover(Location.parse(f"s3://other-bucket-{os.getpid()}/logs"))


@pytest.mark.parametrize(
    ("url", "package", "extra"), [("gs://bucket/logs", "gcsfs", "gcs"), ("az://box/logs", "adlfs", "azure")]
)
def test_missing_extra_names_it(url: str, package: str, extra: str):
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    out = cli("analyze", url)
    assert out.returncode == 2
    proto = url.split(":")[0]
    assert out.stderr.strip() == (
        f"tb-mfu: {url}: {proto}:// needs {package}, which is not installed: pip install 'tb_mfu_plugin[{extra}]'"
    )


def test_listing_1000_objects_is_one_bounded_pass(bucket: Bucket):
    body = b'{"traceEvents": []}'
    for i in range(1000):
        bucket.put(f"many/run{i % 10}/rank{i}.1.pt.trace.json", body)
    before = len(bucket.server.requests)
    t0 = time.monotonic()
    runs = discover(Location.parse(bucket.url("many")))
    took = time.monotonic() - t0
    assert sum(len(r.files) for r in runs) == 1000 and len(runs) == 10
    assert all(f.ident.startswith("ETag:") and f.size == len(body) for r in runs for f in r.files)
    listing = bucket.server.requests[before:]
    # one paged recursive listing (1,000 keys a page), not a request per folder or per object
    assert len(listing) <= 3, listing
    assert bucket.downloads() == []
    assert took < 60  # the listing's own deadline is 120 s ($TB_MFU_LIST_TIMEOUT)


def test_listing_gives_up_at_its_deadline(bucket: Bucket, monkeypatch: pytest.MonkeyPatch):
    import s3fs

    def slow_find(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(30)

    monkeypatch.setattr(s3fs.S3FileSystem, "find", slow_find)
    monkeypatch.setenv("TB_MFU_LIST_TIMEOUT", "0.5")
    t0 = time.monotonic()
    with pytest.raises(TraceError, match=r"listing took longer than 0.5 s \(\$TB_MFU_LIST_TIMEOUT raises it\)"):
        discover(Location.parse(bucket.url("logs")))
    assert time.monotonic() - t0 < 5


# -- the tab ----------------------------------------------------------------------------


def test_tab_reads_s3_logdir_and_mixes_it_with_local(bucket: Bucket, logdir: Path, serve):
    check_tab_mixes_it_with_local(bucket, logdir, serve)


def test_unchanged_bucket_costs_no_downloads_on_the_second_open(bucket: Bucket, logdir: Path, serve, tmp_path):
    cache = tmp_path / "cache"
    got = open_twice_unchanged(bucket, logdir, serve, cache)
    # the same bytes uploaded again: a new LastModified, the same ETag: still nothing downloaded
    f = next((logdir / RUNS[0]).glob("*.pt.trace.json.gz"))
    bucket.put(f"logs/{RUNS[0]}/{f.name}", f.read_bytes())
    third = serve(bucket.url("logs"), cache_dir=str(cache))
    third.settle()
    assert len(bucket.downloads()) == got
    # other bytes under the same key (a new ETag): that object alone is downloaded again
    other = next((logdir / RUNS[1]).glob("*.pt.trace.json.gz"))
    bucket.put(f"logs/{RUNS[0]}/{f.name}", other.read_bytes())
    fourth = serve(bucket.url("logs"), cache_dir=str(cache))
    fourth.settle()
    # that object alone, with the sidecar its analysis reads (RUNS[0] has one); no other run
    again = bucket.downloads()[got:]
    assert f"/{bucket.name}/logs/{RUNS[0]}/{f.name}" in again
    assert set(again) <= {f"/{bucket.name}/logs/{RUNS[0]}/{f.name}", f"/{bucket.name}/logs/{RUNS[0]}/tb_mfu.json"}
    assert len(bucket.downloads()) > got
