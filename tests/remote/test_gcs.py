"""Logdirs in a bucket of a real GCS JSON API on loopback (gcp-storage-emulator, in memory),
reached through a storage options file: the CLI and the tab read them as they read a local
folder, with the same numbers, field for field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from located import reports_at, runs_by_name

pytest.importorskip("gcsfs", reason="the GCS tests need the [gcs] extra (gcsfs)")
pytest.importorskip("gcp_storage_emulator", reason="the GCS tests need gcp-storage-emulator")

import gcsfs.core  # noqa: E402
from gcs_server import GCS_VARS_CLEARED, GcsBucket, GcsServer, closed_port_endpoint  # noqa: E402

from tb_mfu_plugin.analysis.report import to_json  # noqa: E402
from tb_mfu_plugin.core.errors import TraceError  # noqa: E402
from tb_mfu_plugin.running.pipeline import analyze_path  # noqa: E402
from tb_mfu_plugin.trace.locate.listing import discover, identity  # noqa: E402
from tb_mfu_plugin.trace.locate.locations import Location
from tb_mfu_plugin.trace.remote.remote import filesystem  # noqa: E402

from .conftest import RUNS  # noqa: E402
from .scenarios import check_tab_mixes_it_with_local, cli, open_twice_unchanged  # noqa: E402


@pytest.fixture(scope="module")
def gcs_server() -> Iterator[GcsServer]:
    server = GcsServer()
    yield server
    server.stop()


@pytest.fixture
def gcs(gcs_server: GcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GcsBucket]:
    """A bucket reached only through a storage options file named by $TB_MFU_STORAGE_OPTIONS
    (no $STORAGE_EMULATOR_HOST, no key file: the product's own options path)."""
    for var in GCS_VARS_CLEARED:
        monkeypatch.delenv(var, raising=False)
    options = tmp_path / "storage_options.json"
    b = GcsBucket(gcs_server, options)
    monkeypatch.setenv("TB_MFU_STORAGE_OPTIONS", str(options))
    yield b
    gcsfs.core.GCSFileSystem.clear_instance_cache()


def test_cli_analyze_gs_equals_the_local_run(gcs: GcsBucket, logdir: Path):
    gcs.upload_dir(logdir, "team/logs")
    out = cli("analyze", gcs.url("team/logs"), "--json")
    assert out.returncode == 0, out.stderr
    remote = runs_by_name(json.loads(out.stdout), gcs.url("team/logs"))
    assert sorted(remote) == sorted(RUNS)
    assert all(not w["error"] for r in remote.values() for w in r["workers"])
    assert remote == reports_at(logdir)
    # the run's sidecar was read from the bucket too
    flops = remote[RUNS[0]]["workers"][0]["flops"]
    assert flops["user_flops_source"] == f"test sidecar (<root>/{RUNS[0]}/tb_mfu.json)"
    assert gcs.downloads(), "the traces came from the emulator"


def test_cli_compare_gs_run_with_a_local_run(gcs: GcsBucket, logdir: Path):
    a, b = RUNS[0], RUNS[1]
    gcs.upload_dir(logdir / a, f"logs/{a}")
    remote = cli("compare", gcs.url(f"logs/{a}/"), str(logdir / b), "--json")
    local = cli("compare", str(logdir / a), str(logdir / b), "--json")
    assert remote.returncode == local.returncode == 0, remote.stderr
    r = json.loads(remote.stdout.replace(gcs.url("logs"), "<root>").replace(str(logdir), "<root>"))
    assert r["ranks"][0]["baseline"]["file"].startswith(f"<root>/{a}/")
    assert r == json.loads(local.stdout.replace(str(logdir), "<root>"))


def test_one_trace_object_named_directly(gcs: GcsBucket, logdir: Path):
    f = next((logdir / RUNS[0]).glob("*.pt.trace.json.gz"))
    gcs.upload_dir(logdir / RUNS[0], "x")  # the trace and its sidecar
    remote = runs_by_name(to_json(analyze_path(gcs.url(f"x/{f.name}"))), gcs.url("x"))
    assert remote[f.name]["workers"][0]["file"] == f"<root>/{f.name}"
    assert remote == runs_by_name(to_json(analyze_path(str(f))), str(f.parent))


def test_an_endpoint_takes_the_json_api_file_system(gcs: GcsBucket, monkeypatch: pytest.MonkeyPatch):
    """gcsfs's default gs:// class asks a gRPC API, which no emulator or gateway has, for 60 s
    on every call: a configured endpoint (options file or $STORAGE_EMULATOR_HOST) avoids it."""
    fs, path = filesystem(Location.parse(gcs.url("logs")))
    assert type(fs) is gcsfs.core.GCSFileSystem and path == f"{gcs.name}/logs"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.server.endpoint)
    fs, path = filesystem(Location.parse("gs://elsewhere/logs"))
    assert type(fs) is gcsfs.core.GCSFileSystem and path == "elsewhere/logs"


