"""An exact dedup index: the 128-bit hash of every distinct text kept so far.

Keys are the text's digest (``hash_method``, as :class:`~curator_dask.dedup.ExactDuplicates`
computes it) as two uint64 halves, 16 bytes a distinct text plus 4 for the generation
that added it. A key lives in index partition ``high half % partitions``.

A query hashes the batch where it lies, sends ``(id, row, hash)`` to the index
partitions, and in each partition reads that partition's keys from every segment, then
marks each document:

* a duplicate of the index (``exact_duplicate_of_index``) when its hash is there;
* a duplicate within the batch (``exact_duplicate``) when another document of the batch
  with the same text comes first: the lowest id, then the first row, as
  :class:`~curator_dask.dedup.ExactDuplicates` keeps;
* new otherwise: it is kept, and its hash is what an append adds.

A batch read from JSONL or Parquet files (``DocumentDataset.read_jsonl`` /
``read_parquet``, nothing applied since) is hashed as exact dedup's workflow hashes its
input (:mod:`curator_dask.dedup.exact_files`): each partition read once as Arrow, its
texts hashed from the Arrow buffers, its keys split by index partition in the same task,
and each index partition marked by a plain task, all in one graph with the counts and
the batch's digest. Any other batch (from memory, or with steps since its read) is
hashed from its frames and its keys sent with a shuffle. Both mark the same documents.
The kept documents are read again (the text is never held between the two reads), less
the removed rows.

Equivalence: for a corpus ``A`` and a batch ``B``, deduplicating ``A`` (or building the
index from it) and then querying ``B`` removes exactly the documents that exact dedup of
``A`` followed by ``B`` removes from scratch, whenever every id of ``A`` is below every
id of ``B`` (so a text in both keeps its ``A`` copy) and ``B``'s ids are in the same order
in both runs.
"""

from __future__ import annotations

import logging
import uuid

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import rows_where, to_host
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.config import ExactDedupConfig
from curator_dask.dedup.exact import (
    DUPLICATE_REASON,
    NULL_TEXT_REASON,
    NullTextError,
    default_hash_partitions,
    digests,
)
from curator_dask.dedup.exact_arrow import ArrowInput, HashSettings, hash_input, split_by
from curator_dask.dedup.exact_files import drop_listed, route_removals
from curator_dask.dedup.held import fits_in_memory
from curator_dask.dedup.ids import ROW_FIELD, row_numbers
from curator_dask.dedup.index.base import (
    DedupIndex,
    IndexQuery,
    count_actions,
    counted_reasons,
    removal_strategy,
)
from curator_dask.dedup.index.store import (
    PARTITION_FIELD,
    IndexState,
    batch_digest,
    digest_of_sums,
    key_sums,
)
from curator_dask.dedup.removal import REASON_FIELD, remove_ids
from curator_dask.dropped import record_dropped
from curator_dask.io.arrow_types import to_frame
from curator_dask.observe import progress
from curator_dask.partition import Partition
from curator_dask.stages.columns import id_column_fix, require_columns
from curator_dask.task_names import delayed_task, scoped, task_name

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
    # Chunks are hashed where they lie (digests): no combine_chunks copy of every text.
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
        df, rows = rows_where(df, ~nulls), rows[~nulls]
    keys = text_digests(df[text_field], method)
    ids = to_host(df[id_field]).reset_index(drop=True)
    return pd.DataFrame({id_field: ids, ROW_FIELD: rows, HIGH: keys[:, 0], LOW: keys[:, 1],
                         PARTITION_FIELD: (keys[:, 0] % np.uint64(partitions)).astype(np.int64)})


def _read(source: ArrowInput, spec) -> tuple[pa.Table, dict[str, int]]:
    return source.read(spec)


def _hash_routes(source: ArrowInput, spec, routes: int, read: tuple) -> dict:
    """Hash the table an input partition was read into; its keys split by route, and
    their :func:`~curator_dask.dedup.index.store.key_sums`."""
    hashed = hash_input(source, spec, read)
    route = (hashed.hi % np.uint64(routes)).astype(np.int64)
    pieces = split_by(route, routes, {source.settings.id_field: hashed.ids,
                                      ROW_FIELD: hashed.rows, HIGH: hashed.hi, LOW: hashed.lo})
    return {"pieces": pieces, "sums": key_sums([hashed.hi, hashed.lo])}


def _removals(marked: pd.DataFrame, id_field: str) -> pa.Table:
    """A route's documents to remove, ``(_row, id, _reason)`` sorted by row."""
    listed = _removal_list(marked, id_field).sort_values(ROW_FIELD)
    return pa.Table.from_pandas(listed, preserve_index=False).select(
        [ROW_FIELD, id_field, REASON_FIELD])


