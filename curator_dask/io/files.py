"""Find input files through fsspec, in a deterministic order."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

import fsspec
from fsspec.core import url_to_fs
from fsspec.utils import infer_compression

from curator_dask._fsspec import strip_protocol

__all__ = ["InputFile", "list_files", "sample_files", "JSONL_EXTENSIONS", "PARQUET_EXTENSIONS"]

JSONL_EXTENSIONS = (".jsonl", ".json", ".ndjson")
PARQUET_EXTENSIONS = (".parquet", ".pq")
COMPRESSION_SUFFIXES = {".gz": "gzip", ".zst": "zstd", ".bz2": "bz2", ".xz": "xz"}


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


def list_files(
    paths: str | Sequence[str],
    extensions: Sequence[str],
    storage_options: dict | None = None,
) -> tuple[fsspec.AbstractFileSystem, list[InputFile]]:
    """Expand a directory, a glob or a list of paths into sorted input files.

    Directories are searched recursively and filtered by ``extensions`` (a compression
    suffix such as ``.gz`` is allowed after the extension); explicitly named files are
    taken as they are. All paths must be on one filesystem.

    Raises
    ------
    FileNotFoundError
        When a path does not exist, or nothing with the extensions was found.
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [str(paths)]
    paths = [str(p) for p in paths]
    if not paths:
        raise ValueError("no input paths given")
    fs, _ = url_to_fs(paths[0], **(storage_options or {}))

    found: dict[str, int] = {}
    roots: list[str] = []
    for raw in paths:
        path = strip_protocol(fs, raw)
        if any(ch in path for ch in "*?["):
            matches = fs.glob(path, detail=True)
            matches = {p: info for p, info in matches.items() if info.get("type") != "directory"}
            if not matches:
                raise FileNotFoundError(f"no files match the pattern {raw!r}")
            for p, info in matches.items():
                if _has_extension(p, extensions):
                    found[p] = info.get("size") or 0
            roots.append(_glob_root(path))
        elif fs.isdir(path):
            for p, info in fs.find(path, detail=True).items():
                if _has_extension(p, extensions) and not posixpath.basename(p).startswith((".", "_")):
                    found[p] = info.get("size") or 0
            roots.append(path.rstrip("/"))
        elif fs.exists(path):
            found[path] = fs.info(path).get("size") or 0
            roots.append(posixpath.dirname(path))
        else:
            raise FileNotFoundError(f"input path does not exist: {raw!r}")
    if not found:
        raise FileNotFoundError(
            f"no files ending in {', '.join(extensions)} (optionally compressed: "
            f"{', '.join(COMPRESSION_SUFFIXES)}) under {', '.join(map(repr, paths))}"
        )
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


def _glob_root(pattern: str) -> str:
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(ch in part for ch in "*?["):
            return "/".join(parts[:i])
    return posixpath.dirname(pattern)


def _common_root(roots: list[str]) -> str:
    if len(roots) == 1:
        return roots[0]
    split = [r.split("/") for r in roots]
    common = []
    for parts in zip(*split):
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
