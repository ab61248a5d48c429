from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

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


def validation_folder(*parts: str) -> Path:
    """A folder of recorded truth under validation/ with its traces: itself, or its copy unpacked from
    its host's traces.tar.xz (validation/packed.py), where the tree keeps them packed."""
    packed = load_module(ROOT / "validation" / "packed.py")
    return Path(packed.unpacked(str(ROOT.joinpath("validation", *parts))))


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


@pytest.fixture(autouse=True)
def _every_report_keeps_the_invariants(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every report a test builds in this process is checked against tests/invariants.py (issue 32):
    each device's report as the reporting layer makes it, and each run's. A breach fails the test
    that built the report, whatever it asserts itself."""
    import msgspec
    from invariants import run_problems, worker_problems

    from tb_mfu_plugin.reporting import run as reporting_run
    from tb_mfu_plugin.reporting import trace as reporting_trace

    problems: list[str] = []
    device_report, run_report = reporting_trace.device_report, reporting_run.run_report

    def checked_device(*args: Any, **kwargs: Any) -> Any:
        w = device_report(*args, **kwargs)
        if w.error is None and w.summary is not None:
            problems.extend(f"{w.file}: {p}" for p in worker_problems(msgspec.to_builtins(w)))
        return w

    def checked_run(*args: Any, **kwargs: Any) -> Any:
        run = run_report(*args, **kwargs)
        problems.extend(p for p in run_problems(msgspec.to_builtins(run)) if "ranks row" in p)
        return run

    monkeypatch.setattr(reporting_trace, "device_report", checked_device)
    monkeypatch.setattr(reporting_run, "run_report", checked_run)
    yield
    assert not problems, "report invariants broken:\n" + "\n".join(dict.fromkeys(problems))
