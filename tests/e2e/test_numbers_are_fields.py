"""Every number the tab renders is a report field (issue 32 §7): for every sample run, each view
read from the DOM in a real Chromium and compared with the JSON the view was drawn from.

The views: the Overview of every worker report of every run (its cards: the KPIs, the breakdown,
the waterfall, copies, syncs and launches, the top kernels, the roofline, communication, memory,
the critical path and what-if, with every fix picked, and the findings with their evidence
open), and Compare and Strategies of every run, eight at a time. The body of a view is what the
tab drew it from: ``/report``'s run report for the Overview, ``/compare``'s body for the others.

The tab names the field of each figure it writes (``frontend/src/field.ts``):

- ``data-field``: the element's text is that field's value as format.ts writes it (any unit's
  text of the value: the test does not guess which unit the face chose; the path pins the value);
  a field that is null shows no number.
- ``data-scope``: every number in the element's text is one of the fields under that path, as
  format.ts writes it: a table's row, a finding and its evidence, a card's block.

A number anywhere else fails the test, unless it is part of a text the report holds (a name, a
finding's title and fix, a note: strings of the body, written by the analysis) or a text that is
no figure: a step number (``#4``), a name with digits in it (``rank0``, ``bf16``, ``GPU 0``), or
a count of the items a view lists (``ALLOWED``).
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tb_mfu_plugin.analysis import fmt

from .conftest import TensorBoard
from .test_browser import TIMEOUT_MS, poll
from .test_layout import MAX_COMPARE, _picked_shown, go, settle, tab_frame

pytestmark = pytest.mark.e2e

Json = Any

# Elements whose number is no figure of the report, each with why.
NO_FIGURE = {
    "[data-testid=compare-picker] .chip-n": "a run's place in the set picked (the baseline first)",
    "[data-testid=timeline-mark] .leg-val": "how many marks of a finding the chart draws on the step",
    "[data-testid=critical-path-table] tr.total td:last-child": "the step is 100 % of itself",
}

# Each figure the tab names, with the text of its element; every other text with a digit, with
# the scope it stands in (None outside any), and where it is (for the failure's message).
COLLECT_JS = """
(noFigure) => {
  const main = document.querySelector('[data-testid=main]');
  const joined = (el, own) => {
    const parts = [own];
    if (own.startsWith('/')) return own.slice(1);
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const p = e.dataset.scope ?? e.dataset.root;
      if (p === undefined) continue;
      if (p.startsWith('/')) { parts.unshift(p.slice(1)); break; }
      parts.unshift(p);
    }
    return parts.filter((x) => x !== '').join('.');
  };
  const where = (el) => {
    const out = [];
    for (let e = el; e && e !== main && out.length < 5; e = e.parentElement) {
      const id = e.dataset.testid ? `[${e.dataset.testid}]` : '';
      const first = typeof e.className === 'string' ? e.className.trim().split(/\\s+/)[0] : '';
      const cls = first ? `.${first}` : '';
      out.push(`${e.tagName.toLowerCase()}${id}${cls}`);
    }
    return out.join(' < ');
  };
  const fields = Array.from(main.querySelectorAll('[data-field]'), (el) => ({
    path: joined(el, el.dataset.field), text: el.textContent, where: where(el),
  }));
  const loose = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!/\\d/.test(n.textContent) || el.closest(`[data-field], style, script, ${noFigure}`)) continue;
    const s = el.closest('[data-scope]');
    const scopes = s ? s.dataset.scope.split(' ').map((p) => joined(s, p)) : null;
    loose.push({ text: n.textContent, scope: scopes, where: where(el) });
  }
  return { fields, loose };
}
"""

# A figure as format.ts writes it: a number, its sign, its unit (fmt.py's twins write the same).
UNITS = r"%|pp|ns|µs|ms|s|B|kB|MB|GB|TB|PB|[kMGTP]?FLOP/s|[kMGTP]?FLOP/B|[kMGTP]?FLOP|GB/s|×"
NUMBER = re.compile(rf"(?<![\w.#/])[+\u2212\-±]?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?(?:\s?(?:{UNITS})(?![\w/]))?")
# Texts with digits that are no figure: names (a GPU's index, a rank), and counts of the items a
# view lists (rows of a table, findings, fixes picked), which the report holds as list lengths.
ALLOWED = [
    re.compile(p)
    for p in (
        r"\b(?:GPU|device|rank|worker) \d+\b",  # names
        r"Show all \d+ rows",  # a table's rows
        r"Findings \(\d+\)",  # the findings listed
        r"All \d+ (?:re-timed findings )?(?:applied )?together",  # the findings fixed at once
        r"The fixes of \d+ findings applied",  # the fixes picked in the what-if panel
        r"the \d+ largest of the \d+ re-timed findings",  # the what-if panel's findings
        r"\(\d+\)$",  # the items of a list that folds open ("Ops ... (10)")
        re.escape(fmt.IMPOSSIBLE),  # what format.ts writes for a share past 100 %, in words
        r"< 64 KiB",  # a bucket's name: the copies' sizes
        r"to 90 %",  # the batch headroom to 90 % of the device, its definition's fill
        r"\d+ ops? without arithmetic .* cannot place 0 FLOP/s",  # the ops listed that the chart cannot place
    )
]


def get(body: Json, path: str) -> tuple[bool, Any]:
    """The value at ``path`` (keys and indices joined by dots), and whether the body has it."""
    x = body
    for key in path.split(".") if path else []:
        if isinstance(x, list) and key.isdigit() and int(key) < len(x):
            x = x[int(key)]
        elif isinstance(x, dict) and key in x:
            x = x[key]
        else:
            return False, None
    return True, x


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


FORMATS = (fmt.pct, fmt.us, fmt.nbytes, fmt.flops, fmt.flop_rate, fmt.gbps, fmt.intensity, fmt.factor, fmt.count)


def texts(x: float) -> set[str]:
    """Every way format.ts writes the number ``x``: each unit's formatter (and its digits), a rate
    in B/s as GB/s, TFLOP/s; a change signed ("+1.2 pp", "−3.12 ms": the sign, then the size)."""
    out = {w(x) for w in FORMATS} | {fmt.flop_rate(x * 1e12), fmt.gbps(x / 1e9)}
    out |= {fmt.pct(x, d) for d in (0, 1, 2)} | {fmt.count(x, d) for d in (0, 1, 2)}
    sign = "+" if x > 0 else "\u2212" if x < 0 else "±"
    out |= {fmt.change(x, "pp"), fmt.change(x, "relative")} | {sign + w(abs(x)) for w in FORMATS}
    return {" ".join(t.split()) for t in out if t}


def numbers(node: Json) -> Iterator[float]:
    if _number(node):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from numbers(v)


def strings(node: Json) -> Iterator[str]:
    """The texts of the body: its strings (and their parts between `code` spans, which the tab
    sets apart), and its keys as the tab labels them ("batch_factor_at_90": "Batch factor at 90")."""
    if isinstance(node, str):
        yield node
        yield from (part for part in re.split(r"`([^`]+)`", node) if part != node)
    elif isinstance(node, dict):
        for k, v in node.items():
            label = k.replace("_", " ")
            yield from (k, label, label[:1].upper() + label[1:])
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)


@dataclass
class Body:
    """A view's body, with the texts of its numbers by scope, worked out once."""

    json: Json
    names: list[str]  # its strings with a digit, longest first

    def __post_init__(self) -> None:
        self._scopes: dict[str, set[str]] = {}
        # a string of the body where it stands whole in a text: not inside a longer name or number
        # ("9.0", a compute capability, is no part of "99.0 %")
        alternatives = "|".join(re.escape(s) for s in self.names) or "(?!)"
        self.held = re.compile(rf"(?<![\w.,])(?:{alternatives})(?![\w]|[.,]\d)")

    @staticmethod
    def of(body: Json, *extra: Json) -> Body:
        held = {s for b in (body, *extra) for s in strings(b) if re.search(r"\d", s) and len(s) > 1}
        return Body(body, sorted(held, key=len, reverse=True))

    def scope(self, paths: list[str]) -> set[str]:
        """The texts of every number under any of ``paths``."""
        out: set[str] = set()
        for path in paths:
            if path not in self._scopes:
                found, node = get(self.json, path)
                self._scopes[path] = {t for x in numbers(node) for t in texts(x)} if found else set()
            out |= self._scopes[path]
        return out


