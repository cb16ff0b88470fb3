"""An exact dedup index: the 128-bit hash of every distinct text kept so far.

Keys are the text's digest (``hash_method``, as :class:`~curator_dask.dedup.ExactDuplicates`
computes it) as two uint64 halves, 16 bytes a distinct text plus 4 for the generation
that added it. A key lives in index partition ``high half % partitions``.

A query hashes the batch where it lies, sends ``(id, row, hash)`` to the index
partitions (one shuffle of the batch's keys), and in each partition reads that
partition's keys from every segment, then marks each document:

* a duplicate of the index (``exact_duplicate_of_index``) when its hash is there;
* a duplicate within the batch (``exact_duplicate``) when another document of the batch
  with the same text comes first: the lowest id, then the first row, as
  :class:`~curator_dask.dedup.ExactDuplicates` keeps;
* new otherwise: it is kept, and its hash is what an append adds.

Equivalence: for a corpus ``A`` and a batch ``B``, deduplicating ``A`` (or building the
index from it) and then querying ``B`` removes exactly the documents that exact dedup of
``A`` followed by ``B`` removes from scratch, whenever every id of ``A`` is below every
id of ``B`` (so a text in both keeps its ``A`` copy) and ``B``'s ids are in the same order
in both runs.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import to_host
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.config import ExactDedupConfig
from curator_dask.dedup.exact import (
    DUPLICATE_REASON,
    NULL_TEXT_REASON,
    NullTextError,
    digests,
)
from curator_dask.dedup.exact_files import default_hash_partitions
from curator_dask.dedup.ids import ROW_FIELD, row_numbers
from curator_dask.dedup.index.base import (
    DedupIndex,
    IndexQuery,
    reason_counts,
    removal_strategy,
)
from curator_dask.dedup.index.store import PARTITION_FIELD, batch_digest
from curator_dask.dedup.removal import REASON_FIELD, remove_ids
from curator_dask.dropped import record_dropped
from curator_dask.stages.columns import id_column_fix, require_columns
from curator_dask.task_names import scoped, task_name

__all__ = ["EXACT_INDEX_REASON", "ExactDedupIndex", "text_digests"]

logger = logging.getLogger(__name__)

#: The drop reason of a batch document whose text the index holds.
EXACT_INDEX_REASON = "exact_duplicate_of_index"

HIGH, LOW = "_hash_high", "_hash_low"
_ACTION = "_action"
_NEW, _DUPLICATE, _OF_INDEX = 0, 1, 2
_REASONS = {_DUPLICATE: DUPLICATE_REASON, _OF_INDEX: EXACT_INDEX_REASON}
KEY_SCHEMA = pa.schema([(HIGH, pa.uint64()), (LOW, pa.uint64())])


def _task() -> str:
    """What the tasks of a query are called (``exact_dedup_index/query``)."""
    return task_name("query", scope="exact_dedup_index")


def text_digests(texts, method: str = "md5") -> np.ndarray:
    """Each text's 128-bit digest as an ``(n, 2)`` uint64 array (high, low halves).

    The digest is :func:`~curator_dask.dedup.hash_texts`'s, as numbers instead of hex.

    Examples
    --------
    >>> text_digests(pd.Series(["", "a"])).shape
    (2, 2)
    >>> f"{int(text_digests(pd.Series([''])) [0, 0]):016x}"
    'd41d8cd98f00b204'
    """
    if hasattr(texts, "to_arrow"):  # cuDF: hash on the host
        arrow = texts.to_arrow()
    else:
        arrow = pa.array(texts.array if hasattr(texts, "array") else texts)
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks()
    if not (pa.types.is_string(arrow.type) or pa.types.is_large_string(arrow.type)):
        arrow = arrow.cast(pa.large_string())
    packed = digests(arrow, method)
    return np.frombuffer(packed, dtype=">u8").reshape(-1, 2).astype(np.uint64)


def _keys_partition(df, id_field: str, text_field: str, method: str, on_null: str,
                    partitions: int, partition_info=None) -> pd.DataFrame:
    """``(id, _row, high, low, route)`` of one partition (``route``: the high half modulo
    ``partitions``); null texts raise or are left out (and dropped afterwards)."""
    number = partition_info["number"] if partition_info is not None else 0
    rows = row_numbers(len(df), number)
    nulls = np.asarray(to_host(df[text_field].isna()).to_numpy(), dtype=bool)
    if nulls.any():
        if on_null == "error":
            first = to_host(df[id_field][nulls]).iloc[0]
            raise NullTextError(
                f"partition {number}: {int(nulls.sum())} document(s) have a null "
                f"{text_field!r} (first: {id_field}={first}); drop or fill them first, or "
                f"pass on_null='skip' to drop them and count them as {NULL_TEXT_REASON!r}")
        df, rows = df[~nulls], rows[~nulls]
    keys = text_digests(df[text_field], method)
    ids = to_host(df[id_field]).reset_index(drop=True)
    return pd.DataFrame({id_field: ids, ROW_FIELD: rows, HIGH: keys[:, 0], LOW: keys[:, 1],
                         PARTITION_FIELD: (keys[:, 0] % np.uint64(partitions)).astype(np.int64)})


class _MarkPartition:
    """Marks one routed partition of batch keys against the index's keys there."""

    def __init__(self, reader, files: list[list[str]], id_field: str):
        # files: each index partition's file of each segment
        self.reader, self.files, self.id_field = reader, files, id_field

    def __call__(self, df: pd.DataFrame, partition_info=None) -> pd.DataFrame:
        number = partition_info["number"] if partition_info is not None else 0
        df = df.reset_index(drop=True)
        high, low = df[HIGH].to_numpy(), df[LOW].to_numpy()
        found = np.zeros(len(df), dtype=bool)
        # Route q meets index partition q % partitions; each segment sorted, as appended.
        for segment in self.reader(self.files[number % len(self.files)]):
            found |= pairs_in(high, low, segment.column(HIGH).to_numpy(),
                              segment.column(LOW).to_numpy())
        # Of the copies of a text the batch holds, the lowest id (then row) comes first.
        order = df.sort_values([HIGH, LOW, self.id_field, ROW_FIELD]).index
        later = np.zeros(len(df), dtype=bool)
        later[order] = df.loc[order].duplicated([HIGH, LOW], keep="first").to_numpy()
        action = np.where(found, _OF_INDEX, np.where(later, _DUPLICATE, _NEW)).astype(np.int8)
        return df.assign(**{_ACTION: action})


