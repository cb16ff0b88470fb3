"""A plain-text table of a benchmark's results, numbers right-aligned.

Shared by the benchmark scripts (``from table import print_table``; each script runs
with ``benchmarks/`` first on ``sys.path``); the same tables as the ``curator-dask``
command prints (:func:`curator_dask.observe.tables.text_table`).
"""

from __future__ import annotations

from collections.abc import Sequence

from curator_dask.observe.tables import text_table

__all__ = ["print_table"]


def print_table(header: Sequence[str], rows: Sequence[Sequence]) -> None:
    """Print ``header`` and ``rows`` (cells as ``str()`` gives them).

    >>> print_table(("name", "s"), [("a", 1.5), ("long name", 12)])
    name         s
    ---------  ---
    a          1.5
    long name   12
    """
    print(text_table(header, rows))
