"""Remove listed duplicate ids from a corpus on disk: NeMo Curator 1.x's second step.

A NeMo Curator 1.x script finds duplicates with a dedup workflow run without removal
(ids under ``output_path/ExactDuplicateIds`` or ``FuzzyDuplicateIds``), then removes them
with ``TextDuplicatesRemovalWorkflow``. This is that workflow, with its parameters: it
reads the input, gives it the same ids again (the generator file records how, see
:mod:`curator_dask.dedup.duplicate_ids`, and input that changed since is refused), drops
the listed documents (counted as ``listed_duplicate``) and writes the rest through the
project's writer. curator-dask's workflows also remove in one run
(``perform_removal=True``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from curator_dask.compat import nemo_keywords
from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.dedup.cache import FILETYPES, OUTPUT_MODES, FileType, OutputMode
from curator_dask.dedup.duplicate_ids import (
    ASSIGNED_ID_FIELD,
    IdNumbering,
    IdNumberingMismatchError,
)
from curator_dask.dedup.ids import check_unique_ids, repeated_ids
from curator_dask.dedup.removal import remove_ids
from curator_dask.dedup.workflow import read_input
from curator_dask.errors import InvalidArgumentError
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.identity import files_identity
from curator_dask.stages.columns import require_columns
from curator_dask.stages.ids import AddId
from curator_dask.task_names import scoped

__all__ = ["LISTED_DUPLICATE_REASON", "RemovalResult", "TextDuplicatesRemovalWorkflow"]

logger = logging.getLogger(__name__)

#: The drop reason of the documents this workflow removes.
LISTED_DUPLICATE_REASON = "listed_duplicate"


@dataclass
class RemovalResult:
    """What a removal did: ``input_documents == output.rows + removed_documents``."""

    input_documents: int
    removed_documents: int
    output: WriteResult

    @property
    def metadata(self) -> dict:
        """NeMo Curator's name for the counts (``num_duplicates_removed``)."""
        return {"num_duplicates_removed": self.removed_documents,
                "input_documents": self.input_documents, "output_rows": self.output.rows}


