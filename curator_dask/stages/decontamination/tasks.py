"""Evaluation sets from local files: the texts whose n-grams must not be trained on.

An :class:`EvalTask` names a file (or a directory of files) and the columns that hold its
texts, such as a prompt and an answer column. Every value of those columns becomes one
text; a list value (multiple-choice options, several reference answers) gives one text
per item. Nested fields are named with dots (``answers.text``).

Formats, told by the file name: JSON lines (``.jsonl``/``.json``, optionally ``.gz``),
Parquet (``.parquet``) and plain text (``.txt`` and anything else: one text per
non-empty line). Evaluation sets are small, so they are read on the client, once.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from curator_dask.errors import ArgumentTypeError, InvalidArgumentError, NameNotFoundError
from curator_dask.io.errors import InputError

__all__ = ["EvalTask", "TaskFileError", "as_tasks", "load_task_texts", "task_files"]


class TaskFileError(InputError):
    """An evaluation-set file that cannot be read as asked; the message says why and how
    to fix it."""


@dataclass(frozen=True)
class EvalTask:
    """One evaluation set.

    Parameters
    ----------
    path : str
        A file, or a directory whose files (sorted by name) all belong to the task.
    fields : sequence of str, optional
        The columns holding the texts (``["question", "answer"]``; dots reach into
        nested values: ``"answers.text"``). Default: ``["text"]`` for JSON lines and
        Parquet; plain-text files have no columns.
    name : str, optional
        How the task is named in counts and drop reasons. Default: the file name
        without its extensions.

    Examples
    --------
    >>> EvalTask("evals/squad_dev.jsonl.gz", fields=["question", "answers.text"]).name
    'squad_dev'
    """

    path: str
    fields: tuple[str, ...] = field(default=())
    name: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple([self.fields] if isinstance(self.fields, str)
                                                 else self.fields))
        if self.name is None:
            base = os.path.basename(os.path.normpath(self.path))
            object.__setattr__(self, "name", base.split(".")[0] or base)
        if not self.name or any(c in self.name for c in " \t\n"):
            raise InvalidArgumentError(
                f"task name {self.name!r} must be one word (it becomes part of "
                "drop reasons); pass name=")


def as_tasks(tasks) -> tuple[EvalTask, ...]:
    """Tasks from what a user (or a YAML file) gives: an :class:`EvalTask`, a path, a
    mapping of :class:`EvalTask`'s fields, or a list of these."""
    if isinstance(tasks, (str, os.PathLike, EvalTask, Mapping)):
        tasks = [tasks]
    out = []
    for task in tasks:
        if isinstance(task, EvalTask):
            out.append(task)
        elif isinstance(task, (str, os.PathLike)):
            out.append(EvalTask(os.fspath(task)))
        elif isinstance(task, Mapping):
            unknown = set(task) - {"path", "fields", "name"}
            if unknown or "path" not in task:
                raise InvalidArgumentError(
                    f"a task is a path or a mapping with path, fields and name; "
                    f"got {dict(task)!r}")
            out.append(EvalTask(os.fspath(task["path"]), tuple(task.get("fields") or ()),
                                task.get("name")))
        else:
            raise ArgumentTypeError(f"a task is an EvalTask, a path or a mapping, got "
                            f"{type(task).__name__}")
    if not out:
        raise InvalidArgumentError("no evaluation tasks given")
    names = [t.name for t in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidArgumentError(f"task names must differ, {repeated} repeat; give each a name=")
    return tuple(out)


def task_files(task: EvalTask) -> list[str]:
    """The files of ``task``; an error naming the path if there are none."""
    if os.path.isdir(task.path):
        files = sorted(os.path.join(task.path, f) for f in os.listdir(task.path)
                       if not f.startswith(".") and os.path.isfile(os.path.join(task.path, f)))
        if not files:
            raise TaskFileError(f"task {task.name!r}: directory {task.path!r} has no files")
        return files
    if not os.path.isfile(task.path):
        raise TaskFileError(f"task {task.name!r}: {task.path!r} does not exist; give the path "
                            "of an evaluation-set file or directory")
    return [task.path]


def _kind(path: str) -> str:
    name = path[:-3] if path.endswith(".gz") else path
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    return "text"


def _values(value, path: str) -> Iterable[str]:
    if value is None:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _values(item, path)
    elif isinstance(value, (int, float, bool)):
        yield str(value)
    else:
        raise TaskFileError(f"{path}: a field holds a {type(value).__name__}, not text; name "
                            "its text inside with a dot (e.g. answers.text)")


def _lookup(record, dotted: str):
    value = record
    for part in dotted.split("."):
        if isinstance(value, list):
            value = [v.get(part) if isinstance(v, Mapping) else None for v in value]
        elif isinstance(value, Mapping):
            if part not in value:
                raise NameNotFoundError(part)
            value = value[part]
        else:
            raise NameNotFoundError(part)
    return value


def _records(path: str) -> Iterable[tuple[int, dict]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise TaskFileError(f"{path}, line {number}: malformed JSON ({err.msg}); fix "
                                    "the line (each line must be one JSON object)") from None
            if not isinstance(record, dict):
                raise TaskFileError(f"{path}, line {number}: a JSON {type(record).__name__}, "
                                    "not an object; each line must be one JSON object")
            yield number, record


def _texts_of_records(records, fields: Sequence[str], path: str) -> list[str]:
    out = []
    for where, record in records:
        for name in fields:
            try:
                value = _lookup(record, name)
            except KeyError:
                raise TaskFileError(
                    f"{path}, {where}: no field {name!r}; it has {sorted(record)}. Name the "
                    "prompt and answer columns with fields=[...]") from None
            out.extend(_values(value, path))
    return out


def load_task_texts(task: EvalTask) -> list[str]:
    """Every text of ``task``, in file and row order (empty texts left out)."""
    texts: list[str] = []
    for path in task_files(task):
        kind = _kind(path)
        fields = task.fields or (("text",) if kind != "text" else ())
        if kind == "jsonl":
            records = ((f"line {n}", r) for n, r in _records(path))
            texts += _texts_of_records(records, fields, path)
        elif kind == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            top = sorted({f.split(".")[0] for f in fields} - set(table.column_names))
            if top:
                raise TaskFileError(
                    f"{path}: no column {top[0]!r}; it has {table.column_names}. Name the "
                    "prompt and answer columns with fields=[...]")
            columns = table.select(sorted({f.split(".")[0] for f in fields})).to_pylist()
            texts += _texts_of_records(((f"row {i}", r) for i, r in enumerate(columns)),
                                       fields, path)
        else:
            if task.fields:
                raise TaskFileError(f"{path}: a plain-text file has no fields, but fields="
                                    f"{list(task.fields)} were given; name a .jsonl or "
                                    ".parquet file, or leave fields out")
            opener = gzip.open if path.endswith(".gz") else open
            try:
                with opener(path, "rt", encoding="utf-8") as lines:
                    texts += [line.rstrip("\n") for line in lines]
            except UnicodeDecodeError as err:
                raise TaskFileError(f"{path}: not UTF-8 text ({err.reason} at byte "
                                    f"{err.start}); re-encode it as UTF-8") from None
    return [t for t in texts if t.strip()]
