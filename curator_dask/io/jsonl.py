"""Read JSONL partitions with pyarrow's JSON parser.

The fast path hands a whole slice of bytes to ``pyarrow.json.read_json``. Only when
that fails (a malformed line, bad UTF-8) does the slow path look at lines one by one, to
name the file and line, or to skip and count bad lines when asked.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.json as pajson
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import read_block

from curator_dask.dropped import record_dropped
from curator_dask.io.errors import InvalidEncodingError, MalformedLineError
from curator_dask.io.files import InputFile
from curator_dask.io.planner import FileSlice, PartitionSpec
from curator_dask.io.tables import FILENAME_COLUMN, conform, to_frame

__all__ = ["read_jsonl_partition", "infer_jsonl_schema", "read_slice_bytes", "BAD_LINE_REASON"]

logger = logging.getLogger(__name__)

BAD_LINE_REASON = "reader.bad_json_line"
ON_BAD_LINES = ("error", "skip", "warn")
ENCODING_ERRORS = ("strict", "replace")
_SAMPLE_BYTES = 1 << 20
_STREAM_BLOCK = 16 << 20
# fsspec compression name -> Arrow codec, for the codecs Arrow decompresses itself.
_ARROW_CODECS = {None: None, "gzip": "gzip", "bz2": "bz2", "zstd": "zstd"}


def read_slice_bytes(fs, piece: FileSlice) -> bytes:
    """The bytes of a slice, decompressed.

    A byte range starts after the first newline at or after ``piece.start`` and runs to
    the end of the line that spans ``piece.end`` (fsspec's ``read_block``), so adjacent
    ranges read every line exactly once.
    """
    f = piece.file
    if piece.whole:
        if f.compression:
            with fs.open(f.path, "rb", compression=f.compression) as handle:
                return handle.read()
        return fs.cat_file(f.path)
    with fs.open(f.path, "rb") as handle:
        length = None if piece.end is None else piece.end - piece.start
        return read_block(handle, piece.start, length, delimiter=b"\n")


def _first_line_number(fs, f: InputFile, start: int) -> int:
    """1-based number of the first line of the byte range that begins at ``start``.

    The range's first line follows the first newline at or after ``start``, so it is
    line (newlines before ``start``) + 2. Counting reads the file up to ``start``; it is
    done only to name a line in an error.
    """
    if start == 0:
        return 1
    count = 0
    with fs.open(f.path, "rb") as handle:
        remaining = start
        while remaining:
            chunk = handle.read(min(remaining, 1 << 24))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
    return count + 2


def _parse_fast(data: bytes) -> pa.Table:
    # One thread per task: parallelism comes from partitions, and a worker's threads
    # are already busy with other partitions.
    block = max(1 << 20, min(len(data) + 1, (1 << 31) - 1))
    return pajson.read_json(
        io.BytesIO(data),
        read_options=pajson.ReadOptions(use_threads=False, block_size=block),
    )


def _fast_path(fs, piece: FileSlice) -> pa.Table | None:
    """Parse a slice without copying it through Python: the path nearly every slice takes.

    Local files are read by pyarrow's own I/O (whole files streamed in blocks through its
    decompressors, byte ranges as zero-copy slices of a memory map), which avoids a
    Python bytes copy per slice and the page faults of allocating it. Other filesystems
    stream whole files from their fsspec handle. Returns None when anything is off (a bad
    line, bad UTF-8, an empty file, a line longer than a block, an unsupported codec) and
    the caller takes the byte path, which reports or skips each case.
    """
    f = piece.file
    options = pajson.ReadOptions(use_threads=False, block_size=_STREAM_BLOCK)
    try:
        if isinstance(fs, LocalFileSystem) and f.compression in _ARROW_CODECS:
            if piece.whole:
                source = pa.input_stream(f.path, compression=_ARROW_CODECS[f.compression])
            elif f.compression is None:
                source = pa.BufferReader(_mapped_range(f.path, piece))
            else:
                return None
            with source:
                table = pajson.read_json(source, read_options=options)
        elif piece.whole:
            with fs.open(f.path, "rb", compression=f.compression) as handle:
                table = pajson.read_json(handle, read_options=options)
        else:
            return None
        _check_utf8(table)
    except pa.ArrowInvalid:
        return None
    return table


def _mapped_range(path: str, piece: FileSlice) -> pa.Buffer:
    """The bytes ``read_block`` would return for ``piece``, as a slice of a memory map."""
    mapped = pa.memory_map(path)
    size = mapped.size()

    def after_newline(pos: int) -> int:
        while pos < size:
            chunk = mapped.read_at(min(1 << 16, size - pos), pos)
            cut = chunk.find(b"\n")
            if cut >= 0:
                return pos + cut + 1
            pos += len(chunk)
        return size

    start = 0 if piece.start == 0 else after_newline(piece.start)
    end = size if piece.end is None or piece.end >= size else after_newline(piece.end)
    mapped.seek(start)
    return mapped.read_buffer(max(end - start, 0))  # zero-copy: a view of the map


def _check_utf8(table: pa.Table) -> None:
    # pyarrow's JSON parser does not validate UTF-8 inside strings; a full validation
    # of the string columns does.
    table.validate(full=True)


def _parse_slow(data: bytes, path: str, first_line: int, on_bad_lines: str,
                encoding_errors: str) -> tuple[pa.Table | None, int]:
    """Parse line by line to locate bad lines; returns the table and the skip count."""
    good: list[bytes] = []
    skipped = 0
    for number, raw in enumerate(data.split(b"\n"), start=first_line):
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
        except ValueError as err:
            if on_bad_lines == "error":
                raise MalformedLineError(path, number, str(err)) from None
            if on_bad_lines == "warn":
                logger.warning("%s, line %d: skipping malformed JSON (%s)", path, number, err)
            skipped += 1
            continue
        good.append(raw)
    if not good:
        return None, skipped
    return _parse_fast(b"\n".join(good)), skipped


def parse_jsonl_bytes(data: bytes, path: str, *, first_line: int | None = None,
                      line_number=None, on_bad_lines: str = "error",
                      encoding_errors: str = "strict") -> tuple[pa.Table | None, int]:
    """Parse JSONL bytes into a table; ``(None, skipped)`` when there are no rows.

    ``line_number`` is a callable giving the first line's number, called only when an
    error must name a line (counting lines is a read of the file up to the slice).
    """
    try:
        table = _parse_fast(data)
        _check_utf8(table)
        return table, 0
    except pa.ArrowInvalid:
        # Whitespace alone is an empty slice, not an error (checked only on this path:
        # stripping a large slice up front costs a copy of it).
        if data.isspace() or not data:
            return None, 0
    start = first_line if first_line is not None else (line_number() if line_number else 1)
    return _parse_slow(data, path, start, on_bad_lines, encoding_errors)


def infer_jsonl_schema(fs, files: Sequence[InputFile]) -> pa.Schema:
    """Infer the dataset schema from the first rows of the first file that has any."""
    for f in files:
        with fs.open(f.path, "rb", compression=f.compression) as handle:
            data = handle.read(_SAMPLE_BYTES)
        if len(data) == _SAMPLE_BYTES:
            data = data[: data.rfind(b"\n") + 1] or data
        try:
            table, _ = parse_jsonl_bytes(data, f.path, first_line=1, on_bad_lines="skip",
                                         encoding_errors="replace")
        except pa.ArrowInvalid:
            continue
        if table is not None and table.num_columns:
            return table.schema
    return pa.schema([])


def read_jsonl_partition(
    spec: PartitionSpec,
    fs,
    schema: pa.Schema,
    *,
    text_field: str | None = "text",
    add_filename: str | None = None,
    on_bad_lines: str = "error",
    encoding_errors: str = "strict",
    backend: str = "pandas",
):
    """Read one planned partition into a frame with exactly ``schema``'s columns.

    Skipped lines are counted on the partition under ``reader.bad_json_line``.
    """
    tables = []
    skipped = 0
    for piece in spec.slices:
        table = _fast_path(fs, piece)
        bad = 0
        if table is None:
            data = read_slice_bytes(fs, piece)
            table, bad = parse_jsonl_bytes(
                data, piece.file.path,
                line_number=lambda f=piece.file, o=piece.start: _first_line_number(fs, f, o),
                on_bad_lines=on_bad_lines, encoding_errors=encoding_errors,
            )
        skipped += bad
        if table is None:
            continue
        table = conform(table, schema, piece.file.path, text_field)
        if add_filename:
            table = table.append_column(
                add_filename, pa.array([piece.file.name] * table.num_rows, pa.string())
            )
        tables.append(table)
    full_schema = schema
    if add_filename:
        full_schema = schema.append(pa.field(add_filename, pa.string()))
    table = pa.concat_tables(tables) if tables else full_schema.empty_table()
    frame = to_frame(table, backend)
    return record_dropped(frame, BAD_LINE_REASON, skipped)


def filename_column(add_filename: bool | str) -> str | None:
    """The column name for ``add_filename`` (True means ``file_name``)."""
    if add_filename is True:
        return FILENAME_COLUMN
    return add_filename or None
