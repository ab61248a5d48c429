from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "fixtures"
SAMPLES = ROOT / "sample_traces"

# tests/ itself, so that tests import the helpers beside them (conftest, tracegen) by name;
# appended, so that a folder of tests/ can never shadow an installed package
sys.path.append(str(Path(__file__).resolve().parent))


def load_module(path: Path) -> ModuleType:
    """A script outside the package (scripts/, benchmarks/) as a module: those folders are not packages."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixture_path(*parts: str) -> Path:
    """A third-party fixture from ../shared; the test is skipped when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared fixture not available: {p}")
    return p


@pytest.fixture
def shared_fixtures() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/fixtures not available")
    return SHARED


os.environ.setdefault("COLUMNS", "160")

# The suite starts a few hundred Python processes (the CLI, TensorBoard, pool workers, notebooks),
# each importing the package from the checkout. Where PYTHONDONTWRITEBYTECODE is set, each of them
# compiled ~200 modules from source again (~0.2 s of CPU apiece); one bytecode cache for the run,
# in a temporary folder (never in the checkout), as an installed package has it.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) and not os.environ.get("PYTHONPYCACHEPREFIX"):
    _pycache = tempfile.mkdtemp(prefix="tb_mfu_test_pycache_")
    os.environ["PYTHONPYCACHEPREFIX"] = _pycache
    atexit.register(shutil.rmtree, _pycache, True)


@pytest.fixture(scope="session")
def hostile_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The hostile corpus of tests/fuzz (its folder, its cases), built once for the run: the
    fuzz tests run the CLI on it and the decoder's tests compare their two paths on it."""
    fuzz = str(Path(__file__).resolve().parent / "fuzz")
    if fuzz not in sys.path:
        sys.path.append(fuzz)
    import corpus
    import hostile

    out = tmp_path_factory.mktemp("corpus")
    per_base = 4 * corpus.MUTATIONS_PER_BASE if hostile.LONG else corpus.MUTATIONS_PER_BASE
    return out, corpus.build_corpus(out, per_base=per_base)