def test_missing_bucket_and_object_are_one_line_errors(gcs: GcsBucket):
    out = cli("analyze", gcs.url("nothing/here"))
    assert out.returncode == 2
    assert out.stderr.strip() == f"tb-mfu: {gcs.url('nothing/here')}: no such folder or file"
    with pytest.raises(TraceError, match=r"x.pt.trace.json.gz: not found$"):
        discover(Location.parse(gcs.url("nothing/x.pt.trace.json.gz")))
    # a bucket the emulator does not have, reached through the same options
    gone = "gs://no-such-bucket/logs"
    gcs.options["gs://no-such-bucket/"] = {"endpoint_url": gcs.server.endpoint, "token": "anon"}
    gcs.write_options()
    out = cli("analyze", gone)
    assert out.returncode == 2
    assert out.stderr.strip() == f"tb-mfu: {gone}: no such folder or file"


def test_unreachable_endpoint_is_one_line_without_a_traceback(gcs: GcsBucket):
    url = "gs://far-away/logs"
    gcs.options["gs://far-away/"] = {"endpoint_url": closed_port_endpoint(), "token": "anon"}
    gcs.write_options()
    out = cli("analyze", url)  # gcsfs retries a refused connection 6 times before it gives up
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith(f"tb-mfu: {url}: cannot reach the server (ClientConnectorError: ")


def test_identity_is_the_content_hash_else_the_generation():
    listed = {"generation": "1796", "metageneration": "2", "etag": "CJ+5/Pj0+/oCEAI=", "md5Hash": "VinD==", "size": 19}
    assert identity(listed) == "md5Hash:VinD=="
    # a composite object (parallel composite upload) has no md5Hash: its generation says it all
    composite = {k: v for k, v in listed.items() if k != "md5Hash"}
    assert identity(composite) == "generation:1796"


# -- the tab ----------------------------------------------------------------------------


def test_tab_reads_a_gs_logdir(gcs: GcsBucket, logdir: Path, serve):
    gcs.upload_dir(logdir, "logs")
    s = serve(gcs.url("logs"))
    s.settle()
    body = s.json("/runs")
    assert body["errors"] == []
    assert [r["name"] for r in body["runs"]] == sorted(RUNS)
    assert all(r["state"] == "ready" for r in body["runs"])
    expected = reports_at(logdir)
    for run in RUNS:
        report = s.json(f"/report?run={quote(run)}")
        assert runs_by_name({"runs": [report]}, gcs.url("logs"))[run] == expected[run]


def test_tab_mixes_a_gs_logdir_with_a_local_one(gcs: GcsBucket, logdir: Path, serve):
    check_tab_mixes_it_with_local(gcs, logdir, serve)


def test_unchanged_bucket_costs_no_downloads_on_the_second_open(gcs: GcsBucket, logdir: Path, serve, tmp_path):
    cache = tmp_path / "cache"
    got = open_twice_unchanged(gcs, logdir, serve, cache)
    # the same bytes uploaded again: a new generation, the same md5Hash: still nothing downloaded
    f = next((logdir / RUNS[0]).glob("*.pt.trace.json.gz"))
    key = f"logs/{RUNS[0]}/{f.name}"
    before = gcs.info(key)
    gcs.put(key, f.read_bytes())
    after = gcs.info(key)
    assert after["generation"] != before["generation"] and after["md5Hash"] == before["md5Hash"]
    third = serve(gcs.url("logs"), cache_dir=str(cache))
    third.settle()
    assert len(gcs.downloads()) == got
    # other bytes under the same name (a new md5Hash): that object alone is downloaded again
    other = next((logdir / RUNS[1]).glob("*.pt.trace.json.gz"))
    gcs.put(key, other.read_bytes())
    fourth = serve(gcs.url("logs"), cache_dir=str(cache))
    fourth.settle()
    assert all(r["state"] == "ready" for r in fourth.json("/runs")["runs"])
    # that object alone, with the sidecar its analysis reads (RUNS[0] has one); no other run
    again = gcs.downloads()[got:]
    assert key in again
    assert set(again) <= {key, f"logs/{RUNS[0]}/tb_mfu.json"}
