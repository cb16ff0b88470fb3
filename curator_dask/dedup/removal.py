"""Remove documents by id or row: a partition-wise anti-join, counted, with no memory ceiling.

Deduplication ends with a list of documents to drop. The list names them by id, or by
row: ``(id, _row)`` pairs, where ``_row`` is the row number
(:func:`~curator_dask.dedup.ids.row_numbers`) the document had in the dataset the list was
made from. A list of ids removes every document that carries a listed id, so it is only
as safe as the ids are unique; a list of rows removes exactly the listed documents, even
where ids repeat, and checks that each listed row still carries its id (a list made from
another dataset is an error, never a wrong removal). Exact dedup lists rows.

Two ways to take the documents out of a dataset:

``broadcast``
    Gather the ids into one sorted array, ship it once to every worker and filter each
    partition against it. One pass over the data and no shuffle, but every worker holds
    the whole list (8 bytes an id for int64 ids), so it is only safe while the list is
    small. This is the only strategy NeMo Curator's Dask-era removal had, and it fails
    once the duplicate list outgrows host memory (NeMo Curator issue 529).
``shuffle``
    Route each id to drop to the partition that holds it, then filter each partition
    against its own share. Only ids travel: the ``(id, partition)`` pairs of the dataset
    and the ids to drop are joined on id with a shuffle, and the matches are sent to
    their partition with a second, smaller one. The text never crosses the network, a
    worker never holds more than a partition's worth of ids, and the dataset keeps its
    partitions, their order and its partition plan (so ``write_to_filename`` still
    works). The price is one more read of the dataset's id column. A list of rows
    already says where each row is: it is sent to its partitions with one shuffle of
    the list alone, and the dataset is read once.

Both give the same partitions, row for row, with the same drop counts: every output
partition records how many of its own rows it lost (``record_dropped``), so
:meth:`~curator_dask.DocumentDataset.dropped_counts` stays truthful. ``strategy="auto"``
counts the ids first and picks ``broadcast`` up to ``broadcast_threshold`` ids.
"""

from __future__ import annotations

import logging
from typing import Literal, get_args

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.backends import rows_where, to_host
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.ids import (
    ROW_FIELD,
    DuplicateListMismatchError,
    first_row,
    partition_of_rows,
)
from curator_dask.dropped import record_dropped
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.stages.columns import id_column_fix, require_columns
from curator_dask.task_names import task_name

__all__ = [
    "DEFAULT_BROADCAST_THRESHOLD",
    "REASON_FIELD",
    "STRATEGIES",
    "default_shuffle_method",
    "listed_at_most",
    "listed_rows_mask",
    "raise_mismatch",
    "remove_ids",
    "route_to_partitions",
]

logger = logging.getLogger(__name__)

RemovalStrategy = Literal["auto", "broadcast", "shuffle"]
STRATEGIES = get_args(RemovalStrategy)

#: Up to this many ids, ``strategy="auto"`` broadcasts: 10 million int64 ids are an
#: 80 MB array in each worker, small beside a 256 MiB partition of text.
DEFAULT_BROADCAST_THRESHOLD = 10_000_000

_PARTITION_FIELD = "_partition"
#: In a list of rows to remove: each row's drop reason (else ``remove_ids``'s ``reason``).
REASON_FIELD = "_reason"


#: A shuffle of at most this many pieces (input partitions x output partitions) runs as
#: plain tasks even on a cluster: P2P's setup costs more than it saves there (measured:
#: 35% less CPU for a 2 x 2 routing of 20 MB of keys).
SMALL_SHUFFLE_PIECES = 64


def _task() -> str:
    """What the tasks built here are called, in the task scope in force."""
    return task_name("remove", scope="remove_ids")


