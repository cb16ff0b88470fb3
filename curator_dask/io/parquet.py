"""Read Parquet partitions (whole files or groups of row groups) with pyarrow."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from curator_dask.io.errors import MissingColumnError
from curator_dask.io.files import InputFile
from curator_dask.io.planner import PartitionSpec
from curator_dask.io.tables import conform, to_frame

__all__ = ["read_parquet_partition", "infer_parquet_schema"]


def infer_parquet_schema(fs, files: Sequence[InputFile]) -> pa.Schema:
    """The schema stored in the first file's footer."""
    with fs.open(files[0].path, "rb") as handle:
        return pq.ParquetFile(handle).schema_arrow


def read_parquet_partition(
    spec: PartitionSpec,
    fs,
    schema: pa.Schema,
    *,
    text_field: str | None = "text",
    add_filename: str | None = None,
    backend: str = "pandas",
):
    """Read one planned partition into a frame with exactly ``schema``'s columns."""
    tables = []
    for piece in spec.slices:
        with fs.open(piece.file.path, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            present = parquet.schema_arrow.names
            if text_field is not None and text_field not in present:
                raise MissingColumnError(text_field, piece.file.path, present)
            wanted = [n for n in schema.names if n in present]
            if piece.row_groups is None:
                table = parquet.read(columns=wanted, use_threads=False)
            else:
                table = parquet.read_row_groups(list(piece.row_groups), columns=wanted,
                                                use_threads=False)
        table = conform(table.replace_schema_metadata(None), schema, piece.file.path, None)
        if add_filename:
            table = table.append_column(
                add_filename, pa.array([piece.file.name] * table.num_rows, pa.string())
            )
        tables.append(table)
    full_schema = schema
    if add_filename:
        full_schema = schema.append(pa.field(add_filename, pa.string()))
    table = pa.concat_tables(tables) if tables else full_schema.empty_table()
    return to_frame(table, backend)
