"""A fuzzy dedup index: the LSH band buckets of every document's MinHash signature.

Fuzzy dedup joins two documents when they share a bucket in some band (all
``minhashes_per_band`` values of the band agree), and removes all but the lowest id of
each connected group. The index keeps every bucket any indexed document fell in, once
each (a group of near duplicates shares most of its buckets, so it costs little more
than one document), with the generation that added it: 8 bytes a bucket, about
``num_bands`` buckets a distinct document. A bucket lives in index partition
``bucket % partitions``.

A query computes the batch's signatures and buckets where the documents lie, sends
``(id, bucket)`` to the index partitions (one shuffle of the batch's buckets), and in
each partition reads that partition's buckets from every segment. There it links the
documents of each bucket as LSH does, and links every document in a bucket the index
holds to one node that stands for the whole index. Connected components then give each
document's group:

* a group that reaches the index node is a duplicate of the index: every batch document
  in it is removed (``fuzzy_duplicate_of_index``), even one that reaches the index only
  through other documents of the batch;
* any other group keeps its lowest id and loses the rest (``fuzzy_duplicate``), as
  :class:`~curator_dask.dedup.FuzzyDuplicates` on the batch alone would.

An append adds every bucket of the batch the index did not hold, those of the removed
documents included: a later batch that is near the removed copy of a document is then
found, as a run over everything from scratch would find it.

The guarantee
-------------
For a corpus ``A`` and a batch ``B`` deduplicated with the same parameters and seed,
with every id of ``A`` below every id of ``B`` and ``B``'s ids in the same order in
both runs, the documents of ``B`` that the query removes are exactly those of ``B`` that
fuzzy dedup of ``A`` and ``B`` together removes from scratch (when the index was built
from all of ``A``: the raw corpus, or a fuzzy run's cache, which holds every
signature). Of ``A``, the run from scratch removes what dedup of ``A`` alone removes,
and one thing more: where documents of ``B`` join two groups of ``A`` (a batch document
near duplicates in both), the joined group keeps only its lowest id, so the kept
document of the other ``A`` group is removed too. The incremental run has kept it (it
is in ``A``'s output already), so it keeps one document per such bridge more. The same
holds batch after batch.

A false-positive check (``false_positive_check=True``) needs the texts of both
documents of a pair; the index holds buckets, not texts, so it refuses that option.
"""

from __future__ import annotations

import json
import logging
import posixpath

import numpy as np
import pandas as pd
import pyarrow as pa
from fsspec.core import url_to_fs

from curator_dask.backends import to_host
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.cache import MARKER, read_parquet_parts
from curator_dask.dedup.config import FuzzyDedupConfig
from curator_dask.dedup.fuzzy.components import GROUP_FIELD
from curator_dask.dedup.fuzzy.duplicates import FUZZY_DUPLICATE_REASON, FuzzyDuplicates
from curator_dask.dedup.fuzzy.lsh import BUCKET_FIELD, EDGE_FIELDS, bucket_edges
from curator_dask.dedup.fuzzy.minhash import SIGNATURE_FIELD, signature_type
from curator_dask.dedup.ids import DuplicateIdError, check_unique_ids, repeated_ids
from curator_dask.dedup.index.base import (
    DedupIndex,
    IndexQuery,
    member_of,
    reason_counts,
    removal_strategy,
    sorted_unique,
)
from curator_dask.dedup.index.store import PARTITION_FIELD, IndexParameterError, batch_digest
from curator_dask.dedup.removal import remove_ids
from curator_dask.errors import ArgumentTypeError
from curator_dask.observe import progress
from curator_dask.stages.columns import id_column_fix, require_columns
from curator_dask.task_names import scoped, task_name

__all__ = ["FUZZY_INDEX_REASON", "FuzzyDedupIndex"]

logger = logging.getLogger(__name__)

#: The drop reason of a batch document near a document the index holds.
FUZZY_INDEX_REASON = "fuzzy_duplicate_of_index"

#: The node that stands for the whole index in a query's graph: below every id, so a
#: group that reaches it is labelled with it.
INDEX_NODE = np.iinfo(np.int64).min
_IN_INDEX = "_in_index"
_ACTION = "_action"
_NEW, _DUPLICATE, _OF_INDEX = 0, 1, 2
_REASONS = {_DUPLICATE: FUZZY_DUPLICATE_REASON, _OF_INDEX: FUZZY_INDEX_REASON}
KEY_SCHEMA = pa.schema([(BUCKET_FIELD, pa.uint64())])
_BYTES_PER_PARTITION = 256 << 20


def _task() -> str:
    """What the tasks of a query are called (``fuzzy_dedup_index/query``)."""
    return task_name("query", scope="fuzzy_dedup_index")


