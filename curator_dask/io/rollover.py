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
same names, and :func:`write_pieces` deletes pieces an earlier attempt left beyond them.

Writers in a format the io layer does not know (Megatron's token files) supply an
*encoder*: an object whose ``encode(df)`` returns an :class:`Encoded` part, which this
module cuts the same way.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.backends import to_host
from curator_dask.errors import CuratorError

__all__ = ["FileSize", "FileSizeError", "Encoded", "FrameEncoded", "RawBytes", "cut_points",
           "jsonl_lines", "output_pieces", "stale_pieces", "UNITS"]

UNITS = ("bytes", "documents", "tokens")
_UNIT_WORDS = {"document": "documents", "documents": "documents", "docs": "documents",
               "doc": "documents", "token": "tokens", "tokens": "tokens"}
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
    >>> FileSize.parse(1000)
    FileSize(limit=1000, unit='bytes')
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
        Dask reads them) or a count and a unit (``"100000 documents"``, ``"50M tokens"``;
        ``k``, ``M``, ``G``, ``T`` multiply by powers of 1000).
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
    """Encoded bytes of a file (JSONL lines), written as they are."""

    def __init__(self, data: bytes | memoryview):
        self.data = data

    def write_to(self, handle) -> None:
        handle.write(self.data)


class FrameEncoded:
    """A frame (pandas, cuDF or a ``pyarrow.Table``) written as Parquet, JSONL or Arrow.

    JSONL measured in bytes is serialized once here (``lines``: the bytes, and the
    offsets of the rows' lines in them), so the cut is exact and each piece is written
    from those bytes.
    """

    def __init__(self, df, fmt: str, suffix: str, lines: tuple | None = None):
        self.df, self.fmt, self.suffix, self.lines = df, fmt, suffix, lines

    def __len__(self) -> int:
        return self.lines[1].size - 1 if self.lines is not None else len(self.df)

    def sizes(self, unit: str) -> np.ndarray:
        if unit == "documents":
            return np.ones(len(self), dtype=np.int64)
        if unit != "bytes":
            raise FileSizeError(f"a {self.fmt} writer counts target_file_size in bytes or "
                                f"documents, not {unit}; tokens are counted by the "
                                "tokenizing writers")
        if self.fmt == "jsonl":
            if self.lines is None:
                self.lines = jsonl_lines(self.df)
            return np.diff(self.lines[1])
        return arrow_row_bytes(_as_table(self.df))

    def take(self, start: int, stop: int) -> FrameEncoded:
        if self.lines is not None:
            data, offsets = self.lines
            return FrameEncoded(None, self.fmt, self.suffix, (data, offsets[start:stop + 1]))
        rows = (self.df.slice(start, stop - start) if isinstance(self.df, pa.Table)
                else self.df.iloc[start:stop])
        return FrameEncoded(rows, self.fmt, self.suffix)

    def files(self) -> list[tuple[str, object]]:
        if self.lines is not None:
            data, offsets = self.lines
            return [(self.suffix, RawBytes(memoryview(data)[offsets[0]:offsets[-1]]))]
        return [(self.suffix, self.df)]

    def counts(self) -> dict[str, int]:
        return {}


def jsonl_lines(df) -> tuple[bytes, np.ndarray]:
    """The JSONL bytes of ``df`` (every writer's JSON: pandas' ``to_json``, UTF-8 as it
    is) and the offsets of its lines (one more than its rows).

    Newlines inside values are escaped by the JSON writer, so every raw newline ends a
    line.
    """
    frame = to_host(df.to_pandas() if isinstance(df, pa.Table) else df)
    if not len(frame):
        return b"", np.zeros(1, dtype=np.int64)
    text = frame.to_json(orient="records", lines=True, force_ascii=False)
    data = text.encode("utf-8")
    if not data.endswith(b"\n"):
        data += b"\n"
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1
    return data, np.concatenate([[0], ends]).astype(np.int64)


def _as_table(df) -> pa.Table:
    if isinstance(df, pa.Table):
        return df
    return pa.Table.from_pandas(to_host(df), preserve_index=False)


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


def output_pieces(encoded: Encoded, base: str, target) -> list[tuple[str, object]]:
    """The files of one part: ``(name, content)`` in order.

    ``base`` is the part's name without a suffix (``part-00042``). Without a target the
    part is one piece named ``base``; with one (:class:`FileSize`) it is cut by
    :func:`cut_points` into pieces named ``base-00000``, ``base-00001``, ...
    """
    if target is None:
        return [(base + suffix, content) for suffix, content in encoded.files()]
    starts = cut_points(encoded.sizes(target.unit), target.limit)
    stops = [*starts[1:].tolist(), len(encoded)]
    out = []
    for k, (start, stop) in enumerate(zip(starts.tolist(), stops)):
        piece = encoded.take(start, stop)
        out += [(f"{base}-{k:05d}{suffix}", content) for suffix, content in piece.files()]
    return out


def stale_pieces(fs, directory: str, base: str, written: list[str]) -> list[str]:
    """Pieces of the part ``base`` in ``directory`` that ``written`` does not hold: what
    an earlier attempt at the part wrote beyond this one's files (their paths)."""
    pattern = re.compile(re.escape(base) + r"-\d{5,}\.")
    keep = {posixpath.basename(w) for w in written}
    found = fs.glob(posixpath.join(directory, base + "-*"))
    return [f for f in found
            if pattern.match(posixpath.basename(f)) and posixpath.basename(f) not in keep]
