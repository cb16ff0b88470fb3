"""Duplicate ids where NeMo Curator 1.x writes them, and how to give the same ids again.

NeMo Curator 1.x's dedup workflows, run without removal, leave under ``output_path``:

- ``ExactDuplicateIds/`` or ``FuzzyDuplicateIds/``: Parquet files of the ids to remove
  (every document of a group but the one kept), in a column ``_curator_dedup_id``;
- ``exact_id_generator.json`` or ``fuzzy_id_generator.json``: how those ids were given
  to the input, so that a removal workflow can give the same ids again.

A script then checks that the ids directory exists ("no duplicates" otherwise) and
removes them with ``TextDuplicatesRemovalWorkflow``. curator-dask's workflows write the
same layout when run without removal and with an ``output_path``, through the project's
writer (atomic parts under a manifest). Ids given by
:class:`~curator_dask.AddId` are the row numbers of the input's partition plan
(partition * 1e9 + position), the same on every read of the same files with the same
bytes per partition; the generator file (:class:`IdNumbering`) records those files and
that blocksize, and :class:`~curator_dask.dedup.TextDuplicatesRemovalWorkflow` refuses
input that changed since. Ids the input already had are written under their own column
name, and removal matches them there.
"""

from __future__ import annotations

import json
import logging
import posixpath
from dataclasses import asdict, dataclass

import dask.dataframe as dd
from fsspec.core import url_to_fs

from curator_dask.dataset import DocumentDataset
from curator_dask.errors import CuratorError, MissingFileError
from curator_dask.io import atomic
from curator_dask.io.identity import identity_changes

__all__ = ["ASSIGNED_ID_FIELD", "IDS_DIRS", "ID_GENERATOR_FILES", "IdNumbering",
           "IdNumberingMismatchError", "write_duplicate_ids"]

logger = logging.getLogger(__name__)

#: NeMo Curator's column of ids its dedup workflows assign.
ASSIGNED_ID_FIELD = "_curator_dedup_id"
#: The directories of duplicate ids under ``output_path``, by kind of dedup.
IDS_DIRS = {"exact": "ExactDuplicateIds", "fuzzy": "FuzzyDuplicateIds"}
#: The id generator files beside them.
ID_GENERATOR_FILES = {"exact": "exact_id_generator.json", "fuzzy": "fuzzy_id_generator.json"}
_FORMAT = 1


class IdNumberingMismatchError(CuratorError, ValueError):
    """The input differs from the one the duplicate ids were numbered on; the message
    names what changed."""


@dataclass(frozen=True)
class IdNumbering:
    """How the ids in a duplicate-ids directory were given: enough to give them again.

    ``id_field`` is the column the ids are in; ``assigned`` says whether the workflow
    numbered the documents (:class:`~curator_dask.AddId` over the plan of ``files`` read
    with ``input_blocksize`` bytes per partition) or took the input's own column.
    """

    input_filetype: str
    input_blocksize: int
    files: list
    id_field: str
    assigned: bool
    format: int = _FORMAT

    def write(self, path: str, storage_options: dict | None = None) -> None:
        """Write as JSON, atomically (a temporary name, then a move)."""
        fs, target = url_to_fs(path, **(storage_options or {}))
        atomic.write_json(fs, target, asdict(self))

    @classmethod
    def read(cls, path: str, storage_options: dict | None = None) -> IdNumbering:
        fs, target = url_to_fs(path, **(storage_options or {}))
        try:
            with fs.open(target, "rb") as handle:
                data = json.loads(handle.read())
            return cls(**data)
        except FileNotFoundError:
            raise MissingFileError(f"{path}: no id generator file (a dedup workflow run "
                                    "without removal writes it beside the ids)") from None
        except (TypeError, ValueError) as err:
            raise IdNumberingMismatchError(
                f"{path} is not an id generator file written by curator-dask ({err}); "
                "run the dedup workflow again to write it") from None

    def check_files(self, files: list, path: str) -> None:
        """Raise :class:`IdNumberingMismatchError` unless ``files`` (the input's
        :func:`~curator_dask.io.identity.files_identity`) are the files the ids were
        given on."""
        changes = identity_changes([list(f) for f in self.files], [list(f) for f in files])
        if changes is None:
            return
        raise IdNumberingMismatchError(
            f"the input is not the one the ids in {path} were given on: {changes}. The ids "
            "would name other documents; run the dedup workflow on this input again")


def write_duplicate_ids(ids: dd.DataFrame, output_path: str, kind: str,
                        numbering: IdNumbering, storage_options: dict | None = None) -> str:
    """Write ``ids`` (one column, ``numbering.id_field``) to ``output_path``'s ids directory
    for ``kind`` (``"exact"`` or ``"fuzzy"``) and the generator file beside it; returns
    the directory. Files an earlier run wrote there are replaced; anyone else's are an
    error (the writer's ``mode="overwrite"``)."""
    directory = posixpath.join(output_path.rstrip("/"), IDS_DIRS[kind])
    dataset: DocumentDataset = DocumentDataset(ids)
    written = dataset.to_parquet(directory, mode="overwrite", storage_options=storage_options)
    numbering.write(posixpath.join(output_path.rstrip("/"), ID_GENERATOR_FILES[kind]),
                    storage_options)
    logger.info("%s dedup: %d duplicate ids written to %s", kind, written.rows, directory)
    return directory
