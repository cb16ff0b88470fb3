"""Output files of a chosen size: how one part is cut into files.

A writer given ``target_file_size`` cuts each part into files of at most that size and
names them after the part and their place in it: ``part-00042-00000.parquet``,
``part-00042-00001.parquet``, ... (names sort in document order). The size is counted in
one of three units (:class:`FileSize`):

- ``bytes``: ``268435456`` or ``"256MiB"``. What is counted is the encoded size of the
  rows before compression: the bytes of the lines for JSONL (exact), the tokens' bytes
  for Megatron's ``.bin`` (exact), the rows' Arrow data for Parquet and Arrow files (a
  close estimate of Parquet's plain encoding). A compressed file is smaller than its
  target by its compression ratio.
- ``documents``: ``"100000 documents"`` (or ``docs``).
- ``tokens``: ``"50M tokens"``, for the tokenizing writers.

Files are filled in order: a file takes rows while their sizes sum to at most the
target, so each file but a part's last is as full as the next row allows; a single row
larger than the target is a file of its own. The cut is a pure function of the part's
rows, so a rewritten part (a retried task, a resumed run) gets the same files under the
same names, and the writer deletes pieces an earlier attempt left beyond them
(:func:`~curator_dask.io.output_state.stale_pieces`).

Writers in a format the io layer does not know (Megatron's token files) supply an
*encoder*: an object whose ``encode(df)`` returns an :class:`Encoded` part, which this
module cuts the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from annotated_types import Ge, Predicate

from curator_dask.errors import CuratorError
from curator_dask.io.arrow_types import to_table
from curator_dask.io.json_lines import json_lines
from curator_dask.io.output_state import part_name

__all__ = [
    "UNITS",
    "Encoded",
    "FileSize",
    "FileSizeError",
    "FrameEncoded",
    "RawBytes",
    "TargetFileSize",
    "cut_points",
    "jsonl_lines",
    "output_pieces",
]

UNITS = ("bytes", "documents", "tokens")
_UNIT_WORDS = {"document": "documents", "documents": "documents", "docs": "documents",
               "doc": "documents", "token": "tokens", "tokens": "tokens", "byte": "bytes",
               "bytes": "bytes"}
_COUNT = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]+)?)\s*([kKmMgGtT]?)\s+([A-Za-z]+)\s*$")
_MULTIPLIER = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


class FileSizeError(CuratorError, ValueError):
    """A ``target_file_size`` that cannot be read, or in a unit the writer cannot count."""


@dataclass(frozen=True)
class FileSize:
    """How large one output file may be: ``limit`` in ``unit`` (bytes, documents, tokens).

    Examples
    --------
    >>> FileSize.parse("256MiB")
    FileSize(limit=268435456, unit='bytes')
    >>> FileSize.parse("100k documents")
    FileSize(limit=100000, unit='documents')
    >>> str(FileSize.parse("2.5M tokens"))
    '2500000 tokens'
    >>> FileSize.parse(1000) == FileSize.parse("1000 bytes") == FileSize.parse("1k bytes")
    True
    """

    limit: int
    unit: str = "bytes"

    def __post_init__(self):
        if self.unit not in UNITS:
            raise FileSizeError(f"target_file_size: the unit must be one of {UNITS}, "
                                f"got {self.unit!r}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, (int, np.integer)) \
                or self.limit < 1:
            raise FileSizeError(f"target_file_size must be a positive number of {self.unit}, "
                                f"got {self.limit!r}")

    @classmethod
    def parse(cls, value: int | str | FileSize | None) -> FileSize | None:
        """``value`` as a :class:`FileSize` (None stays None).

        An integer is bytes; a string is a size in bytes (``"512MiB"``, ``"1GB"``, as
        Dask reads them) or a count and a unit (``"100000 documents"``, ``"50M tokens"``,
        ``"64k bytes"``; ``k``, ``M``, ``G``, ``T`` multiply by powers of 1000), as
        ``str()`` of a :class:`FileSize` writes it.
        """
        if value is None or isinstance(value, FileSize):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return cls(int(value), "bytes")
        if not isinstance(value, str):
            raise FileSizeError(f"target_file_size must be a number of bytes or a string such "
                                f"as '256MiB', '100000 documents' or '50M tokens', got "
                                f"{value!r}")
        counted = _COUNT.match(value)
        if counted and counted.group(3).lower() in _UNIT_WORDS:
            number, multiplier, word = counted.groups()
            limit = float(number.replace("_", "")) * _MULTIPLIER[multiplier.lower()]
            if limit != int(limit):
                raise FileSizeError(f"target_file_size {value!r}: a count of "
                                    f"{_UNIT_WORDS[word.lower()]} must be whole")
            return cls(int(limit), _UNIT_WORDS[word.lower()])
        from dask.utils import parse_bytes

        try:
            return cls(int(parse_bytes(value)), "bytes")
        except (ValueError, TypeError):
            raise FileSizeError(f"target_file_size {value!r} is neither a size in bytes "
                                "('256MiB', '1GB') nor a count with a unit ('100000 documents', "
                                "'50M tokens')") from None

    def __str__(self) -> str:
        return f"{self.limit} {self.unit}"


def is_file_size_text(text: str) -> bool:
    """Whether :meth:`FileSize.parse` reads ``text`` (``"256MiB"``, ``"50M tokens"``)."""
    try:
        FileSize.parse(text)
    except FileSizeError:
        return False
    return True


#: A ``target_file_size`` as a type hint (pipeline files are checked against it): a
#: positive number of bytes, or a text :meth:`FileSize.parse` reads.
TargetFileSize = Annotated[int, Ge(1)] | Annotated[str, Predicate(is_file_size_text)]


def cut_points(sizes: np.ndarray, limit: int) -> np.ndarray:
    """The first row of each file when rows of ``sizes`` fill files of at most ``limit``.

    Greedy, in order: a file takes rows while their sizes sum to at most ``limit``; a row
    larger than ``limit`` is a file alone. Zero rows make one (empty) file.

    Examples
    --------
    >>> cut_points(np.array([3, 3, 3, 3, 3]), 7).tolist()
    [0, 2, 4]
    >>> cut_points(np.array([1, 10, 1]), 5).tolist()
    [0, 1, 2]
    >>> cut_points(np.array([], dtype=np.int64), 5).tolist()
    [0]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    ends = np.cumsum(sizes)
    starts = [0]
    start, filled = 0, 0
    n = len(sizes)
    while True:
        # Rows start.. fit while ends[row] - filled <= limit (always at least one row).
        stop = max(int(np.searchsorted(ends, filled + limit, side="right")), start + 1)
        if stop >= n:
            break
        starts.append(stop)
        start, filled = stop, int(ends[stop - 1])
    return np.asarray(starts, dtype=np.int64)


