"""Find input files through fsspec, in a deterministic order.

A path that exists is read as it is spelled, whatever characters it holds
(``in/part[1].jsonl``, a directory named ``d[12]`` or ``in?*``); only a path that does not
exist is a glob pattern (:func:`is_pattern`). Every reader, the command line's input
checks and the dedup workflows find their files through :func:`list_files`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

import fsspec
from fsspec.core import url_to_fs
from fsspec.utils import infer_compression

from curator_dask._fsspec import strip_protocol
from curator_dask.errors import InvalidArgumentError
from curator_dask.io.errors import InputNotFoundError

__all__ = [
    "JSONL_EXTENSIONS",
    "PARQUET_EXTENSIONS",
    "InputFile",
    "is_pattern",
    "list_files",
    "pattern_root",
    "sample_files",
]

JSONL_EXTENSIONS = (".jsonl", ".json", ".ndjson")
PARQUET_EXTENSIONS = (".parquet", ".pq")
COMPRESSION_SUFFIXES = {".gz": "gzip", ".zst": "zstd", ".bz2": "bz2", ".xz": "xz"}
#: The characters that make a path that does not exist a glob pattern.
WILDCARDS = "*?["


@dataclass(frozen=True)
class InputFile:
    """One input file: its path on ``fs``, size in bytes, compression and display name.

    ``name`` is the path relative to the input root (a directory given by the user, or
    the common parent of the files), used by ``add_filename`` and ``write_to_filename``.
    """

    path: str
    size: int
    compression: str | None
    name: str


def _has_extension(path: str, extensions: Sequence[str]) -> bool:
    lower = path.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if lower.endswith(suffix):
            lower = lower[: -len(suffix)]
            break
    return lower.endswith(tuple(extensions))


def _compression_of(path: str) -> str | None:
    for suffix, name in COMPRESSION_SUFFIXES.items():
        if path.lower().endswith(suffix):
            return name
    return infer_compression(path)


def is_pattern(fs, path: str) -> bool:
    """Whether ``path`` (stripped of its protocol) is a glob pattern: it holds a wildcard
    (``*``, ``?``, ``[``) and does not exist. A path that exists is always literal.

    Examples
    --------
    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe("/docs/part[1].jsonl", b"{}")
    >>> is_pattern(fs, "/docs/part[1].jsonl"), is_pattern(fs, "/docs/part[2].jsonl")
    (False, True)
    >>> is_pattern(fs, "/docs/none.jsonl")
    False
    """
    return any(ch in path for ch in WILDCARDS) and not fs.exists(path)


def pattern_root(pattern: str) -> str:
    """The directory before the first path component that holds a wildcard.

    Examples
    --------
    >>> pattern_root("/data/2024-*/part-?.jsonl")
    '/data'
    """
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(ch in part for ch in WILDCARDS):
            return "/".join(parts[:i]) or ("/" if pattern.startswith("/") else "")
    return posixpath.dirname(pattern)


# One branch per kind of path (literal file, directory, glob, list of them) and per reason
# a listing names nothing.
def list_files(  # noqa: PLR0912
    paths: str | Sequence[str],
    extensions: Sequence[str],
    storage_options: dict | None = None,
) -> tuple[fsspec.AbstractFileSystem, list[InputFile]]:
    """Expand a directory, a glob or a list of paths into sorted input files.

    A path that exists is taken literally: a directory is searched recursively and
    filtered by ``extensions`` (a compression suffix such as ``.gz`` is allowed after the
    extension; names starting with ``.`` or ``_`` are skipped), a file is taken as it
    is, whatever its name. A path that does not exist and holds a wildcard is a glob
    (see :func:`is_pattern`). All paths must be on one filesystem.

    Raises
    ------
    InputNotFoundError
        (a ``FileNotFoundError``) When a path does not exist, a pattern matches nothing
        (the message says how to match a literal ``[``), or nothing with the extensions
        was found.
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [str(paths)]
    paths = [str(p) for p in paths]
    if not paths:
        raise InvalidArgumentError("no input paths given")
    fs, _ = url_to_fs(paths[0], **(storage_options or {}))

    found: dict[str, int] = {}
    roots: list[str] = []
    for raw in paths:
        path = strip_protocol(fs, raw)
        if is_pattern(fs, path):
            matches = fs.glob(path, detail=True)
            matches = {p: info for p, info in matches.items() if info.get("type") != "directory"}
            if not matches:
                raise InputNotFoundError(raw, pattern=True)
            for p, info in matches.items():
                if _has_extension(p, extensions):
                    found[p] = info.get("size") or 0
            roots.append(pattern_root(path))
        elif fs.isdir(path):
            for p, info in fs.find(path, detail=True).items():
                hidden = posixpath.basename(p).startswith((".", "_"))
                if _has_extension(p, extensions) and not hidden:
                    found[p] = info.get("size") or 0
            roots.append(path.rstrip("/"))
        elif fs.exists(path):
            found[path] = fs.info(path).get("size") or 0
            roots.append(posixpath.dirname(path))
        else:
            raise InputNotFoundError(raw)
    if not found:
        raise InputNotFoundError(", ".join(map(repr, paths)), extensions=(
            f"{', '.join(extensions)} (optionally compressed: {', '.join(COMPRESSION_SUFFIXES)})"))
    root = _common_root(roots)
    files = [
        InputFile(path=p, size=found[p], compression=_compression_of(p), name=_relative(p, root))
        for p in sorted(found)
    ]
    return fs, files


def sample_files(files: Sequence[InputFile], n: int) -> list[InputFile]:
    """Up to ``n`` files spread evenly over the listing, the first and the last included.

    Examples
    --------
    >>> files = [InputFile(f"/d/{i}.jsonl", 1, None, f"{i}.jsonl") for i in range(10)]
    >>> [f.name for f in sample_files(files, 4)]
    ['0.jsonl', '3.jsonl', '6.jsonl', '9.jsonl']
    """
    if len(files) <= n:
        return list(files)
    if n <= 1:
        return list(files[:n])
    picks = sorted({round(i * (len(files) - 1) / (n - 1)) for i in range(n)})
    return [files[i] for i in picks]


def _common_root(roots: list[str]) -> str:
    if len(roots) == 1:
        return roots[0]
    split = [r.split("/") for r in roots]
    common = []
    for parts in zip(*split, strict=False):  # up to the shortest path
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return "/".join(common)


def _relative(path: str, root: str) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return posixpath.basename(path)


def open_input(fs, path: str, **kwargs):
    """Open ``path`` for reading with a file position of its own.

    fsspec's in-memory filesystem hands every ``open`` of a path the *same* file object,
    so two readers of one file (two partitions on threads, or a reader and its resync
    check) would move each other's position. Such a file is copied into a private buffer;
    every other filesystem opens as usual.
    """
    from fsspec.implementations.memory import MemoryFileSystem

    if isinstance(fs, MemoryFileSystem) and kwargs.get("mode", "rb") == "rb":
        import io

        from fsspec.compression import compr

        handle = io.BytesIO(fs.cat_file(path))
        compression = kwargs.get("compression")
        return compr[compression](handle, mode="rb") if compression else handle
    return fs.open(path, "rb", **kwargs)