def default_shuffle_method(pieces: int | None = None) -> str:
    """The shuffle to use: dask's configured one, else P2P on a cluster, else tasks.

    P2P streams shuffle data through worker disk, so its memory is bounded by the
    partition size; it needs a ``distributed`` client. Without one (the local
    schedulers) the task-based shuffle is the one that works. ``pieces`` (input
    partitions x output partitions), when given and at most
    :data:`SMALL_SHUFFLE_PIECES`, picks tasks: a shuffle that small holds a few
    partitions' worth at most.
    """
    configured = dask.config.get("dataframe.shuffle.method", None)
    if configured:
        return configured
    if pieces is not None and pieces <= SMALL_SHUFFLE_PIECES:
        return "tasks"
    try:
        from distributed import default_client

        default_client()
    except (ImportError, ValueError):
        return "tasks"
    return "p2p"


def remove_ids(ds: DocumentDataset, ids_to_remove, *, id_field: str = "id",
               strategy: str = "auto",
               broadcast_threshold: int = DEFAULT_BROADCAST_THRESHOLD,
               reason: str = "duplicate", most_ids: int | None = None) -> DocumentDataset:
    """Drop the listed documents, by id or by row, counting them on each partition.

    Parameters
    ----------
    ds : DocumentDataset
        The documents.
    ids_to_remove : DocumentDataset, dask DataFrame or dask Series
        The ids to drop, in a column named ``id_field`` (a Series may have any name).
        Ids that are not in ``ds`` are ignored, and an id may appear more than once.
        Every document that carries a listed id is dropped, so where ids may repeat,
        list rows instead: with a ``_row`` column beside ``id_field`` (row numbers of
        ``ds``, :func:`~curator_dask.dedup.ids.row_numbers`) exactly the listed rows are
        dropped, and a listed row that does not carry the listed id (a list made from
        another dataset) raises :class:`~curator_dask.dedup.ids.DuplicateListMismatchError`.
    id_field : str, default "id"
    strategy : {"auto", "broadcast", "shuffle"}
        ``broadcast`` sends the whole id list to every worker; ``shuffle`` sends each
        partition only its own ids (see the module docstring). ``auto`` persists the ids,
        counts them, and broadcasts when there are at most ``broadcast_threshold``.
        All three give identical output.
    broadcast_threshold : int, default 10_000_000
        The most ids ``auto`` broadcasts.
    reason : str, default "duplicate"
        The drop reason recorded for :meth:`DocumentDataset.dropped_counts`. A list of
        rows may instead name each row's own reason in a ``_reason`` column
        (:data:`REASON_FIELD`), so one pass removes documents gone for several reasons
        (rows shift once some are removed, so two passes by row could not).
    most_ids : int, optional
        The most ids the list can hold, where known without computing it (the rows its
        Parquet files' footers record: :func:`listed_at_most`): ``auto`` then broadcasts
        without counting when that is within ``broadcast_threshold``.

    Returns
    -------
    DocumentDataset
        The same partitions, in the same order, less the removed rows.

    Examples
    --------
    >>> import pandas as pd
    >>> ds = DocumentDataset.from_pandas(
    ...     pd.DataFrame({"id": [1, 2, 3, 4], "text": list("abcd")}), npartitions=2)
    >>> drop = DocumentDataset.from_pandas(pd.DataFrame({"id": [2, 4, 9]}))
    >>> for strategy in ("broadcast", "shuffle"):
    ...     out = remove_ids(ds, drop, strategy=strategy, reason="exact_duplicate")
    ...     print(out.df.compute()["id"].tolist(), out.dropped_counts())
    [1, 3] {'exact_duplicate': 2}
    [1, 3] {'exact_duplicate': 2}

    By row, where ids repeat: only the second document with id 7 goes.

    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"id": [7, 7, 8], "text": list("aab")}))
    >>> rows = DocumentDataset.from_pandas(pd.DataFrame({"id": [7], "_row": [1]}))
    >>> remove_ids(ds, rows).df.compute()["text"].tolist()
    ['a', 'b']

    Each row with its own reason:

    >>> rows = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"id": [7, 8], "_row": [1, 2], "_reason": ["copy", "seen_before"]}))
    >>> remove_ids(ds, rows).dropped_counts()
    {'copy': 1, 'seen_before': 1}
    """
    if not isinstance(ds, DocumentDataset):
        raise ArgumentTypeError(f"remove_ids takes a DocumentDataset, got {type(ds).__name__}")
    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if (not isinstance(broadcast_threshold, int) or isinstance(broadcast_threshold, bool)
            or broadcast_threshold < 0):
        raise InvalidArgumentError(
            f"broadcast_threshold must be a non-negative number of ids, got {broadcast_threshold!r}"
        )
    require_columns("remove_ids", ds.df.columns, [id_field],
                    fix=id_column_fix(id_field, [id_field]))
    ids = _id_frame(ids_to_remove, id_field)
    _check_id_types(ds.df._meta[id_field], ids._meta[id_field], id_field)

    if strategy == "auto" and most_ids is not None and most_ids <= broadcast_threshold:
        strategy = "broadcast"
        logger.info("remove_ids: at most %d ids to remove, broadcast_threshold=%d: "
                    "broadcast strategy", most_ids, broadcast_threshold)
    if strategy == "auto":
        # Counting computes the ids; persisting them keeps the removal from computing
        # them a second time (8 bytes an id, spread over the cluster).
        ids = ids.persist()
        count = len(ids)
        strategy = "broadcast" if count <= broadcast_threshold else "shuffle"
        logger.info("remove_ids: %d ids to remove, broadcast_threshold=%d: %s strategy",
                    count, broadcast_threshold, strategy)
    by_row = ROW_FIELD in ids.columns
    if strategy == "broadcast":
        join = _broadcast_row_anti_join if by_row else _broadcast_anti_join
    else:
        join = _shuffle_row_anti_join if by_row else _shuffle_anti_join
    return join(ds, ids, id_field, reason)


