"""Every error curator-dask defines derives from CuratorError, keeps its builtin base, and
crosses a process boundary intact (pickle), as errors raised on Dask workers must."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

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
            lambda: DocumentDataset.read_jsonl(str(tmp_path / "data")).df.compute(),
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
