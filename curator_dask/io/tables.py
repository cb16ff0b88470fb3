"""Arrow tables to partitions: one schema for the whole dataset, pandas or cuDF.

Every partition of a dataset must have the same columns and dtypes (Dask's meta). Files
are parsed by pyarrow, conformed to the dataset's Arrow schema here, and converted to the
partition backend in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.io.errors import MissingColumnError, SchemaMismatchError

__all__ = ["arrow_type", "schema_with_overrides", "conform", "to_frame", "check_backend",
           "FILENAME_COLUMN"]

FILENAME_COLUMN = "file_name"
BACKENDS = ("pandas", "cudf")


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "cudf":
        try:
            import cudf  # noqa: F401
        except ImportError as err:
            raise ImportError(
                "backend='cudf' needs cuDF on a machine with an NVIDIA GPU: "
                "pip install 'curator-dask[gpu]'"
            ) from err
    return backend


def arrow_type(dtype) -> pa.DataType:
    """The Arrow type for a user-given dtype (``"str"``, ``"int64"``, a numpy or Arrow type)."""
    if isinstance(dtype, pa.DataType):
        return dtype
    if isinstance(dtype, pd.ArrowDtype):
        return dtype.pyarrow_dtype
    if dtype in (str, "str", "string", "object", object) or isinstance(dtype, pd.StringDtype):
        return pa.string()
    if dtype in ("bool", bool):
        return pa.bool_()
    try:
        return pa.from_numpy_dtype(np.dtype(dtype))
    except TypeError as err:
        raise TypeError(f"cannot read a column as {dtype!r}: not a known dtype") from err


def schema_with_overrides(inferred: pa.Schema, input_meta: Mapping | None,
                          columns: Sequence[str] | None) -> pa.Schema:
    """The dataset schema: inferred types, replaced by ``input_meta``, cut to ``columns``."""
    fields = {f.name: f.type for f in inferred}
    for name, dtype in (input_meta or {}).items():
        fields[name] = arrow_type(dtype)
    # A column that was all null in the sample gets a string type rather than null, so a
    # later file with values in it can still be read.
    fields = {n: (pa.string() if pa.types.is_null(t) else t) for n, t in fields.items()}
    if columns is not None:
        fields = {n: fields.get(n, pa.string()) for n in columns}
    return pa.schema(list(fields.items()))


def conform(table: pa.Table, schema: pa.Schema, path: str, text_field: str | None) -> pa.Table:
    """Select, order and cast ``table``'s columns to ``schema``.

    Columns missing from the file are filled with nulls, except the text column, which
    must be present in any file that has rows.
    """
    if text_field is not None and table.num_rows and text_field not in table.column_names:
        raise MissingColumnError(text_field, path, table.column_names)
    arrays = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            if column.type != field.type:
                try:
                    column = column.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                    raise SchemaMismatchError(field.name, path, str(field.type),
                                              f"{column.type} ({err})") from err
            arrays.append(column)
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def to_frame(table: pa.Table, backend: str = "pandas"):
    """Convert a conformed table to a pandas (Arrow-backed strings) or cuDF frame."""
    if backend == "cudf":
        import cudf

        return cudf.DataFrame.from_arrow(table)
    frame = table.to_pandas(
        types_mapper=_string_mapper, self_destruct=True, split_blocks=True
    )
    return frame


def _string_mapper(arrow_type: pa.DataType):
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return _STRING_DTYPE
    # Bytes stay Arrow-backed: as Python objects, Dask would convert them to strings
    # (its convert-string option) and fail on bytes that are not UTF-8.
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return pd.ArrowDtype(arrow_type)
    return None


def _arrow_string_dtype():
    # pandas 3's default "str" dtype is Arrow-backed; on pandas 2 ask for it explicitly.
    try:
        dtype = pd.StringDtype("pyarrow", na_value=np.nan)
    except TypeError:  # pandas < 2.3 has no na_value argument
        dtype = pd.StringDtype("pyarrow")
    return dtype


_STRING_DTYPE = _arrow_string_dtype()
