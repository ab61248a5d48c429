"""Download report: the run's JSON, and the offline HTML page with the report and the bundle inlined.

The page is parsed with Python's own HTML parser, which tokenises as a browser
does: a hostile kernel name must stay inside the data block as text, whatever
it holds (the browser test opens the page in Chromium).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tb_mfu_plugin.tensorboard.offline import DATA_ID, script_safe_js
from tb_mfu_plugin.tensorboard.plugin import STATIC_DIR

from .conftest import RUN_A

HOSTILE = "</script><script>alert(1)</script><!--<script>"


class Elements(HTMLParser):
    """Every element's tag, attributes and text, as the HTML tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None], str]] = []
        self.open = False  # text goes to the last element until its end tag

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs), ""))
        self.open = True

    def handle_endtag(self, tag: str) -> None:
        self.open = False

    def handle_data(self, data: str) -> None:
        if self.found and self.open:
            tag, attrs, text = self.found[-1]
            self.found[-1] = (tag, attrs, text + data)


def parse(page: bytes) -> list[tuple[str, dict[str, str | None], str]]:
    p = Elements()
    p.feed(page.decode())
    p.close()
    return p.found


def test_json_download_is_the_cli_report_of_the_run(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    r = s.get(f"/download?run={RUN_A}&format=json")
    assert r.status_code == 200
    assert r.headers["Content-Disposition"] == f'attachment; filename="mfu-{RUN_A}.json"'
    body = json.loads(r.get_data())
    assert set(body) == {"schema_version", "tool_version", "runs"}
    assert body["runs"] == [s.json(f"/report?run={RUN_A}")]


def test_html_download_inlines_the_report_and_the_bundle_under_a_strict_csp(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    r = s.get(f"/download?run={RUN_A}&format=html&worker=0")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert r.headers["Content-Disposition"] == f'attachment; filename="mfu-{RUN_A}.html"'
    page = r.get_data()
    els = parse(page)
    scripts = [(a, t) for tag, a, t in els if tag == "script"]
    assert [a.get("type") for a, _ in scripts] == ["application/json", "module"]
    data = json.loads(scripts[0][1])
    assert scripts[0][0]["id"] == DATA_ID and (data["run"], data["worker"]) == (RUN_A, 0)
    assert data["report"]["runs"] == [s.json(f"/report?run={RUN_A}")]
    # and what /runs says of the run, so the page's own code draws it as the tab does
    listing = s.json("/runs")
    assert data["runs"]["runs"] == [r for r in listing["runs"] if r["name"] == RUN_A]
    assert data["runs"]["sources"] == listing["sources"] and not data["runs"]["uploads"]["enabled"]
    bundle = (Path(STATIC_DIR) / "index.js").read_bytes()
    assert scripts[1][1].encode() == script_safe_js(bundle)
    # no source but that one script: nothing is fetched, so the page works offline
    (csp,) = [a["content"] for tag, a, _ in els if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    digest = base64.b64encode(hashlib.sha256(scripts[1][1].encode()).digest()).decode()
    assert csp is not None and csp.startswith("default-src 'none'; ") and f"script-src 'sha256-{digest}';" in csp
    assert not re.search(r"(https?:)?//[a-z]", csp)
    assert [t for t, a, _ in els if a.get("src") or a.get("href")] == []


def test_a_hostile_kernel_name_stays_text_in_the_offline_page(serve, tmp_path):
    from tracegen import TraceBuilder

    logdir = tmp_path / "logs"
    TraceBuilder().kernel_steps(HOSTILE).write(logdir / "hostile" / "worker0.1.pt.trace.json.gz")
    s = serve(logdir)
    s.settle()
    page = s.get("/download?run=hostile&format=html").get_data()
    els = parse(page)
    scripts = [(a, t) for tag, a, t in els if tag == "script"]
    assert len(scripts) == 2  # the name opened no script element of its own
    assert HOSTILE.encode() not in page and b"alert(1)" in page  # there, but escaped
    data: Any = json.loads(scripts[0][1])
    kernels = data["report"]["runs"][0]["workers"][0]["top_kernels"]
    assert kernels[0]["name"] == HOSTILE  # and it decodes back verbatim
    title = next(t for tag, _, t in els if tag == "title")
    assert title == "MFU report: hostile"


def test_a_hostile_run_name_is_escaped_in_the_title(serve, tmp_path):
    from tracegen import TraceBuilder

    logdir = tmp_path / "logs"
    name = "<b>run</title><script>alert(1)</script>"
    TraceBuilder().kernel_steps("k").write(logdir / name.replace("/", "_") / "worker0.1.pt.trace.json.gz")
    s = serve(logdir)
    s.settle()
    run = name.replace("/", "_")
    page = s.get(f"/download?run={quote(run, safe='')}&format=html").get_data()
    els = parse(page)
    assert [t for tag, _, t in els if tag == "title"] == [f"MFU report: {run}"]
    assert [tag for tag, _, _ in els].count("script") == 2
    disposition = s.get(f"/download?run={quote(run, safe='')}&format=json").headers["Content-Disposition"]
    assert re.fullmatch(r'attachment; filename="mfu-[A-Za-z0-9._-]+\.json"', disposition)


def test_script_safe_js_leaves_no_end_tag_or_comment_opener():
    code = b'const a="</script>",b=/<\\/script/,c=`<!--${a}`;// </SCRIPT >'
    out = script_safe_js(code)
    assert not re.search(rb"</script|<!--", out, re.IGNORECASE)
    assert out == b'const a="\\x3C/script>",b=/<\\/script/,c=`\\x3C!--${a}`;// \\x3C/SCRIPT >'


def test_the_page_of_a_distributed_run_holds_its_strategy_and_ranks(serve, tmp_path):
    """ddp_2gpu's saved page once said "single GPU" in its ranks card: it holds the run report
    the tab gets, strategy and ranks included, and opens on the worker asked for."""
    import shutil

    from .conftest import SAMPLES

    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "ddp_2gpu", logdir / "ddp_2gpu")
    s = serve(logdir)
    s.settle()
    page = s.get("/download?run=ddp_2gpu&format=html&worker=1").get_data()
    data = json.loads(next(t for tag, a, t in parse(page) if tag == "script" and a.get("id") == DATA_ID))
    (run,) = data["report"]["runs"]
    assert run == s.json("/report?run=ddp_2gpu") and run["strategy"] == ["DDP"]
    assert [r["worker"] for r in run["ranks"]["ranks"]] == ["rank0", "rank1"]
    assert (data["run"], data["worker"]) == ("ddp_2gpu", 1)


def test_download_of_an_unknown_run_or_format_is_refused(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    assert s.get("/download?run=nope&format=html").status_code == 404
    assert s.get(f"/download?run={RUN_A}&format=exe").status_code == 400
