"""An input partition of exact dedup read as Arrow, and its texts hashed.

Shared by the exact workflow's single-read path (:mod:`curator_dask.dedup.exact_files`)
and the exact dedup index's query (:mod:`curator_dask.dedup.index.exact`): the partition
is parsed once, as an Arrow table (no pandas frame), its rows numbered, ids assigned as
:class:`~curator_dask.AddId` would where the input has none, and every text hashed from
the Arrow buffers.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fsspec.implementations.local import LocalFileSystem

from curator_dask.dedup.exact import NULL_TEXT_REASON, NullTextError, digests
from curator_dask.dedup.ids import row_numbers
from curator_dask.io.source import PartitionReader

__all__ = ["ArrowInput", "HashSettings", "HashedInput", "hash_input", "split_by"]


@dataclass(frozen=True)
class HashSettings:
    """What every task needs to know (pickled once per task)."""

    id_field: str
    text_field: str
    hash_method: str
    on_null: str
    assign_id: bool


# -- reading a partition --------------------------------------------------------------------

def _with_ids(table: pa.Table, number: int, settings: HashSettings) -> pa.Table:
    """``table`` with its id column: the input's, or AddId's numbers appended."""
    if settings.id_field in table.column_names:
        return table
    # AddId's numbering, which is also the row numbering: partition * 1e9 + position.
    return table.append_column(settings.id_field, pa.array(row_numbers(table.num_rows, number)))


def _text(table: pa.Table, settings: HashSettings) -> pa.ChunkedArray:
    # The chunks as the reader parsed them: digests hashes each in place (no copy).
    return table.column(settings.text_field)


def _null_error(table: pa.Table, nulls: np.ndarray, number: int, settings: HashSettings,
                files: list[str]) -> NullTextError:
    first = table.column(settings.id_field).take(pa.array(np.flatnonzero(nulls)[:1]))[0]
    return NullTextError(
        f"partition {number}: {int(nulls.sum())} document(s) have a null "
        f"{settings.text_field!r} (first: {settings.id_field}={first.as_py()}; the "
        f"partition's files: {', '.join(files)}). Drop or fill them first, or pass "
        f"on_null='skip' to drop them and count them as {NULL_TEXT_REASON!r}"
    )


class ArrowInput:
    """Reads an input partition as the run sees it: from the input files (with ids) or
    from the staged copy. Shared by every task; each task gets only its own
    :class:`~curator_dask.io.planner.PartitionSpec`, never the whole plan."""

    def __init__(self, reader, settings: HashSettings, staging: str | None, fs):
        self.reader, self.settings = reader, settings
        self.staging, self.fs = staging, fs

    def read(self, spec) -> tuple[pa.Table, dict[str, int]]:
        table, dropped = self.reader.table(spec)
        return _with_ids(table.replace_schema_metadata(None), spec.index, self.settings), dropped

    @classmethod
    def of(cls, ds, settings: HashSettings) -> ArrowInput | None:
        """The input of ``ds`` read as Arrow tables, or None where ``ds`` is not a
        planned read of JSONL or Parquet files as read (a step or an operation since, or
        data from memory): then only its frames say what it holds."""
        source = ds.source
        reader = source.reader if source is not None else None
        if (not isinstance(reader, PartitionReader) or reader.fmt not in ("jsonl", "parquet")
                or not source.plan):
            return None
        return cls(reader, settings, None, source.fs)

    def staged(self, i: int) -> pa.Table:
        path = posixpath.join(self.staging, f"part-{i:05d}.arrow")
        if isinstance(self.fs, LocalFileSystem):
            # A memory map: the staged table is never copied, only the kept rows are.
            return pa.ipc.open_file(pa.memory_map(path)).read_all()
        with self.fs.open(path, "rb") as handle:
            return pa.ipc.open_file(pa.BufferReader(handle.read())).read_all()


# -- step 1: hash (and stage) -----------------------------------------------------------------

@dataclass
class HashedInput:
    """One input partition read as Arrow and its texts hashed: the table, the rows it
    skipped by reason, which texts are null, and ``(id, row, hi, lo)`` of the others
    (``hi``/``lo``: the two uint64 halves of each text's 128-bit digest)."""

    table: pa.Table
    dropped: dict[str, int]
    nulls: np.ndarray
    ids: pa.Array
    rows: np.ndarray
    hi: np.ndarray
    lo: np.ndarray


def hash_input(source: ArrowInput, spec, read: tuple | None = None) -> HashedInput:
    """Read partition ``spec`` once (or take ``read``, what :meth:`ArrowInput.read`
    returned for it) and hash its texts from the Arrow buffers (rows numbered before
    null texts are left out: removals count positions in the whole partition). A null
    text raises unless ``on_null`` is ``"skip"``."""
    settings = source.settings
    i = spec.index
    table, dropped = read if read is not None else source.read(spec)
    n = table.num_rows
    rows = row_numbers(n, i)
    text = _text(table, settings)
    nulls = np.zeros(n, dtype=bool)
    if text.null_count:
        nulls = pc.is_null(text).to_numpy(zero_copy_only=False)
        if settings.on_null == "error":
            raise _null_error(table, nulls, i, settings,
                              [s.file.path for s in spec.slices])
        text = text.filter(pa.array(~nulls))
    words = np.frombuffer(digests(text, settings.hash_method), dtype=">u8").reshape(-1, 2)
    hi, lo = words[:, 0].astype(np.uint64), words[:, 1].astype(np.uint64)
    ids = table.column(settings.id_field)
    if nulls.any():
        keep = ~nulls
        ids, rows = ids.filter(pa.array(keep)), rows[keep]
    return HashedInput(table, dropped, nulls, ids, rows, hi, lo)


def split_by(bucket_of: np.ndarray, buckets: int, columns: dict) -> list[pa.Table]:
    """``columns`` (equal-length arrays) as one table per bucket, bucket ``b`` holding
    the rows whose ``bucket_of`` is ``b``, in their order.

    Examples
    --------
    >>> [t.column("x").to_pylist() for t in split_by(np.array([1, 0, 1]), 2,
    ...                                               {"x": np.array([5, 6, 7])})]
    [[6], [5, 7]]
    """
    order = np.argsort(bucket_of, kind="stable")
    bounds = np.searchsorted(bucket_of[order], np.arange(buckets + 1))
    pieces = []
    for b in range(buckets):
        take = order[bounds[b]:bounds[b + 1]]
        pieces.append(pa.table({name: _take(values, take) for name, values in columns.items()}))
    return pieces


def _take(values, positions: np.ndarray):
    if isinstance(values, np.ndarray):
        return values[positions]
    return values.take(pa.array(positions))
