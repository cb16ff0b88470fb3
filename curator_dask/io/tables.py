"""Arrow tables to partitions: one schema for the whole dataset, pandas or cuDF.

Every partition of a dataset must have the same columns and dtypes (Dask's meta). Files
are parsed by pyarrow, conformed to the dataset's Arrow schema here, and converted to the
partition backend in one place (:mod:`curator_dask.io.arrow_types`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.errors import (
    ArgumentTypeError,
    CuratorError,
    InvalidArgumentError,
    MissingDependencyError,
)
from curator_dask.io.arrow_types import children, decoded_type, is_text_type
from curator_dask.io.errors import (
    InputError,
    MissingColumnError,
    SchemaConflictError,
    SchemaMismatchError,
    TextTypeError,
    UnexpectedColumnError,
)

__all__ = [
    "FILENAME_COLUMN",
    "ColumnConflict",
    "Conformer",
    "SchemaUnion",
    "arrow_type",
    "check_backend",
    "schema_with_overrides",
    "unify_types",
    "with_text_column",
]

logger = logging.getLogger(__name__)

FILENAME_COLUMN = "file_name"
Backend = Literal["pandas", "cudf"]
BACKENDS = get_args(Backend)


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise InvalidArgumentError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "cudf":
        try:
            import cudf  # noqa: F401
        except ImportError as err:
            raise MissingDependencyError(
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
        raise ArgumentTypeError(f"cannot read a column as {dtype!r}: not a known dtype") from err


def schema_with_overrides(inferred: pa.Schema, input_meta: Mapping | None,
                          columns: Sequence[str] | None) -> pa.Schema:
    """The dataset schema: inferred types, replaced by ``input_meta``, cut to ``columns``."""
    fields = {f.name: f.type for f in inferred}
    for name, dtype in (input_meta or {}).items():
        fields[name] = arrow_type(dtype)
    # A column that was all null in the sample gets a string type rather than null, so a
    # later file with values in it can still be read.
    fields = {n: (pa.string() if pa.types.is_null(t) else t) for n, t in fields.items()}
    # Dictionary encoding is how a file stores values, not a type: read the values.
    fields = {n: decoded_type(t) for n, t in fields.items()}
    if columns is not None:
        fields = {n: fields.get(n, pa.string()) for n in columns}
    return pa.schema(list(fields.items()))


def with_text_column(schema: pa.Schema, text_field: str | None, columns_chosen: bool) -> pa.Schema:
    """``schema`` with its text column as strings (appended unless the user chose columns).

    A text column inferred as numbers (a file whose texts are all numbers) is still read
    as strings: each file's values are then checked, and cast only when asked.
    """
    if text_field is None:
        return schema
    index = schema.get_field_index(text_field)
    if index < 0:
        return schema if columns_chosen else schema.append(pa.field(text_field, pa.string()))
    if is_text_type(schema.field(index).type):
        return schema
    return schema.set(index, pa.field(text_field, pa.string()))


def unify_types(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type that holds values of both ``a`` and ``b``, or None when they conflict.

    Arrow's permissive promotion: null takes the other type, integers widen to floats,
    ``string`` to ``large_string``, structs merge their fields; a string and a number (or
    a list and a struct) conflict.

    Examples
    --------
    >>> unify_types(pa.int64(), pa.float64())
    DataType(double)
    >>> unify_types(pa.string(), pa.int64()) is None
    True
    """
    if a == b:
        return a
    try:
        merged = pa.unify_schemas([pa.schema([("c", a)]), pa.schema([("c", b)])],
                                  promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return merged.field("c").type


class ColumnConflict(CuratorError):
    """Rows of a table that do not fit the dataset's schema (raised by :class:`Conformer`).

    ``kind`` is ``"type"`` (a value of another type), ``"text"`` (a text value that is not
    a string), ``"unexpected"`` (a field the schema lacks) or ``"missing"`` (no text
    column). ``rows`` is a boolean numpy mask of the rows concerned. Readers turn it into
    an error naming the file and line (:meth:`error`), or skip and count the rows.
    """

    def __init__(self, kind: str, column: str, found: pa.DataType, expected: pa.DataType | None,
                 rows, present: list[str] | None = None, within: str | None = None):
        super().__init__(kind, column, str(found))
        self.kind, self.column, self.found, self.expected = kind, column, found, expected
        self.rows, self.present, self.within = rows, present, within

    @property
    def skippable(self) -> bool:
        """Whether ``on_bad_lines='skip'`` may skip the rows (a type that does not fit)."""
        return self.kind in ("type", "text")

    def error(self, path: str, line: int | None, *, unit: str = "line",
              skippable: bool = False) -> InputError:
        if self.kind == "missing":
            return MissingColumnError(self.column, path, self.present, line=line, unit=unit)
        if self.kind == "unexpected":
            return UnexpectedColumnError(self.column, path, line=line, unit=unit,
                                         within=self.within)
        if self.kind == "text":
            return TextTypeError(self.column, path, str(self.found), line=line, unit=unit,
                                 skippable=skippable)
        return SchemaMismatchError(self.column, path, str(self.expected), str(self.found),
                                   line=line, unit=unit, skippable=skippable)


def _valid_rows(column) -> np.ndarray:
    return np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)