def listed_at_most(listing) -> int | None:
    """The most rows a list of documents to remove holds, known without computing it: a
    :class:`~curator_dask.DocumentDataset` read from Parquet files as they are (the rows
    their footers record); None for anything else.

    Examples
    --------
    >>> import pandas as pd
    >>> listed_at_most(DocumentDataset.from_pandas(pd.DataFrame({"id": [1, 2]}))) is None
    True
    """
    source = listing.source if isinstance(listing, DocumentDataset) else None
    return source.most_rows() if source is not None else None


def _id_frame(ids_to_remove, id_field: str) -> dd.DataFrame:
    if isinstance(ids_to_remove, DocumentDataset):
        ids_to_remove = ids_to_remove.df
    if isinstance(ids_to_remove, dd.Series):
        return ids_to_remove.rename(id_field).to_frame()
    if not isinstance(ids_to_remove, dd.DataFrame):
        raise ArgumentTypeError(
            "ids_to_remove must be a DocumentDataset, a dask DataFrame or a dask Series, got "
            f"{type(ids_to_remove).__name__}; wrap a pandas frame with dd.from_pandas"
        )
    require_columns("remove_ids (ids_to_remove)", ids_to_remove.columns, [id_field],
                    fix="Pass id_field= naming the id column.")
    if ROW_FIELD in ids_to_remove.columns and id_field != ROW_FIELD:
        if not pd.api.types.is_integer_dtype(ids_to_remove._meta[ROW_FIELD].dtype):
            raise ArgumentTypeError(
                f"the {ROW_FIELD!r} column of ids_to_remove must hold integer row "
                f"numbers, not {ids_to_remove._meta[ROW_FIELD].dtype}")
        reasons = [REASON_FIELD] if REASON_FIELD in ids_to_remove.columns else []
        return ids_to_remove[[id_field, ROW_FIELD, *reasons]]
    return ids_to_remove[[id_field]]


def _check_id_types(doc_ids, drop_ids, id_field: str) -> None:
    numeric = (pd.api.types.is_numeric_dtype(doc_ids.dtype),
               pd.api.types.is_numeric_dtype(drop_ids.dtype))
    if numeric[0] != numeric[1]:
        raise ArgumentTypeError(
            f"id column {id_field!r} is {doc_ids.dtype} in the dataset but {drop_ids.dtype} "
            "in ids_to_remove; both must be integers or both strings"
        )


