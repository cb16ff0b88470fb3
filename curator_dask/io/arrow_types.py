"""Arrow types as partitions hold them: one mapping from Arrow types to pandas dtypes and
back (:func:`partition_dtype`, :func:`to_frame`, :func:`to_table`), and the walks over
nested types the readers need (dictionary encoding removed, the timestamps JSON
inference makes of strings, the integral doubles a JSON integer may have been rounded to).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "STRING_DTYPE",
    "children",
    "decoded_type",
    "holds_only_text",
    "inexact_float_rows",
    "is_text_type",
    "partition_dtype",
    "string_offsets",
    "strings_for_timestamps",
    "to_frame",
    "to_table",
]


def is_text_type(arrow_type: pa.DataType) -> bool:
    """Whether a column of this type holds strings (``string`` or ``large_string``)."""
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def string_offsets(array: pa.Array) -> tuple[pa.Buffer | None, np.ndarray]:
    """Zero-copy views of a string or large-string array (one chunk): its UTF-8 data
    buffer (None when it has none) and its ``len + 1`` offsets into it (int32 or int64,
    as the type has them; absolute positions in the buffer, so a sliced array needs no
    rebasing). The one place the hashing kernels (exact and MinHash) take strings apart.

    >>> data, offsets = string_offsets(pa.array(["ab", "", "cde"]).slice(1))
    >>> offsets.tolist(), data.to_pybytes()[offsets[0]:offsets[-1]]
    ([2, 2, 5], b'cde')
    """
    offset_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    n = len(array)
    _, offsets_buffer, data_buffer = array.buffers()
    if offsets_buffer is None:  # a zero-length array may have no offsets buffer
        return data_buffer, np.zeros(n + 1, dtype=offset_type)
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[array.offset:array.offset + n + 1]
    return data_buffer, offsets


def children(arrow_type: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(arrow_type):
        return [arrow_type.field(i) for i in range(arrow_type.num_fields)]
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) \
            or pa.types.is_fixed_size_list(arrow_type):
        return [arrow_type.value_field]
    if pa.types.is_map(arrow_type):
        return [arrow_type.key_field, arrow_type.item_field]
    return []


def _rebuild(arrow_type: pa.DataType, leaf) -> pa.DataType:
    """``arrow_type`` with every leaf type replaced by ``leaf(type)``."""
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_rebuild(f.type, leaf)) for f in children(arrow_type)])
    if pa.types.is_large_list(arrow_type):
        return pa.large_list(arrow_type.value_field.with_type(
            _rebuild(arrow_type.value_type, leaf)))
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_rebuild(arrow_type.value_type, leaf)))
    if pa.types.is_map(arrow_type):
        return pa.map_(_rebuild(arrow_type.key_type, leaf),
                       arrow_type.item_field.with_type(_rebuild(arrow_type.item_type, leaf)))
    return leaf(arrow_type)


def holds_only_text(arrow_type: pa.DataType) -> bool:
    """Whether every value a column of this type holds is a string (strings, and lists
    and structs of nothing but strings)."""
    fields = children(arrow_type)
    if fields:
        return all(holds_only_text(f.type) for f in fields)
    return is_text_type(arrow_type)


def strings_for_timestamps(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every timestamp, at any depth, replaced by a string: for schemas
    inferred from JSON, where a timestamp can only come from a string that looks like one.

    Examples
    --------
    >>> strings_for_timestamps(pa.schema([("t", pa.list_(pa.timestamp("s")))])).types
    [ListType(list<item: string>)]
    """
    def leaf(arrow_type):
        return pa.string() if pa.types.is_timestamp(arrow_type) else arrow_type

    return pa.schema([f.with_type(_rebuild(f.type, leaf)) for f in schema])


