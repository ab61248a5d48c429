"""The probe of remote logdirs (issue 22): hostile HTTP servers on loopback against the CLI
and the tab's backend, with a known good run beside each case.

Two servers (hostile_http.py): ``home``, the logdir's origin, and ``other``, a second
origin on loopback. Each case lives in its own folder ``/c/<case>/`` of home and holds the
good run ``good/`` beside what is hostile; where the hostile part is the listing itself,
the good run beside it is the tab's local source. ``other`` serves under ``/o/<case>/``
what a redirect points to (a real trace, so that a followed redirect would be analysed as
the run), and home serves a real run under ``/secret/``, outside every case's folder.
The storage options give home two credential headers, ``Authorization`` and ``X-Api-Key``.

Pass criterion, per case, for ``tb-mfu analyze URL --json`` (run by cli_runner.py in a
child process) and for the tab (the plugin's WSGI app, ``--logdir_spec mine:LOCAL,theirs:URL``):

- the good run keeps its exact figures (equal to the local run's, field for field);
- the hostile part ends as its one-line error (expected words named per case), never a
  traceback, and no route answers 5xx;
- no request leaves the case's folder on home, none reaches ``other`` (except where the
  case allows that origin, and then without the credential headers), none asks ``/secret/``;
- no credential value appears in stdout, stderr, the routes' bodies or the logs;
- every case within its deadline, the CLI's peak RSS under ``CLI_RSS_MB`` (it reads every
  file itself: ``--jobs 1``) and the server's under ``SERVER_RSS_MB`` (what this process, which
  runs the server, adds at its peak during the case, plus the peak of each analysis process the
  case's server started).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from located import reports_at

from ..plugin import conftest as plugin_conftest
from . import hostile_http as hh

serve = plugin_conftest.serve  # the tab's WSGI app over our plugin, as tests/plugin and tests/remote use it

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "sample_traces" / "low_sm_efficiency"
TRACE = next(GOOD.glob("*.pt.trace.json.gz")).name
SECRETS = ("tok-AUTH-5f3c91", "xapi-KEY-77d2e0")
LIST_TIMEOUT_S = 15  # a listing's deadline: time enough on a loaded machine, where no case needs it
SLOW_LIST_S = 4  # the deadline of the cases whose listings trickle
STALL_S = 3
CLI_RSS_MB = 512
SERVER_RSS_MB = 1024
# A run's streamed bytes must not outlast this; the good run beside gets the same cap.
SLOW_MAX_SECONDS = 5


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[hh.Origin, hh.Origin, bytes], str]  # routes the case; returns the logdir URL
    # words of the one-line error the hostile part must end as; "a|b" where either is right (a
    # short body is a truncated file, and its leftover bytes spoil the next answer on that connection)
    error: str
    lists: bool = True  # the logdir lists (its good run is analysed); else the source's own error
    args: tuple[str, ...] = ()
    seconds: float = 30.0  # the case's deadline, CLI and tab alike
    allows_other: bool = False  # the storage options allow redirects to ``other``
    list_timeout: float = LIST_TIMEOUT_S
    in_tab: bool = True  # the error is shown in /runs or /report (else only in the server's log)
    warns: bool = False  # the logdir lists, and /runs has one line for the part it could not list
    single: bool = False  # the logdir is one file: the CLI names its run by the file, the tab by the source


def _with_good(home: hh.Origin, name: str, trace: bytes, *links: str, routes: dict[str, hh.Behaviour] | None = None):
    base = f"/c/{name}/"
    home.routes[base] = hh.listing("good/", *links)
    home.routes[base + "good/"] = hh.listing(TRACE)
    home.routes[base + "good/" + TRACE] = hh.static(trace, "application/gzip")
    for path, behaviour in (routes or {}).items():
        home.routes[base + path] = behaviour
    return home.url(base)


def _bad_file(home: hh.Origin, name: str, trace: bytes, behaviour: hh.Behaviour, fname: str = TRACE) -> str:
    return _with_good(home, name, trace, "bad/", routes={"bad/": hh.listing(fname), f"bad/{fname}": behaviour})


def _redirect_listing(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    other.routes["/o/rlist/"] = hh.listing("good/")
    other.routes["/o/rlist/good/"] = hh.listing(TRACE)
    other.routes["/o/rlist/good/" + TRACE] = hh.static(trace)
    home.routes["/c/rlist/"] = hh.redirect(other.url("/o/rlist/"))
    return home.url("/c/rlist/")


def _redirect_subfolder(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    other.routes["/o/rsub/"] = hh.listing(TRACE)
    other.routes["/o/rsub/" + TRACE] = hh.static(trace)
    return _with_good(home, "rsub", trace, "evil/", routes={"evil/": hh.redirect(other.url("/o/rsub/"))})


def _redirect_file(name: str) -> Callable[[hh.Origin, hh.Origin, bytes], str]:
    def build(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
        other.routes[f"/o/{name}/{TRACE}"] = hh.static(trace)
        return _bad_file(home, name, trace, hh.redirect(other.url(f"/o/{name}/{TRACE}")))

    return build


def _redirect_out_of_folder(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    return _bad_file(home, "rout", trace, hh.redirect(f"/secret/{TRACE}"))


TRAVERSALS = (
    "../../secret/",
    "%2e%2e/%2e%2e/secret/",
    "%2E%2E%2F%2E%2E%2Fsecret/",
    "..%2f..%2fsecret/",
    "%252e%252e/%252e%252e/secret/",
    "..\\..\\secret\\",
    "/secret/",
    "//127.0.0.1/secret/",
    "sub/",
)


def _traversal(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    absolute = home.url("/secret/")
    sub = hh.listing("../../../secret/", "%2e%2e/%2e%2e/%2e%2e/secret/", f"../../../secret/{TRACE}")
    return _with_good(home, "trav", trace, *TRAVERSALS, absolute, f"../../secret/{TRACE}", routes={"sub/": sub})


def _dead_link(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    url = _with_good(home, "dead", trace)
    home.routes["/c/dead/good/"] = hh.listing(TRACE, "rank9.1.pt.trace.json.gz")
    return url


def _deep_loop(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    url = _with_good(home, "deep", trace, "loop/")
    page = hh.listing("loop/")
    path = "/c/deep/loop/"
    for _ in range(40):  # deeper than any walk goes
        home.routes[path] = page
        path += "loop/"
    return url


def _signed(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    params = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Security-Token")
    home.routes[f"/c/signed/{TRACE}"] = hh.signed(trace, params)
    query = "&".join(f"{p}={v}" for p, v in zip(params, ("AWS4-HMAC-SHA256", *SIGNED), strict=True))
    return home.url(f"/c/signed/{TRACE}?{query}")


def _sas(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    home.routes[f"/c/sas/{TRACE}"] = hh.signed(trace, ("sv", "sig"))
    return home.url(f"/c/sas/{TRACE}?sv=2024-11-04&se=2030-01-01T00%3A00Z&sp=r&sig={SAS_SIG}")


def _root(behaviour: Callable[[], hh.Behaviour], name: str) -> Callable[[hh.Origin, hh.Origin, bytes], str]:
    def build(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
        _with_good(home, name, trace)
        home.routes[f"/c/{name}/"] = behaviour()
        return home.url(f"/c/{name}/")

    return build


def _many_links(home: hh.Origin, other: hh.Origin, trace: bytes) -> str:
    """The good run's folder, then 100,000 links to files that do not exist, on one page."""
    url = _with_good(home, "links", trace)
    dead = (f"w{i}.1.pt.trace.json.gz" for i in range(100_000))
    home.routes["/c/links/"] = hh.page(hh.listing_html(["good/", *dead]))
    return url


