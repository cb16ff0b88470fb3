"""Every error curator-dask defines derives from CuratorError, keeps its builtin base, and
crosses a process boundary intact (pickle), as errors raised on Dask workers must."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path

import pytest

import curator_dask
from curator_dask import CuratorError, DocumentDataset
from curator_dask.executors import NoWorkersError, ResourceUnavailableError, WorkerLifetimeError
from curator_dask.io.errors import ForeignFilesError, MalformedLineError, OutputOverlapsInputError
from curator_dask.stages.columns import ColumnNotFoundError
from curator_dask.stages.models.model_dir import ModelDirectoryError


def defined_exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(curator_dask.__path__, "curator_dask."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__):
                found.append(obj)
    return found


def test_every_exception_class_derives_from_curator_error():
    exceptions = defined_exceptions()
    # The walk must see the package's errors, or the check below proves nothing.
    assert {"InputError", "ResourceUnavailableError", "ConfigError"} <= {
        e.__name__ for e in exceptions}
    outside = sorted(f"{e.__module__}.{e.__qualname__}" for e in exceptions
                     if not issubclass(e, CuratorError))
    assert outside == [], f"exception classes not deriving from CuratorError: {outside}"


@pytest.mark.parametrize("error, builtin", [
    (MalformedLineError("a.jsonl", 3, "Expecting value"), ValueError),
    (ForeignFilesError("out/", ["out/x.txt"]), FileExistsError),
    (ColumnNotFoundError("column 'text' not found"), KeyError),
    (ModelDirectoryError("model/: no config.json"), OSError),
    (WorkerLifetimeError("task-1", 12.0, 10.0, "tcp://127.0.0.1:1"), RuntimeError),
])
def test_errors_keep_their_builtin_base_and_pickle(error, builtin):
    assert isinstance(error, CuratorError) and isinstance(error, builtin)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)


def test_except_curator_error_catches_what_the_project_raises(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "fine"}\n{"text": broken\n')
    caught = []
    for action in (
            DocumentDataset.read_jsonl(str(tmp_path / "data")).df.compute,
            lambda: DocumentDataset.read_jsonl(str(tmp_path / "data"), on_bad_lines="skip")
            .to_parquet(str(tmp_path / "data" / "out"))):
        try:
            action()
        except CuratorError as err:
            caught.append(err)
    assert [type(e) for e in caught] == [MalformedLineError, OutputOverlapsInputError]
    assert "a.jsonl" in str(caught[0]) and "line 2" in str(caught[0])
    assert isinstance(caught[0], ValueError)  # and the builtin base still catches it
    assert issubclass(NoWorkersError, ResourceUnavailableError)
    assert issubclass(ResourceUnavailableError, CuratorError)


# -- every deliberate raise is a project error ------------------------------------------------

PACKAGE = Path(curator_dask.__file__).parent
BUILTIN_ERRORS = {name for name, obj in vars(builtins).items()
                  if inspect.isclass(obj) and issubclass(obj, BaseException)}
#: Builtin raises that are the language's protocols or signals inside a module, with why.
ALLOWED = {
    ("curator_dask.stages.extract.extractors", "_read_exact", "EOFError"):
        "the extraction child's pipe closed: the sandbox catches it and starts a new child",
}


def _handled_here(stack: list[ast.AST], name: str) -> bool:
    """Whether a ``try`` around the raise, in the same function, catches ``name``: a
    builtin raised to leave a block, turned into a project error a few lines down."""
    for node, child in zip(reversed(stack), reversed([*stack[1:], None]), strict=True):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        if isinstance(node, ast.Try) and child in node.body:
            for handler in node.handlers:
                caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [
                    handler.type]
                if any(isinstance(t, ast.Name) and t.id in (name, "Exception") for t in caught):
                    return True
    return False


def builtin_raises(module: str, source: str) -> list[str]:
    """``module:line: Error`` for each raise of a builtin exception that is not a
    re-raise, an abstract method's ``NotImplementedError``, ``__getattr__``'s
    ``AttributeError``, one caught by a ``try`` around it, or in :data:`ALLOWED`."""
    found = []

    def visit(node: ast.AST, stack: list[ast.AST]) -> None:
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.id if isinstance(target, ast.Name) else None
            function = next((s for s in reversed(stack)
                             if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
            owner = stack[stack.index(function) - 1] if function in stack[1:] else None
            if name in BUILTIN_ERRORS and not (
                    (name == "NotImplementedError" and isinstance(owner, ast.ClassDef))
                    or (name == "AttributeError" and function is not None
                        and function.name == "__getattr__")
                    or _handled_here([*stack, node], name)
                    or (module, getattr(function, "name", None), name) in ALLOWED):
                found.append(f"{module}:{node.lineno}: {name}")
        for child in ast.iter_child_nodes(node):
            visit(child, [*stack, node])

    visit(ast.parse(source), [])
    return found


def test_the_raise_walker_tells_deliberate_builtin_raises_from_the_allowed_ones():
    source = (
        "class Base:\n"
        "    def process(self):\n"
        "        raise NotImplementedError\n"          # abstract: allowed
        "def __getattr__(name):\n"
        "    raise AttributeError(name)\n"             # the protocol: allowed
        "def parse(text):\n"
        "    try:\n"
        "        raise ValueError('bad')\n"            # caught below: allowed
        "    except ValueError as err:\n"
        "        raise InputError(str(err)) from err\n"
        "    raise\n"                                  # a re-raise: allowed
        "def check(n):\n"
        "    if n < 0:\n"
        "        raise ValueError('n < 0')\n"          # deliberate: reported
        "    raise NotImplementedError('not yet')\n"   # outside a class: reported
    )
    assert builtin_raises("pkg.mod", source) == [
        "pkg.mod:14: ValueError", "pkg.mod:15: NotImplementedError"]


def test_every_deliberate_raise_is_a_project_error():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found += builtin_raises(module, path.read_text())
    assert found == [], ("raise a project error (curator_dask.errors: InvalidArgumentError, "
                         "ArgumentTypeError, ...) keeping the builtin base:\n" + "\n".join(found))
