"""A plain-text table of a benchmark's results, columns padded to their widest cell.

Shared by the benchmark scripts (``from table import print_table``; each script runs
with ``benchmarks/`` first on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["print_table"]


def print_table(header: Sequence[str], rows: Sequence[Sequence]) -> None:
    """Print ``header`` and ``rows`` (cells as ``str()`` gives them), two spaces apart.

    >>> print_table(("name", "s"), [("a", 1.5), ("long name", 12)])
    name       s
    a          1.5
    long name  12
    """
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