def _with_partition(df, partitions: int) -> pd.DataFrame:
    df = to_host(df)
    buckets = df[BUCKET_FIELD].to_numpy(dtype=np.uint64)
    return df.assign(**{PARTITION_FIELD: (buckets % np.uint64(partitions)).astype(np.int64)})


class _MarkBuckets:
    """Marks which buckets of one routed partition the index holds."""

    def __init__(self, reader, files: list[list[str]]):
        self.reader, self.files = reader, files

    def __call__(self, df: pd.DataFrame, partition_info=None) -> pd.DataFrame:
        number = partition_info["number"] if partition_info is not None else 0
        df = df.reset_index(drop=True)
        buckets = df[BUCKET_FIELD].to_numpy(dtype=np.uint64)
        found = np.zeros(len(df), dtype=bool)
        # Route q meets index partition q % partitions; each segment sorted, as appended.
        for segment in self.reader(self.files[number % len(self.files)]):
            found |= member_of(buckets, segment.column(BUCKET_FIELD).to_numpy())
        return df.assign(**{_IN_INDEX: found})


def _edges(df: pd.DataFrame, id_field: str) -> pd.DataFrame:
    """The batch's LSH edges in one partition, and an edge from every document in a
    bucket the index holds to :data:`INDEX_NODE`."""
    x, y = EDGE_FIELDS
    within = bucket_edges(df[[id_field, BUCKET_FIELD]], id_field)
    hits = sorted_unique(df[id_field].to_numpy()[df[_IN_INDEX].to_numpy()])
    to_index = pd.DataFrame({x: np.full(len(hits), INDEX_NODE, dtype=np.int64),
                             y: hits.astype(np.int64)})
    return pd.concat([within.astype(np.int64), to_index], ignore_index=True)


def _new_buckets(df: pd.DataFrame) -> pd.DataFrame:
    new = df[BUCKET_FIELD].to_numpy(dtype=np.uint64)[~df[_IN_INDEX].to_numpy()]
    return pd.DataFrame({BUCKET_FIELD: sorted_unique(new)})


def _actions(df: pd.DataFrame, id_field: str) -> pd.DataFrame:
    """``(id, _action)`` of every document in a group (the index node left out)."""
    ids = df[id_field].to_numpy()
    groups = df[GROUP_FIELD].to_numpy()
    action = np.where(groups == INDEX_NODE, _OF_INDEX,
                      np.where(ids != groups, _DUPLICATE, _NEW)).astype(np.int8)
    keep = ids != INDEX_NODE
    return pd.DataFrame({id_field: ids[keep], _ACTION: action[keep]})


def _ids_with(df: pd.DataFrame, id_field: str, action: int) -> pd.DataFrame:
    return df.loc[df[_ACTION].to_numpy() == action, [id_field]]