def tokens(text: str) -> list[str]:
    return [" ".join(m.group(0).split()) for m in NUMBER.finditer(text)]


def unnamed(text: str, body: Body) -> str:
    """``text`` without what the report holds as text and what is no figure."""
    text = body.held.sub(" ", text)
    for p in ALLOWED:
        text = p.sub(" ", text)
    return text


def check_view(view: str, seen: Json, body: Body, tally: Counter[str] | None = None) -> list[str]:
    """What ``seen`` (COLLECT_JS of a view) shows that is no field of ``body``, one line each;
    ``tally`` counts the views, and the numbers matched to a named field or to one in scope."""
    tally = Counter() if tally is None else tally
    tally["views"] += 1
    bad = []
    for el in seen["fields"]:
        found, value = get(body.json, el["path"])
        shown = tokens(el["text"])
        if not found:
            bad.append(f"{view}: no field {el['path']!r} for {el['text']!r} ({el['where']})")
        elif _number(value):
            wrong = [t for t in shown if t not in texts(value)]
            if wrong or not shown:
                bad.append(f"{view}: {el['path']} = {value!r} shown as {el['text']!r} ({el['where']})")
            tally["named"] += len(shown) - len(wrong)
        elif isinstance(value, str):
            if value not in el["text"]:
                bad.append(f"{view}: {el['path']} = {value!r} shown as {el['text']!r} ({el['where']})")
        elif shown:  # null (unknown) or a block: no figure
            bad.append(f"{view}: {el['path']} is {value!r}, shown as {el['text']!r} ({el['where']})")
    for node in seen["loose"]:
        rest = tokens(unnamed(node["text"], body))
        if not rest:
            continue
        held = body.scope(node["scope"]) if node["scope"] is not None else set()
        wrong = [t for t in rest if t not in held]
        tally["in scope"] += len(rest) - len(wrong)
        if wrong:
            scope = f"scope {node['scope']!r}" if node["scope"] is not None else "no scope"
            bad.append(f"{view}: {wrong} in {node['text'].strip()!r}, {scope} ({node['where']})")
    return bad