class Encoded(Protocol):
    """A part in its output format, before it is cut into files.

    ``sizes(unit)`` is each row's size in a unit of :data:`UNITS` (raise
    :class:`FileSizeError` for a unit it cannot count); ``take(start, stop)`` the rows
    ``start:stop``; ``files()`` the ``(suffix, content)`` of the files one piece makes
    (a content is a frame, a ``pyarrow.Table``, or an object with ``write_to(handle)``);
    ``counts()`` counters to carry with the part's stats (tokens written).
    """

    def __len__(self) -> int: ...

    def sizes(self, unit: str) -> np.ndarray: ...

    def take(self, start: int, stop: int) -> Encoded: ...

    def files(self) -> list[tuple[str, object]]: ...

    def counts(self) -> dict[str, int]: ...


class RawBytes:
    """A file's encoded content (JSONL lines, token ids, an index), written as it is,
    without a copy: bytes, a memoryview or a numpy array."""

    def __init__(self, data: bytes | memoryview | np.ndarray):
        self.data = data

    def write_to(self, handle) -> None:
        data = self.data
        if isinstance(data, np.ndarray):
            data = memoryview(np.ascontiguousarray(data)).cast("B")
        handle.write(data)


class FrameEncoded:
    """A partition written as Parquet, JSONL or Arrow: the Arrow table every writer
    writes (:func:`~curator_dask.io.arrow_types.to_table`), made once.

    JSONL measured in bytes is serialized once here (``lines``: the bytes
    :func:`~curator_dask.io.json_lines.json_lines` writes, and the offsets of the rows'
    lines in them), so the cut is exact and each piece is written from those bytes.
    """

    def __init__(self, table: pa.Table | None, fmt: str, suffix: str,
                 lines: tuple | None = None):
        self.table, self.fmt, self.suffix, self.lines = table, fmt, suffix, lines

    @classmethod
    def of(cls, df, fmt: str, suffix: str, schema: pa.Schema | None = None) -> FrameEncoded:
        """A pandas or cuDF frame, or a table, with string columns typed as ``schema``
        (what the data was read with) records them."""
        return cls(to_table(df, schema), fmt, suffix)

    def __len__(self) -> int:
        return self.lines[1].size - 1 if self.lines is not None else self.table.num_rows

    def sizes(self, unit: str) -> np.ndarray:
        if unit == "documents":
            return np.ones(len(self), dtype=np.int64)
        if unit != "bytes":
            raise FileSizeError(f"a {self.fmt} writer counts target_file_size in bytes or "
                                f"documents, not {unit}; tokens are counted by the "
                                "tokenizing writers")
        if self.fmt == "jsonl":
            if self.lines is None:
                self.lines = jsonl_lines(self.table)
                self.table = None  # the lines are what is written from here on
            return np.diff(self.lines[1])
        return arrow_row_bytes(self.table)

    def take(self, start: int, stop: int) -> FrameEncoded:
        if self.lines is not None:
            data, offsets = self.lines
            return FrameEncoded(None, self.fmt, self.suffix, (data, offsets[start:stop + 1]))
        return FrameEncoded(self.table.slice(start, stop - start), self.fmt, self.suffix)

    def files(self) -> list[tuple[str, object]]:
        if self.lines is not None:
            data, offsets = self.lines
            return [(self.suffix, RawBytes(memoryview(data)[offsets[0]:offsets[-1]]))]
        return [(self.suffix, self.table)]

    def counts(self) -> dict[str, int]:
        return {}


