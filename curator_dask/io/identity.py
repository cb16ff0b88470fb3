"""The identity of input files: how caches and resume know the input is the same.

A file's identity is its size, its modification time, the checksum or ETag its
filesystem reports (fsspec ``info``: S3's ``ETag``, GCS's ``md5Hash``/``crc32c``; a local
disk reports none), and a BLAKE2 hash of its first and last :data:`BLOCK_BYTES` (the
whole file when it is smaller than two blocks). A file edited in place to a text of the
same length changes its modification time and, near either end or in a small file, its
hash; a copy with the same bytes but a new modification time counts as changed.

Caches and resume record the identities they were computed from
(:func:`files_identity`, :func:`plan_identity`) and compare them with
:func:`identity_changes`, which says which file changed and how.

Examples
--------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> fs.pipe_file("/identity-doc/a.jsonl", b'{"text": "abc"}\\n')
>>> before = files_identity(fs, ["/identity-doc/a.jsonl"])
>>> fs.pipe_file("/identity-doc/a.jsonl", b'{"text": "xyz"}\\n')  # same length
>>> identity_changes(before, files_identity(fs, ["/identity-doc/a.jsonl"]))
"the input files changed (1 file: '/identity-doc/a.jsonl' modified (time ...), content changed)"
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import dask

__all__ = ["BLOCK_BYTES", "digest", "file_identity", "files_identity", "identity_changes",
           "plan_digest", "plan_identity"]

#: Bytes hashed at each end of a file.
BLOCK_BYTES = 1 << 20
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created",
               "timeCreated")
_CHECKSUM_KEYS = ("ETag", "etag", "md5Hash", "crc32c", "checksum", "ContentMD5", "md5")
_SHOWN = 3


def _json_time(value):
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, (int, float, str)):
        return value
    return str(value) if value is not None else None


def _ends_hash(fs, path: str, size: int) -> str:
    h = hashlib.blake2b(digest_size=16)
    if size <= 2 * BLOCK_BYTES:
        h.update(fs.cat_file(path))
    else:
        h.update(fs.cat_file(path, start=0, end=BLOCK_BYTES))
        h.update(fs.cat_file(path, start=size - BLOCK_BYTES, end=size))
    return h.hexdigest()


def file_identity(fs, path: str) -> list:
    """``[path, size, mtime, checksum, hash of the first and last blocks]``."""
    info = fs.info(path)
    size = int(info.get("size") or 0)
    mtime = next((info[k] for k in _MTIME_KEYS if info.get(k) is not None), None)
    checksum = next((str(info[k]) for k in _CHECKSUM_KEYS if info.get(k)), None)
    return [path, size, _json_time(mtime), checksum, _ends_hash(fs, path, size)]


def files_identity(fs, paths: Iterable[str]) -> list[list]:
    """The identity of each file (read in parallel), sorted by path."""
    paths = sorted(set(paths))
    if len(paths) < 2:
        return [file_identity(fs, p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(16, len(paths))) as pool:
        return list(pool.map(lambda p: file_identity(fs, p), paths))


def digest(value) -> str:
    """A short stable hash of JSON-able ``value`` (a fingerprint, an identity).

    >>> digest({"b": 1, "a": [2]}) == digest({"a": [2], "b": 1})
    True
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def plan_identity(fs, plan: Sequence) -> dict:
    """What a partition plan reads: a token of its slices, and every file's identity."""
    files = {s.file.path for spec in plan for s in spec.slices}
    return {"plan": plan_digest(plan), "files": files_identity(fs, files)}


def plan_digest(plan: Sequence) -> str:
    """A token of a partition plan's specs (what each partition reads, in order)."""
    return dask.base.tokenize([repr(p) for p in plan])


def _when(value) -> str:
    if isinstance(value, (int, float)):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value)) + \
            f".{int(value % 1 * 1000):03d}"
    return str(value)


def _how(old: list, new: list) -> str:
    parts = []
    if old[1] != new[1]:
        parts.append(f"size {old[1]} -> {new[1]} bytes")
    if old[2] != new[2]:
        parts.append(f"modified (time {_when(old[2])} -> {_when(new[2])})")
    if old[3] != new[3]:
        parts.append(f"checksum {old[3]} -> {new[3]}")
    if old[4] != new[4]:
        parts.append("content changed" + ("" if parts else
                                          " (same size and modification time)"))
    return ", ".join(parts) or "changed"


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def identity_changes(old, new) -> str | None:
    """Which input files changed between two :func:`files_identity` lists, and how, in
    words (None when they are the same).

    Examples
    --------
    >>> a, b = ["a", 1, 5.0, None, "x"], ["b", 2, 5.0, None, "y"]
    >>> identity_changes([a], [a, b])
    "the input files changed (1 -> 2 files: 'b' added)"
    """
    if old == new:
        return None
    if not isinstance(old, list) or not all(isinstance(e, list) and len(e) == 5 for e in old):
        return "the input files were recorded without their identity (by an earlier version)"
    before = {e[0]: e for e in old}
    after = {e[0]: e for e in new}
    details = []
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    if added:
        details.append(f"{_listed(added)} added")
    if removed:
        details.append(f"{_listed(removed)} removed")
    changed = [p for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    details += [f"{p!r} {_how(before[p], after[p])}" for p in changed[:_SHOWN]]
    if len(changed) > _SHOWN:
        details.append(f"{len(changed) - _SHOWN} more changed")
    count = (f"{len(old)} -> {len(new)} files" if len(old) != len(new)
             else f"{len(new)} file" + ("s" if len(new) != 1 else ""))
    return f"the input files changed ({count}: {'; '.join(details)})"
