"""The pieces that hold remote logdirs to their origin and folder and keep credentials out of
what is shown, one by one (the probe in tests/probe runs them against hostile servers)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yarl

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.tensorboard import runs as runs_mod
from tb_mfu_plugin.tensorboard.runs import Scan, Source, scan_sources
from tb_mfu_plugin.trace.locate.locations import Location
from tb_mfu_plugin.trace.remote import storage
from tb_mfu_plugin.trace.remote.http_fs import Scope, inside, links_of
from tb_mfu_plugin.trace.remote.redact import redact_query, shown, shown_json

SIGNED_URLS = [
    # (a presigned URL, the values that must not show)
    (
        "https://b.s3.amazonaws.com/logs/rank0.1.pt.trace.json.gz?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAEXAMPLE%2F20300101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20300101T000000Z"
        "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token=FwoGZXIvYXdzEXAMPLE"
        "&X-Amz-Signature=0123456789abcdef0123456789abcdef",
        ("AKIAEXAMPLE", "FwoGZXIvYXdzEXAMPLE", "0123456789abcdef0123456789abcdef"),
    ),
    (
        "https://storage.googleapis.com/b/x.json.gz?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        "&X-Goog-Credential=svc%40p.iam.gserviceaccount.com%2F20300101%2Fauto%2Fstorage%2Fgoog4_request"
        "&X-Goog-Signature=deadbeefcafe",
        ("svc%40p.iam", "deadbeefcafe"),
    ),
    (
        "https://acct.blob.core.windows.net/c/x.json.gz?sv=2024-11-04&se=2030-01-01T00%3A00Z&sr=b&sp=r"
        "&sig=q8Zr2%2BAzureSig%3D",
        ("AzureSig", "2030-01-01T00"),
    ),
    (
        "https://d111.cloudfront.net/x.json.gz?Expires=1900000000&Signature=CFsig~abc&Key-Pair-Id=K2JCJMDEHXQW5F",
        ("CFsig", "K2JCJ"),
    ),
    ("http://h/x.json.gz?token=abc123&api_key=k-999", ("abc123", "k-999")),
]


@pytest.mark.parametrize(("url", "hidden"), SIGNED_URLS)
def test_signed_urls_show_without_their_signature(url: str, hidden: tuple[str, ...]):
    for text in (url, f"{url}: the server answered HTTP 403 (access denied)"):
        out = shown(text)
        assert "***" in out and not [h for h in hidden if h in out], out
        assert out.split("?")[0] == url.split("?")[0]  # the file is still named
    body = json.dumps({"file": url.replace("&", "\\u0026"), "runs": [url]}).encode()
    out_json = shown_json(body)
    assert not [h for h in hidden if h.encode() in out_json]
    json.loads(out_json)  # still JSON


def test_text_without_credentials_is_left_as_it_is():
    plain = b'{"name": "void at::native::(anonymous namespace)::k<T=float>", "file": "http://h/a?prefix=logs"}'
    assert shown_json(plain) is plain
    assert redact_query("http://h/logs/?prefix=run_a&delimiter=/") == "http://h/logs/?prefix=run_a&delimiter=/"


def test_every_option_value_is_blanked_from_errors_and_credentials_from_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    options = {
        "http://h/": {"headers": {"X-Api-Key": "k-1234567890", "Authorization": "Bearer tok-abcdefgh"}},
        "gs://b/": {"token": "anon", "endpoint_url": "http://10.0.0.7:4443", "project": "team"},
    }
    (tmp_path / "o.json").write_text(json.dumps(options))
    monkeypatch.setenv(storage.STORAGE_OPTIONS_ENV, str(tmp_path / "o.json"))
    # an error text: every value goes, whatever its name or length
    err = storage.redact(
        "401 (X-Api-Key: k-1234567890; Authorization: Bearer tok-abcdefgh) at http://10.0.0.7:4443 team"
    )
    assert "k-1234567890" not in err and "tok-abcdefgh" not in err and "10.0.0.7:4443" not in err and "team" not in err
    # all a face shows: the credentials go (the header values and the token in them), words stay
    text = "void (anonymous namespace)::k team k-1234567890 tok-abcdefgh"
    assert shown(text) == "void (anonymous namespace)::k team *** ***"


@pytest.mark.parametrize(
    "path",
    [
        "/logs/../secret/",
        "/logs/%2e%2e/secret/",
        "/logs/%2E%2E/secret/",
        "/logs/..%2fsecret/",
        "/logs/%252e%252e/secret/",
        "/logs/..\\secret/",
        "/logs/./x",
        "/secret/",
        "/logsx/",
        "/logs/a\x00b",
    ],
)
def test_paths_outside_the_folder_are_refused(path: str):
    assert not inside(path, "/logs/")


def test_paths_inside_the_folder_pass():
    assert inside("/logs", "/logs/") and inside("/logs/run%20a/x.json.gz", "/logs/") and inside("/a", "/")


def test_scope_holds_requests_to_the_origin_and_folder():
    scope = Scope.of("http://127.0.0.1:8000/team/logs/", is_folder=True)
    assert scope.refusal(yarl.URL("http://127.0.0.1:8000/team/logs/run/x.json.gz")) is None
    assert scope.refusal(yarl.URL("http://127.0.0.1:8000/team/logs")) is None  # its own redirect to "/"
    assert "another origin" in scope.refusal(yarl.URL("http://127.0.0.1:8001/team/logs/"))
    assert "another origin" in scope.refusal(yarl.URL("https://127.0.0.1:8000/team/logs/"))
    assert "outside the logdir's folder" in scope.refusal(yarl.URL("http://127.0.0.1:8000/team/secret/"))
    allowed = Scope.of("http://a/logs/", is_folder=True, allowed=["https://cdn.example"])
    assert allowed.refusal(yarl.URL("https://cdn.example:443/anything")) is None
    assert allowed.refusal(yarl.URL("https://evil.example/anything")) is not None
    file_scope = Scope.of("http://a/logs/run/x.json.gz?sig=1", is_folder=False)
    assert file_scope.folder == "/logs/run/"


def test_links_of_an_index_page():
    page = (
        "<a href=\"run_a/\">a</a> <A HREF='run_b/'>b</A> <a class=x href=run_c/>c</a>"
        '<abbr href="no/">not a link</abbr> see http://h/logs/d.json.gz <a name="x">no href</a>'
    )
    assert list(links_of(page)) == ["run_a/", "run_b/", "run_c/", "http://h/logs/d.json.gz"]
    # blanks after "<a" that never close a tag, and tags that never end: no link, no error
    assert list(links_of("<a " + " " * 100_000 + '<a href="x/">')) == []
    assert list(links_of("<" * 50_000)) == []


def test_a_source_that_fails_any_way_is_its_own_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    local = tmp_path / "logs" / "run_a"
    local.mkdir(parents=True)
    (local / "w.1.pt.trace.json").write_text("{}")
    real = runs_mod.discover

    def discover(path: Location, name: str | None = None, limits: object = None, warn: object = None):  # type: ignore[no-untyped-def]
        if path.is_url:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return real(path, name, limits, warn)

    monkeypatch.setattr(runs_mod, "discover", discover)
    scan = scan_sources([Source("mine", str(tmp_path / "logs")), Source("far", "http://127.0.0.1:9/x/")])
    assert list(scan.runs) == ["mine/run_a"]
    (err,) = scan.errors
    assert err.startswith("http://127.0.0.1:9/x/: cannot scan (UnicodeDecodeError") and "\n" not in err


def test_local_runs_are_shown_before_a_slow_source_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "logs" / "run_a").mkdir(parents=True)
    (tmp_path / "logs" / "run_a" / "w.1.pt.trace.json").write_text("{}")
    release = threading.Event()
    real = runs_mod.discover

    def discover(path: Location, name: str | None = None, limits: object = None, warn: object = None):  # type: ignore[no-untyped-def]
        if path.is_url:
            assert release.wait(30)
            raise TraceError(path.text, "not found")
        return real(path, name, limits, warn)

    monkeypatch.setattr(runs_mod, "discover", discover)
    seen: list[Scan] = []

    def progress(scan: Scan) -> None:
        seen.append(scan)
        release.set()  # the slow source may end once the local runs have been shown

    sources = [Source("mine", str(tmp_path / "logs")), Source("far", "http://127.0.0.1:9/x/")]
    final = scan_sources(sources, on_progress=progress)
    assert list(seen[0].runs) == ["mine/run_a"] and seen[0].errors == []
    assert final.errors == ["http://127.0.0.1:9/x/: not found"]
    # the next scan shows the slow source's last listing until its new one is in
    release.clear()
    seen.clear()
    scan_sources(sources, on_progress=progress, previous=final.by_source)
    assert seen[0].errors == ["http://127.0.0.1:9/x/: not found"]


def test_a_signed_files_folder_is_its_paths():
    """Sidecars are looked for beside the file, without its query (which signs that object only)."""
    url = (
        "https://b.s3.amazonaws.com/logs/run/x.json.gz?X-Amz-Credential=AKIA/2030/us/s3/aws4_request&X-Amz-Signature=ab"
    )
    assert Location.parse(url).parent().text == "https://b.s3.amazonaws.com/logs/run"
