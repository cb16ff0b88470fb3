"""Dedup indexes: what earlier batches held, on disk, to deduplicate new batches against.

:class:`ExactDedupIndex` keeps the hash of every distinct text, :class:`FuzzyDedupIndex`
the LSH buckets of every document's MinHash signature. Each is a directory of
generations (:mod:`curator_dask.dedup.index.store`): a query compares a batch with the
latest one, an append adds the batch's new keys as the next.
"""

from curator_dask.dedup.index.base import DedupIndex, IndexQuery
from curator_dask.dedup.index.exact import EXACT_INDEX_REASON, ExactDedupIndex
from curator_dask.dedup.index.fuzzy import FUZZY_INDEX_REASON, FuzzyDedupIndex
from curator_dask.dedup.index.stages import ExactIndexDedup, FuzzyIndexDedup, IndexDedupStats
from curator_dask.dedup.index.store import IndexChangedError, IndexParameterError

__all__ = [
    "EXACT_INDEX_REASON",
    "FUZZY_INDEX_REASON",
    "DedupIndex",
    "ExactDedupIndex",
    "ExactIndexDedup",
    "FuzzyDedupIndex",
    "FuzzyIndexDedup",
    "IndexChangedError",
    "IndexDedupStats",
    "IndexParameterError",
    "IndexQuery",
]