@dataclass(frozen=True)
class Conformer:
    """Select, order and cast a table's columns to the dataset's ``schema``.

    Columns missing from a table are filled with nulls. On good input the checks cost a
    comparison of column names and types; anything that does not fit raises
    :class:`ColumnConflict` and the reader, on its slow path, locates the lines:

    - a field the schema lacks (unless ``columns_chosen``: the user chose the columns);
    - a column whose type conflicts with the schema's (a number where the schema has a
      string), or a value that does not survive the cast to it (1.5 in an integer
      column); ``typed`` columns, set by ``input_meta``, are cast whatever their type;
    - a text column that is not strings (cast to strings when ``text_cast``);
    - no text column at all in a table with rows (when ``require_text``).

    Examples
    --------
    >>> conformer = Conformer(pa.schema([("text", pa.string()), ("n", pa.float64())]))
    >>> table, cast = conformer(pa.table({"n": [1, 2], "text": ["a", "b"]}), "f.jsonl")
    >>> table.schema.names, table.column("n").type, cast
    (['text', 'n'], DataType(double), 0)
    """

    schema: pa.Schema
    text_field: str | None = "text"
    text_cast: bool = False
    typed: frozenset = frozenset()
    columns_chosen: bool = False

    def __call__(self, table: pa.Table, path: str, *,
                 require_text: bool = True) -> tuple[pa.Table, int]:
        """The conformed table and how many text values were cast to strings."""
        names = table.column_names
        if not self.columns_chosen and names != self.schema.names:
            self._check_unexpected(table)
        text = self.text_field
        if text is not None and require_text and table.num_rows and text not in names:
            raise ColumnConflict("missing", text, pa.null(), pa.string(),
                                 np.ones(table.num_rows, dtype=bool), present=names)
        arrays = []
        cast = 0
        for field in self.schema:
            if field.name not in names:
                arrays.append(pa.nulls(table.num_rows, field.type))
                continue
            column = table.column(field.name)
            if column.type != field.type:
                column, n = self._cast(_decoded(column), field)
                cast += n
            arrays.append(column)
        return pa.Table.from_arrays(arrays, schema=self.schema), cast

    def _check_unexpected(self, table: pa.Table) -> None:
        known = set(self.schema.names)
        for name in table.column_names:
            if name not in known:
                column = table.column(name)
                # A field that is null everywhere carries nothing that could be lost.
                if column.null_count < len(column):
                    raise ColumnConflict("unexpected", name, column.type, None,
                                         _valid_rows(column))

    def _cast(self, column, field: pa.Field):
        if column.null_count == len(column):
            return pa.nulls(len(column), field.type), 0
        if field.name == self.text_field and not is_text_type(column.type):
            if self.text_cast:
                try:
                    return column.cast(field.type), len(column) - column.null_count
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    pass
            raise ColumnConflict("text", field.name, column.type, field.type, _valid_rows(column))
        # Types of one family (integers and floats, string and large_string, structs)
        # are cast, and a value that does not survive the cast is located; a string where
        # the schema has a number (or the reverse) is never cast implicitly.
        if column.type == field.type:  # a dictionary, decoded
            return column, 0
        if field.name in self.typed or unify_types(field.type, column.type) is not None:
            lost = _dropped_fields(column.type, field.type)
            if lost and field.name not in self.typed:
                raise ColumnConflict("unexpected", f"{field.name}.{lost[0]}", column.type, None,
                                     _rows_with_field(column, lost[0]), within=field.name)
            try:
                return column.cast(field.type), 0
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise ColumnConflict("type", field.name, column.type, field.type,
                                     _failing_casts(column, field.type)) from None
        raise ColumnConflict("type", field.name, column.type, field.type, _valid_rows(column))


