"""The on-disk duplicate list: written whole, then marked complete, so a rerun can resume.

A duplicate list lives in its own directory, one Parquet file per hash partition
(``part-00000.parquet`` ...), and a completion marker ``_COMPLETE.json`` written last and
atomically. Without the marker the directory is an interrupted write and is computed
again; with it, the list is read back one file per partition, which keeps every hash
group whole in one partition. The marker records a fingerprint of what the list was
computed from (input files and parameters): a list made from other input is not reused.
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from dataclasses import dataclass

from fsspec.core import url_to_fs

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.exact import HASH_FIELD, mark_hash_partitioned

__all__ = ["CachedDuplicates", "write_duplicates", "read_duplicates", "MARKER",
           "DUPLICATES_DIR"]

logger = logging.getLogger(__name__)

MARKER = "_COMPLETE.json"
#: The subdirectory of a ``cache_path`` that holds the exact duplicate list.
DUPLICATES_DIR = "exact_duplicates"
_FORMAT = 1


@dataclass
class CachedDuplicates:
    """A duplicate list on disk: the dataset read back, its row count and origin."""

    duplicates: DocumentDataset
    path: str
    rows: int
    from_cache: bool


def _directory(cache_path: str) -> str:
    return cache_path.rstrip("/") + "/" + DUPLICATES_DIR


def write_duplicates(duplicates: DocumentDataset, cache_path: str, *,
                     fingerprint: dict | None = None,
                     storage_options: dict | None = None) -> CachedDuplicates:
    """Compute ``duplicates`` into ``cache_path/exact_duplicates``, then mark it complete.

    Anything already in that directory (an earlier or interrupted list) is replaced.
    """
    path = _directory(cache_path)
    written = duplicates.to_parquet(path, mode="overwrite", storage_options=storage_options)
    fs, root = url_to_fs(path, **(storage_options or {}))
    marker = {"format": _FORMAT, "rows": written.rows, "files": len(written.files),
              "fingerprint": fingerprint}
    target = posixpath.join(root, MARKER)
    tmp = posixpath.join(root, f".{MARKER}.tmp-{uuid.uuid4().hex}")
    fs.pipe_file(tmp, json.dumps(marker, sort_keys=True).encode("utf-8"))
    fs.mv(tmp, target)
    logger.info("wrote %d duplicate rows in %d files to %s", written.rows,
                len(written.files), path)
    return CachedDuplicates(_read_back(path, storage_options), path, written.rows, False)


def read_duplicates(cache_path: str, *, fingerprint: dict | None = None,
                    storage_options: dict | None = None) -> CachedDuplicates | None:
    """The complete duplicate list in ``cache_path``, or None when there is none to reuse.

    None when the marker is missing (never written, or interrupted), when it was made from
    another fingerprint, or when its files are not all there.
    """
    path = _directory(cache_path)
    fs, root = url_to_fs(path, **(storage_options or {}))
    target = posixpath.join(root, MARKER)
    if not fs.exists(target):
        if fs.exists(root):
            logger.info("%s has no completion marker: computing the duplicates again", path)
        return None
    marker = json.loads(fs.cat_file(target))
    if marker.get("format") != _FORMAT or marker.get("fingerprint") != fingerprint:
        logger.warning("the duplicate list in %s was made from other input or parameters: "
                       "computing it again", path)
        return None
    parts = [p for p in fs.ls(root, detail=False)
             if posixpath.basename(p).startswith("part-") and p.endswith(".parquet")]
    if len(parts) != marker["files"]:
        logger.warning("%s holds %d of the %d files its marker lists: computing again",
                       path, len(parts), marker["files"])
        return None
    logger.info("reusing %d duplicate rows from %s", marker["rows"], path)
    return CachedDuplicates(_read_back(path, storage_options), path, marker["rows"], True)


def _read_back(path: str, storage_options: dict | None) -> DocumentDataset:
    # One file per partition: each file is one hash partition, so groups stay whole.
    ds = DocumentDataset.read_parquet(path, files_per_partition=1, text_field=HASH_FIELD,
                                      storage_options=storage_options)
    return mark_hash_partitioned(ds)
