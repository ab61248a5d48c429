"""Locations (a path, a URL, an archive member) as strings, and the storage options file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.trace.locate.locations import (
    archive_kind,
    basename,
    is_local,
    is_url,
    join,
    member_location,
    normalize,
    parent,
    parse_member,
)
from tb_mfu_plugin.trace.remote import storage

MEMBER = "zip://run_a/rank0.1.pt.trace.json.gz::s3://bucket/team.zip"


def test_kinds_of_location():
    assert is_local("/logs/run") and not is_url("/logs/run")
    assert is_url("s3://b/logs") and is_url("https://h/logs/") and is_url(MEMBER)
    assert not is_url("zip://a/b.json::/local/team.zip") and not is_local("zip://a/b.json::/local/team.zip")
    assert normalize("file:///logs/my%20run") == "/logs/my run"
    assert archive_kind("/x/team.tar.gz") == "tar" and archive_kind("s3://b/t.zip") == "zip"
    assert archive_kind("/x/rank0.pt.trace.json.gz") is None and archive_kind(MEMBER) is None


def test_member_locations_round_trip():
    m = parse_member(MEMBER)
    assert m is not None and (m.kind, m.name, m.archive) == (
        "zip",
        "run_a/rank0.1.pt.trace.json.gz",
        "s3://bucket/team.zip",
    )
    assert member_location(m.kind, m.name, m.archive) == MEMBER
    assert basename(MEMBER) == "rank0.1.pt.trace.json.gz"
    assert parent(MEMBER) == "zip://run_a::s3://bucket/team.zip"
    assert join(parent(MEMBER), "tb_mfu.json") == "zip://run_a/tb_mfu.json::s3://bucket/team.zip"
    assert join("zip://::/x/t.zip", "tb_mfu.json") == "zip://tb_mfu.json::/x/t.zip"


def test_url_parents_and_names():
    url = "s3://bucket/team/run42/rank0.1.pt.trace.json.gz"
    assert parent(url) == "s3://bucket/team/run42" and basename(url) == "rank0.1.pt.trace.json.gz"
    assert join("s3://bucket/team/run42", "tb_mfu.json") == "s3://bucket/team/run42/tb_mfu.json"
    assert basename("https://h/logs/x.pt.trace.json.gz?sig=abc") == "x.pt.trace.json.gz"
    assert parent("/logs/run/x.json") == "/logs/run" and parent("x.json") == "."


def test_a_password_in_a_url_is_refused_and_blanked():
    with pytest.raises(TraceError) as exc:
        normalize("https://alice:hunter22@files.example/logs/")
    assert "hunter22" not in str(exc.value) and "***" in str(exc.value)
    assert normalize("https://alice@files.example/logs/") == "https://alice@files.example/logs/"


@pytest.fixture
def options_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def write(text: str, suffix: str = ".json") -> Path:
        p = tmp_path / f"opts{suffix}"
        p.write_text(text)
        monkeypatch.setenv(storage.STORAGE_OPTIONS_ENV, str(p))
        return p

    yield write
    monkeypatch.delenv(storage.STORAGE_OPTIONS_ENV, raising=False)
    storage.use_storage_options(None)


def test_longest_prefix_wins_and_toml_works(options_file):  # type: ignore[no-untyped-def]
    options_file(json.dumps({"s3://": {"anon": True}, "s3://team/": {"profile": "team"}}))
    assert storage.options_for("s3://team/logs") == {"profile": "team"}
    assert storage.options_for("s3://other/logs") == {"anon": True}
    assert storage.options_for("gs://x/y") == {}
    options_file('["s3://team/"]\nkey = "AKIAEXAMPLEKEY"\nsecret = "s3cr3t-value"\n', ".toml")
    assert storage.options_for("s3://team/x") == {"key": "AKIAEXAMPLEKEY", "secret": "s3cr3t-value"}
    assert storage.redact("denied for AKIAEXAMPLEKEY with s3cr3t-value") == "denied for *** with ***"


def test_bad_options_files_are_named_not_quoted(options_file):  # type: ignore[no-untyped-def]
    p = options_file('{"s3://b/": {"secret": "s3cr3t-value",}}')
    with pytest.raises(TraceError) as exc:
        storage.options_for("s3://b/x")
    assert str(exc.value) == f"{p}: storage options file is not valid JSON (line 1)"
    p = options_file('{"bucket/": {"key": "x"}}')
    with pytest.raises(TraceError, match="is not a URL prefix"):
        storage.options_for("s3://b/x")
    p = options_file('["s3://b/"]')
    with pytest.raises(TraceError, match="must map URL prefixes to tables of options"):
        storage.options_for("s3://b/x")


def test_unknown_protocol_is_one_line():
    with pytest.raises(TraceError, match=r"unknown protocol nope:// \(fsspec knows no such file system\)"):
        storage.filesystem("nope://x/y")