def pairs_in(high: np.ndarray, low: np.ndarray, index_high: np.ndarray,
             index_low: np.ndarray) -> np.ndarray:
    """Which ``(high, low)`` pairs are among the index's pairs (sorted by high, then low,
    as a segment stores them), by binary search.

    Examples
    --------
    >>> u = lambda *v: np.array(v, dtype=np.uint64)
    >>> pairs_in(u(1, 1, 2), u(5, 6, 5), u(1, 1, 2), u(6, 7, 5)).tolist()
    [False, True, True]
    """
    if len(index_high) == 0 or len(high) == 0:
        return np.zeros(len(high), dtype=bool)
    start = np.searchsorted(index_high, high, side="left")
    stop = np.searchsorted(index_high, high, side="right")
    found = np.zeros(len(high), dtype=bool)
    single = stop - start == 1
    found[single] = index_low[start[single]] == low[single]
    # Halves shared by several index keys: about pairs / 2**64 of them, searched one by one.
    for i in np.flatnonzero(stop - start > 1):
        lows = index_low[start[i]:stop[i]]
        j = np.searchsorted(lows, low[i])
        found[i] = j < len(lows) and lows[j] == low[i]
    return found


def _removal_list(df: pd.DataFrame, id_field: str) -> pd.DataFrame:
    gone = df[df[_ACTION].to_numpy() != _NEW]
    reasons = np.where(gone[_ACTION].to_numpy() == _OF_INDEX, EXACT_INDEX_REASON,
                       DUPLICATE_REASON)
    return pd.DataFrame({id_field: gone[id_field].to_numpy(),
                         ROW_FIELD: gone[ROW_FIELD].to_numpy(),
                         REASON_FIELD: pd.array(reasons, dtype="string[pyarrow]")})


def _new_keys(df: pd.DataFrame) -> pd.DataFrame:
    """The partition's new keys, sorted (each is new once: the batch's first copy)."""
    new = df[df[_ACTION].to_numpy() == _NEW]
    high, low = new[HIGH].to_numpy(), new[LOW].to_numpy()
    order = np.lexsort((low, high))
    return pd.DataFrame({HIGH: high[order], LOW: low[order]})


def _drop_null_text(df, text_field: str):
    nulls = df[text_field].isna()
    count = int(nulls.sum())
    return record_dropped(df[~nulls], NULL_TEXT_REASON, count) if count else df