class TextDuplicatesRemovalWorkflow:
    """Drop the documents whose ids are listed in ``ids_to_remove_path`` and write the rest.

    Parameters
    ----------
    input_path : str or list of str
        The corpus the ids were found in (files or directories, any fsspec URL).
    ids_to_remove_path : str
        Parquet files of the ids to remove (``ExactDuplicateIds``, ``FuzzyDuplicateIds``).
    output_path : str
        Directory for the kept documents; it must not be, contain or lie inside an input
        path.
    input_filetype : {"parquet", "jsonl"}, default "parquet"
    output_filetype : {"parquet", "jsonl"}, default "parquet"
    id_field : str, default "_curator_dedup_id"
        The id column of the input. With ``id_generator_path``, ids the dedup workflow
        gave (``_curator_dedup_id``) are given again under this name.
    duplicate_id_field : str, default "id"
        The column of ``ids_to_remove_path`` that holds the ids.
    id_generator_path : str, optional
        The ``*_id_generator.json`` the dedup workflow wrote: the input is read with its
        blocksize and checked against its files, and its ids given again.
    input_blocksize : int or str, optional
        Bytes per partition when there is no generator file.
    input_fields : list of str, optional
        Read only these columns.
    output_fields : list of str, optional
        Write only these columns.
    drop_id_field : bool, default False
        Leave ``id_field`` out of the output.
    output_mode : {"error", "overwrite", "overwrite_all"}, default "error"
        As for :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.
    input_file_extensions : list of str, optional
        Accepted when they are extensions curator-dask reads for ``input_filetype``.
    storage_options : dict, optional
        For fsspec, used for input, ids and output.
    """

    @nemo_keywords()
    def __init__(self, input_path, ids_to_remove_path: str, output_path: str, *,
                 input_filetype: FileType = "parquet", output_filetype: FileType = "parquet",
                 id_field: str = ASSIGNED_ID_FIELD, duplicate_id_field: str = "id",
                 id_generator_path: str | None = None,
                 input_blocksize: int | str | None = None,
                 input_fields: list[str] | None = None, output_fields: list[str] | None = None,
                 drop_id_field: bool = False, output_mode: OutputMode = "error",
                 input_file_extensions: list[str] | None = None,
                 storage_options: dict | None = None):
        for name, value in (("input_filetype", input_filetype),
                            ("output_filetype", output_filetype)):
            if value not in FILETYPES:
                raise InvalidArgumentError(f"{name} must be one of {FILETYPES}, got {value!r}")
        if output_mode not in OUTPUT_MODES:
            raise InvalidArgumentError(
                f"output_mode must be one of {OUTPUT_MODES}, got {output_mode!r}")
        if drop_id_field and output_fields and id_field in output_fields:
            raise InvalidArgumentError(f"drop_id_field=True but output_fields lists {id_field!r}")
        readable = JSONL_EXTENSIONS if input_filetype == "jsonl" else PARQUET_EXTENSIONS
        other = [e for e in input_file_extensions or ()
                 if "." + e.lstrip(".").lower() not in readable]
        if other:
            raise InvalidArgumentError(
                f"input_file_extensions {other} are not {input_filetype} "
                f"extensions curator-dask reads ({', '.join(readable)}); pass "
                "input_path as the list of files to read")
        self.input_path = input_path
        self.ids_to_remove_path = ids_to_remove_path
        self.output_path = output_path
        self.input_filetype = input_filetype
        self.output_filetype = output_filetype
        self.id_field = id_field
        self.duplicate_id_field = duplicate_id_field
        self.id_generator_path = id_generator_path
        self.input_blocksize = input_blocksize
        self.input_fields = input_fields
        self.output_fields = output_fields
        self.drop_id_field = drop_id_field
        self.output_mode = output_mode
        self.storage_options = storage_options

    def _files(self) -> list[list]:
        """The identity of every input file (see :mod:`curator_dask.io.identity`)."""
        extensions = JSONL_EXTENSIONS if self.input_filetype == "jsonl" else PARQUET_EXTENSIONS
        fs, files = list_files(self.input_path, extensions, self.storage_options)
        return files_identity(fs, [f.path for f in files])

    def read(self) -> DocumentDataset:
        """The input with the ids the list names documents by."""
        blocksize, numbering = self.input_blocksize, None
        if self.id_generator_path is not None:
            numbering = IdNumbering.read(self.id_generator_path, self.storage_options)
            if numbering.input_filetype != self.input_filetype:
                raise IdNumberingMismatchError(
                    f"the ids in {self.id_generator_path} were given to {numbering.input_filetype} "
                    f"input; pass input_filetype={numbering.input_filetype!r}")
            numbering.check_files(self._files(), self.id_generator_path)
            blocksize = numbering.input_blocksize
        columns = list(self.input_fields) if self.input_fields else None
        ds = read_input(self.input_path, self.input_filetype, blocksize, "error",
                        columns=columns, storage_options=self.storage_options)
        if numbering is not None and numbering.assigned:
            if self.id_field in ds.df.columns:
                raise InvalidArgumentError(
                    f"the input already has a column {self.id_field!r}; the ids "
                    f"in {self.id_generator_path} were given by the dedup "
                    "workflow: pass another id_field=")
            return AddId(id_field=self.id_field)(ds)
        if numbering is not None and numbering.id_field != self.id_field:
            raise IdNumberingMismatchError(
                f"the ids in {self.ids_to_remove_path} are the input's own "
                f"{numbering.id_field!r} column: pass id_field={numbering.id_field!r} and "
                f"duplicate_id_field={numbering.id_field!r}")
        require_columns("TextDuplicatesRemovalWorkflow", ds.df.columns, [self.id_field],
                        fix="Pass id_generator_path= (the dedup workflow's "
                            "*_id_generator.json) to give the ids again, or id_field= naming "
                            "the input's id column.")
        check_unique_ids(repeated_ids(ds.df, self.id_field), self.id_field,
                         who="TextDuplicatesRemovalWorkflow")
        return ds

    def ids(self):
        """The ids to remove, in a column named ``id_field``."""
        listed = DocumentDataset.read_parquet(self.ids_to_remove_path, text_field=None,
                                              storage_options=self.storage_options)
        require_columns(f"the ids in {self.ids_to_remove_path}", listed.df.columns,
                        [self.duplicate_id_field],
                        fix="Pass duplicate_id_field= naming the column of ids.")
        return listed.df[[self.duplicate_id_field]].rename(
            columns={self.duplicate_id_field: self.id_field})

    @scoped("remove_duplicates")
    def run(self) -> RemovalResult:
        """Remove the listed documents and write the rest."""
        ds = remove_ids(self.read(), self.ids(), id_field=self.id_field,
                        reason=LISTED_DUPLICATE_REASON)
        df = ds.df
        if self.output_fields:
            df = df[list(self.output_fields)]
        if self.drop_id_field:
            df = df.drop(columns=[self.id_field])
        out = ds.with_frames(df)
        write = out.to_jsonl if self.output_filetype == "jsonl" else out.to_parquet
        written = write(self.output_path, mode=self.output_mode,
                        storage_options=self.storage_options)
        removed = written.dropped.get(LISTED_DUPLICATE_REASON, 0)
        logger.info("removal: %d documents in, %d removed, %d written to %s",
                    written.rows + removed, removed, written.rows, self.output_path)
        return RemovalResult(input_documents=written.rows + removed, removed_documents=removed,
                             output=written)