def _kept_partition(source: ArrowInput, spec, read: tuple | None,
                    removals: list[pa.Table]) -> Partition:
    """Partition ``spec`` less its removed rows (and null texts under ``on_null="skip"``),
    each counted: from the table read for its hash task (``read``, held), or read
    again."""
    if read is not None:
        # A table object of its own: the conversion to a frame consumes the object it
        # converts, and the held one serves every computation of the kept documents.
        table, dropped = read[0].select(read[0].column_names), read[1]
    else:
        table, dropped = source.read(spec)
    table, counts = drop_listed(table, removals, spec.index, source.settings, dropped)
    return Partition(to_frame(table, source.reader.backend), counts)


def _route_piece(hashed: dict, route: int) -> pa.Table:
    return hashed["pieces"][route]


def _key_sums(hashed: dict) -> np.ndarray:
    return hashed["sums"]


def _mark_route(pieces: list[pa.Table], route: int, mark: _MarkPartition) -> pd.DataFrame:
    """Mark route ``route``'s keys, gathered from every input partition (the frame a
    shuffle of the keys would have delivered)."""
    keys = pa.concat_tables(pieces)
    id_field = mark.id_field
    frame = pd.DataFrame({id_field: to_frame(keys.select([id_field]))[id_field],
                          ROW_FIELD: keys.column(ROW_FIELD).to_numpy(),
                          HIGH: keys.column(HIGH).to_numpy(),
                          LOW: keys.column(LOW).to_numpy()})
    return mark(frame, partition_info={"number": route})


def _summary(marked: pd.DataFrame) -> np.ndarray:
    """A marked route's action counts, then its :func:`key_sums` (for the digest)."""
    return np.concatenate([_action_counts(marked).astype(np.uint64),
                           key_sums([marked[HIGH].to_numpy(), marked[LOW].to_numpy()])])


def _action_counts(marked: pd.DataFrame) -> np.ndarray:
    return count_actions(marked[_ACTION], len(_REASONS) + 1)


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
        later = np.zeros(len(df), dtype=bool)
        # Of the copies of a text the batch holds, the lowest id (then row) comes first:
        # only the keys that repeat are sorted with their ids.
        copies = df.iloc[_repeated(high, low)]
        order = copies.sort_values([HIGH, LOW, self.id_field, ROW_FIELD]).index
        later[order] = copies.loc[order].duplicated([HIGH, LOW], keep="first").to_numpy()
        action = np.where(found, _OF_INDEX, np.where(later, _DUPLICATE, _NEW)).astype(np.int8)
        return df.assign(**{_ACTION: action})


