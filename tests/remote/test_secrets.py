"""Secrets of the storage options file never appear in reports, error messages, logs, the
tab's responses or cache files, even when a store's own error message quotes one."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from s3_server import KEY_ID, SECRET, Bucket

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.trace.locate.listing import discover
from tb_mfu_plugin.trace.locate.locations import Location

from .scenarios import cli, texts_a_user_sees


def test_secrets_stay_out_of_reports_logs_tab_and_cache(
    bucket: Bucket, logdir: Path, serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    seen = texts_a_user_sees(bucket, logdir, serve, tmp_path / "cache", caplog)
    for text in seen:
        assert SECRET not in text and KEY_ID not in text


def test_a_store_error_quoting_a_secret_is_blanked(bucket: Bucket, serve, caplog: pytest.LogCaptureFixture):
    # botocore quotes a bad region name in its error: here the region is the secret itself
    options = json.loads(bucket.options_file.read_text())
    options[bucket.url()]["client_kwargs"] = {"region_name": SECRET}
    bucket.options_file.write_text(json.dumps(options))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TraceError) as exc:
        discover(Location.parse(bucket.url("logs")))
    assert "***" in str(exc.value) and SECRET not in str(exc.value)
    out = cli("analyze", bucket.url("logs"))
    assert out.returncode == 2 and "***" in out.stderr
    s = serve(bucket.url("logs"))
    s.settle()
    errors = s.json("/runs")["errors"]
    assert len(errors) == 1 and "***" in errors[0]
    for text in (str(exc.value), out.stdout, out.stderr, json.dumps(errors), caplog.text):
        assert SECRET not in text


def test_a_password_in_a_url_is_refused_and_not_echoed():
    with pytest.raises(TraceError) as exc:
        Location.parse("https://alice:hunter22@files.example/logs/")
    assert "hunter22" not in str(exc.value) and "storage options file" in str(exc.value)
    out = cli("analyze", "https://alice:hunter22@127.0.0.1:9/logs/")
    assert out.returncode == 2 and "hunter22" not in out.stderr + out.stdout


def test_a_bad_options_file_is_named_and_not_quoted(tmp_path: Path):
    bad = tmp_path / "opts.json"
    bad.write_text('{"s3://b/": {"secret": "' + SECRET + '",}')  # a trailing comma: not JSON
    out = cli("analyze", "s3://b/logs", "--storage-options", str(bad))
    assert out.returncode == 2
    assert out.stderr.strip() == f"tb-mfu: {bad}: storage options file is not valid JSON (line 1)"
    assert SECRET not in out.stderr