class ExactDedupIndex(DedupIndex):
    """The hashes of every text kept so far, on disk, to deduplicate new batches against.

    Parameters
    ----------
    path : str
        The index directory (any fsspec URL). Created by the first :meth:`IndexQuery.append`;
        an existing index is opened, its parameters checked against ``config``.
    config : ExactDedupConfig, optional
        ``hash_method`` decides the keys and is recorded in the index; ``id_field``,
        ``text_field``, ``on_null``, ``removal_strategy`` and ``broadcast_threshold`` apply
        to each query. Default: the index's own ``hash_method`` (or ``md5`` for a new one).
    partitions : int, optional
        Index partitions, fixed when the index is created: each query task reads one of
        them (16 bytes a key). Default: one per 2 GiB of the first batch's input files,
        as exact dedup's shuffle has. Choose for the size the index will grow to, about
        20 million keys (300 MB) a partition at most.
    storage_options : dict, optional
        For fsspec.

    Raises
    ------
    IndexParameterError
        The index was made with another ``hash_method`` (or other partitions), or the
        path holds files that are not an index.

    Examples
    --------
    >>> import tempfile
    >>> from curator_dask import DocumentDataset
    >>> index = ExactDedupIndex(tempfile.mkdtemp() + "/index")
    >>> first = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"id": [0, 1, 2], "text": ["a", "b", "a"]}))
    >>> query = index.query(first)
    >>> query.removed, query.append()
    ({'exact_duplicate': 1, 'exact_duplicate_of_index': 0}, 1)
    >>> batch = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"id": [0, 1, 2], "text": ["b", "c", "c"]}))
    >>> query = index.query(batch)
    >>> sorted(query.kept.df.compute()["text"]), query.kept.dropped_counts()
    (['c'], {'exact_duplicate': 1, 'exact_duplicate_of_index': 1})
    """

    kind = "exact"
    config_class = ExactDedupConfig
    key_columns = (HIGH, LOW)

    def _default_partitions(self, ds: DocumentDataset) -> int:
        # As exact dedup's shuffle: one per 2 GiB of input (16 bytes a distinct text).
        if ds.plan is not None:
            return default_hash_partitions(sum(p.nbytes for p in ds.plan))
        return max(1, -(-ds.npartitions // 16))

    def parameters(self) -> dict:
        return {"hash_method": self.config.hash_method}

    @scoped("exact_dedup_index")
    def query(self, ds: DocumentDataset, *, as_of: int | None = None,
              batch_id: str | None = None) -> IndexQuery:
        """Compare a batch with the index (and with itself); see :class:`IndexQuery`.

        Computes the batch's hashes and marks (persisted, ~40 bytes a document); the
        kept dataset is lazy (it reads the batch again). ``as_of`` compares with an earlier
        generation instead of the current one. ``batch_id`` names the batch for
        :attr:`IndexQuery.appended_as`; by default a batch read from files is named by
        them, and one from memory has no name (it is never taken for a rerun).
        """
        c = self.config
        require_columns("ExactDedupIndex", ds.df.columns, [c.id_field, c.text_field],
                        fix=id_column_fix(c.id_field, [c.id_field])
                        if c.id_field not in ds.df.columns
                        else "Pass text_field= in the config naming the text column.")
        state, routes = self._plan(ds)
        meta = _keys_partition(pd.DataFrame({c.id_field: ds.df._meta[c.id_field],
                                             c.text_field: pd.Series([], dtype=str)}),
                               c.id_field, c.text_field, c.hash_method, "skip", routes)
        keys = ds.df.map_partitions(_keys_partition, c.id_field, c.text_field, c.hash_method,
                                    c.on_null, routes, token=_task(), meta=meta,
                                    align_dataframes=False, enforce_metadata=False)
        routed = self.store.route(keys, routes).persist()
        batch = self._batch_key(ds, batch_id, batch_digest(routed, [HIGH, LOW]))
        base, appended = self._base(state, batch, as_of)
        files = [self.store.partition_files(state, p, base) for p in range(state.partitions)]
        mark = _MarkPartition(self.store.reader(KEY_SCHEMA), files, c.id_field)
        marked = routed.map_partitions(
            mark, token=_task(), meta=meta.drop(columns=PARTITION_FIELD).assign(
                **{_ACTION: np.array([], dtype=np.int8)}),
            align_dataframes=False, enforce_metadata=False).persist()
        del routed
        documents, removed, new = reason_counts(marked[_ACTION], _REASONS)
        listed = marked.map_partitions(_removal_list, c.id_field,
                                       token=_task(), meta=_removal_list(marked._meta, c.id_field))
        kept = remove_ids(ds, listed, id_field=c.id_field,
                          strategy=removal_strategy(c, sum(removed.values())),
                          broadcast_threshold=c.broadcast_threshold, reason=DUPLICATE_REASON)
        if c.on_null == "skip":
            kept = kept.map_partitions(_drop_null_text, c.text_field, token=_task(),
                                       meta=kept.df._meta)
        logger.info("exact index query: %d documents, %d new, removed %s (compared with "
                    "generation %d)", documents, new, removed, base)
        return IndexQuery(kept=kept, documents=documents, removed=removed, new_keys=new,
                          base_generation=base, appended_as=appended, _index=self,
                          _state=state, _batch=batch,
                          _rows=marked.map_partitions(_new_keys, token=_task(),
                                                      meta=_new_keys(marked._meta)))
