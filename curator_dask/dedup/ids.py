"""Which document is which during deduplication: row numbers, and the check on user ids.

A user's ``id`` column is not always unique: files concatenated twice, ids copied from a
source that reuses them, a column named ``id`` that means something else. Removing "id
17" then removes every document that carries 17, unique ones included, and a group whose
copies share an id loses every copy. So deduplication never trusts ``id_field`` alone:

* **Exact dedup works on rows.** Where it hashes a partition it also numbers its rows,
  ``partition * 1_000_000_000 + position`` (the numbers :class:`~curator_dask.AddId` would
  give), and the duplicate list names rows, not ids. Removal takes out exactly the
  listed rows and checks that each still carries the listed id, so ids may repeat, be
  strings or be anything else.
* **Fuzzy dedup checks its ids.** Its graph of near duplicates has one node per id, so
  a repeated id would join unrelated documents. Before it groups anything it counts the
  documents of every id (one small aggregation beside the MinHash pass) and stops with
  :class:`DuplicateIdError` if any id is on more than one document.
"""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np

from curator_dask.errors import CuratorError, InvalidArgumentError
from curator_dask.stages.ids import ROWS_PER_PARTITION_ID_SPACE
from curator_dask.task_names import task_name

__all__ = [
    "HASH_FIELD",
    "ROW_FIELD",
    "DuplicateIdError",
    "DuplicateListMismatchError",
    "check_unique_ids",
    "first_row",
    "is_hash_partitioned",
    "mark_hash_partitioned",
    "partition_of_rows",
    "repeated_ids",
    "row_numbers",
]

#: The column of row numbers in exact dedup's duplicate list and in ``remove_ids`` input.
ROW_FIELD = "_row"
#: The column of text hashes in exact dedup's duplicate list.
HASH_FIELD = "_hash"

# Names of the duplicate frames known to be partitioned on the hash (every group whole
# in one partition): those made by identify and those read back from its cache. Expression
# names are deterministic tokens, so a name here always means the same computation.
_HASH_PARTITIONED: set[str] = set()


def mark_hash_partitioned(duplicates):
    """Declare that each hash group of ``duplicates`` (a DocumentDataset) lies whole in
    one partition, so exact dedup's ``remove`` skips regrouping it.

    Only for frames written by ``ExactDuplicates.identify`` and read back one file per
    partition (its cache). Returns ``duplicates``.
    """
    _HASH_PARTITIONED.add(duplicates.df._name)
    return duplicates


def is_hash_partitioned(df: dd.DataFrame) -> bool:
    """Whether ``df`` was declared by :func:`mark_hash_partitioned`."""
    return df._name in _HASH_PARTITIONED


class DuplicateIdError(CuratorError, ValueError):
    """Documents share an id where deduplication needs every id to be unique."""


class DuplicateListMismatchError(CuratorError, ValueError):
    """A list of rows to remove was made from another dataset than the one given."""


def row_numbers(length: int, partition: int) -> np.ndarray:
    """The row numbers of a partition: ``partition * 1_000_000_000 + position``.

    Examples
    --------
    >>> row_numbers(3, 2).tolist()
    [2000000000, 2000000001, 2000000002]
    """
    if length >= ROWS_PER_PARTITION_ID_SPACE:
        raise InvalidArgumentError(
            f"partition {partition} has {length} rows, more than the "
            f"{ROWS_PER_PARTITION_ID_SPACE} deduplication can number; use a smaller blocksize"
        )
    return first_row(partition) + np.arange(length, dtype=np.int64)


def first_row(partition: int) -> int:
    """The row number of a partition's first row."""
    return partition * ROWS_PER_PARTITION_ID_SPACE


def partition_of_rows(rows: np.ndarray) -> np.ndarray:
    """The partition each row number belongs to.

    Examples
    --------
    >>> partition_of_rows(np.array([5, 2000000001])).tolist()
    [0, 2]
    """
    return rows // ROWS_PER_PARTITION_ID_SPACE


def repeated_ids(df: dd.DataFrame, id_field: str) -> dd.Series:
    """How many documents carry each id that is on more than one (lazy, usually empty).

    One aggregation of the id column: each partition counts its own ids, and the counts
    are combined by id over a shuffle, so no worker holds every id. Its tasks are
    called ``<scope>/check_ids`` (:mod:`curator_dask.task_names`).
    """
    name = task_name("check_ids")
    meta = _id_counts(df._meta, id_field)
    counts = df.map_partitions(_id_counts, id_field, meta=meta, token=name,
                               align_dataframes=False, enforce_metadata=False)
    if counts.npartitions > 1:
        counts = counts.shuffle(on=id_field, ignore_index=True)
    return counts.map_partitions(_repeated, id_field, meta=_repeated(meta, id_field),
                                 token=name, align_dataframes=False, enforce_metadata=False)


def _id_counts(df, id_field: str):
    """``(id, count)`` of one partition's ids, nulls included."""
    counts = df[id_field].value_counts(dropna=False)
    return counts.rename_axis(id_field).rename("count").reset_index()


def _repeated(counts, id_field: str):
    """The ids counted more than once in all, from partitions' ``(id, count)`` rows."""
    total = counts.groupby(id_field, dropna=False, sort=False)["count"].sum()
    return total[total > 1]


def check_unique_ids(repeated, id_field: str, *, who: str, fix: str | None = None) -> None:
    """Raise :class:`DuplicateIdError` if ``repeated`` (from :func:`repeated_ids`) has rows.

    ``repeated`` may be lazy or computed; ``who`` names the operation in the message and
    ``fix`` replaces the advice on what to do.

    Examples
    --------
    >>> import pandas as pd
    >>> ds = dd.from_pandas(pd.DataFrame({"id": [1, 2, 2, 3, 3, 3]}), npartitions=2)
    >>> check_unique_ids(repeated_ids(ds, "id"), "id", who="FuzzyDuplicates")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curator_dask.dedup.ids.DuplicateIdError: FuzzyDuplicates: 2 ids ... (5 documents in all; ...
    """
    if isinstance(repeated, dd.Series):
        repeated = repeated.compute()
    if len(repeated) == 0:
        return
    repeated = repeated.sort_values(ascending=False, kind="stable")
    example, copies = repeated.index[0], int(repeated.iloc[0])
    if isinstance(example, np.generic):
        example = example.item()
    advice = fix or (
        "give every document a unique id with AddId (curator_dask.AddId; in a pipeline, "
        "the AddId stage before this one), or pass id_field= naming a column of unique ids"
    )
    raise DuplicateIdError(
        f"{who}: {len(repeated)} id{'s are' if len(repeated) != 1 else ' is'} each on more "
        f"than one document ({int(repeated.sum())} documents in all; e.g. "
        f"{id_field}={example!r} is on {copies} documents). It groups documents by "
        f"{id_field!r}, so a repeated id would join unrelated documents and remove unique "
        f"ones. Fix: {advice}"
    )
