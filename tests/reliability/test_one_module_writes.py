"""No module of the package writes a file except ``curator_dask/io/atomic.py``.

Every path curator-dask writes is checked by a run's output guard and written through
the atomic helpers; a write anywhere else would bypass both. This reads the package's
source (its syntax tree, so docstrings and comments do not count) and fails naming each
file and line that opens a file for writing, moves, removes or creates files and
directories, or hands a path to a library that writes (pandas' ``to_parquet``,
``pq.write_table``, distributed's ``performance_report``, ``save_pretrained``, ...).
A library writer given a handle is allowed when the handle comes from the atomic module.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import curator_dask

PACKAGE = Path(curator_dask.__file__).parent
#: The one module allowed to write.
WRITER = PACKAGE / "io" / "atomic.py"

#: Methods that change the filesystem, whatever object they are called on.
CHANGING = {"write_text", "write_bytes", "mv", "move", "rm", "rm_file", "rmdir", "pipe",
            "pipe_file", "put", "put_file", "touch", "makedirs", "mkdir", "unlink",
            "rmtree", "removedirs", "copyfile", "copytree", "cp_file", "mkdtemp", "mkstemp",
            "NamedTemporaryFile", "TemporaryDirectory", "performance_report",
            "write_to_dataset", "symlink"}
#: Functions of ``os`` that change the filesystem (``str.replace`` is not one of them).
OS_CHANGING = {"replace", "rename", "remove", "renames", "chmod", "utime"}
#: Library writers that take a path or an open handle as their target.
FRAME_WRITERS = {"to_parquet", "to_json", "to_csv", "to_feather", "to_pickle", "to_orc"}
#: Where a writer's target is: the argument position (or keyword names).
TABLE_WRITERS = {"write_table": 1, "new_file": 0, "new_stream": 0, "dump": 1,
                 "save_pretrained": 0}
#: The context managers of the atomic module that give a writable handle (or directory).
OPENERS = {"atomic_open", "open_partial", "staged_directory", "staged_files"}
WRITE_MODE = set("wax+")


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _owner(node: ast.AST) -> str:
    return _name(node.value) if isinstance(node, ast.Attribute) else ""


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode string of an ``open`` call ("r" when none is given), or None when it is
    not a literal (it cannot be checked)."""
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None and len(call.args) > position:
        mode = call.args[position]
    if mode is None:
        return "r"
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else None


class _Scanner(ast.NodeVisitor):
    def __init__(self):
        self.found: list[tuple[int, str]] = []
        self.handles: list[set[str]] = [set()]  # names bound to the atomic module's handles
        self.datasets: list[set[str]] = [set()]  # names annotated as DocumentDataset

    def _function(self, node):
        names = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]
                 if a.annotation is not None and "DocumentDataset" in ast.unparse(a.annotation)}
        self.handles.append(set())
        self.datasets.append(names)
        self.generic_visit(node)
        self.handles.pop()
        self.datasets.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if isinstance(node.target, ast.Name) and "DocumentDataset" in ast.unparse(node.annotation):
            self.datasets[-1].add(node.target.id)
        self.generic_visit(node)

    def visit_With(self, node: ast.With):
        for item in node.items:
            call = item.context_expr
            if (isinstance(call, ast.Call) and _name(call.func) in OPENERS
                    and isinstance(item.optional_vars, ast.Name)):
                self.handles[-1].add(item.optional_vars.id)
        self.generic_visit(node)

    def _handle(self, node: ast.AST | None) -> bool:
        return isinstance(node, ast.Name) and any(node.id in h for h in self.handles)

    # One branch per kind of call that writes a file.
    def visit_Call(self, node: ast.Call):  # noqa: PLR0912
        name, owner = _name(node.func), _owner(node.func)
        problem = None
        if owner == "atomic":
            pass  # the atomic module's own helpers
        elif name == "open" and owner == "os":
            if not (node.args and ast.unparse(node.args[0]) == "os.devnull"):
                problem = "os.open()"
        elif name == "open":
            mode = _mode(node, 1)
            if mode is None or WRITE_MODE & set(mode):
                problem = f"open for writing (mode {mode!r})"
        elif name in CHANGING:
            problem = f"{name}()"
        elif owner == "os" and name in OS_CHANGING:
            problem = f"os.{name}()"
        elif owner == "shutil":
            problem = f"shutil.{name}()"
        elif name in FRAME_WRITERS:
            target = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg in ("path", "path_or_buf")), None)
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            dataset = isinstance(receiver, ast.Name) and any(
                receiver.id in d for d in self.datasets)
            if target is not None and not self._handle(target) and not dataset:
                problem = f"{name}() on a path"
        elif name in TABLE_WRITERS:
            position = TABLE_WRITERS[name]
            target = node.args[position] if len(node.args) > position else None
            if target is not None and not self._handle(target):
                problem = f"{name}() on a path"
        if problem:
            self.found.append((node.lineno, problem))
        self.generic_visit(node)


def writes_in(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every write ``source`` makes outside the atomic module."""
    scanner = _Scanner()
    scanner.visit(ast.parse(source))
    return scanner.found


def test_the_scanner_finds_every_kind_of_write():
    # The scanner must see what it is meant to refuse, or the test below checks nothing.
    source = textwrap.dedent('''
        import os, shutil, json
        import pyarrow.parquet as pq
        def f(fs, df, table, path, ds, model):
            open(path, "w")
            open(path, mode="ab")
            fs.open(path, "wb")
            fs.open(path, "rb")
            fs.mv(path, path + "x")
            fs.rm(path)
            os.replace(path, path)
            shutil.rmtree(path)
            df.to_parquet(path)
            pq.write_table(table, path)
            model.save_pretrained(path)
            "a-b".replace("-", "+")
            with atomic_open(fs, path) as handle:
                df.to_parquet(handle)
                pq.write_table(table, handle)
            json.dump({}, open(path, "w"))
            with staged_directory(path) as draft:
                model.save_pretrained(draft)
        def g(out: DocumentDataset, path):
            out.to_parquet(path)
        ''')
    found = [line for line, _ in writes_in(source)]
    # Lines (in the snippet) of each write: open w, open ab, fs.open wb, mv, rm, os.replace,
    # rmtree, to_parquet on a path, write_table on a path, save_pretrained, the open
    # inside json.dump, and json.dump's target.
    assert found == [5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 20, 20]


def test_no_module_writes_except_the_atomic_module():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == WRITER:
            continue
        for line, what in writes_in(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {what}")
    assert not offenders, (
        "these write outside curator_dask/io/atomic.py; check the path with the run's "
        "OutputGuard (curator_dask.io.guard) and write through curator_dask.io.atomic:\n"
        + "\n".join(offenders))


def test_the_atomic_module_is_where_the_writes_are():
    # The exemption is for the module that does write, not for an empty file.
    kinds = {what.split("(")[0] for _, what in writes_in(WRITER.read_text(encoding="utf-8"))}
    assert {"open for writing ", "mv", "rm", "makedirs", "mkdtemp"} <= kinds