def route_to_partitions(df: dd.DataFrame, column: str, npartitions: int) -> dd.DataFrame:
    """``df`` shuffled into ``npartitions`` partitions, partition ``i`` holding the rows
    whose ``column`` (an integer) is ``i``; numbers past the last land in the last.

    One shuffle of ``df`` alone: how a list is sent to the partitions of a dataset it
    names, or keys to the partitions of an on-disk index. ``column`` is consumed (it
    becomes the index), so the rows arrive without it.

    Examples
    --------
    >>> df = dd.from_pandas(pd.DataFrame({"p": [2, 0, 1, 2], "x": list("abcd")}),
    ...                     npartitions=2)
    >>> routed = route_to_partitions(df, "p", 3)
    >>> [sorted(routed.partitions[i].compute()["x"]) for i in range(3)]
    [['b'], ['c'], ['a', 'd']]
    """
    if npartitions == 1:
        return df.drop(columns=column).repartition(npartitions=1)
    # Partition i gets the index values [i, i + 1); the last one [n - 1, n - 1].
    return df.set_index(column, divisions=[*range(npartitions), npartitions - 1],
                        shuffle_method=default_shuffle_method(df.npartitions * npartitions))


# -- broadcast ---------------------------------------------------------------------------

def _sorted_unique(df, id_field: str):
    """The ids to drop, once each, sorted (so partitions can binary-search them)."""
    return df[[id_field]].drop_duplicates().sort_values(id_field, ignore_index=True)


def _gathered(listing: dd.DataFrame, sorted_unique, id_field: str, meta) -> dd.DataFrame:
    """``listing`` in one partition, through ``sorted_unique``: each partition's own
    entries first (fewer to move), then the gathered whole; a list already in one
    partition goes through once."""
    if listing.npartitions > 1:
        listing = (listing.map_partitions(sorted_unique, id_field, token=_task(), meta=meta)
                   .repartition(npartitions=1))
    return listing.map_partitions(sorted_unique, id_field, token=_task(), meta=meta)


def _broadcast_anti_join(ds: DocumentDataset, ids: dd.DataFrame, id_field: str,
                         reason: str) -> DocumentDataset:
    # One partition holding every id; map_partitions hands a one-partition frame to each
    # task whole, and distributed sends it once to each worker.
    drop_set = _gathered(ids, _sorted_unique, id_field, ids._meta[[id_field]])
    return ds.map_partitions(_anti_join_sorted, drop_set, id_field, reason, token=_task(),
                             meta=ds.df._meta)


def _anti_join_sorted(df, drop_set, id_field: str, reason: str):
    return _drop_rows(df, _isin_sorted(df[id_field], drop_set[id_field]), reason)


def _isin_sorted(ids, sorted_ids):
    """Which of ``ids`` are in the sorted Series ``sorted_ids``.

    For numeric pandas ids a binary search (no hash table rebuilt per partition, no
    memory beyond the array); otherwise the backend's ``isin``.
    """
    if (isinstance(ids, pd.Series) and isinstance(sorted_ids, pd.Series)
            and pd.api.types.is_numeric_dtype(ids.dtype)
            and pd.api.types.is_numeric_dtype(sorted_ids.dtype)):
        values = ids.to_numpy()
        sorted_ids = sorted_ids.to_numpy()
        if len(sorted_ids) == 0:
            return np.zeros(len(values), dtype=bool)
        position = np.searchsorted(sorted_ids, values)
        np.minimum(position, len(sorted_ids) - 1, out=position)
        return sorted_ids[position] == values
    return ids.isin(sorted_ids)


# -- shuffle ------------------------------------------------------------------------------

def _with_partition(df, id_field: str, partition_info=None):
    """The ``(id, partition number)`` pairs of one partition of the dataset."""
    out = df[[id_field]]
    number = partition_info["number"] if partition_info is not None else 0
    return out.assign(**{_PARTITION_FIELD: np.full(len(out), number, dtype=np.int64)})