def decoded_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with dictionary encoding removed at every depth: a dictionary of
    strings is read as strings (the encoding is how a file stores them, not a type of
    its own)."""
    def leaf(t):
        return decoded_type(t.value_type) if pa.types.is_dictionary(t) else t

    return _rebuild(arrow_type, leaf)


#: Doubles from this magnitude on are not all integers a double holds exactly.
_EXACT_DOUBLE_INTEGERS = float(2**53)


def inexact_float_rows(table: pa.Table, *, by_column: bool = False):
    """Rows holding an integral double of magnitude 2**53 or more, at any depth: where a
    JSON integer may have been rounded on its way into a float column.

    A boolean mask over the rows, or with ``by_column`` a ``{column: mask}`` of the
    columns that have such rows. Costs a comparison per float value; nothing for columns
    without floats.
    """
    found: dict[str, np.ndarray] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if not _has_double(column.type):
            continue
        mask = _inexact_in(column.combine_chunks() if column.num_chunks != 1
                           else column.chunk(0), len(column))
        if mask is not None and mask.any():
            found[name] = mask
    if by_column:
        return found
    rows = np.zeros(table.num_rows, dtype=bool)
    for mask in found.values():
        rows |= mask
    return rows


def _has_double(arrow_type: pa.DataType) -> bool:
    return pa.types.is_float64(arrow_type) or any(_has_double(f.type)
                                                  for f in children(arrow_type))


def _inexact_in(array, n: int) -> np.ndarray | None:
    """The mask of :func:`inexact_float_rows` for one array of ``n`` rows."""
    arrow_type = array.type
    if pa.types.is_float64(arrow_type):
        big = pc.greater_equal(pc.abs(array), _EXACT_DOUBLE_INTEGERS)
        integral = pc.equal(pc.floor(array), array)
        mask = pc.fill_null(pc.and_(big, integral), False)
        return mask.to_numpy(zero_copy_only=False)
    if pa.types.is_struct(arrow_type):
        out = np.zeros(n, dtype=bool)
        for i in range(arrow_type.num_fields):
            if _has_double(arrow_type.field(i).type):
                child = _inexact_in(array.field(i), n)
                if child is not None:
                    out |= child
        return out
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) \
            or pa.types.is_map(arrow_type):
        flat = pc.list_flatten(array)
        child = _inexact_in(flat, len(flat))
        out = np.zeros(n, dtype=bool)
        if child is not None and child.any():
            parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
            out[parents[child]] = True
        return out
    return None


def partition_dtype(arrow_type: pa.DataType):
    """The pandas dtype a column of ``arrow_type`` has in a partition.

    Every choice holds the column's values and nulls exactly, and converts back to the
    same Arrow type (:func:`to_table`):

    - strings: Arrow-backed pandas strings (the ``text`` contract);
    - integers of every width, signed or not, and booleans: pandas' nullable dtypes
      (``Int64``, ``UInt64``, ``boolean``, ...): a column with a null stays integers
      (numpy would make it floats), every digit of ``2**63 - 1`` or ``2**64 - 1`` is
      kept, and numpy arithmetic works (``df["n"] % 2``);
    - every other type (floats, which keep NaN apart from null, structs, lists, maps,
      timestamps, dates, decimals, bytes): ``pd.ArrowDtype(arrow_type)``.

    Examples
    --------
    >>> partition_dtype(pa.int64()), partition_dtype(pa.float64())
    (Int64Dtype(), double[pyarrow])
    >>> str(partition_dtype(pa.string()))
    'str'
    """
    if is_text_type(arrow_type):
        return STRING_DTYPE
    masked = _MASKED_DTYPES.get(arrow_type)
    return masked if masked is not None else pd.ArrowDtype(arrow_type)


def to_frame(table: pa.Table, backend: str = "pandas"):
    """Convert a conformed table to a pandas (dtypes of :func:`partition_dtype`) or cuDF
    frame."""
    if backend == "cudf":
        import cudf

        return cudf.DataFrame.from_arrow(table)
    return table.to_pandas(types_mapper=partition_dtype, self_destruct=True, split_blocks=True)


def to_table(frame, schema: pa.Schema | None = None) -> pa.Table:
    """A partition (pandas or cuDF frame, or a table) as the Arrow table a writer writes.

    Columns keep the Arrow type their dtype holds (:func:`partition_dtype` in reverse).
    Pandas strings carry no Arrow type of their own: a string column takes the type the
    ``schema`` it was read with records for it (``string`` or ``large_string``), else
    ``string`` (``large_string`` when its text passes 2 GiB). Columns of other dtypes
    (numpy numbers a stage added, Python objects) convert as pyarrow infers them.

    The table carries no pandas metadata: Parquet keeps the Arrow schema itself, and
    pandas' record of Arrow-backed dtypes does not always read back (a list of floats
    fails ``pandas.read_parquet``), so any reader gets the Arrow types.

    Examples
    --------
    >>> frame = to_frame(pa.table({"text": ["a", None], "n": pa.array([1, None])}))
    >>> to_table(frame).schema.types
    [DataType(string), DataType(int64)]
    >>> to_table(frame, pa.schema([("text", pa.large_string())])).schema.types
    [DataType(large_string), DataType(int64)]
    """
    if isinstance(frame, pa.Table):
        return _without_pandas_metadata(frame)
    if not isinstance(frame, pd.DataFrame):  # cuDF
        return _without_pandas_metadata(frame.to_arrow(preserve_index=False))
    table = _without_pandas_metadata(pa.Table.from_pandas(frame, preserve_index=False))
    recorded = {f.name: f.type for f in schema} if schema is not None else {}
    for i, name in enumerate(table.column_names):
        if not isinstance(frame.dtypes.iloc[i], pd.StringDtype):
            continue
        wanted = recorded.get(name)
        wanted = wanted if wanted is not None and is_text_type(wanted) else pa.string()
        if table.schema.field(i).type != wanted:
            # Kept as it is where it cannot be cast: over 2 GiB of text in one column.
            with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
                table = table.set_column(i, table.schema.field(i).with_type(wanted),
                                         table.column(i).cast(wanted))
    return table


def _without_pandas_metadata(table: pa.Table) -> pa.Table:
    metadata = table.schema.metadata
    if not metadata or b"pandas" not in metadata:
        return table
    rest = {k: v for k, v in metadata.items() if k != b"pandas"}
    return table.replace_schema_metadata(rest or None)


def _arrow_string_dtype():
    # pandas 3's default "str" dtype is Arrow-backed; on pandas 2 ask for it explicitly.
    try:
        dtype = pd.StringDtype("pyarrow", na_value=np.nan)
    except TypeError:  # pandas < 2.3 has no na_value argument
        dtype = pd.StringDtype("pyarrow")
    return dtype


#: The dtype of string columns in pandas partitions.
STRING_DTYPE = _arrow_string_dtype()
#: Arrow types held in pandas' nullable (masked) dtypes, which numpy arithmetic supports.
_MASKED_DTYPES = {
    pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
    pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype(),
}
