"""What the docs, README and notebooks import is public: it exists, and a subpackage it
comes from lists it in ``__all__``. ``import curator_dask`` stays light."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import curator_dask

ROOT = Path(__file__).parent.parent
IMPORT = re.compile(r"from (curator_dask[\w.]*) import (\([^)]*\)|[^\n`;]*)")


def documented_texts() -> dict[str, str]:
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in sorted(ROOT.glob("docs/*.md"))}
    texts["README.md"] = (ROOT / "README.md").read_text()
    for path in sorted(ROOT.glob("notebooks/*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        texts[str(path.relative_to(ROOT))] = "\n".join("".join(c["source"]) for c in cells)
    return texts


def documented_imports() -> list[tuple[str, str, str]]:
    found = []
    for where, text in documented_texts().items():
        for match in IMPORT.finditer(text):
            names = match.group(2).strip("()").replace("\\\n", " ").replace("\n", " ")
            for name in names.split(","):
                name = name.split(" as ")[0].strip()
                if name:
                    found.append((where, match.group(1), name))
    return found


IMPORTS = documented_imports()


def test_the_docs_import_from_curator_dask_at_all():
    # The parser must find the imports, or the test below checks nothing.
    assert ("docs/index.md", "curator_dask", "ExactDedup") in IMPORTS
    assert ("README.md", "curator_dask", "get_client") in IMPORTS
    assert len({where for where, _, _ in IMPORTS}) >= 6


@pytest.mark.parametrize("where, module, name", IMPORTS,
                         ids=[f"{w}:{m}.{n}" for w, m, n in IMPORTS])
def test_every_documented_import_is_public(where, module, name):
    imported = importlib.import_module(module)
    assert hasattr(imported, name), f"{where}: {module} has no {name!r}"
    public = getattr(imported, "__all__", None)
    assert public is not None and name in public, (
        f"{where} imports {name!r} from {module}, which does not list it in __all__: "
        "export it there (or import it from curator_dask)")


def test_every_name_in_all_resolves():
    missing = [name for name in curator_dask.__all__ if not hasattr(curator_dask, name)]
    assert missing == []
    from curator_dask import ExactDedup, FuzzyDedup, ResourceUnavailableError, SemanticDedup
    from curator_dask.dedup import ExactDedup as from_dedup

    assert ExactDedup is from_dedup
    assert issubclass(ResourceUnavailableError, curator_dask.CuratorError)
    assert FuzzyDedup.__module__.startswith("curator_dask.dedup")
    assert SemanticDedup.__module__.startswith("curator_dask.dedup")


def test_executor_internals_are_not_exported():
    from curator_dask import executors

    assert set(executors.__all__) == {
        "BatchExecutor", "Executor", "LocalExecutor", "NoWorkersError",
        "ResourceUnavailableError", "StreamingExecutor", "WorkerLifetimeError"}
    # Still importable by module path, for the executors' own tests.
    from curator_dask.executors.state import RunState  # noqa: F401


@pytest.mark.slow
def test_importing_the_package_does_not_load_models_or_numba():
    heavy = ["torch", "transformers", "sklearn", "numba", "curator_dask.dedup"]
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, curator_dask; "
         f"print([m for m in {heavy!r} if m in sys.modules])"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
    assert loaded == "[]", f"import curator_dask loads {loaded}"
