"""Read Parquet partitions (whole files or groups of row groups) with pyarrow.

Errors name the file and the row (1-based, counted over the whole file) where they can:
a value that does not fit the dataset's type, a text column that is not strings, a column
the dataset's schema lacks, a file that cannot be decoded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curator_dask.io.arrow_types import to_frame
from curator_dask.io.errors import CorruptFileError, reading
from curator_dask.io.files import InputFile, open_input, sample_files
from curator_dask.io.partitions import FileSlice, PartitionSpec
from curator_dask.io.tables import ColumnConflict, Conformer, SchemaUnion

__all__ = [
    "SAMPLE_FILES",
    "infer_parquet_schema",
    "open_parquet",
    "read_parquet_partition",
    "read_parquet_table",
    "stored_rows",
]

logger = logging.getLogger(__name__)

# Schema inference unifies the footers of up to this many files, spread over the listing.
SAMPLE_FILES = 16
# Columns pandas writes for its index: not data, never reported as unexpected.
_INDEX_COLUMN = re.compile(r"__index_level_\d+__")
_DECODE_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError)


def open_parquet(handle, path: str) -> pq.ParquetFile:
    """Open a Parquet file from a binary handle; a broken footer names the file."""
    try:
        return pq.ParquetFile(handle)
    except _DECODE_ERRORS as err:
        raise CorruptFileError(
            path, f"not a complete Parquet file: {type(err).__name__}: {err}"
        ) from err


def infer_parquet_schema(fs, files: Sequence[InputFile], *, settled: Collection[str] = (),
                         columns: Collection[str] | None = None) -> pa.Schema:
    """The union of the schemas in the footers of up to :data:`SAMPLE_FILES` files.

    Files are spread over the listing (the first and the last among them). Two files that
    give a column incompatible types are a
    :class:`~curator_dask.io.errors.SchemaConflictError` naming both, unless the column
    is in ``settled`` (typed by the caller) or outside ``columns``.
    """
    union = SchemaUnion(settled=settled, columns=columns, unit="row")
    for f in sample_files(files, SAMPLE_FILES):
        with reading(f.path), open_input(fs, f.path) as handle:
            schema = open_parquet(handle, f.path).schema_arrow
        union.add(pa.schema([field for field in schema if not _INDEX_COLUMN.fullmatch(field.name)]),
                  f.path)
    return union.schema()


def stored_rows(fs, plan: Sequence[PartitionSpec]) -> int:
    """The rows the ``plan`` of Parquet files covers, from the files' footers (nothing
    else is read): each slice's row range, row groups, or the whole file.

    Examples
    --------
    >>> import fsspec, pyarrow as pa, pyarrow.parquet as pq
    >>> from curator_dask.io.files import InputFile
    >>> fs = fsspec.filesystem("memory")
    >>> with fs.open("/rows/a.parquet", "wb") as f:
    ...     pq.write_table(pa.table({"id": range(10)}), f, row_group_size=4)
    >>> whole = InputFile("/rows/a.parquet", fs.size("/rows/a.parquet"), None, "a.parquet")
    >>> stored_rows(fs, [PartitionSpec(0, (FileSlice(whole),)),
    ...                  PartitionSpec(1, (FileSlice(whole, row_groups=(1, 2)),))])
    16
    """
    footers: dict[str, pq.FileMetaData] = {}
    total = 0
    for spec in plan:
        for piece in spec.slices:
            if piece.rows is not None:
                total += piece.rows[1] - piece.rows[0]
                continue
            path = piece.file.path
            if path not in footers:
                with reading(path), open_input(fs, path) as handle:
                    footers[path] = open_parquet(handle, path).metadata
            metadata = footers[path]
            groups = (range(metadata.num_row_groups) if piece.row_groups is None
                      else piece.row_groups)
            total += sum(metadata.row_group(g).num_rows for g in groups)
    return total


def _file_row(metadata, piece: FileSlice, row: int) -> int:
    """The 1-based row in the file of row ``row`` of a table read from ``piece``."""
    row_groups = piece.row_groups
    if piece.rows is not None:
        row += piece.rows[0]
    groups = list(range(metadata.num_row_groups)) if row_groups is None else list(row_groups)
    for group in groups:
        first = sum(metadata.row_group(g).num_rows for g in range(group))
        size = metadata.row_group(group).num_rows
        if row < size:
            return first + row + 1
        row -= size
    return row + 1


def _read_rows(parquet, group: int, first: int, stop: int, columns) -> pa.Table:
    """Rows ``[first, stop)`` of one row group, decoded in batches of at most the range:
    the batches before ``first`` are decoded and let go, none after ``stop`` is read, and
    the whole row group is never in memory at once."""
    size = max(1, min(stop - first, 65_536))
    kept, seen = [], 0
    for batch in parquet.iter_batches(batch_size=size, row_groups=[group], columns=columns,
                                      use_threads=False):
        end = seen + batch.num_rows
        if end > first:
            start = max(first, seen)
            kept.append(batch.slice(start - seen, min(stop, end) - start))
        seen = end
        if seen >= stop:
            break
    if not kept:  # a range past the group's end: nothing planned reads one
        return parquet.schema_arrow.empty_table().select(columns)
    return pa.Table.from_batches(kept)


def _read_slice(fs, piece: FileSlice, conformer: Conformer) -> tuple[pa.Table, int]:
    """One slice conformed to the schema, and how many text values were cast."""
    path = piece.file.path
    with open_input(fs, path) as handle:
        parquet = open_parquet(handle, path)
        metadata = parquet.metadata
        present = parquet.schema_arrow.names
        if not conformer.columns_chosen:
            known = set(conformer.schema.names)
            extra = [n for n in present if n not in known and not _INDEX_COLUMN.fullmatch(n)]
            if extra:
                raise ColumnConflict("unexpected", extra[0], pa.null(), None, None).error(
                    path, _file_row(metadata, piece, 0), unit="row")
        text = conformer.text_field
        if text is not None and text not in present:
            raise ColumnConflict("missing", text, pa.null(), pa.string(), None,
                                 present=present).error(
                path, _file_row(metadata, piece, 0), unit="row")
        wanted = [n for n in conformer.schema.names if n in present]
        try:
            if piece.rows is not None:
                table = _read_rows(parquet, piece.row_groups[0], *piece.rows, wanted)
            elif piece.row_groups is None:
                table = parquet.read(columns=wanted, use_threads=False)
            else:
                table = parquet.read_row_groups(list(piece.row_groups), columns=wanted,
                                                use_threads=False)
        except _DECODE_ERRORS as err:
            groups = "all row groups" if piece.row_groups is None else \
                f"row groups {list(piece.row_groups)}"
            raise CorruptFileError(path, f"{groups}: {type(err).__name__}: {err}",
                                   line=_file_row(metadata, piece, 0)) from err
    try:
        # The text column's presence was checked in the footer (it may not be selected).
        return conformer(table.replace_schema_metadata(None), path, require_text=False)
    except ColumnConflict as conflict:
        bad = np.flatnonzero(conflict.rows) if conflict.rows is not None else np.array([0])
        row = _file_row(metadata, piece, int(bad[0]) if bad.size else 0)
        raise conflict.error(path, row, unit="row") from None


def read_parquet_table(
    spec: PartitionSpec,
    fs,
    schema: pa.Schema,
    *,
    text_field: str | None = "text",
    add_filename: str | None = None,
    text_cast: bool = False,
    typed: Collection[str] = (),
    columns_chosen: bool = False,
) -> tuple[pa.Table, dict[str, int]]:
    """Read one planned partition as an Arrow table with exactly ``schema``'s columns
    (and no rows skipped: the empty drop counts keep the JSONL reader's shape)."""
    conformer = Conformer(schema, text_field, text_cast, frozenset(typed), columns_chosen)
    tables = []
    for piece in spec.slices:
        with reading(piece.file.path):
            table, cast = _read_slice(fs, piece, conformer)
        if cast:
            logger.warning("%s: cast %d values of the text column %r to strings "
                           "(text_cast=True)", piece.file.path, cast, text_field)
        if add_filename:
            table = table.append_column(
                add_filename, pa.array([piece.file.name] * table.num_rows, pa.string())
            )
        tables.append(table)
    full_schema = schema
    if add_filename:
        full_schema = schema.append(pa.field(add_filename, pa.string()))
    table = pa.concat_tables(tables) if tables else full_schema.empty_table()
    return table, {}


def read_parquet_partition(spec: PartitionSpec, fs, schema: pa.Schema, *,
                           backend: str = "pandas", **options):
    """Read one planned partition into a frame with exactly ``schema``'s columns."""
    table, _ = read_parquet_table(spec, fs, schema, **options)
    return to_frame(table, backend)