# -- the browser ------------------------------------------------------------------------------


WORKER_PICKED_JS = "() => document.querySelector('[data-testid=worker-select]')?.value ?? '0'"
OPEN_ALL_JS = "() => document.querySelectorAll('details').forEach((d) => { d.open = true; })"


def _pick_every_fix(frame: Any) -> None:
    pick_all = frame.locator("[data-testid=whatif] input[data-finding='*']")
    if pick_all.count():
        pick_all.check()
    else:
        for box in frame.locator("[data-testid=whatif] input[data-index]").all():
            box.check()


def _overviews(page: Any, frame: Any, tb: TensorBoard, run: str, tally: Counter[str]) -> list[str]:
    """Every worker report of ``run``: its Overview as drawn, then with details open and every fix picked."""
    go(page, f"view=overview&run={run}")
    frame.locator("[data-testid=run-title]").filter(has_text=run).wait_for(timeout=TIMEOUT_MS)
    report = tb.get_json(f"/data/plugin/mfu/report?run={urllib.parse.quote(run)}")
    listed = next(r for r in tb.get_json("/data/plugin/mfu/runs")["runs"] if r["name"] == run)
    body = Body.of(report, listed)
    bad: list[str] = []
    workers = frame.locator("[data-testid=worker-select] option").count()
    for idx in range(max(1, workers)):
        if workers > 1:
            frame.locator("[data-testid=worker-select]").select_option(str(idx))
            poll(lambda i=idx: frame.evaluate(WORKER_PICKED_JS) == str(i))
        frame.locator("[data-testid=overview], [data-testid=worker-error]").first.wait_for(timeout=TIMEOUT_MS)
        settle(frame)
        bad += _checked(f"{run} worker {idx}", frame, body, tally)
        frame.evaluate(OPEN_ALL_JS)
        _pick_every_fix(frame)
        frame.wait_for_timeout(100)
        bad += _checked(f"{run} worker {idx}, opened", frame, body, tally)
    return bad


def _checked(view: str, frame: Any, body: Body, tally: Counter[str]) -> list[str]:
    """check_view of what ``frame`` shows now; a view in which no number matched a field fails
    too (a view drawn from nothing would pass every check)."""
    mine: Counter[str] = Counter()
    bad = check_view(view, frame.evaluate(COLLECT_JS, ", ".join(NO_FIGURE)), body, mine)
    tally.update(mine)
    if not mine["named"] + mine["in scope"]:
        bad.append(f"{view}: no number of the report shown")
    return bad


