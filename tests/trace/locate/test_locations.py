"""Locations (a path, a URL, an archive member) as one parsed value, and the storage options file."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.trace.locate.locations import Location
from tb_mfu_plugin.trace.remote import remote, storage

MEMBER = "zip://run_a/rank0.1.pt.trace.json.gz::s3://bucket/team.zip"
SIGNED = (
    "https://acct.blob.example/logs/run42/rank0.1.pt.trace.json.gz"
    "?X-Amz-Credential=AKIA/20260101/us-east-1/s3/aws4_request&X-Amz-Signature=abc#frag"
)


def parse(text: str) -> Location:
    return Location.parse(text)


def test_kinds_of_location():
    assert parse("/logs/run").is_local and not parse("/logs/run").is_url
    assert parse("s3://b/logs").is_url and parse("https://h/logs/").is_url and parse(MEMBER).is_url
    local_member = parse("zip://a/b.json::/local/team.zip")
    assert not local_member.is_url and not local_member.is_local
    assert parse("file:///logs/my%20run").text == "/logs/my run" and parse("file:///logs/my%20run").is_local
    assert parse("/x/team.tar.gz").archive_kind == "tar" and parse("s3://b/t.zip").archive_kind == "zip"
    assert parse("/x/rank0.pt.trace.json.gz").archive_kind is None and parse(MEMBER).archive_kind is None
    assert parse("https://h/t.tgz?sig=x").archive_kind == "tar"  # the query is not the name
    assert (parse("S3://b/x").scheme, parse(MEMBER).scheme, parse("/x").scheme) == ("s3", "zip", None)
    assert (parse("/x").kind, parse("gs://b/x").kind, parse(MEMBER).kind) == ("local", "url", "member")


def test_member_locations_round_trip():
    loc = parse(MEMBER)
    m = loc.member
    assert m is not None and (m.kind, m.name, m.archive.text) == (
        "zip",
        "run_a/rank0.1.pt.trace.json.gz",
        "s3://bucket/team.zip",
    )
    assert m.archive.is_url and m.archive == parse("s3://bucket/team.zip")
    assert Location.of_member(m.kind, m.name, m.archive) == loc and loc.text == MEMBER
    assert loc.basename == "rank0.1.pt.trace.json.gz"
    assert loc.parent().text == "zip://run_a::s3://bucket/team.zip" and loc.parent().member is not None
    assert loc.parent().join("tb_mfu.json").text == "zip://run_a/tb_mfu.json::s3://bucket/team.zip"
    assert parse("zip://::/x/t.zip").join("tb_mfu.json").text == "zip://tb_mfu.json::/x/t.zip"
    # a member of a file:// archive names the archive as a local path, as a listing of it would
    assert parse("tar://a/b.json::file:///x/t.tar").text == "tar://a/b.json::/x/t.tar"


def test_url_parents_and_names():
    url = parse("s3://bucket/team/run42/rank0.1.pt.trace.json.gz")
    assert url.parent().text == "s3://bucket/team/run42" and url.basename == "rank0.1.pt.trace.json.gz"
    assert url.parent().is_url and url.parent().scheme == "s3"
    assert parse("s3://bucket/team/run42").join("tb_mfu.json").text == "s3://bucket/team/run42/tb_mfu.json"
    assert parse("https://h/logs/x.pt.trace.json.gz?sig=abc").basename == "x.pt.trace.json.gz"
    assert parse("/logs/run/x.json").parent().text == "/logs/run" and parse("x.json").parent().text == "."
    assert parse("s3://bucket/").parent().text == "s3://bucket/"  # a bucket's root has no parent
    assert parse("s3://b/logs/").stripped().text == "s3://b/logs" and parse("/x/").stripped().text == "/x/"


def test_signed_urls_parent_drops_the_query_and_join_keeps_the_folder():
    loc = parse(SIGNED)
    assert loc.basename == "rank0.1.pt.trace.json.gz"
    folder = loc.parent()
    assert folder.text == "https://acct.blob.example/logs/run42"  # the signature names this object only
    assert folder.join("tb_mfu.json").text == "https://acct.blob.example/logs/run42/tb_mfu.json"
    assert folder.join("tb_mfu.json").basename == "tb_mfu.json"


def test_text_round_trips_and_locations_compare_by_it():
    for text in ("/logs/run a/x.json", "s3://b/x.json", SIGNED, MEMBER, "tar://r/w.json::/x/t.tar.gz", "rel/x.json"):
        loc = parse(text)
        assert loc.text == str(loc) == text and parse(loc.text) == loc and hash(parse(text)) == hash(loc)
    assert Location.local("/x") == parse("file:///x") and parse("/a") < parse("/b")


def test_locations_pickle_whole():
    """Workers get their file's location by pickling (processes, Dask): it must arrive whole,
    member and archive included, with nothing to parse there."""
    for text in ("/logs/x.json", SIGNED, MEMBER, "zip://a/b.json::/local/team.zip"):
        loc = parse(text)
        back = pickle.loads(pickle.dumps(loc))
        assert back == loc and (back.kind, back.scheme, back.path, back.member) == (
            loc.kind,
            loc.scheme,
            loc.path,
            loc.member,
        )


def test_a_password_in_a_url_is_refused_and_blanked():
    with pytest.raises(TraceError) as exc:
        parse("https://alice:hunter22@files.example/logs/")
    assert "hunter22" not in str(exc.value) and "***" in str(exc.value)
    assert parse("https://alice@files.example/logs/").text == "https://alice@files.example/logs/"
    with pytest.raises(TraceError) as exc:  # the archive of a member is parsed as strictly
        parse("zip://a.json::https://alice:hunter22@files.example/t.zip")
    assert "hunter22" not in str(exc.value) and "***" in str(exc.value)


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
        remote.filesystem(parse("nope://x/y"))
