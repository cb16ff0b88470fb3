"""The package's import graph has no cycles and no import against the layers.

Every module of ``curator_dask`` is read with :mod:`ast`, and every import in it counts:
at the top, inside functions and under ``TYPE_CHECKING`` alike, since an import inside a
function that closes a loop is a loop all the same, only found later. Importing
``a.b.c`` also runs ``a/b/__init__.py``, so a module that imports from a package it is
not part of depends on that package's ``__init__`` too.
"""

from __future__ import annotations

import ast
import functools
import itertools
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "curator_dask"


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """``{"curator_dask.io.planner": path, "curator_dask.io": .../io/__init__.py, ...}``"""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.cache
def imported_names(module: str, path: Path) -> list[tuple[str, int]]:
    """Every absolute module name ``module`` imports (``from x import y`` gives ``x.y``,
    which may be a module or a name in ``x``), with its line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.extend((f"{base}.{alias.name}", node.lineno) for alias in node.names)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """``graph[a][b]``: the line where module ``a`` imports module ``b`` (of the package)."""
    graph: dict[str, dict[str, int]] = defaultdict(dict)
    for module, path in modules.items():
        for name, line in imported_names(module, path):
            target = name
            while target and target not in modules:  # x.y where y is a name: module x
                target = target.rpartition(".")[0]
            if not target:
                continue
            parts = target.split(".")
            # The target itself, and the __init__ of each package entered to reach it.
            for depth in range(2, len(parts) + 1):
                reached = ".".join(parts[:depth])
                inside = module == reached or module.startswith(reached + ".")
                if reached in modules and not inside:
                    graph[module].setdefault(reached, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def loop_through(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    """One loop inside ``component``, as ``a (line 3) -> b (line 9) -> a``."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    # Walk on inside the component until the walk comes back to a module it passed.
    while True:
        here = path[-1]
        step = sorted(t for t in graph[here] if t in members)
        target = next((t for t in step if t == start), None) or \
            next((t for t in step if t not in seen), step[0])
        path.append(target)
        if target in seen:
            break
        seen.add(target)
    first = path.index(path[-1])
    loop = path[first:]
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(loop)) + \
        f" -> {loop[-1]}"


MODULES = module_files()
GRAPH = import_graph(MODULES)


def test_the_walker_sees_the_imports_inside_functions_and_relative_ones(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("from pkg.sub.b import B\n")
    (root / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (root / "sub" / "b.py").write_text("from ..a import f\nB = 1\n")
    (root / "c.py").write_text("from pkg.sub.b import B\n")
    graph = import_graph(module_files(root))
    assert graph["pkg.a"] == {"pkg.sub": 2, "pkg.sub.b": 2}
    assert graph["pkg.sub.b"] == {"pkg.a": 1}
    assert graph["pkg.c"] == {"pkg.sub": 1, "pkg.sub.b": 1}
    assert cycles(graph) == [["pkg.a", "pkg.sub", "pkg.sub.b"]]
    assert loop_through(["pkg.a", "pkg.sub", "pkg.sub.b"], graph) == \
        "pkg.a (line 2) -> pkg.sub (line 1) -> pkg.sub.b (line 1) -> pkg.a"


def test_the_walker_reads_the_whole_package():
    assert len(MODULES) > 100
    # A function-level import and a package __init__ entered, both seen.
    assert "curator_dask.stages.filters" in GRAPH["curator_dask.cli.demo"]
    assert "curator_dask.io.planner" in GRAPH["curator_dask.dataset"]


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert found == [], "import cycles:\n" + "\n".join(loop_through(c, GRAPH) for c in found)


#: (importer, imported): modules (or packages, with everything under them) that must not
#: import the other, because data and control flow the other way.
FORBIDDEN = [
    ("curator_dask.io", "curator_dask.dataset"),
    ("curator_dask.dataset", "curator_dask.observe"),
    ("curator_dask.dataset", "curator_dask.stages"),
    ("curator_dask.stages", "curator_dask.dedup"),
    ("curator_dask.stages", "curator_dask.executors"),
    ("curator_dask.dedup", "curator_dask.executors"),
    ("curator_dask.cluster", "curator_dask.executors"),
    ("curator_dask.text", "curator_dask.stages"),
    ("curator_dask.numba_cache", "curator_dask.stages"),
    ("curator_dask.numba_cache", "curator_dask.dedup"),
]


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("importer, imported", FORBIDDEN, ids=[f"{a}-{b}" for a, b in FORBIDDEN])
def test_no_import_against_the_layers(importer, imported):
    assert any(_under(m, importer) for m in MODULES) and any(_under(m, imported) for m in MODULES)
    wrong = [f"{a} imports {b} (line {line})" for a, targets in GRAPH.items()
             if _under(a, importer) for b, line in targets.items() if _under(b, imported)]
    assert wrong == []


def test_production_code_never_imports_the_testing_helpers():
    wrong = [f"{a} imports {b} (line {line})" for a, targets in GRAPH.items()
             if not _under(a, "curator_dask.testing") for b, line in targets.items()
             if _under(b, "curator_dask.testing")]
    assert wrong == []


def test_is_cudf_comes_from_backends_only():
    wrong = [f"{module} imports is_cudf from {name.rpartition('.')[0]} (line {line})"
             for module, path in MODULES.items()
             for name, line in imported_names(module, path)
             if name.endswith(".is_cudf") and name != "curator_dask.backends.is_cudf"]
    assert wrong == []


def test_fsspec_private_api_is_used_in_one_module_only():
    wrong = [f"{module} line {node.lineno}" for module, path in MODULES.items()
             if module != "curator_dask._fsspec"
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr == "_strip_protocol"]
    assert wrong == []


@pytest.mark.slow
def test_a_partition_path_never_calls_back_up_a_layer():
    from curator_dask.testing.path import Hop, partition_path

    path = partition_path()
    # The tool saw the whole path: the read, the stage and the write of the partition.
    assert {Hop("curator_dask.executors.runtime", name)
            for name in ("read_task", "stage_task", "write_task")} <= set(path.hops)
    assert Hop("curator_dask.io.writers", "write_part") in path.hops
    assert path.upward == []

def test_no_script_directory_shadows_a_standard_library_module():
    """Tests put ``benchmarks/`` and ``tests/`` first on ``sys.path``, and worker processes
    they spawn inherit it: a script named like a standard library module there
    (``tokenize.py``) would be imported in its place (``linecache`` imports ``tokenize``)
    and break every worker that starts after it."""
    root = PACKAGE.parent
    scripts = {f"{d}/{p.name}" for d in ("benchmarks", "tests", "examples")
               for p in (root / d).glob("*.py")}
    assert any(s.startswith("benchmarks/") for s in scripts)
    shadowing = sorted(s for s in scripts if Path(s).stem in sys.stdlib_module_names)
    assert shadowing == []