SIGNED = (
    "AKIAPROBE%2F20300101%2Fus-east-1%2Fs3%2Faws4_request",
    "5f1e9a0c7d3b2a1908f7e6d5c4b3a291",
    "FwoGZXIvYXdzEPROBE",
)
SAS_SIG = "q8Zr2%2BprobeSASsig%3D"
SHOWN_NEVER = (*SECRETS, "5f1e9a0c7d3b2a1908f7e6d5c4b3a291", "FwoGZXIvYXdzEPROBE", "AKIAPROBE", "probeSASsig")

CASES = [
    # §1 requests off the host
    Case("rlist", _redirect_listing, "another origin", lists=False),
    Case(
        "rsub",
        _redirect_subfolder,
        "sub-folder not listed (refused: the server sent the request to another origin",
        warns=True,
    ),
    Case("rfile", _redirect_file("rfile"), "another origin"),
    Case("allow", _redirect_file("allow"), "", allows_other=True),
    Case("rout", _redirect_out_of_folder, "outside the logdir's folder"),
    # §1 secrets echoed, signed URLs
    Case("e401", lambda h, o, t: _bad_file(h, "e401", t, hh.echo_401()), "HTTP 401 (access denied)"),
    Case("e401root", _root(hh.echo_401, "e401root"), "HTTP 401 (access denied)", lists=False),
    Case("signed", _signed, "", single=True),
    Case("sas", _sas, "", single=True),
    # §2 reads outside the folder
    Case("trav", _traversal, ""),
    Case("deep", _deep_loop, ""),
    # §4 slow files and listings
    Case(
        "trickle",
        lambda h, o, t: _bad_file(h, "trickle", t, hh.trickle(t)),
        f"still running after {SLOW_MAX_SECONDS} s",
        args=("--max-seconds", str(SLOW_MAX_SECONDS)),
        seconds=SLOW_MAX_SECONDS + 25,
    ),
    Case(  # the whole answer, headers included, a byte a second: --max-seconds holds the whole file
        "slowloris",
        lambda h, o, t: _bad_file(h, "slowloris", t, hh.slowloris(t)),
        f"still running after {SLOW_MAX_SECONDS} s",
        args=("--max-seconds", str(SLOW_MAX_SECONDS)),
        seconds=SLOW_MAX_SECONDS + 5,
        list_timeout=120,  # the default: the listing's deadline must not be what ends it
    ),
    Case(
        "stall",
        lambda h, o, t: _bad_file(h, "stall", t, hh.trickle(t, every_s=3600)),
        f"the server sent nothing for {STALL_S} s",  # long before the file's own deadline
        args=("--max-seconds", "60"),
        seconds=STALL_S + 25,
    ),
    Case(
        "tlist",
        _root(lambda: hh.trickle(hh.listing_html(["good/"]).encode(), content_type="text/html"), "tlist"),
        f"listing took longer than {SLOW_LIST_S} s",
        lists=False,
        seconds=SLOW_LIST_S + 25,
        list_timeout=SLOW_LIST_S,
    ),
    # §5 bodies
    Case(
        "endless",
        lambda h, o, t: _bad_file(h, "endless", t, hh.chunked(hh.endless_events), "rank0.1.pt.trace.json"),
        "max_trace_bytes",
        args=("--max-trace-bytes", "32M"),
    ),
    Case(  # the same with the default caps, and kernels the decoder keeps: memory stays bounded
        "endlessraw",
        lambda h, o, t: _bad_file(h, "endlessraw", t, hh.chunked(hh.endless_kernels), "rank0.1.pt.trace.json"),
        "max_unsized_bytes",
    ),
    Case(
        "gzbomb",
        lambda h, o, t: _bad_file(h, "gzbomb", t, hh.gzip_encoded_bomb(), "rank0.1.pt.trace.json"),
        "max_compression_ratio",
    ),
    Case(
        "gzlist",
        _root(lambda: hh.gzip_encoded_bomb(content_type="text/html"), "gzlist"),
        "gzip-encoded though identity was asked",
        lists=False,
    ),
    Case("lie", lambda h, o, t: _bad_file(h, "lie", t, hh.lying_length(t[:1000], len(t) + 5000)), "not completed"),
    Case(
        "short",
        lambda h, o, t: _bad_file(h, "short", t, hh.lying_length(t, len(t) // 2)),
        "not valid HTTP|truncated gzip",
    ),
    # §6 dead links; huge listings
    Case("dead", _dead_link, "not found"),
    # a listing over a cap is read up to it, one line says what was left out, the good run is read
    Case("links", _many_links, "more than 20,000 links", warns=True),
    Case("linksonly", _root(lambda: hh.page(hh.many_links_html()), "linksonly"), "more than 20,000 links", lists=False),
    Case("fat", _root(lambda: hh.static(hh.padded_html(), "text/html"), "fat"), "larger than 16 MiB", warns=True),
    Case(
        "endlist",
        _root(lambda: hh.chunked(hh.endless_events, "text/html"), "endlist"),
        "larger than 16 MiB",
        lists=False,
    ),
]


@dataclass
class Servers:
    home: hh.Origin
    other: hh.Origin
    urls: dict[str, str]
    options: Path
    local: Path  # a local logdir holding the good run
    expected: dict[str, Any]  # the good worker's report, read locally


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    tmp = tmp_path_factory.mktemp("probe")
    local = tmp / "local"
    (local / "good").mkdir(parents=True)
    shutil.copy(GOOD / TRACE, local / "good" / TRACE)
    trace = (GOOD / TRACE).read_bytes()
    home, other = hh.Origin(), hh.Origin()
    for route in ("/secret/", "/c/secret/"):
        home.routes[route] = hh.listing(TRACE)
        home.routes[route + TRACE] = hh.static(trace)
    urls = {c.name: c.build(home, other, trace) for c in CASES}
    headers = {"Authorization": f"Bearer {SECRETS[0]}", "X-Api-Key": SECRETS[1]}
    options = tmp / "storage_options.json"
    options.write_text(
        json.dumps(
            {
                home.url("/"): {"headers": headers},
                home.url("/c/allow/"): {"headers": headers, "allowed_origins": [other.base]},
            }
        )
    )
    expected = _figures(reports_at(local)["good"]["workers"][0])
    yield Servers(home, other, urls, options, local, expected)
    home.close()
    other.close()


def _figures(worker: dict[str, Any]) -> dict[str, Any]:
    """A worker's report with its own location written ``<file>``: the figures, wherever it was read."""
    text = json.dumps(worker)
    return json.loads(text.replace(json.dumps(worker["file"])[1:-1], "<file>"))


def _good_worker(runs: list[dict[str, Any]], run: str) -> dict[str, Any]:
    (r,) = [r for r in runs if r["name"] == run]
    (w,) = [w for w in r["workers"] if w["file"].split("?")[0].endswith(TRACE) and not w["error"]]
    return _figures(w)


def _requests_held(s: Servers, case: Case) -> None:
    """No request left the case's folder, reached ``other`` unasked, or carried a credential there."""
    outside = [r.path for r in s.home.requests if not r.path.startswith("/c/") or r.path.startswith("/c/secret")]
    assert outside == [], f"requests outside every case's folder: {outside[:5]}"
    foreign = s.other.asked(f"/o/{case.name}/")
    if not case.allows_other:
        assert foreign == [], f"{len(foreign)} requests reached the other origin"
    else:
        assert foreign, "the allowed origin was never asked"
    assert not [r for r in s.other.requests if any(v in SECRETS or SECRETS[0] in v for v in r.headers.values())]


def _descendants() -> set[int]:
    """The pids of this process's descendants (the tab's analysis processes, their forkserver)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _peak_mb(pid: int) -> float:
    """A process's peak RSS (VmHWM), 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0.0)


def _reset_peak() -> float:
    """Start this process's peak RSS afresh (``clear_refs`` 5 resets VmHWM to the current RSS) and
    return that RSS, MB; 0.0 where the kernel does not offer it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return 0.0
    status = Path("/proc/self/status").read_text()
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0.0)


def _server_peak_mb(before: set[int], base_mb: float) -> float:
    """What the case's server cost at its peak: this process's peak above its RSS at the case's
    start (``base_mb``: the server runs in this pytest process, whose own size depends on the tests
    run before), plus each analysis process started since ``before``, at its own peak. Where the
    peak cannot be reset (``base_mb`` 0), this process's peak of all its life: an upper bound."""
    if not Path("/proc/self/status").exists():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return _peak_mb(os.getpid()) - base_mb + sum(_peak_mb(p) for p in _descendants() - before)


def _names_error(case: Case, text: str) -> bool:
    return any(words in text for words in case.error.split("|"))


def _no_secret(*texts: str) -> None:
    for text in texts:
        leaked = [s for s in SHOWN_NEVER if s in text]
        assert not leaked, f"shown: {leaked}"


# -- the CLI ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_results(servers: Servers) -> dict[str, dict[str, Any] | None]:
    """Every case's CLI result (None for a case whose child died), all cases in one child."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
    env.update(TB_MFU_STALL_TIMEOUT=str(STALL_S), TB_MFU_PROBE_CASE_S="90")
    for var in ("TB_MFU_CACHE_DIR", "TB_MFU_STORAGE_OPTIONS"):
        env.pop(var, None)
    options = ("--storage-options", str(servers.options))
    todo = [
        {
            "name": c.name,
            # --jobs 1: every file is read in the runner itself, so that its peak RSS is the CLI's
            # whole cost (a pool's workers are no children of it) and a case that hangs leaves none
            "argv": ["analyze", servers.urls[c.name], "--json", "--jobs", "1", *options, *c.args],
            "env": {"TB_MFU_LIST_TIMEOUT": c.list_timeout},
        }
        for c in CASES
    ]
    results: dict[str, dict[str, Any] | None] = {}
    runner = str(Path(__file__).with_name("cli_runner.py"))
    while todo:
        proc = subprocess.run(
            [sys.executable, runner, json.dumps(todo, default=str)],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        done = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        results.update({r["name"]: r for r in done})
        if len(done) < len(todo):  # that case ended the child: recorded, the rest run in a new one
            results[todo[len(done)]["name"]] = None
        todo = todo[len(done) + 1 :]
    return results


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cli_against_a_hostile_server(case: Case, servers: Servers, cli_results: dict[str, Any]):
    r = cli_results[case.name]
    assert r is not None, f"{case.name}: the CLI hung or crashed (faulthandler ended it)"
    out, err = r["stdout"], r["stderr"]
    print(f"{case.name}: rc {r['rc']}, {r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB")
    assert r["crash"] is None, r["crash"]
    assert "Traceback" not in out + err
    assert all(line.startswith("tb-mfu: ") for line in err.splitlines()), err
    if case.lists:
        assert r["rc"] == 0, err
        assert _good_worker(json.loads(out)["runs"], TRACE if case.single else "good") == servers.expected
    else:
        assert r["rc"] == 2 and len(err.splitlines()) == 1, err
    assert _names_error(case, err), err
    _no_secret(out, err)
    _requests_held(servers, case)
    assert r["seconds"] < case.seconds, f"{case.name} took {r['seconds']} s"
    assert r["peak_rss_mb"] < CLI_RSS_MB


# -- the tab --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_tab_against_a_hostile_server(
    case: Case, servers: Servers, serve, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    monkeypatch.setenv("TB_MFU_LIST_TIMEOUT", str(case.list_timeout))
    monkeypatch.setenv("TB_MFU_STALL_TIMEOUT", str(STALL_S))
    monkeypatch.setenv("TB_MFU_STORAGE_OPTIONS", str(servers.options))
    caplog.set_level("INFO")
    before = _descendants()
    base_mb = _reset_peak()
    t0 = time.monotonic()
    spec = f"mine:{servers.local},theirs:{servers.urls[case.name]}"
    flags = {"max_seconds": case.args[case.args.index("--max-seconds") + 1]} if "--max-seconds" in case.args else {}
    flags.update({"max_trace_bytes": "32M"} if "--max-trace-bytes" in case.args else {})
    s = serve(None, logdir_spec=spec, show_full_paths=True, **flags)
    s.settle(timeout=case.seconds + 30)
    runs = s.get("/runs")
    assert runs.status_code == 200
    body = json.loads(runs.get_data())
    reports = {}
    for run in body["runs"]:
        r = s.get(f"/report?run={quote(run['name'])}")
        assert r.status_code < 500, (run["name"], r.status_code)
        reports[run["name"]] = json.loads(r.get_data())
    assert time.monotonic() - t0 < case.seconds + 10
    assert _good_worker([reports["mine/good"]], "mine/good") == servers.expected
    errors = body["errors"] + [w["error"] or "" for rep in reports.values() for w in rep["workers"]]
    assert all("\n" not in e and "Traceback" not in e for e in errors)
    if case.lists:
        assert len(body["errors"]) == case.warns, body["errors"]
        theirs = "theirs" if case.single else "theirs/good"
        assert _good_worker([reports[theirs]], theirs) == servers.expected
    else:
        assert len(body["errors"]) == 1
    assert _names_error(case, " ".join(errors) if case.in_tab else caplog.text), errors
    _no_secret(runs.get_data(as_text=True), json.dumps(reports), caplog.text)
    _requests_held(servers, case)
    assert _server_peak_mb(before, base_mb) < SERVER_RSS_MB


def test_tab_shows_local_runs_while_slow_listings_trickle(servers: Servers, serve, monkeypatch: pytest.MonkeyPatch):
    """Three listings that trickle a byte a second: the local run is listed (and analysed) while
    they are still being listed, and they end in their own deadline at once, not one after another."""
    monkeypatch.setenv("TB_MFU_LIST_TIMEOUT", str(SLOW_LIST_S))
    monkeypatch.setenv("TB_MFU_STORAGE_OPTIONS", str(servers.options))
    slow = ",".join(f"t{i}:{servers.urls['tlist']}" for i in range(3))
    t0 = time.monotonic()
    s = serve(None, logdir_spec=f"mine:{servers.local},{slow}")
    s.wait_for(lambda: any(r["name"] == "mine/good" for r in s.json("/runs")["runs"]), timeout=SLOW_LIST_S + 30)
    first = s.json("/runs")
    if time.monotonic() - t0 < SLOW_LIST_S:  # the trickling listings cannot have ended yet
        assert first["scanned"] and first["scanning"] and first["errors"] == []
    s.settle(timeout=60)
    body = s.json("/runs")
    assert [r["name"] for r in body["runs"]] == ["mine/good"]
    assert len(body["errors"]) == 3 and all(f"longer than {SLOW_LIST_S} s" in e for e in body["errors"])
    assert time.monotonic() - t0 < 3 * SLOW_LIST_S  # one deadline for all three, not one each
    assert _good_worker([s.json("/report?run=mine%2Fgood")], "mine/good") == servers.expected
