"""Ranges of numeric parameters, written into their type hints.

A parameter hinted ``PositiveInt`` is an ``int`` of at least 1, and so on: the bounds are
``annotated_types`` metadata on the type (``Annotated[int, Ge(1)]``), which type checkers
ignore and which the pipeline-file checker (:mod:`curator_dask.cli.registry`, with
pydantic) enforces, so ``files_per_partition: 0`` or ``threads_per_worker: -2`` in a
pipeline file is an error naming the file, the line, the parameter and the range before
anything runs. Constructors still check their own arguments when called from Python.

Examples
--------
>>> from curator_dask.cli.registry import parameters_of
>>> from curator_dask.stages.io_stages import JsonlReader
>>> files_per_partition = [p for p in parameters_of(JsonlReader)
...                        if p.name == "files_per_partition"][0]
>>> files_per_partition.check(0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
curator_dask.cli.registry.ParameterTypeError: files_per_partition expects int >= 1 | None, got 0 ...
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from annotated_types import Ge, Gt, Le, Predicate
from dask.utils import parse_bytes, parse_timedelta

__all__ = [
    "MAX_BYTE_SIZE",
    "ByteSize",
    "Duration",
    "Fraction",
    "MemorySize",
    "NonNegativeInt",
    "NonNegativeNumber",
    "PositiveInt",
    "PositiveNumber",
]

#: A count of at least one (partitions, files, workers' threads, tasks in flight).
PositiveInt = Annotated[int, Ge(1)]
#: A count that may be zero (workers to start when more come later).
NonNegativeInt = Annotated[int, Ge(0)]
#: A number above zero (seconds, sizes as numbers).
PositiveNumber = Annotated[float, Gt(0)]
#: A number of at least zero.
NonNegativeNumber = Annotated[float, Ge(0)]
#: A share between 0 and 1.
Fraction = Annotated[float, Ge(0), Le(1)]
#: The largest number of bytes a size parameter takes (1 TiB): one partition or one
#: worker's memory beyond it is a typo, not a plan.
MAX_BYTE_SIZE = 1 << 40


def is_size_text(text: str) -> bool:
    """A size such as '256MiB', of at most 1 TiB."""
    try:
        size = parse_bytes(text)
    except (ValueError, TypeError, OverflowError):
        return False
    return isinstance(size, int) and 0 <= size <= MAX_BYTE_SIZE


def is_duration_text(text: str) -> bool:
    """A duration such as '30s' or '2h'."""
    try:
        seconds = parse_timedelta(text, default="seconds")
    except (ValueError, TypeError, OverflowError, KeyError):
        return False
    return seconds is not None and math.isfinite(seconds) and seconds >= 0


_SIZE_TEXT = Annotated[str, Predicate(is_size_text)]
#: A number of bytes (1 to 1 TiB), or a size such as ``"256MiB"``.
ByteSize = Annotated[int, Ge(1), Le(MAX_BYTE_SIZE)] | _SIZE_TEXT
#: A worker's memory: ``"auto"``, a size such as ``"4GiB"``, a number of bytes, or a
#: fraction of the machine's memory (a number up to 1); 0 for no limit.
MemorySize = Literal["auto"] | _SIZE_TEXT | Annotated[float, Ge(0), Le(MAX_BYTE_SIZE)]
#: Seconds, or a duration such as ``"30s"``, ``"1h"``.
Duration = NonNegativeNumber | Annotated[str, Predicate(is_duration_text)]
