"""The frontend's sources: Biome- and tsc-clean, report types generated from the report
Structs and current, colours only from the palette.

The Biome and tsc checks need ``cd frontend && npm ci`` (CI's .ci/run does it) and are
skipped without it, like the committed-bundle check in tests/plugin/test_plugin.py.
"""

from __future__ import annotations

import enum
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest
from conftest import load_module

ROOT = Path(__file__).resolve().parent.parent
FRONTEND = ROOT / "frontend"
SRC = FRONTEND / "src"


def _gen() -> ModuleType:
    """scripts/gen_ts_types.py as a module (scripts/ is not a package)."""
    return load_module(ROOT / "scripts" / "gen_ts_types.py")


def _node_tool(name: str) -> Path:
    tool = FRONTEND / "node_modules" / ".bin" / name
    if shutil.which("node") is None or not tool.exists():
        pytest.skip("frontend dependencies not installed (cd frontend && npm ci)")
    return tool


# -- lint and types -----------------------------------------------------------------------


def test_biome_reports_nothing() -> None:
    """Formatting, lint rules and import order: no diagnostic of any severity (infos too,
    which ``biome check`` alone would let pass)."""
    biome = _node_tool("biome")
    out = subprocess.run(
        [str(biome), "check", "--error-on-warnings", "--reporter=json"],
        cwd=FRONTEND,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        report = json.loads(out.stdout)
    except ValueError:  # Biome's JSON reporter is marked experimental: show what it wrote
        pytest.fail(out.stdout + out.stderr)
    found = [
        f"{d['location']['path']}:{d['location'].get('start', {}).get('line', '?')} {d['category']} {d['message']}"
        for d in report["diagnostics"]
    ]
    assert out.returncode == 0 and not found, "\n".join(found) or out.stderr


def test_typescript_typechecks() -> None:
    tsc = _node_tool("tsc")
    out = subprocess.run([str(tsc), "--noEmit"], cwd=FRONTEND, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_generated_report_types_are_current() -> None:
    committed = (SRC / "report_types.ts").read_text(encoding="utf-8")
    assert committed == _gen().render(), "stale frontend/src/report_types.ts: run python scripts/gen_ts_types.py"


def test_generated_route_types_are_current() -> None:
    """The routes' bodies (tensorboard/bodies.py), generated as the report's are."""
    gen = _gen()
    for path, text in gen.outputs():
        assert path.read_text(encoding="utf-8") == text, f"stale {path.name}: run python scripts/gen_ts_types.py"
    routes = (SRC / "route_types.ts").read_text(encoding="utf-8")
    declared = set(re.findall(r"^export (?:interface|type) (\w+)", routes, re.M))
    _, defs = msgspec.json.schema_components(gen.route_roots())
    _, report = msgspec.json.schema_components(gen.roots())
    assert declared == set(defs) - set(report)
    assert {"RunsBody", "RunStatus", "PartialReport", "CompareBody", "Suggestion", "OfflinePayload"} <= declared
    # what the routes share with the report is imported from report_types.ts, not declared twice
    imported = re.search(r"import type \{([^}]*)\} from './report_types';", routes)
    assert imported is not None
    shared = {"FindingsAgainstBaseline", "RankSummary", "Report", "RunReport", "StrategyRow", "WorkerReport"}
    assert {n.strip() for n in imported.group(1).split(",") if n.strip()} == shared


def test_report_types_declare_every_struct_of_the_report() -> None:
    text = (SRC / "report_types.ts").read_text(encoding="utf-8")
    declared = set(re.findall(r"^export (?:interface|type) (\w+)", text, re.M))
    _, defs = msgspec.json.schema_components(_gen().roots())
    assert declared == set(defs)
    assert {"RunReport", "WorkerReport", "Summary", "Roofline", "RankSummary"} <= declared


# -- the generator's translation ----------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Extra(TypedDict, total=False):
    note: str


class Leaf(msgspec.Struct, kw_only=True):
    """A leaf.

    Two lines of doc."""

    n: int


class Cat(msgspec.Struct, tag="cat"):
    lives: int


class Dog(msgspec.Struct, tag="dog"):
    good: bool


class Sparse(msgspec.Struct, kw_only=True, omit_defaults=True):
    required_one: float
    maybe: str | None = None


class Kitchen(msgspec.Struct, kw_only=True):
    leaf: Leaf
    leaves: list[Leaf] = []
    by_name: dict[str, Leaf] = {}
    counts: dict[str, int] = {}
    nullable: Leaf | None = None
    level: Literal["low", "high"] = "low"
    colour: Colour = Colour.RED
    pair: tuple[int, str] = (0, "")
    many: list[int | str] = []
    pet: Cat | Dog | None = None
    anything: Any = None
    blob: dict[str, Any] = {}
    extra: Extra | None = None
    sparse: Sparse | None = None
    per_step: Annotated[float, msgspec.Meta(description="µs per step")] = 0.0
    odd_key: int = msgspec.field(name="odd-key", default=0)


def _decls(text: str) -> dict[str, str]:
    """Each declaration's text (with its doc comment), by name: they are blank-line separated."""
    out = {}
    for block in text.split("\n\n"):
        m = re.search(r"^export (?:interface|type) (\w+)", block, re.M)
        if m:
            out[m.group(1)] = block.strip()
    return out


def test_generator_translates_each_kind_of_field() -> None:
    decls = _decls(_gen().render([Kitchen]))
    kitchen = decls["Kitchen"].splitlines()
    # Every field of a Struct without omit_defaults is in the encoded JSON: none is optional.
    assert kitchen[1:-1] == [
        "  leaf: Leaf;",
        "  leaves: Leaf[];",
        "  by_name: Record<string, Leaf>;",
        "  counts: Record<string, number>;",
        "  nullable: Leaf | null;",
        "  level: 'high' | 'low';",  # msgspec sorts a Literal's values
        "  colour: Colour;",
        "  pair: [number, string];",
        "  many: (number | string)[];",
        "  pet: Cat | Dog | null;",
        "  anything: unknown;",
        "  blob: Record<string, unknown>;",
        "  extra: Extra | null;",
        "  sparse: Sparse | null;",
        "  /** µs per step */",
        "  per_step: number;",
        "  'odd-key': number;",
    ]
    assert decls["Colour"] == "export type Colour = 'blue' | 'red';"  # sorted too
    assert decls["Leaf"].splitlines() == [
        "/**",
        " * A leaf.",
        " *",
        " * Two lines of doc.",
        " */",
        "export interface Leaf {",
        "  n: number;",
        "}",
    ]
    # The tag field of a tagged union is a literal, so the union narrows on it.
    assert "  type: 'cat';" in decls["Cat"].splitlines()
    # Fields left out of the JSON: defaults of an omit_defaults Struct, keys of a TypedDict.
    assert decls["Sparse"].splitlines()[1:-1] == ["  required_one: number;", "  maybe?: string | null;"]
    assert decls["Extra"].splitlines()[1:-1] == ["  note?: string;"]


class Bar(msgspec.Struct, kw_only=True):
    """Keys only some values have: UNSET is left out of the JSON, None is written."""

    always: float
    sometimes: bool | msgspec.UnsetType = msgspec.UNSET
    sometimes_null: float | None | msgspec.UnsetType = msgspec.UNSET
    defaulted: int = 0


def test_generator_marks_unset_fields_optional_and_only_them() -> None:
    assert msgspec.json.encode(Bar(always=1.0)) == b'{"always":1.0,"defaulted":0}'  # what the tab receives
    assert _decls(_gen().render([Bar]))["Bar"].splitlines()[-5:] == [
        "  always: number;",
        "  sometimes?: boolean;",
        "  sometimes_null?: number | null;",
        "  defaulted: number;",
        "}",
    ]


def test_report_blocks_are_typed_in_the_generated_file() -> None:
    """flops, findings, waterfall, distributed and ranks are Structs: the tab gets their keys."""
    decls = _decls((SRC / "report_types.ts").read_text(encoding="utf-8"))
    worker = decls["WorkerReport"].splitlines()
    for line in (
        "  flops: FlopsDetail | null;",
        "  findings: Finding[];",
        "  waterfall: WaterfallBar[];",
        "  distributed: Distributed | null;",
    ):
        assert line in worker
    assert "  ranks: RankSummary | null;" in decls["RunReport"].splitlines()
    assert "  mfu?: number | null;" in decls["WaterfallBar"].splitlines()
    # Nothing stays free-form JSON: a finding's evidence is the union of the rules' own structs.
    untyped = [line for d in decls.values() for line in d.splitlines() if re.search(r":.*(?<!')\bunknown\b(?!')", line)]
    assert untyped == []
    finding = decls["Finding"].splitlines()
    assert "  evidence:" in finding and "    | SyncPointEvidence" in finding
    assert "  rule: 'sync_point';" in decls["SyncPointEvidence"].splitlines()


def test_generated_evidence_fields_are_current_and_name_every_rule() -> None:
    """frontend/src/evidence_fields.ts: each rule's evidence fields with their labels and units,
    generated from the structs (diagnosis.ts formats each value by its unit from it)."""
    gen = _gen()
    text = (SRC / "evidence_fields.ts").read_text(encoding="utf-8")
    assert text == gen.render_evidence(), "stale frontend/src/evidence_fields.ts: run python scripts/gen_ts_types.py"
    from tb_mfu_plugin.diagnosis import RULE_IDS

    assert re.findall(r"^  (\w+): \[$", text, re.MULTILINE) == list(RULE_IDS)
    # diagnosis.ts reads units from the table and guesses none from a key's name
    source = (SRC / "diagnosis.ts").read_text(encoding="utf-8")
    assert "EVIDENCE_FIELDS" in source
    assert not re.search(r"fmtByKey|hasUnit|prettyKey|\.test\((k|key)\)|\.replace\(/_", source)


def test_generated_types_compile(tmp_path: Path) -> None:
    tsc = _node_tool("tsc")
    (tmp_path / "kitchen.ts").write_text(_gen().render([Kitchen]), encoding="utf-8")
    out = subprocess.run(
        [str(tsc), "--noEmit", "--strict", "--isolatedModules", "kitchen.ts"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_generator_check_mode_flags_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _gen()
    stale = tmp_path / "report_types.ts"
    stale.write_text("// old\n", encoding="utf-8")
    monkeypatch.setattr(gen, "OUT", stale)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert stale.read_text(encoding="utf-8") == "// old\n"  # --check never writes
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0


# -- one palette --------------------------------------------------------------------------

COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(")


def test_colours_come_from_the_palette_only() -> None:
    offenders = [
        f"{p.name}:{i}: {line.strip()}"
        for p in sorted(SRC.iterdir())
        if p.suffix in (".ts", ".css") and p.name != "palette.ts"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if COLOUR.search(line)
    ]
    assert not offenders, "colours outside src/palette.ts:\n" + "\n".join(offenders)


def test_every_css_variable_is_defined() -> None:
    """style.css reads colours as var(--x), which index.ts defines from palette.ts's UI."""
    palette = (SRC / "palette.ts").read_text(encoding="utf-8")
    ui = palette[palette.index("export const UI = {") : palette.index("};", palette.index("export const UI = {"))]
    keys = re.findall(r"^\s+(\w+):", ui, re.M)
    defined = {"--" + re.sub(r"[A-Z]", lambda m: "-" + m.group(0).lower(), k) for k in keys}
    css = (SRC / "style.css").read_text(encoding="utf-8")
    defined |= set(re.findall(r"^\s*(--[\w-]+):", css, re.M))
    used = set(re.findall(r"var\((--[\w-]+)\)", re.sub(r"/\*.*?\*/", "", css, flags=re.S)))
    assert used and used <= defined, sorted(used - defined)
    assert len(keys) >= 10  # the parse above found the palette
