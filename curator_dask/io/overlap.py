"""Where output may go: never onto, into or around an input.

How two paths relate (:func:`relation`: one is, contains or lies inside the other), and
:func:`check_output_path`, which refuses an output on top of an input. Every path a run
writes is registered with its :class:`~curator_dask.io.guard.OutputGuard`, which checks
it with these before anything is deleted or written. Paths are compared after resolving
``..`` and, on a local filesystem, symbolic links, and only when they are on the same
filesystem (``file://`` and ``s3://`` never overlap).

Examples
--------
>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> (root / "raw").mkdir()
>>> inputs = input_paths(str(root / "raw"))
>>> check_output_path(str(root / "clean"), [inputs])  # a sibling: fine
>>> check_output_path(str(root / "raw" / ".." / "raw" / "out"), [inputs])
Traceback (most recent call last):
...
curator_dask.io.errors.OutputOverlapsInputError: output directory ... lies inside the input path ...
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fsspec.core import url_to_fs

from curator_dask._fsspec import strip_protocol
from curator_dask.io.errors import OutputOverlapsInputError
from curator_dask.io.files import is_pattern, pattern_root

__all__ = ["InputPaths", "check_output_path", "input_paths", "relation"]


@dataclass(frozen=True)
class InputPaths:
    """Paths on one filesystem that an output must keep clear of.

    ``paths`` are as the user gave them (a glob, a path that does not exist, counts as the
    directory before its first wildcard); ``files`` are the files found under them, checked
    too because a file inside an input directory may be a symbolic link to somewhere else.
    """

    fs: object
    paths: tuple[str, ...]
    files: tuple[str, ...] = ()
    label: str = "input path"


def input_paths(paths: str | Sequence[str], storage_options: dict | None = None, *,
                files: Iterable[str] = (), label: str = "input path") -> InputPaths:
    """The :class:`InputPaths` of ``paths`` (any fsspec URLs on one filesystem)."""
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [str(paths)]
    paths = [str(p) for p in paths]
    fs, _ = url_to_fs(paths[0], **(storage_options or {}))
    roots = []
    for raw in paths:
        path = strip_protocol(fs, raw)
        roots.append(pattern_root(path) if is_pattern(fs, path) else path)
    return InputPaths(fs, tuple(roots), tuple(files), label)


def check_output_path(path: str, others: Iterable[InputPaths], *,
                      what: str = "output directory", storage_options: dict | None = None,
                      fs=None) -> None:
    """Raise :class:`~curator_dask.io.errors.OutputOverlapsInputError` when ``path`` is,
    contains or lies inside any of ``others`` on the same filesystem.

    ``fs`` (with ``path`` already stripped of its protocol) skips parsing the URL again.
    """
    if fs is None:
        fs, path = url_to_fs(path, **(storage_options or {}))
    target = _resolve(fs, path)
    for other in others:
        if other is None or not _same_filesystem(fs, other.fs):
            continue
        for given in other.paths:
            _compare(what, path, target, other.label, given, _resolve(other.fs, given))
        if other.files and _is_local(fs):
            resolve = _DirectoryResolver()
            for file in other.files:
                _compare(what, path, target, "input file", file, resolve(file))


def relation(fs, path: str, other_fs, other: str) -> str | None:
    """How ``path`` relates to ``other``: ``"is"``, ``"lies inside"``, ``"contains"``, or
    None when they are apart (or on different filesystems).

    Examples
    --------
    >>> import fsspec
    >>> memory = fsspec.filesystem("memory")
    >>> relation(memory, "/a/b", memory, "/a"), relation(memory, "/a", memory, "/ab")
    ('lies inside', None)
    """
    if not _same_filesystem(fs, other_fs):
        return None
    return _relation(_resolve(fs, path), _resolve(other_fs, other))


def _relation(target: str, resolved: str) -> str | None:
    if target == resolved:
        return "is"
    if _inside(target, resolved):
        return "lies inside"
    if _inside(resolved, target):
        return "contains"
    return None


def _compare(what: str, path: str, target: str, other_what: str, other: str,
             resolved: str) -> None:
    found = _relation(target, resolved)
    if found is not None:
        raise OutputOverlapsInputError(what, path, other_what, other, found,
                                       resolved=(target, resolved))


def _inside(path: str, directory: str) -> bool:
    directory = directory.rstrip("/")
    return path.startswith(directory + "/") if directory else path != "/"


def _protocols(fs) -> set[str]:
    protocol = getattr(fs, "protocol", "")
    names = {protocol} if isinstance(protocol, str) else set(protocol)
    return {"file" if name == "local" else name for name in names}


def _same_filesystem(a, b) -> bool:
    return bool(_protocols(a) & _protocols(b))


def _is_local(fs) -> bool:
    return "file" in _protocols(fs)


def _resolve(fs, path: str) -> str:
    path = strip_protocol(fs, path)
    if _is_local(fs):
        return os.path.realpath(path)
    return posixpath.normpath(path) if path else path


class _DirectoryResolver:
    """``realpath`` of many files, resolving each directory once."""

    def __init__(self):
        self.directories: dict[str, str] = {}

    def __call__(self, file: str) -> str:
        if os.path.islink(file):
            return os.path.realpath(file)
        directory, name = os.path.split(file)
        resolved = self.directories.get(directory)
        if resolved is None:
            resolved = self.directories[directory] = os.path.realpath(directory)
        return os.path.join(resolved, name)