def _shuffle_anti_join(ds: DocumentDataset, ids: dd.DataFrame, id_field: str,
                       reason: str) -> DocumentDataset:
    method = default_shuffle_method()
    df = ds.df
    npartitions = df.npartitions
    meta = df._meta[[id_field]].assign(**{_PARTITION_FIELD: np.array([], dtype=np.int64)})
    locations = df.map_partitions(_with_partition, id_field, token=_task(), meta=meta,
                                  align_dataframes=False, enforce_metadata=False)
    # Shuffle join on id: (id, partition) of every document meets the ids to drop.
    hits = locations.merge(ids, on=id_field, how="inner", shuffle_method=method,
                           npartitions=max(npartitions, ids.npartitions))
    # Send each hit to the partition that holds it.
    routed = route_to_partitions(hits, _PARTITION_FIELD, npartitions)
    return ds.map_partitions(_anti_join_routed, routed, id_field, reason, token=_task(),
                             meta=df._meta)


def _anti_join_routed(df, routed, id_field: str, reason: str):
    if len(routed) == 0:
        return df
    return _drop_rows(df, df[id_field].isin(routed[id_field]), reason)


# -- by row -------------------------------------------------------------------------------

def _sorted_unique_rows(df, id_field: str):
    """The rows to drop, once each, sorted by row number (with their reasons, if listed)."""
    return (df[_row_columns(df, id_field)].drop_duplicates(ROW_FIELD)
            .sort_values(ROW_FIELD, ignore_index=True))


def _row_columns(df, id_field: str) -> list[str]:
    return [ROW_FIELD, id_field, *([REASON_FIELD] if REASON_FIELD in df.columns else [])]


def _broadcast_row_anti_join(ds: DocumentDataset, rows: dd.DataFrame, id_field: str,
                             reason: str) -> DocumentDataset:
    drop_set = _gathered(rows, _sorted_unique_rows, id_field,
                         rows._meta[_row_columns(rows._meta, id_field)])
    return ds.map_partitions(_anti_join_rows_sorted, drop_set, id_field, reason,
                             ds.npartitions, token=_task(), meta=ds.df._meta)


def _anti_join_rows_sorted(df, drop_set, id_field: str, reason: str, npartitions: int,
                           partition_info=None):
    number = partition_info["number"] if partition_info is not None else 0
    drop_set = _host(drop_set)
    numbers = drop_set[ROW_FIELD].to_numpy()
    # This partition's rows are one contiguous run of the sorted numbers.
    start, stop = np.searchsorted(numbers, [first_row(number), first_row(number + 1)])
    if number == npartitions - 1 and stop < len(numbers):
        raise_mismatch(f"the list names rows of partition {partition_of_rows(numbers[-1:])[0]}, "
                  f"but the dataset has {npartitions} partitions")
    return _drop_listed_rows(df, drop_set.iloc[start:stop], number, id_field, reason)


def _shuffle_row_anti_join(ds: DocumentDataset, rows: dd.DataFrame, id_field: str,
                           reason: str) -> DocumentDataset:
    npartitions = ds.npartitions
    meta = rows._meta[_row_columns(rows._meta, id_field)].assign(
        **{_PARTITION_FIELD: np.array([], dtype=np.int64)})
    tagged = rows.map_partitions(_with_row_partition, token=_task(), meta=meta,
                                 align_dataframes=False, enforce_metadata=False)
    # The list alone is shuffled, straight to the partitions its rows are in; numbers
    # past the last partition land in it and are refused there.
    routed = route_to_partitions(tagged, _PARTITION_FIELD, npartitions)
    return ds.map_partitions(_anti_join_rows_routed, routed, id_field, reason,
                             token=_task(), meta=ds.df._meta)


def _with_row_partition(df):
    partitions = partition_of_rows(_host(df)[ROW_FIELD].to_numpy())
    return df.assign(**{_PARTITION_FIELD: partitions})


def _anti_join_rows_routed(df, routed, id_field: str, reason: str, partition_info=None):
    if len(routed) == 0:
        return df
    number = partition_info["number"] if partition_info is not None else 0
    routed = _host(routed).reset_index(drop=True)
    elsewhere = partition_of_rows(routed[ROW_FIELD].to_numpy()) != number
    if elsewhere.any():
        other = int(partition_of_rows(routed[ROW_FIELD].to_numpy()[elsewhere][:1])[0])
        raise_mismatch(f"the list names rows of partition {other}, but the dataset has "
                  f"{number + 1} partitions")
    listed = _sorted_unique_rows(routed, id_field)
    return _drop_listed_rows(df, listed, number, id_field, reason)