def _compared(page: Any, frame: Any, tb: TensorBoard, view: str, group: list[str], tally: Counter[str]) -> list[str]:
    go(page, f"view={view}&compare={','.join(group)}")
    poll(lambda: _picked_shown(frame, view, group))
    settle(frame)
    frame.evaluate(OPEN_ALL_JS)
    query = "&".join(f"run={urllib.parse.quote(r)}" for r in group)
    body = tb.get_json(f"/data/plugin/mfu/compare?{query}")
    assert all(e["report"] is not None for e in body["runs"])
    return _checked(f"{view} of {', '.join(group)}", frame, Body.of(body), tally)


# A number the tab would have computed, planted beside the step time: the collection must see it.
PLANT_JS = """
() => {
  const sub = document.querySelector('[data-testid=step-time]').parentElement.querySelector('.kpi-sub');
  sub.append(' · planted 12,345.67 µs');
}
"""


def _a_planted_number_is_caught(frame: Any, tb: TensorBoard, run: str) -> None:
    report = tb.get_json(f"/data/plugin/mfu/report?run={urllib.parse.quote(run)}")
    frame.evaluate(PLANT_JS)
    bad = check_view("planted", frame.evaluate(COLLECT_JS, ", ".join(NO_FIGURE)), Body.of(report))
    assert len(bad) == 1 and "12,345.67 µs" in bad[0] and "summary" in bad[0], bad


def test_every_number_on_every_view_is_a_report_field(samples_tb: TensorBoard, browser: Any) -> None:
    runs = [r["name"] for r in samples_tb.get_json("/data/plugin/mfu/runs")["runs"]]
    assert len(runs) >= 20
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000}, device_scale_factor=1)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{samples_tb.url}/#mfu&view=overview&run={runs[0]}")
    frame = tab_frame(page)
    bad: list[str] = []
    tally: Counter[str] = Counter()
    for run in runs:
        bad += _overviews(page, frame, samples_tb, run, tally)
    _a_planted_number_is_caught(frame, samples_tb, runs[-1])
    groups = [runs[i : i + MAX_COMPARE] for i in range(0, len(runs), MAX_COMPARE)]
    for view in ("compare", "strategies"):
        for group in groups:
            bad += _compared(page, frame, samples_tb, view, group, tally)
    ctx.close()
    print(f"{len(runs)} runs, {tally['views']} views: {tally['named']} numbers named, {tally['in scope']} in scope")
    assert not bad, f"{len(bad)} numbers that are no report field:\n" + "\n".join(bad)
    assert not errors, errors
    assert tally["views"] >= 2 * len(runs) + 2 * len(groups)


def test_the_check_finds_a_number_that_is_no_field() -> None:
    """The check itself, on a made-up view: a figure whose text or path is wrong, a number in
    no scope, one outside its scope, and what passes (a name, a step number, an allowed count)."""
    body = Body.of({"summary": {"mfu": 0.1234, "steps": 3, "idle": None}, "rows": [{"us": 1500.0}], "name": "rank7"})
    seen = {
        "fields": [
            {"path": "summary.mfu", "text": "12.3 %", "where": "ok"},
            {"path": "summary.mfu", "text": "12.4 %", "where": "wrong text"},
            {"path": "summary.nope", "text": "1", "where": "no field"},
            {"path": "summary.idle", "text": "n/a", "where": "ok"},
            {"path": "summary.idle", "text": "0.0 %", "where": "a number for null"},
        ],
        "loose": [
            {"text": "rank7 · step #4 · GPU 0 · Show all 12 rows", "scope": None, "where": "ok"},
            {"text": "1.50 ms", "scope": ["rows.0"], "where": "ok"},
            {"text": "3 steps · 1.50 ms", "scope": ["summary", "rows"], "where": "ok"},
            {"text": "2.00 ms", "scope": ["rows.0"], "where": "not in scope"},
            {"text": "12.3 %", "scope": None, "where": "no scope"},
        ],
    }
    bad = check_view("v", seen, body)
    assert [re.search(r"\(([^()]*)\)$", b).group(1) for b in bad] == [  # type: ignore[union-attr]
        "wrong text",
        "no field",
        "a number for null",
        "not in scope",
        "no scope",
    ]
    assert json.dumps(bad)
