"""Text tables for terminals and logs, through tabulate: numbers right-aligned.

Every table curator-dask prints (the stage summary after a run, ``Pipeline.describe()``,
the dedup commands' results, the benchmarks) goes through :func:`text_table`, so they
all look alike. Cells are given as the text to show (``f"{n:,}"``); a column whose cells
all read as numbers (digits with ``,`` and ``.``, a sign, a unit such as ``%`` or ``s``,
or ``-`` for none) is right-aligned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["text_table"]

_NUMBER = re.compile(r"^[-+]?(\d[\d,]*(\.\d+)?|\.\d+)(e[-+]?\d+)?\s?(%|s|x|MB|GB)?$|^-$")


def _numeric(cells: list[str]) -> bool:
    shown = [c for c in cells if c != ""]
    return bool(shown) and all(_NUMBER.match(c) for c in shown) and \
        any(c != "-" for c in shown)


def text_table(header: Sequence[str] | None, rows: Sequence[Sequence], *,
               indent: str = "", rule: bool = True) -> str:
    """``rows`` under ``header`` as a text table, numeric columns right-aligned.

    Parameters
    ----------
    header : sequence of str, optional
        Column titles; None for a table without them.
    rows : sequence of sequences
        Cells, shown as ``str()`` gives them.
    indent : str
        Put before every line.
    rule : bool
        A line of dashes under the header.

    Examples
    --------
    >>> print(text_table(("stage", "docs", "share"), [("read", "1,200", "100.0%"),
    ...                                                ("word_count", "87", "7.3%")]))
    stage         docs    share
    ----------  ------  -------
    read         1,200   100.0%
    word_count      87     7.3%
    """
    from tabulate import tabulate

    cells = [["" if c is None else str(c) for c in row] for row in rows]
    width = len(header) if header is not None else max((len(r) for r in cells), default=0)
    columns = [[row[i] if i < len(row) else "" for row in cells] for i in range(width)]
    align = ["right" if _numeric(column) else "left" for column in columns]
    text = tabulate(cells, headers=list(header) if header is not None else (),
                    tablefmt="simple" if header is not None and rule else "plain",
                    colalign=align, disable_numparse=True)
    return "\n".join(indent + line.rstrip() for line in text.splitlines())
