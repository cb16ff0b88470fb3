"""The one module that writes files: atomic writes, exclusive creates, removals.

Everything curator-dask writes goes through these functions: parts, manifests, part
markers, completion records, leases, caches, reports, downloads, node-setup markers and
model load logs. A test reads the package's source and fails, naming the line, on any
other write (an ``open`` for writing, ``fs.mv``, ``fs.rm``, ``os.replace``,
``shutil.rmtree``, ``to_parquet`` on a path, ...). *Which* paths a run may write is
decided before any of these is called, by the run's
:class:`~curator_dask.io.guard.OutputGuard`.

- :func:`atomic_open` writes a hidden temporary file beside the target and renames it
  into place only when complete (and removes it on error), so a reader never finds a
  half-written file under a final name. Temporary names end in ``.tmp-<32 hex digits>``
  and start with ``.``: readers skip them and a later write of the project removes them.
- :func:`create_exclusive` creates a file only if nothing is there, atomically where the
  filesystem allows it (a hard link on a local disk, ``mode="xb"`` in memory), and
  otherwise by writing and reading back (see :mod:`curator_dask.io.lease`).
- Removals never follow a symbolic link (:func:`remove_entry` unlinks the link).

Examples
--------
>>> import fsspec, json
>>> fs = fsspec.filesystem("memory")
>>> write_json(fs, "/atomic-doc/state.json", {"done": True})
>>> json.loads(fs.cat_file("/atomic-doc/state.json"))
{'done': True}
>>> create_exclusive(fs, "/atomic-doc/state.json", b"{}")
False
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import numpy as np

from curator_dask.errors import ArgumentTypeError
from curator_dask.io.errors import OutputExistsError

__all__ = [
    "TMP_SUFFIX",
    "atomic_open",
    "create_exclusive",
    "has_exclusive_create",
    "is_local",
    "is_temporary",
    "json_default",
    "make_dirs",
    "make_local_dirs",
    "make_temp_dir",
    "move",
    "open_lock",
    "open_partial",
    "performance_report",
    "remove",
    "remove_empty_directory",
    "remove_entry",
    "remove_tree",
    "staged_directory",
    "staged_files",
    "temporary_name",
    "touch",
    "write_bytes",
    "write_json",
]

#: What a temporary file's name ends with, before 32 hex digits.
TMP_SUFFIX = ".tmp-"
_TEMPORARY = re.compile(r"^\..+" + re.escape(TMP_SUFFIX) + r"[0-9a-f]{32}$")


def _protocols(fs) -> set[str]:
    protocol = getattr(fs, "protocol", "")
    return {protocol} if isinstance(protocol, str) else set(protocol)


def is_local(fs) -> bool:
    """Whether ``fs`` is the local filesystem."""
    return bool(_protocols(fs) & {"file", "local"})


def has_exclusive_create(fs) -> bool:
    """Whether :func:`create_exclusive` is atomic on ``fs`` (local disks and memory)."""
    return is_local(fs) or "memory" in _protocols(fs)


def temporary_name(path: str) -> str:
    """A hidden name beside ``path`` for writing it: ``dir/.name.tmp-<32 hex>``.

    Examples
    --------
    >>> temporary_name("out/part-00001.parquet")[:-32]
    'out/.part-00001.parquet.tmp-'
    >>> temporary_name("out/.part-00001.done")[:-32]
    'out/.part-00001.done.tmp-'
    """
    directory, name = posixpath.split(path)
    hidden = name if name.startswith(".") else "." + name
    return posixpath.join(directory, f"{hidden}{TMP_SUFFIX}{uuid.uuid4().hex}")


def is_temporary(name: str) -> bool:
    """Whether ``name`` (a base name) is a temporary file of :func:`temporary_name`."""
    return bool(_TEMPORARY.match(name))


def _discard(fs, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if fs.exists(path):
            fs.rm(path)


@contextlib.contextmanager
def atomic_open(fs, path: str, *, compression: str | None = None, exclusive: bool = False,
                keep_mode: bool = False) -> Iterator:
    """A binary handle whose bytes appear at ``path`` only once it is closed whole.

    ``exclusive=True`` raises ``FileExistsError`` (and keeps nothing) when ``path``
    exists by the time the write is complete. ``keep_mode=True`` gives the new file the
    permissions of the one it replaces (a local file rewritten in place).
    """
    tmp = temporary_name(path)
    options = {"compression": compression} if compression else {}
    try:
        with fs.open(tmp, "wb", **options) as handle:
            yield handle
        if exclusive and fs.exists(path):
            raise OutputExistsError(path)
        if keep_mode and is_local(fs) and os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    except BaseException:
        _discard(fs, tmp)
        raise
    fs.mv(tmp, path)


def write_bytes(fs, path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(fs, path) as handle:
        handle.write(data)


def json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise ArgumentTypeError(f"cannot write {type(value).__name__} as JSON")


def write_json(fs, path: str, value) -> None:
    """Write ``value`` as JSON (keys sorted; numpy scalars as numbers) atomically."""
    write_bytes(fs, path, json.dumps(value, sort_keys=True, default=json_default).encode())


def create_exclusive(fs, path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` if nothing is there; False if something is.

    On a local disk the complete file is hard-linked into place (atomic, also on NFS);
    in memory the file is opened with ``mode="xb"``. Elsewhere (object stores) a missing
    file is written with :func:`write_bytes`: two writers racing may both see it missing,
    and the later one wins; :class:`~curator_dask.io.lease.Lease` reads its file back to
    tell which.
    """
    if is_local(fs):
        make_dirs(fs, posixpath.dirname(path))
        tmp = temporary_name(path)
        with open(tmp, "wb") as handle:
            handle.write(data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        return True
    if has_exclusive_create(fs):  # in memory
        try:
            with fs.open(path, "xb") as handle:
                handle.write(data)
        except FileExistsError:
            return False
        return True
    if fs.exists(path):
        return False
    write_bytes(fs, path, data)
    return True


def remove(fs, path: str, *, missing_ok: bool = False) -> None:
    """Delete the file ``path``."""
    try:
        fs.rm(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def remove_entry(fs, entry: str) -> None:
    """Delete a file or a directory tree; a symbolic link is unlinked, never followed."""
    if is_local(fs) and os.path.islink(entry):
        os.unlink(entry)
    else:
        fs.rm(entry, recursive=True)


def remove_empty_directory(fs, path: str) -> bool:
    """Delete the directory ``path`` if it exists and is empty; whether it did."""
    if fs.exists(path) and fs.isdir(path) and not fs.ls(path, detail=False):
        fs.rmdir(path)
        return True
    return False


def make_dirs(fs, path: str) -> None:
    """Create the directory ``path`` and its parents (nothing if it exists)."""
    if path:
        fs.makedirs(path, exist_ok=True)


def move(fs, source: str, target: str) -> None:
    """Rename ``source`` to ``target`` (one step where the filesystem has a rename)."""
    fs.mv(source, target)


def make_temp_dir(prefix: str) -> str:
    """A new private directory in the system's temporary directory."""
    return tempfile.mkdtemp(prefix=prefix)


# -- local files a process keeps for itself ---------------------------------------------------

def make_local_dirs(path: str) -> None:
    """Create the local directory ``path`` and its parents (nothing if it exists)."""
    os.makedirs(path, exist_ok=True)


def open_lock(path: str):
    """``path`` opened for appending (created if missing): a handle to ``flock``."""
    return open(path, "a")


def touch(path: str) -> None:
    """Create the empty file ``path`` (a marker)."""
    with open(path, "w"):
        pass


def remove_tree(path: str) -> None:
    """Delete the local directory ``path`` and what it holds, if it exists."""
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def open_partial(path: str, offset: int) -> Iterator:
    """The local file ``path`` open for writing from byte ``offset`` on (what is after it
    is cut): to resume a download. ``offset=0`` starts the file over."""
    with open(path, "ab" if offset else "wb") as handle:
        handle.truncate(offset)
        yield handle


@contextlib.contextmanager
def performance_report(fs, path: str) -> Iterator[None]:
    """distributed's performance report of what runs inside, saved to ``path``: written
    to a private temporary file by distributed, then moved into place atomically."""
    from distributed import performance_report as record

    directory = make_temp_dir("curator-report-")
    draft = os.path.join(directory, "report.html")
    try:
        with record(filename=draft):
            yield
    finally:
        if os.path.exists(draft):
            with open(draft, "rb") as handle:
                write_bytes(fs, path, handle.read())
        remove_tree(directory)


@contextlib.contextmanager
def staged_directory(path: str) -> Iterator[str]:
    """A temporary local directory to fill; on success it becomes ``path`` (which must
    not exist, or be empty) in one rename, so a failed write leaves no partial directory."""
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    draft = tempfile.mkdtemp(prefix="." + os.path.basename(path) + TMP_SUFFIX, dir=parent)
    try:
        yield draft
        if os.path.isdir(path) and not os.listdir(path):
            os.rmdir(path)
        os.rename(draft, path)
    except BaseException:
        shutil.rmtree(draft, ignore_errors=True)
        raise


@contextlib.contextmanager
def staged_files(path: str) -> Iterator[str]:
    """A temporary local directory to fill; on success each file in it is moved into
    ``path`` (made if missing) by one rename, replacing a file of the same name, so a
    failed write leaves ``path`` as it was. For adding files to a directory that may
    already hold others (a model beside its tokenizer); :func:`staged_directory` makes a
    whole new directory in one rename."""
    path = os.path.abspath(os.fspath(path))
    os.makedirs(path, exist_ok=True)
    draft = tempfile.mkdtemp(prefix="." + os.path.basename(path) + TMP_SUFFIX, dir=path)
    try:
        yield draft
        for root, _, names in os.walk(draft):
            target_root = os.path.join(path, os.path.relpath(root, draft))
            os.makedirs(target_root, exist_ok=True)
            for name in names:
                os.replace(os.path.join(root, name), os.path.join(target_root, name))
    finally:
        shutil.rmtree(draft, ignore_errors=True)
