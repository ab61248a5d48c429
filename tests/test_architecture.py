"""The import rules of docs/architecture.md, checked on the code: no module imports a higher layer,
no modules import each other in a circle, and no analysis module does I/O.

Every import counts, wherever it stands: at the top of a module, inside a function (a lazy import
is still a dependency) and under ``if TYPE_CHECKING:`` (a type is a dependency too). The layer map
is the table in docs/architecture.md; the test reads it from there, so the doc and the check
cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tb_mfu_plugin"
DOC = ROOT / "docs" / "architecture.md"

# A row of the doc's layer table: "| 3 | `analysis/` | ...", or several entries: "| 6 | `cli/`, `notebook/` | ...".
_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*((?:`[^`|]+`(?:,\s*)?)+)\s*\|", re.MULTILINE)

# Modules whose import means I/O (files, sockets, processes). ``re``, ``json`` and ``msgspec``
# parse bytes they are handed; these reach outside the process.
_IO_MODULES = frozenset(
    {
        "os",
        "io",
        "pathlib",
        "shutil",
        "tempfile",
        "glob",
        "gzip",
        "bz2",
        "lzma",
        "zipfile",
        "tarfile",
        "mmap",
        "socket",
        "subprocess",
        "urllib",
        "http",
        "fsspec",
        "aiohttp",
        "requests",
    }
)


def layer_map() -> dict[str, int]:
    """Top-level entry of the package (``"analysis"``, ``"__init__"``) -> its layer, from the doc."""
    out: dict[str, int] = {}
    for layer, entries in _ROW.findall(DOC.read_text(encoding="utf-8")):
        for entry in re.findall(r"`([^`]+)`", entries):
            name = entry.removesuffix("/").removesuffix(".py")
            assert name not in out, f"{entry} is in two rows of the layer table"
            out[name] = int(layer)
    return out


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module of the package) for every import in the module, at any depth."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                # "from pkg import module" depends on the module; "from module import name" on the module
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                if target in known and target != name:
                    out.append((node.lineno, target))
    return out


def layer_of(module: str, layers: dict[str, int]) -> int:
    parts = module.split(".")
    return layers[parts[1] if len(parts) > 1 else "__init__"]


def graph() -> dict[str, list[tuple[int, str]]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_the_layer_table_names_every_part_of_the_package() -> None:
    layers = layer_map()
    assert sorted(set(layers.values())) == list(range(1, max(layers.values()) + 1)), "layers are 1, 2, 3, ..."
    top = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert top == set(layers), (
        f"docs/architecture.md's layer table and the package differ: not in the table {sorted(top - set(layers))}, "
        f"not in the package {sorted(set(layers) - top)}"
    )


def test_no_module_imports_a_higher_layer() -> None:
    layers, files = layer_map(), modules()
    upward = [
        f"{files[a].relative_to(ROOT)}:{line} imports {b} (layer {layer_of(a, layers)} -> {layer_of(b, layers)})"
        for a, targets in graph().items()
        for line, b in targets
        if layer_of(b, layers) > layer_of(a, layers)
    ]
    assert not upward, "an import runs up the layers of docs/architecture.md:\n" + "\n".join(upward)


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    edges = {a: {b for _, b in targets} for a, targets in graph().items()}
    circles = _circles(edges)
    assert not circles, "modules that import each other in a circle:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_circle() -> None:
    # the check itself: a loop of three and a pair, beside a module outside both
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e", "a"}, "e": {"d"}, "f": {"a"}}
    assert _circles(edges) == [["a", "b", "c"], ["d", "e"]]


def io_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for every import of an I/O module and every call of ``open`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        found += [(node.lineno, n) for n in names if n.split(".")[0] in _IO_MODULES]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            found.append((node.lineno, "open()"))
    return found


def test_no_analysis_module_does_io() -> None:
    """analysis/ is pure functions over tables: it opens no file, socket or process (trace/ does)."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted((PACKAGE / "analysis").rglob("*.py"))
        for line, what in io_uses(path.read_text(encoding="utf-8"))
    ]
    assert not found, "I/O in the analysis layer (it belongs in trace/):\n" + "\n".join(found)


def test_the_io_check_finds_io() -> None:
    source = "import numpy as np\nimport os.path\n\ndef f(p):\n    from fsspec import open as o\n    return open(p)\n"
    assert io_uses(source) == [(2, "os.path"), (5, "fsspec"), (6, "open()")]