def _rows_with_field(column, path: str) -> np.ndarray:
    """Rows where the struct field ``path`` (``a.b``) of ``column`` has a value (every
    valid row when a list lies on the way)."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    valid = np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)
    for name in path.split("."):
        if not pa.types.is_struct(array.type):
            return valid
        array = pc.struct_field(array, name)
        valid &= np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)
    return valid


def _decoded(column):
    """A column with its dictionary encoding (at any depth) removed."""
    decoded = decoded_type(column.type)
    return column if decoded == column.type else column.cast(decoded)


def _dropped_fields(source: pa.DataType, target: pa.DataType, prefix: str = "") -> list[str]:
    """Paths of struct fields (at any depth) that ``source`` has with values and
    ``target`` lacks: a cast from one to the other would drop them."""
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        wanted = {target.field(i).name: target.field(i).type for i in range(target.num_fields)}
        out = []
        for i in range(source.num_fields):
            child = source.field(i)
            if child.name not in wanted:
                if not pa.types.is_null(child.type):
                    out.append(prefix + child.name)
            else:
                out += _dropped_fields(child.type, wanted[child.name], f"{prefix}{child.name}.")
        return out
    source_children, target_children = children(source), children(target)
    if source_children and len(source_children) == len(target_children) \
            and not pa.types.is_struct(source) and not pa.types.is_struct(target):
        return [path for a, b in zip(source_children, target_children, strict=True)
                for path in _dropped_fields(a.type, b.type, prefix)]
    return []


def _failing_casts(column, arrow_type: pa.DataType) -> np.ndarray:
    """The rows whose value cannot be cast (error path: one cast per value)."""
    failing = np.zeros(len(column), dtype=bool)
    for i, value in enumerate(column.to_pylist()):
        if value is None:
            continue
        try:
            pa.array([value], column.type).cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            failing[i] = True
    return failing if failing.any() else _valid_rows(column)


class SchemaUnion:
    """The union of sampled files' schemas, field by field, remembering where types came from.

    A field seen in any sample is kept (in the order first seen); types of one family
    unify (:func:`unify_types`: integers and floats give floats). Incompatible types for a
    column that matters (not in ``settled``, typed by the caller, and in ``columns`` when
    given) raise :class:`~curator_dask.io.errors.SchemaConflictError` naming both files
    and lines or rows (``on_conflict="error"``), or (``"keep"``) log a warning and keep
    the type of most sampled values, so that the reader skips and counts the fewest.

    Examples
    --------
    >>> union = SchemaUnion()
    >>> union.add(pa.table({"text": ["a"], "n": [1]}), "a.jsonl", lambda row: row + 1)
    >>> union.add(pa.table({"text": ["b"], "n": [0.5], "url": ["u"]}), "b.jsonl",
    ...           lambda row: row + 1)
    >>> union.schema().types
    [DataType(string), DataType(double), DataType(string)]
    """

    def __init__(self, *, settled: Collection[str] = (), columns: Collection[str] | None = None,
                 on_conflict: str = "error", skippable: bool = False, unit: str = "line"):
        self.settled, self.columns = set(settled), None if columns is None else set(columns)
        self.on_conflict, self.skippable, self.unit = on_conflict, skippable, unit
        # name -> groups of compatible types: [type, values seen, path, line of the first]
        self.groups: dict[str, list[list]] = {}

    @property
    def fields(self) -> list[str]:
        return list(self.groups)

    def add(self, table: pa.Table | pa.Schema, path: str,
            line_of: Callable[[int], int] | None = None) -> None:
        """Add a sample: a table (``line_of`` maps its rows to lines) or a file's schema."""
        is_table = isinstance(table, pa.Table)

        def where(name: str) -> int | None:
            if line_of is None or not is_table:
                return None
            valid = np.flatnonzero(_valid_rows(table.column(name)))
            return line_of(int(valid[0]) if valid.size else 0)

        for field in table.schema if is_table else table:
            column = table.column(field.name) if is_table else None
            seen = len(column) - column.null_count if is_table else 1
            groups = self.groups.setdefault(field.name, [])
            for group in groups:
                merged = unify_types(group[0], field.type)
                if merged is not None:
                    if merged != group[0] and merged == field.type:
                        group[2:] = [path, where(field.name)]
                    group[0] = merged
                    group[1] += seen
                    break
            else:
                groups.append([field.type, seen, path, where(field.name)])
                if len(groups) > 1 and self._matters(field.name) and self.on_conflict == "error":
                    raise self._error(field.name, groups[0], groups[-1])

    def _matters(self, name: str) -> bool:
        return name not in self.settled and (self.columns is None or name in self.columns)

    def _error(self, name: str, first: list, second: list) -> SchemaConflictError:
        return SchemaConflictError(name, (first[0], *first[2:]), (second[0], *second[2:]),
                                   unit=self.unit, skippable=self.skippable)

    def schema(self) -> pa.Schema:
        fields = []
        for name, groups in self.groups.items():
            chosen = max(groups, key=lambda group: group[1])  # the first among equals
            if len(groups) > 1 and self._matters(name):
                for other in groups:
                    if other is not chosen:
                        logger.warning("%s; keeping %s (%d sampled values against %d): values "
                                       "that do not fit it are skipped and counted",
                                       self._error(name, chosen, other).summary, chosen[0],
                                       chosen[1], other[1])
            fields.append((name, chosen[0]))
        return pa.schema(fields)