def _repeated(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """Positions of the ``(high, low)`` pairs that occur more than once.

    Examples
    --------
    >>> u = lambda *v: np.array(v, dtype=np.uint64)
    >>> _repeated(u(1, 2, 1, 1), u(5, 5, 5, 6)).tolist()
    [0, 2]
    """
    order = np.lexsort((low, high))
    same = (high[order][1:] == high[order][:-1]) & (low[order][1:] == low[order][:-1])
    repeated = np.zeros(len(order), dtype=bool)
    repeated[1:] |= same
    repeated[:-1] |= same
    return np.sort(order[repeated])


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
    return record_dropped(rows_where(df, ~nulls), NULL_TEXT_REASON, count) if count else df


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

    def _marker(self, state: IndexState, base: int) -> _MarkPartition:
        """Marks a route's keys against the index as of generation ``base``."""
        files = [self.store.partition_files(state, p, base) for p in range(state.partitions)]
        return _MarkPartition(self.store.reader(KEY_SCHEMA), files, self.config.id_field)

    def _mark_frames(self, ds: DocumentDataset, state: IndexState, routes: int, meta,
                     marked_meta, as_of: int | None, batch_id: str | None) -> tuple:
        """Mark a batch from its frames: hash each, shuffle the keys to their routes."""
        c = self.config
        keys = ds.df.map_partitions(_keys_partition, c.id_field, c.text_field, c.hash_method,
                                    c.on_null, routes, token=_task(), meta=meta,
                                    align_dataframes=False, enforce_metadata=False)
        routed = self.store.route(keys, routes).persist()
        batch = self._batch_key(ds, batch_id, batch_digest(routed, [HIGH, LOW]))
        base, appended = self._base(state, batch, as_of)
        marked = routed.map_partitions(self._marker(state, base), token=_task(),
                                       meta=marked_meta, align_dataframes=False,
                                       enforce_metadata=False).persist()
        counts = dask.compute(*[delayed_task(_action_counts, "query")(part)
                                for part in marked.to_delayed()])
        return marked, counts, batch, base, appended

    def _mark_read(self, source: ArrowInput, ds: DocumentDataset, state: IndexState,
                   routes: int, marked_meta, as_of: int | None, batch_id: str | None) -> tuple:
        """Mark a batch read from files (see the module docstring): one graph of plain
        tasks, persisted with its counts and digest; a batch that may have been
        appended already is hashed first, its digest deciding the generation it is
        compared with. The kept documents come from the tables the hash tasks read,
        held in the workers' memory where the batch fits
        (:func:`~curator_dask.dedup.held.fits_in_memory`), else from a second
        read."""
        token = uuid.uuid4().hex[:12]
        plan = ds.plan
        hold = fits_in_memory(sum(p.nbytes for p in plan))
        # The read is a task of its own: the small tasks after the hash (a route's
        # piece of it) may run anywhere without taking the table along.
        reads = [dask.delayed(_read, pure=False)(source, spec,
                                                 dask_key_name=f"{_task()}-{token}-read-{i}")
                 for i, spec in enumerate(plan)]
        hashed = [dask.delayed(_hash_routes, pure=False)(
            source, spec, routes, reads[i], dask_key_name=f"{_task()}-{token}-hash-{i}")
            for i, spec in enumerate(plan)]
        name = self._batch_name(ds, batch_id)
        digest = None
        if self._may_be_appended(state, name, as_of):
            hashed, held = progress.persist(hashed, reads if hold else [])
            reads = held if hold else reads
            sums = [delayed_task(_key_sums, "query")(h) for h in hashed]
            digest = digest_of_sums(dask.compute(*sums))
        base, appended = self._base(state, f"{name}:{digest}" if digest else None, as_of)
        mark = self._marker(state, base)
        marks = [dask.delayed(_mark_route, pure=False)(
            [dask.delayed(_route_piece, pure=True)(h, r, dask_key_name=(
                f"{_task()}-{token}-piece-{i}-{r}")) for i, h in enumerate(hashed)], r, mark,
            dask_key_name=f"{_task()}-{token}-mark-{r}") for r in range(routes)]
        summaries = [dask.delayed(_summary, pure=True)(m, dask_key_name=(
            f"{_task()}-{token}-summary-{r}")) for r, m in enumerate(marks)]
        marks, reads, summaries = progress.persist(marks, reads if hold else [], summaries)
        summaries = dask.compute(*summaries)
        width = len(_REASONS) + 1
        counts = [s[:width] for s in summaries]
        batch = f"{name}:{digest_of_sums(s[width:] for s in summaries)}" if name else None
        marked = dd.from_delayed(marks, meta=marked_meta, verify_meta=False)
        removals = [dask.delayed(_removals, pure=True)(m, self.config.id_field, dask_key_name=(
            f"{_task()}-{token}-removals-{r}")) for r, m in enumerate(marks)]
        strategy = removal_strategy(self.config, sum(counted_reasons(counts, _REASONS)[1]
                                                     .values()))
        routed = route_removals(removals, len(plan), strategy, token)
        kept = ds.with_partitions([dask.delayed(_kept_partition, pure=True)(
            source, spec, reads[i] if hold else None, routed[i],
            dask_key_name=f"{_task()}-{token}-kept-{i}") for i, spec in enumerate(plan)])
        return marked, counts, batch, base, appended, kept

    @scoped("exact_dedup_index")
    def query(self, ds: DocumentDataset, *, as_of: int | None = None,
              batch_id: str | None = None) -> IndexQuery:
        """Compare a batch with the index (and with itself); see :class:`IndexQuery`.

        Computes the batch's hashes and marks (persisted, ~40 bytes a document); the
        kept dataset is lazy. A batch read from files (and nothing applied since) is
        read once, and its tables held on the workers for the kept documents while it
        fits in a quarter of their memory; otherwise the kept dataset reads the batch
        again (see the module docstring). ``as_of`` compares with an earlier
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
        marked_meta = meta.drop(columns=PARTITION_FIELD).assign(
            **{_ACTION: np.array([], dtype=np.int8)})
        source = ArrowInput.of(ds, HashSettings(c.id_field, c.text_field, c.hash_method,
                                                c.on_null, assign_id=False))
        if source is None:
            marked, counts, batch, base, appended = self._mark_frames(
                ds, state, routes, meta, marked_meta, as_of, batch_id)
            kept = None
        else:
            marked, counts, batch, base, appended, kept = self._mark_read(
                source, ds, state, routes, marked_meta, as_of, batch_id)
        documents, removed, new = counted_reasons(counts, _REASONS)
        if kept is None:
            listed = marked.map_partitions(_removal_list, c.id_field, token=_task(),
                                           meta=_removal_list(marked._meta, c.id_field))
            kept = remove_ids(ds, listed, id_field=c.id_field,
                              strategy=removal_strategy(c, sum(removed.values())),
                              broadcast_threshold=c.broadcast_threshold,
                              reason=DUPLICATE_REASON)
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
