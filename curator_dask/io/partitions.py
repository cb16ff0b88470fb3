"""What one partition of the input is: slices of files, numbered in the plan.

:mod:`curator_dask.io.planner` makes the plan; the readers (:mod:`~curator_dask.io.jsonl`,
:mod:`~curator_dask.io.parquet`, :mod:`~curator_dask.io.warc`) read one
:class:`PartitionSpec` each. Both sides speak these two types, so they live below both.
"""

from __future__ import annotations

from dataclasses import dataclass

from curator_dask.io.files import InputFile

__all__ = ["FileSlice", "PartitionSpec"]


@dataclass(frozen=True)
class FileSlice:
    """Part of one file.

    For JSONL, ``start``/``end`` are byte offsets of an uncompressed file (``end=None``:
    to the end); the slice holds every line that begins after the first newline at or
    after ``start`` (or at 0) up to and including the line that spans ``end``, so
    adjacent slices read each line exactly once. For Parquet, ``row_groups`` lists the
    row groups (``None``: all), and ``rows``, where given, the rows ``[first, stop)`` of
    its one row group (a row group larger than a partition may be, read in parts). For
    WARC, the slice holds the records whose first byte (in the stored, possibly
    gzip-compressed file) lies in ``[start, end)``; see :mod:`curator_dask.io.warc`.
    """

    file: InputFile
    start: int = 0
    end: int | None = None
    row_groups: tuple[int, ...] | None = None
    rows: tuple[int, int] | None = None

    @property
    def whole(self) -> bool:
        return (self.start == 0 and self.end is None and self.row_groups is None
                and self.rows is None)


@dataclass(frozen=True)
class PartitionSpec:
    """The slices that make one partition, and the partition's index in the plan."""

    index: int
    slices: tuple[FileSlice, ...]

    @property
    def nbytes(self) -> int:
        total = 0
        for s in self.slices:
            end = s.file.size if s.end is None else s.end
            total += end - s.start
        return total