class FuzzyDedupIndex(DedupIndex):
    """The LSH buckets of every document indexed so far, on disk, to find near duplicates
    of them in new batches.

    Parameters
    ----------
    path : str
        The index directory (any fsspec URL). Created by the first append; an existing
        index is opened, its parameters checked against ``config``.
    config : FuzzyDedupConfig, optional
        ``seed``, ``char_ngrams``, ``num_bands``, ``minhashes_per_band`` and
        ``use_64_bit_hash`` decide the buckets and are recorded in the index; the other
        fields apply to each query (``false_positive_check`` must stay off). Default: the
        index's own parameters (NeMo Curator's defaults for a new one).
    partitions : int, optional
        Index partitions, fixed when the index is created: each query task reads one of
        them (8 bytes a bucket, ``num_bands`` buckets a distinct document). Default: one
        per 256 MiB of the first batch's input files. Choose for the size the index will
        grow to, about 2 million documents a partition at most.
    storage_options : dict, optional
        For fsspec.

    Raises
    ------
    IndexParameterError
        The index was made with other MinHash or LSH parameters (or other partitions),
        the path holds files that are not an index, or ``false_positive_check`` is on.

    Examples
    --------
    >>> import tempfile
    >>> from curator_dask import DocumentDataset
    >>> from curator_dask.dedup import FuzzyDedupConfig
    >>> config = FuzzyDedupConfig(char_ngrams=5, num_bands=10, minhashes_per_band=4)
    >>> index = FuzzyDedupIndex(tempfile.mkdtemp() + "/index", config=config)
    >>> fox = "the quick brown fox jumps over the lazy dog " * 4
    >>> first = DocumentDataset.from_pandas(
    ...     pd.DataFrame({"id": [0, 1], "text": [fox, "unrelated"]}))
    >>> index.query(first).append()
    1
    >>> batch = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"id": [0, 1], "text": [fox.replace("lazy", "LAZY", 1), "something new entirely"]}))
    >>> query = index.query(batch)
    >>> query.kept.df.compute()["id"].tolist(), query.removed
    ([1], {'fuzzy_duplicate': 0, 'fuzzy_duplicate_of_index': 1})
    """

    kind = "fuzzy"
    config_class = FuzzyDedupConfig
    key_columns = (BUCKET_FIELD,)

    def _default_partitions(self, ds: DocumentDataset) -> int:
        # About 160 bytes of buckets a distinct document: one partition per 256 MiB of input.
        if ds.plan is not None:
            return max(1, -(-sum(p.nbytes for p in ds.plan) // _BYTES_PER_PARTITION))
        return max(1, -(-ds.npartitions // 2))

    def parameters(self) -> dict:
        c = self.config
        return {"seed": c.seed, "char_ngrams": c.char_ngrams, "num_bands": c.num_bands,
                "minhashes_per_band": c.minhashes_per_band,
                "use_64_bit_hash": c.use_64_bit_hash}

    def _check_config(self) -> None:
        if self.config.false_positive_check:
            raise IndexParameterError(
                "FuzzyDedupIndex: false_positive_check=True needs the text of both documents "
                "of a pair, and the index keeps buckets, not texts; leave it off (or run "
                "FuzzyDeduplicationWorkflow over the old and new documents together)")

    # -- queries -----------------------------------------------------------------------------
    @scoped("fuzzy_dedup_index")
    def query(self, ds: DocumentDataset, *, as_of: int | None = None,
              batch_id: str | None = None) -> IndexQuery:
        """Compare a batch with the index (and with itself); see :class:`IndexQuery`.

        Computes the batch's signatures, buckets and groups (the buckets and the groups
        persisted: 8 + 16 bytes a document a band, and 16 bytes a duplicate); the kept
        dataset is lazy. Ids must be unique integers (``AddId``), as for
        :class:`~curator_dask.dedup.FuzzyDuplicates`. ``as_of`` and ``batch_id`` are as
        for :meth:`ExactDedupIndex.query <curator_dask.dedup.ExactDedupIndex.query>`.
        """
        c = self.config
        require_columns("FuzzyDedupIndex", ds.df.columns, [c.id_field, c.text_field],
                        fix=id_column_fix(c.id_field, [c.id_field])
                        if c.id_field not in ds.df.columns
                        else "Pass text_field= in the config naming the text column.")
        dedup = FuzzyDuplicates(config=c)
        state, routes = self._plan(ds)
        marked, documents, batch, base, appended = self._mark(
            dedup.signatures(ds).df, state, routes, as_of, dedup,
            lambda digest: self._batch_key(ds, batch_id, digest))
        edges = marked.map_partitions(_edges, c.id_field, token=_task(),
                                      meta=_edges(marked._meta, c.id_field),
                                      align_dataframes=False, enforce_metadata=False).persist()
        labelled = dedup.groups(edges, num_edges=len(edges))
        groups = labelled.map_partitions(_actions, c.id_field, token=_task(),
                                         meta=_actions(labelled._meta, c.id_field)).persist()
        _, removed, _ = reason_counts(groups[_ACTION], _REASONS)
        kept = ds
        for action, reason in sorted(_REASONS.items(), reverse=True):
            ids = groups.map_partitions(_ids_with, c.id_field, action,
                                        token=_task(), meta=groups._meta[[c.id_field]])
            kept = remove_ids(kept, ids, id_field=c.id_field,
                              strategy=removal_strategy(c, removed[reason]),
                              broadcast_threshold=c.broadcast_threshold, reason=reason)
        new = self._new_buckets(marked)
        logger.info("fuzzy index query: %d documents, removed %s (compared with generation "
                    "%d)", documents, removed, base)
        return IndexQuery(kept=kept, documents=documents, removed=removed, new_keys=len(new),
                          base_generation=base, appended_as=appended, _index=self,
                          _state=state, _batch=batch, _rows=new)

    @staticmethod
    def _new_buckets(marked):
        return marked.map_partitions(_new_buckets, token=_task(), meta=_new_buckets(marked._meta),
                                     align_dataframes=False, enforce_metadata=False).persist()

    def _mark(self, signatures, state, routes: int, as_of, dedup: FuzzyDuplicates,
              name_batch):
        """Route the batch's buckets to the index partitions and mark those the index
        holds: ``(marked, documents, batch key, base generation, appended as)``;
        ``name_batch`` makes the batch's key from the digest of its buckets."""
        id_field = self.config.id_field
        if not pd.api.types.is_integer_dtype(signatures._meta[id_field].dtype):
            raise ArgumentTypeError(f"FuzzyDedupIndex needs integer ids, but {id_field!r} is "
                                    f"{signatures._meta[id_field].dtype}; assign them with AddId()")
        buckets = dedup.lsh.buckets(signatures, range(dedup.lsh.num_bands))
        keyed = buckets.map_partitions(_with_partition, routes,
                                       token=_task(), meta=_with_partition(buckets._meta, routes),
                                       align_dataframes=False, enforce_metadata=False)
        # The id checks share the MinHash pass with the buckets.
        routed, repeated, lowest = progress.persist(
            self.store.route(keyed, routes), repeated_ids(signatures, id_field),
            signatures[id_field].min())
        check_unique_ids(repeated, id_field, who="FuzzyDedupIndex")
        lowest = lowest.compute()
        if not pd.isna(lowest) and int(lowest) == INDEX_NODE:
            raise DuplicateIdError(
                f"FuzzyDedupIndex: {id_field}={INDEX_NODE} stands for the index in the "
                "query's graph; renumber the documents with AddId()")
        digest = batch_digest(routed, [BUCKET_FIELD])
        documents = int(digest.split("-")[0], 16) // dedup.lsh.num_bands
        batch = name_batch(digest)
        base, appended = self._base(state, batch, as_of)
        files = [self.store.partition_files(state, p, base) for p in range(state.partitions)]
        mark = _MarkBuckets(self.store.reader(KEY_SCHEMA), files)
        marked = routed.map_partitions(
            mark, token=_task(), meta=buckets._meta.assign(**{_IN_INDEX: np.array([], dtype=bool)}),
            align_dataframes=False, enforce_metadata=False).persist()
        return marked, documents, batch, base, appended

    # -- building from a finished fuzzy run --------------------------------------------------
    @classmethod
    def from_fuzzy_cache(cls, path: str, cache_path: str, *, partitions: int | None = None,
                         storage_options: dict | None = None) -> FuzzyDedupIndex:
        """Add every signature a finished fuzzy dedup run computed to the index at ``path``.

        ``cache_path`` is the run's (``FuzzyDeduplicationWorkflow`` or ``curator-dask
        dedup fuzzy``): its MinHash phase holds the signature of every document, and
        its LSH phase records the parameters, which become the index's (an existing
        index must have the same). Nothing is hashed again; the documents' buckets
        become one generation, as if the run's input had been queried and appended.
        """
        fs, root = url_to_fs(cache_path, **(storage_options or {}))
        phases = posixpath.join(root.rstrip("/"), "fuzzy")
        try:
            recorded = json.loads(fs.cat_file(posixpath.join(phases, "lsh", MARKER)))
            json.loads(fs.cat_file(posixpath.join(phases, "minhash", MARKER)))
        except FileNotFoundError:
            raise IndexParameterError(
                f"{cache_path} holds no finished fuzzy dedup run (no completed MinHash and "
                "LSH phases under fuzzy/): run the fuzzy dedup first, or build the index "
                "from the documents") from None
        fingerprint = recorded["fingerprint"]
        minhash, lsh = fingerprint["minhash"], fingerprint["lsh"]
        config = FuzzyDedupConfig(
            seed=minhash["seed"], char_ngrams=minhash["char_ngrams"],
            num_bands=lsh["num_bands"], minhashes_per_band=lsh["minhashes_per_band"],
            use_64_bit_hash=minhash["use_64_bit_hash"], id_field=minhash["id_field"],
            text_field=minhash["text_field"])
        index = cls(path, config=config, partitions=partitions,
                    storage_options=storage_options)
        schema = pa.schema([(config.id_field, pa.int64()),
                            (SIGNATURE_FIELD, signature_type(config.use_64_bit_hash))])
        signatures = read_parquet_parts(posixpath.join(cache_path.rstrip("/"), "fuzzy",
                                                       "minhash"), schema,
                                        storage_options=storage_options)
        if partitions is None and index.store.state() is None:
            # As for the run's input files, which the MinHash phase records.
            index._partitions = max(1, -(-sum(entry[1] for entry in fingerprint["files"])
                                         // _BYTES_PER_PARTITION))
        state, routes = index._plan(DocumentDataset(signatures))
        marked, documents, batch, _base, appended = index._mark(
            signatures, state, routes, None, FuzzyDuplicates(config=config),
            lambda digest: f"cache {cache_path}:{digest}")
        if appended is None:  # else the run's documents are in the index already
            index._append_rows(state, index._new_buckets(marked), batch)
        logger.info("fuzzy index %s: %d documents of %s added", path, documents, cache_path)
        return index