def jsonl_lines(table: pa.Table) -> tuple[bytes, np.ndarray]:
    """The JSONL bytes of ``table``, exactly as every JSONL writer writes them
    (:func:`~curator_dask.io.json_lines.json_lines`), and the offsets of its lines (one
    more than its rows).

    The JSON encoder escapes newlines inside keys and values, and no byte of a multi-byte
    UTF-8 character is a newline, so every raw newline ends a line.

    Examples
    --------
    >>> data, offsets = jsonl_lines(pa.table({"text": ["a\\nb", "ü"]}))
    >>> data, offsets.tolist()
    (b'{"text":"a\\\\nb"}\\n{"text":"\\xc3\\xbc"}\\n', [0, 16, 30])
    """
    data = b"".join(json_lines(table))
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1
    return data, np.concatenate([[0], ends]).astype(np.int64)


def arrow_row_bytes(table: pa.Table) -> np.ndarray:
    """Each row's size in Arrow buffers: value bytes of strings and binaries plus their
    offsets, the width of fixed-size values, an even share of anything nested."""
    total = np.zeros(table.num_rows, dtype=np.int64)
    for column in table.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) \
                or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            lengths = pc.binary_length(column).to_numpy(zero_copy_only=False)
            total += np.nan_to_num(lengths, nan=0).astype(np.int64)
            total += 8 if pa.types.is_large_string(kind) or pa.types.is_large_binary(kind) else 4
        elif hasattr(kind, "bit_width") and kind.bit_width >= 8:
            total += kind.bit_width // 8
        elif table.num_rows:
            total += -(-column.nbytes // table.num_rows)
    return total


def output_pieces(encoded: Encoded, index: int, target) -> list[tuple[str, object]]:
    """The files of part ``index``: ``(name, content)`` in order.

    Without a target the part is one piece, ``part-00042.parquet``; with one
    (:class:`FileSize`) it is cut by :func:`cut_points` into pieces named
    ``part-00042-00000.parquet``, ``part-00042-00001.parquet``, ...
    (:func:`~curator_dask.io.output_state.part_name`).
    """
    if target is None:
        return [(part_name(index, suffix), content) for suffix, content in encoded.files()]
    starts = cut_points(encoded.sizes(target.unit), target.limit)
    stops = [*starts[1:].tolist(), len(encoded)]
    out = []
    for k, (start, stop) in enumerate(zip(starts.tolist(), stops, strict=True)):
        piece = encoded.take(start, stop)
        out += [(part_name(index, suffix, piece=k), content)
                for suffix, content in piece.files()]
    return out
