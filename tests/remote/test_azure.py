"""Logdirs in a container of a real Azure Blob API on loopback (Azurite, Microsoft's emulator,
pinned in tests/emulators): the CLI and the tab read ``az://`` and ``abfs://`` as they read a
local folder, with the same numbers, field for field; the account key, which is only in the
storage options file, shows nowhere."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from azurite_server import ACCOUNT, ACCOUNT_KEY, AZURE_VARS_CLEARED, AzuriteServer, Container, azurite_path
from located import reports_at, runs_by_name

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.locate.listing import discover
from tb_mfu_plugin.trace.locate.locations import Location

from .conftest import RUNS
from .scenarios import check_tab_mixes_it_with_local, cli, open_twice_unchanged, texts_a_user_sees

pytest.importorskip("adlfs", reason="the Azure tests need the [azure] extra (adlfs)")


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteServer]:
    exe = azurite_path()
    if exe is None:
        pytest.skip("Azurite is not installed: needs node and `npm ci` in tests/emulators")
    server = AzuriteServer(exe, tmp_path_factory.mktemp("azurite"))
    yield server
    server.stop()


@pytest.fixture
def container(azurite: AzuriteServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Container]:
    """A container reached through a storage options file named by $TB_MFU_STORAGE_OPTIONS,
    with no Azure credentials in the environment (the file is the only place they are)."""
    import adlfs

    for var in AZURE_VARS_CLEARED:
        monkeypatch.delenv(var, raising=False)
    options = tmp_path / "storage_options.json"
    c = Container(azurite, options)
    monkeypatch.setenv("TB_MFU_STORAGE_OPTIONS", str(options))
    yield c
    adlfs.AzureBlobFileSystem.clear_instance_cache()


@pytest.mark.parametrize("protocol", ["az", "abfs"])
def test_cli_analyze_az_equals_the_local_run(container: Container, logdir: Path, protocol: str):
    container.upload_dir(logdir, "team/logs")
    url = container.url("team/logs", protocol)
    out = cli("analyze", url, "--json")
    assert out.returncode == 0, out.stderr
    remote = runs_by_name(json.loads(out.stdout), url)
    assert sorted(remote) == sorted(RUNS)
    assert all(not w["error"] for r in remote.values() for w in r["workers"])
    assert remote == reports_at(logdir)
    # the run's sidecar was read from the container too
    flops = remote[RUNS[0]]["workers"][0]["flops"]
    assert flops["user_flops_source"] == f"test sidecar (<root>/{RUNS[0]}/tb_mfu.json)"
    assert container.downloads()  # read from Azurite, not from somewhere else


def test_listing_keeps_each_blob_etag_and_size(container: Container, logdir: Path):
    container.upload_dir(logdir, "logs")
    runs = discover(Location.parse(container.url("logs")))
    files = [f for r in runs for f in r.files]
    assert len(files) >= 4
    for f in files:
        blob = container.client.get_blob_client(f.path.text.removeprefix(container.url())).get_blob_properties()
        assert f.size == blob.size and f.ident == f"etag:{blob.etag.strip(chr(34))}"
    assert container.downloads() == []  # a listing reads no blob


def test_one_trace_blob_named_directly(container: Container, logdir: Path):
    f = next((logdir / RUNS[0]).glob("*.pt.trace.json.gz"))
    container.upload_dir(logdir / RUNS[0], "x")  # the trace and its sidecar
    remote = runs_by_name(to_json(analyze_path(container.url(f"x/{f.name}"))), container.url("x"))
    assert remote[f.name]["workers"][0]["file"] == f"<root>/{f.name}"
    assert remote == runs_by_name(to_json(analyze_path(str(f))), str(f.parent))


def test_missing_container_and_folder_are_one_line_errors(container: Container, azurite: AzuriteServer):
    missing = f"az://no-such-container-{os.getpid()}/logs"
    options = json.loads(container.options_file.read_text())
    options["az://"] = {"connection_string": azurite.connection_string}
    container.write_options(options)
    for url in (missing, container.url("nothing/here")):
        out = cli("analyze", url)
        assert out.returncode == 2
        assert out.stderr.strip() == f"tb-mfu: {url}: no such folder or file"
    with pytest.raises(TraceError, match=r"x.pt.trace.json.gz: not found$"):
        discover(Location.parse(container.url("nothing/x.pt.trace.json.gz")))


# -- the tab ----------------------------------------------------------------------------


def test_tab_reads_az_logdir_and_mixes_it_with_local(container: Container, logdir: Path, serve):
    check_tab_mixes_it_with_local(container, logdir, serve)


def test_unchanged_container_costs_no_downloads_on_the_second_open(
    container: Container, logdir: Path, serve, tmp_path: Path
):
    cache = tmp_path / "cache"
    got = open_twice_unchanged(container, logdir, serve, cache)
    # a blob written again (Azure gives every write a new ETag, even of the same bytes):
    # that blob alone is downloaded again, with the sidecar its analysis reads; no other run
    f = next((logdir / RUNS[0]).glob("*.pt.trace.json.gz"))
    other = next((logdir / RUNS[1]).glob("*.pt.trace.json.gz"))
    container.put(f"logs/{RUNS[0]}/{f.name}", other.read_bytes())
    third = serve(container.url("logs"), cache_dir=str(cache))
    third.settle()
    again = container.downloads()[got:]
    blob = f"/{ACCOUNT}/{container.name}/logs/{RUNS[0]}"
    assert f"{blob}/{f.name}" in again
    assert set(again) <= {f"{blob}/{f.name}", f"{blob}/tb_mfu.json"}


def test_account_key_stays_out_of_reports_logs_tab_and_cache(
    container: Container, logdir: Path, serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    seen = texts_a_user_sees(container, logdir, serve, tmp_path / "cache", caplog, "--json")
    for text in seen:
        assert ACCOUNT_KEY not in text and "AccountKey" not in text


def test_a_wrong_account_key_is_access_denied_in_one_line_without_the_key(
    container: Container, azurite: AzuriteServer, serve
):
    wrong = base64.b64encode(b"another account key, also never printed").decode()
    options = {container.url(): {"connection_string": azurite.connection_string.replace(ACCOUNT_KEY, wrong)}}
    container.write_options(options)
    out = cli("analyze", container.url("logs"))
    assert out.returncode == 2
    # the SDK's reason and error code; not its request id, time and XML body
    assert out.stderr.strip() == (
        f"tb-mfu: {container.url('logs')}: access denied (Server failed to authenticate the request. Make sure "
        "the value of the Authorization header is formed correctly including the signature. (AuthorizationFailure))"
    )
    s = serve(container.url("logs"))
    s.settle()
    errors = s.json("/runs")["errors"]
    assert len(errors) == 1 and "access denied" in errors[0]
    for text in (out.stdout, out.stderr, json.dumps(errors)):
        assert wrong not in text and ACCOUNT_KEY not in text


def test_no_account_anywhere_says_where_to_name_one(container: Container):
    container.write_options({})
    out = cli("analyze", container.url("logs"))
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"tb-mfu: {container.url('logs')}: no credentials found (environment, profile or instance role), "
        "or name them in a storage options file (--storage-options)"
    )
