"""Document ids: unique, int64, and the same on every run over the same input."""

from __future__ import annotations

import numpy as np

from curator_dask.backends import series_like
from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.base import ProcessingStage

__all__ = ["ROWS_PER_PARTITION_ID_SPACE", "AddId"]

#: Ids of partition ``p`` are ``p * ROWS_PER_PARTITION_ID_SPACE + row``: readable in
#: decimal (partition 3, row 5 -> 3000000005) and room for 9.2 billion partitions.
ROWS_PER_PARTITION_ID_SPACE = 1_000_000_000


class AddId(ProcessingStage):
    """Give every document an id derived from its partition index and row position.

    The partition index comes from the partition plan (the sorted input files and the
    blocksize or files_per_partition), so the same input read the same way gives the
    same ids on every run, on any cluster, in any order of execution. No pass over the
    data is needed to count rows first.

    Parameters
    ----------
    id_field : str, default "id"
    id_prefix : str, optional
        Store string ids ``f"{id_prefix}-{id:010d}"`` instead of int64.
    start_index : int, optional
        Add this to every id, so the first document's id is ``start_index``. Ids stay
        unique and the same on every run, but unlike NeMo Curator's (which counts every
        partition's rows first) they are consecutive only within a partition.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": list("abc")}), npartitions=2)
    >>> AddId()(ds).df.compute()["id"].tolist()
    [0, 1, 1000000000]
    >>> AddId(id_prefix="doc")(ds).df.compute()["id"].tolist()
    ['doc-0000000000', 'doc-0000000001', 'doc-1000000000']
    >>> AddId("id", None, 100)(ds).df.compute()["id"].tolist()
    [100, 101, 1000000100]
    """

    working_set = "read"  # memory per input byte: see io/planner.py

    needs_partition_index = True

    def __init__(self, id_field: str = "id", id_prefix: str | None = None,
                 start_index: int | None = None):
        if start_index is not None and (not isinstance(start_index, int) or start_index < 0):
            raise InvalidArgumentError(
                f"start_index must be a non-negative integer, got {start_index!r}")
        self.id_field = id_field
        self.id_prefix = id_prefix
        self.start_index = start_index
        self.name = "add_id"
        self.output_columns = {id_field: "str" if id_prefix else "int64"}

    def process(self, df, partition_index: int):
        if len(df) >= ROWS_PER_PARTITION_ID_SPACE:
            raise InvalidArgumentError(
                f"partition {partition_index} has {len(df)} rows, more than AddId's "
                f"{ROWS_PER_PARTITION_ID_SPACE} per partition; use a smaller blocksize"
            )
        ids = partition_index * ROWS_PER_PARTITION_ID_SPACE + np.arange(len(df), dtype=np.int64)
        if self.start_index:
            ids += self.start_index
        if self.id_prefix is None:
            return df.assign(**{self.id_field: ids})
        # Vectorised formatting through numpy's string ops, not a Python loop per row.
        digits = np.strings.zfill(ids.astype(str), 10)
        labels = np.strings.add(f"{self.id_prefix}-", digits)
        return df.assign(**{self.id_field: _as_string_column(df, labels)})


def _as_string_column(df, values):
    return series_like(values, df, "str")
