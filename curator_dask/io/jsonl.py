"""Read JSONL partitions with pyarrow's JSON parser.

The fast path hands a whole slice of bytes to ``pyarrow.json.read_json``, typed by the
dataset's schema (so a string that looks like a date stays the string it is), and
conforms the table to the schema. Only when that fails (a malformed line, bad UTF-8, a
value whose type changes inside the slice or does not fit the schema, a field the schema
lacks, an integer that the column's floats cannot hold exactly, a broken compressed
stream) does the slow path look at lines one by one, to name the file and line, or to
skip and count bad lines when asked.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson
from fsspec.implementations.local import LocalFileSystem

from curator_dask.dropped import record_dropped
from curator_dask.io.arrow_types import (
    holds_only_text,
    inexact_float_rows,
    strings_for_timestamps,
    to_frame,
)
from curator_dask.io.errors import (
    InvalidEncodingError,
    MalformedLineError,
    TruncatedFileError,
    reading,
)
from curator_dask.io.files import InputFile, sample_files
from curator_dask.io.jsonl_bytes import (
    SAMPLE_BYTES,
    STREAM_BLOCK,
    STREAM_ERRORS,
    first_line_number,
    mapped_range,
    open_stream,
    read_slice,
    read_slice_bytes,
    sample_bytes,
)
from curator_dask.io.partitions import FileSlice, PartitionSpec
from curator_dask.io.tables import FILENAME_COLUMN, ColumnConflict, Conformer, SchemaUnion

__all__ = [
    "BAD_LINE_REASON",
    "SAMPLE_BYTES",
    "SAMPLE_FILES",
    "TRUNCATED_REASON",
    "TYPE_MISMATCH_REASON",
    "infer_jsonl_schema",
    "read_jsonl_partition",
    "read_jsonl_table",
    "read_slice_bytes",
]

logger = logging.getLogger(__name__)

# Drop-count reasons (see curator_dask.dropped).
BAD_LINE_REASON = "reader.bad_json_line"
TYPE_MISMATCH_REASON = "reader.type_mismatch"
TRUNCATED_REASON = "reader.truncated_file"

OnBadLines = Literal["error", "skip", "warn"]
EncodingErrors = Literal["strict", "replace"]
ON_BAD_LINES = get_args(OnBadLines)
ENCODING_ERRORS = get_args(EncodingErrors)
# Schema inference samples up to SAMPLE_FILES files spread over the listing (see
# curator_dask.io.jsonl_bytes.SAMPLE_BYTES for how much of each).
SAMPLE_FILES = 16
_BOM = b"\xef\xbb\xbf"


def _parse_options(schema: pa.Schema | None) -> pajson.ParseOptions | None:
    """Parse the fields of ``schema`` with its types (the others are inferred)."""
    if schema is None:
        return None
    fields = list(schema)
    if not fields:
        return None
    return pajson.ParseOptions(explicit_schema=pa.schema(fields),
                               unexpected_field_behavior="infer")


def _holds_null_type(arrow_type: pa.DataType) -> bool:
    if pa.types.is_null(arrow_type):
        return True
    return any(_holds_null_type(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def _parse_fast(data: bytes, schema: pa.Schema | None = None) -> pa.Table:
    # One thread per task: parallelism comes from partitions, and a worker's threads
    # are already busy with other partitions.
    block = max(1 << 20, min(len(data) + 1, (1 << 31) - 1))

    def parse(typed: pa.Schema | None) -> pa.Table:
        return pajson.read_json(
            io.BytesIO(data),
            read_options=pajson.ReadOptions(use_threads=False, block_size=block),
            parse_options=_parse_options(typed),
        )

    table = parse(schema)
    try:
        return _check_utf8(table)
    except pa.ArrowInvalid:
        # pyarrow's inference builds invalid lists whose first item is null
        # ([null, 0]); typed by the schema it inferred, the same bytes parse right.
        # Bad UTF-8 stays invalid and raises here.
        return _check_utf8(parse(table.schema))


def _parse_piece(data: bytes, schema: pa.Schema | None) -> pa.Table:
    """Parse with the schema's types, or, when a value does not parse as its column's
    type, with only the string fields typed and the rest inferred, so that the
    conformer can cast what fits (``2.0`` into integers, numbers under ``text_cast``) and
    name what does not; a field named in a parse error is inferred too. Raises Arrow's
    error when no typing parses the bytes."""
    try:
        return _parse_fast(data, schema)
    except pa.ArrowInvalid as strict_error:
        if schema is None:
            raise
        error = strict_error
    # Without the field the error names; when it names none (a value that does not
    # convert), with only the fields of text, which inference would take for dates.
    failing = _failing_field(error)
    fields = ([f for f in schema if f.name != failing] if failing in schema.names
              else [f for f in schema if holds_only_text(f.type)])
    while True:
        try:
            return _parse_fast(data, pa.schema(fields))
        except pa.ArrowInvalid as err:
            failing = _failing_field(err)
            if failing is None or failing not in {f.name for f in fields}:
                raise error from None
            fields = [f for f in fields if f.name != failing]


def _failing_field(err: pa.ArrowInvalid) -> str | None:
    """The top-level field a JSON parse error names (``Column(/meta/[]) changed ...``)."""
    match = re.search(r"Column\(/([^/)]*)", str(err))
    return match.group(1) if match else None


def _fast_path(fs, piece: FileSlice, schema: pa.Schema) -> pa.Table | None:
    """Parse a slice without copying it through Python: the path nearly every slice takes.

    Local files are read by pyarrow's own I/O: uncompressed ones, whole or a byte
    range, as zero-copy views of a memory map (the parser reads the page cache itself:
    no copy into freshly allocated buffers, whose first touch the kernel zeroes; on 8
    files of 62 MB, 0.11 CPU-s against 0.13 streamed), compressed ones streamed in blocks
    through pyarrow's decompressors. Other filesystems stream whole files from their
    fsspec handle. Returns None when anything is off (a bad line, bad UTF-8, an empty
    file, a line longer than a block, a broken compressed stream) and the caller takes
    the byte path, which reports or skips each case.
    """
    f = piece.file
    options = pajson.ReadOptions(use_threads=False, block_size=STREAM_BLOCK)
    parse = _parse_options(schema)
    try:
        if isinstance(fs, LocalFileSystem) and f.compression is None:
            with pa.BufferReader(mapped_range(f.path, piece)) as source:
                table = pajson.read_json(source, read_options=options, parse_options=parse)
        elif piece.whole:
            with open_stream(fs, f) as source:
                table = pajson.read_json(source, read_options=options, parse_options=parse)
        else:
            return None
        table = _check_utf8(table)
    except STREAM_ERRORS:
        return None
    return table


def _check_utf8(table: pa.Table) -> pa.Table:
    """``table`` (its null-typed lists repaired), fully validated: pyarrow's JSON parser
    does not validate UTF-8 inside strings, a full validation does."""
    if any(_holds_null_type(t) for t in table.schema.types):
        table = pa.table([pa.chunked_array([_repaired(chunk) for chunk in c.chunks], c.type)
                          if _holds_null_type(c.type) else c for c in table.columns],
                         schema=table.schema)
    table.validate(full=True)
    return table


def _repaired(array: pa.Array) -> pa.Array:
    """``array`` rebuilt where pyarrow's JSON parser leaves a list of nulls shorter than
    its offsets say (``[null, null]`` parses to offsets 0..2 over one null)."""
    arrow_type = array.type
    mask = array.is_null() if array.null_count else None
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        offsets = array.offsets
        values = array.values
        values = (pa.nulls(offsets[-1].as_py()) if pa.types.is_null(arrow_type.value_type)
                  else _repaired(values))
        cls = pa.ListArray if pa.types.is_list(arrow_type) else pa.LargeListArray
        return cls.from_arrays(offsets, values, type=arrow_type, mask=mask)
    if pa.types.is_struct(arrow_type):
        children = [_repaired(array.field(i)) for i in range(arrow_type.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=mask)
    return array


def _check_exact_integers(table: pa.Table, lines: list[bytes]) -> None:
    """Raise :class:`ColumnConflict` for the rows whose line holds an integer that the
    float column it landed in does not hold exactly (``9007199254740993`` beside ``0.5``,
    or ``2**64 - 1``, which JSON parsers read as a double)."""
    suspects = inexact_float_rows(table, by_column=True)
    for name, rows in suspects.items():
        lost = np.zeros(table.num_rows, dtype=bool)
        arrow_type = table.schema.field(name).type
        for row in np.flatnonzero(rows):
            value = json.loads(lines[row]).get(name)
            lost[row] = _inexact_integer_in(value, arrow_type)
        if lost.any():
            raise ColumnConflict("type", name, "an integer that a double cannot hold "
                                 "exactly", table.schema.field(name).type, lost)


def _inexact_integer_in(value, arrow_type: pa.DataType) -> bool:
    """Whether a JSON value holds, where ``arrow_type`` has a double, an integer that
    the double does not hold exactly."""
    if pa.types.is_float64(arrow_type):
        return isinstance(value, int) and not isinstance(value, bool) and float(value) != value
    if isinstance(value, dict) and pa.types.is_struct(arrow_type):
        return any(_inexact_integer_in(value.get(arrow_type.field(i).name),
                                       arrow_type.field(i).type)
                   for i in range(arrow_type.num_fields))
    if isinstance(value, list) and (pa.types.is_list(arrow_type)
                                    or pa.types.is_large_list(arrow_type)):
        return any(_inexact_integer_in(v, arrow_type.value_type) for v in value)
    return False


# -- the slow path: line by line --------------------------------------------------------

def _split_lines(data: bytes, path: str, first_line: int, on_bad_lines: str,
                 encoding_errors: str) -> tuple[list[bytes], list[int], int, dict]:
    """The lines that are JSON objects, their line numbers, how many were skipped, and
    the fields the lines have (in the order first seen)."""
    good: list[bytes] = []
    numbers: list[int] = []
    fields: dict[str, None] = {}
    skipped = 0
    for number, raw in enumerate(data.split(b"\n"), start=first_line):
        if number == 1 and raw.startswith(_BOM):  # a file's byte-order mark is not data
            raw = raw[len(_BOM):]
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            if encoding_errors == "replace":
                text = raw.decode("utf-8", errors="replace")
                raw = text.encode("utf-8")
            else:
                raise InvalidEncodingError(path, number, str(err)) from None
        try:
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        except RecursionError:
            err = ValueError("values nested too deeply to parse")
            if on_bad_lines == "error":
                raise MalformedLineError(path, number, str(err)) from None
            skipped += 1
            continue
        except ValueError as err:
            if on_bad_lines == "error":
                raise MalformedLineError(path, number, str(err)) from None
            if on_bad_lines == "warn":
                logger.warning("%s, line %d: skipping malformed JSON (%s)", path, number, err)
            skipped += 1
            continue
        good.append(raw)
        numbers.append(number)
        fields.update(dict.fromkeys(value))
    return good, numbers, skipped, fields


def _pieces(lines: list[bytes], lo: int, hi: int, schema: pa.Schema | None = None
            ) -> Iterator[tuple[int, int, pa.Table | pa.ArrowInvalid]]:
    """Parse ``lines[lo:hi]`` (see :func:`_parse_piece`), halving the range where a value
    changes type inside it.

    Yields ``(lo, hi, table)`` for consecutive ranges, in order; each table has one type
    per column. A single line that Arrow cannot type (a list mixing numbers and objects)
    yields Arrow's error instead of a table.
    """
    if lo >= hi:
        return
    try:
        yield lo, hi, _parse_piece(b"\n".join(lines[lo:hi]), schema)
    except pa.ArrowInvalid as err:
        if hi - lo == 1:
            yield lo, hi, err
            return
        mid = (lo + hi) // 2
        yield from _pieces(lines, lo, mid, schema)
        yield from _pieces(lines, mid, hi, schema)


class _SliceReader:
    """Reads the slices of one partition, accumulating drop counts and text casts."""

    def __init__(self, conformer: Conformer, on_bad_lines: str, encoding_errors: str):
        self.conformer = conformer
        self.on_bad_lines, self.encoding_errors = on_bad_lines, encoding_errors
        self.dropped: Counter = Counter()
        self.casts: Counter = Counter()

    def conform(self, table: pa.Table, path: str, **kwargs) -> pa.Table:
        conformed, cast = self.conformer(table, path, **kwargs)
        if cast:
            self.casts[path] += cast
        return conformed

    def read(self, fs, piece: FileSlice) -> list[pa.Table]:
        with reading(piece.file.path, offset=piece.start):
            return self._read(fs, piece)

    def _read(self, fs, piece: FileSlice) -> list[pa.Table]:
        path = piece.file.path
        table = _fast_path(fs, piece, self.conformer.schema)
        line_number = lambda: first_line_number(fs, piece.file, piece.start)  # noqa: E731
        if table is not None:
            try:
                conformed = self.conform(table, path)
                if self._settled(conformed):
                    return [conformed]
            except ColumnConflict as conflict:
                if conflict.kind == "missing":  # the whole slice: its first line says it
                    raise conflict.error(path, line_number()) from None
                # Otherwise the slow path locates the lines.
        data, broken = read_slice(fs, piece)
        if broken is not None:
            data = self._truncated(data, broken, path)
        return self.parse(data, path, line_number)

    def _settled(self, table: pa.Table) -> bool:
        """Whether a table parsed at once needs no look at its lines: its text column is
        not all null (the typed parse fills a text column the lines lack with nulls), and
        no integral double is so large that it may be a rounded integer."""
        text = self.conformer.text_field
        if text is not None and table.num_rows \
                and table.column(text).null_count == table.num_rows:
            return False
        return not inexact_float_rows(table).any()

    def parse(self, data: bytes, path: str, line_number: Callable[[], int]) -> list[pa.Table]:
        """Parse JSONL bytes into conformed tables (none when there are no rows).

        ``line_number`` gives the first line's number; it is called only on the slow path
        (counting lines is a read of the file up to the slice).
        """
        try:
            table = _check_utf8(_parse_piece(data, self.conformer.schema))
            conformed = self.conform(table, path)
            if self._settled(conformed):
                return [conformed]
        except pa.ArrowInvalid:
            # Whitespace alone is an empty slice, not an error (checked only on this path:
            # stripping a large slice up front costs a copy of it).
            if not data or data.isspace():
                return []
        except ColumnConflict as conflict:
            if conflict.kind == "missing":
                raise conflict.error(path, line_number()) from None
        return self._parse_slow(data, path, line_number())

    def _parse_slow(self, data: bytes, path: str, first_line: int) -> list[pa.Table]:
        lines, numbers, malformed, fields = _split_lines(data, path, first_line,
                                                         self.on_bad_lines,
                                                         self.encoding_errors)
        self.dropped[BAD_LINE_REASON] += malformed
        tables = []
        text = self.conformer.text_field
        present: dict[str, None] = {}
        for lo, hi, table in _pieces(lines, 0, len(lines), self.conformer.schema):
            if isinstance(table, pa.ArrowInvalid):
                self._skip_unreadable(table, path, numbers[lo])
                continue
            present.update(dict.fromkeys(table.column_names))
            tables.append(self._conform_lines(table, path, numbers[lo:hi], lines[lo:hi]))
        # The parse is typed by the schema, whose columns it fills with nulls where the
        # lines have none: which fields the lines really have, their parse says.
        present = {name: None for name in fields} if present else present
        if text is not None and present and text not in present:
            raise ColumnConflict("missing", text, pa.null(), pa.string(), None,
                                 present=list(present)).error(path, numbers[0])
        return tables

    def _skip_unreadable(self, err: pa.ArrowInvalid, path: str, number: int) -> None:
        reason = f"its values cannot be read as Arrow columns: {err}"
        if self.on_bad_lines == "error":
            raise MalformedLineError(path, number, reason)
        if self.on_bad_lines == "warn":
            logger.warning("%s, line %d: skipping a line (%s)", path, number, reason)
        self.dropped[BAD_LINE_REASON] += 1

    def _conform_lines(self, table: pa.Table, path: str, numbers: list[int],
                       lines: list[bytes]) -> pa.Table:
        """Conform a table whose rows are the lines ``numbers``, skipping what does not fit."""
        while True:
            try:
                conformed = self.conform(table, path, require_text=False)
                _check_exact_integers(conformed, lines)
                return conformed
            except ColumnConflict as conflict:
                bad = np.flatnonzero(conflict.rows)
                if not conflict.skippable or self.on_bad_lines == "error" or not bad.size:
                    line = numbers[bad[0]] if bad.size else numbers[0]
                    raise conflict.error(path, line, skippable=conflict.skippable) from None
                if self.on_bad_lines == "warn":
                    for i in bad:
                        logger.warning("%s, line %d: skipping a line whose %r is %s, not %s",
                                       path, numbers[i], conflict.column, conflict.found,
                                       conflict.expected)
                self.dropped[TYPE_MISMATCH_REASON] += int(bad.size)
                keep = np.flatnonzero(~conflict.rows)
                table = table.take(keep)
                numbers = [numbers[i] for i in keep]
                lines = [lines[i] for i in keep]

    def _truncated(self, data: bytes, reason: str, path: str) -> bytes:
        """The complete lines before a break in a compressed stream; the rest is counted."""
        cut = data.rfind(b"\n") + 1
        last_line = data.count(b"\n", 0, cut)
        if self.on_bad_lines == "error":
            raise TruncatedFileError(path, reason, line=last_line, offset=len(data))
        partial = 1 if data[cut:].strip() else 0
        logger.warning(
            "%s: the compressed stream ends early (%s) after line %d; keeping the lines "
            "before the break, counting %d partial line under %s (lines after the break "
            "cannot be counted)", path, reason, last_line, partial, TRUNCATED_REASON)
        self.dropped[TRUNCATED_REASON] += partial
        return data[:cut]


# -- schema inference -------------------------------------------------------------------

def _sample_tables(data: bytes, path: str) -> list[tuple[pa.Table, Callable[[int], int]]]:
    """Tables of a sample, each with a function from a row to its line number."""
    try:
        table = _parse_fast(data)
    except pa.ArrowInvalid:
        if not data.strip():
            return []
    else:
        numbers: list[int] = []

        def line_of(row: int) -> int:
            if not numbers:  # computed only to name a line
                numbers.extend(n for n, raw in enumerate(data.split(b"\n"), start=1)
                               if raw.strip())
            return numbers[row]

        return [(table, line_of)]
    lines, numbers, _, _ = _split_lines(data, path, 1, "skip", "replace")
    # A line no Arrow type holds says nothing of the schema: the reader reports it.
    return [(table, lambda row, lo=lo: numbers[lo + row])
            for lo, _, table in _pieces(lines, 0, len(lines))
            if not isinstance(table, pa.ArrowInvalid)]


def infer_jsonl_schema(fs, files: Sequence[InputFile], *, settled: Collection[str] = (),
                       columns: Collection[str] | None = None,
                       on_conflict: str = "error") -> pa.Schema:
    """Infer the dataset schema from samples of several files, unified.

    Up to :data:`SAMPLE_FILES` files spread over the listing (the first and the last
    among them) are sampled: the first complete line of each, however long, and up to
    :data:`SAMPLE_BYTES` after it. Their schemas are unified field by field: a field
    seen in any sample is kept, integers and floats promote to floats. Two samples that
    give a column incompatible types (a string and a number) are a
    :class:`~curator_dask.io.errors.SchemaConflictError` naming both files and lines
    (``on_conflict="error"``), or a warning that keeps the first type (``"keep"``: the
    reader then skips and counts the lines that do not fit). Conflicts in ``settled``
    columns (typed by the caller) or outside ``columns`` do not matter. When no sampled
    file has a row, the other files are tried in order.
    """
    union = SchemaUnion(settled=settled, columns=columns, on_conflict=on_conflict,
                        skippable=True)
    sampled = sample_files(files, SAMPLE_FILES)
    chosen = set(sampled)
    rest = [f for f in files if f not in chosen]
    for group in (sampled, rest):
        for f in group:
            with reading(f.path):
                for table, line_of in _sample_tables(sample_bytes(fs, f), f.path):
                    union.add(table, f.path, line_of)
            if group is rest and union.fields:
                break
        if union.fields:
            break
    # JSON has no timestamps: pyarrow infers them from strings that look like dates,
    # which are read as the strings they are.
    return strings_for_timestamps(union.schema())


def read_jsonl_table(
    spec: PartitionSpec,
    fs,
    schema: pa.Schema,
    *,
    text_field: str | None = "text",
    add_filename: str | None = None,
    on_bad_lines: str = "error",
    encoding_errors: str = "strict",
    text_cast: bool = False,
    typed: Collection[str] = (),
    columns_chosen: bool = False,
) -> tuple[pa.Table, dict[str, int]]:
    """Read one planned partition as an Arrow table with exactly ``schema``'s columns,
    and the lines skipped by reason (see :func:`read_jsonl_partition`)."""
    conformer = Conformer(schema, text_field, text_cast, frozenset(typed), columns_chosen)
    reader = _SliceReader(conformer, on_bad_lines, encoding_errors)
    tables = []
    for piece in spec.slices:
        for table in reader.read(fs, piece):
            if add_filename:
                table = table.append_column(
                    add_filename, pa.array([piece.file.name] * table.num_rows, pa.string())
                )
            tables.append(table)
    for path, count in reader.casts.items():
        logger.warning("%s: cast %d values of the text column %r to strings (text_cast=True)",
                       path, count, text_field)
    full_schema = schema
    if add_filename:
        full_schema = schema.append(pa.field(add_filename, pa.string()))
    table = pa.concat_tables(tables) if tables else full_schema.empty_table()
    return table, {reason: count for reason, count in reader.dropped.items() if count}


def read_jsonl_partition(spec: PartitionSpec, fs, schema: pa.Schema, *,
                         backend: str = "pandas", **options):
    """Read one planned partition into a frame with exactly ``schema``'s columns.

    Options are those of :func:`read_jsonl_table`. Skipped lines are counted on the
    partition: malformed JSON under ``reader.bad_json_line``, values whose type does not
    fit the schema under ``reader.type_mismatch``, the partial last line of a truncated
    compressed file under ``reader.truncated_file``.
    """
    table, dropped = read_jsonl_table(spec, fs, schema, **options)
    frame = to_frame(table, backend)
    for reason, count in dropped.items():
        record_dropped(frame, reason, count)
    return frame


def filename_column(add_filename: bool | str) -> str | None:
    """The column name for ``add_filename`` (True means ``file_name``)."""
    if add_filename is True:
        return FILENAME_COLUMN
    return add_filename or None