def _drop_listed_rows(df, listed, number: int, id_field: str, reason: str):
    """Drop the rows ``listed`` (sorted, unique ``(_row, id)`` of this partition), each
    counted under its listed reason where the list has them, else under ``reason``."""
    if len(listed) == 0:
        return df
    hit = listed_rows_mask(df[id_field], listed[ROW_FIELD].to_numpy(), listed[id_field],
                           number, id_field)
    if REASON_FIELD not in listed.columns:
        return _drop_rows(df, hit, reason)
    kept = rows_where(df, ~hit)
    # Every listed row was found (listed_rows_mask raises otherwise): count the list.
    for why, count in _host(listed[REASON_FIELD]).value_counts(sort=False).items():
        record_dropped(kept, str(why), int(count))
    return kept


def listed_rows_mask(ids, rows: np.ndarray, listed_ids, number: int,
                     id_field: str) -> np.ndarray:
    """Which rows of partition ``number`` (``ids``: its id column, pandas or Arrow) the
    list ``(rows, listed_ids)`` names (row numbers sorted and unique, all of this
    partition), as a boolean mask; a row that does not carry its listed id raises
    :class:`~curator_dask.dedup.ids.DuplicateListMismatchError`.

    Examples
    --------
    >>> import pyarrow as pa
    >>> listed_rows_mask(pa.array([7, 7, 8]), np.array([1]), pa.array([7]), 0, "id").tolist()
    [False, True, False]
    """
    hit = np.zeros(len(ids), dtype=bool)
    if len(rows) == 0:
        return hit
    positions = np.asarray(rows, dtype=np.int64) - first_row(number)
    if positions[-1] >= len(ids):
        raise_mismatch(f"the list names row {int(positions[-1])} of partition {number}, which "
                  f"has {len(ids)} rows")
    if isinstance(ids, (pa.Array, pa.ChunkedArray)):
        found = ids.take(pa.array(positions))
        wanted = listed_ids if isinstance(listed_ids, (pa.Array, pa.ChunkedArray)) \
            else pa.array(listed_ids)
        same = pc.fill_null(pc.equal(found, wanted.cast(found.type)), False).to_numpy(
            zero_copy_only=False)
        same |= (pc.is_null(found).to_numpy(zero_copy_only=False)
                 & pc.is_null(wanted).to_numpy(zero_copy_only=False))
        found_at = lambda i: found[i].as_py()  # noqa: E731
        wanted_at = lambda i: wanted[i].as_py()  # noqa: E731
    else:
        found = _host(ids).iloc[positions].reset_index(drop=True)
        wanted = pd.Series(listed_ids).reset_index(drop=True)
        same = found.eq(wanted).fillna(False).to_numpy(dtype=bool) | (
            found.isna().to_numpy() & wanted.isna().to_numpy())
        found_at = lambda i: _plain(found.iloc[i])  # noqa: E731
        wanted_at = lambda i: _plain(wanted.iloc[i])  # noqa: E731
    if not same.all():
        bad = int(np.flatnonzero(~same)[0])
        raise_mismatch(f"row {int(positions[bad])} of partition {number} has {id_field}="
                  f"{found_at(bad)!r}, the list says {wanted_at(bad)!r}")
    hit[positions] = True
    return hit


def raise_mismatch(what: str):
    """Raise :class:`DuplicateListMismatchError`: a list of rows to remove that does not
    fit the dataset it is applied to (``what`` says how)."""
    raise DuplicateListMismatchError(
        f"remove_ids: {what}: the list of rows to remove was made from another dataset "
        "(other files, blocksize or partitions, or documents filtered since). Remove from "
        "the dataset the list was made from, or make the list again from this one"
    )


#: A cuDF frame's small slice as pandas (rows lists and the ids they are checked on).
_host = to_host


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _drop_rows(df, hit, reason: str):
    removed = int(hit.sum())
    if not removed:
        return df
    return record_dropped(rows_where(df, ~hit), reason, removed)
