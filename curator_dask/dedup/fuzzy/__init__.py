"""Fuzzy (near-duplicate) deduplication: MinHash, LSH, connected components, removal.

Each phase is usable on its own, and :class:`FuzzyDeduplicationWorkflow` runs them all on
files with a resumable cache::

    MinHash (signatures) -> LSH (candidate edges) -> [check_false_positives]
        -> connected_components (id, group) -> removal (remove_ids)

The MinHash kernel (:mod:`.minhash_kernel`) reproduces cuDF's signatures bit for bit, so
CPU and GPU workers can share one run.
"""

from curator_dask.compat import FuzzyDuplicatesConfig
from curator_dask.dedup.fuzzy.components import (
    UnionFind,
    connected_components,
    distributed_components,
    streamed_components,
    union_find_components,
)
from curator_dask.dedup.fuzzy.duplicates import FUZZY_DUPLICATE_REASON, FuzzyDuplicates
from curator_dask.dedup.fuzzy.jaccard import char_ngram_jaccard, check_false_positives
from curator_dask.dedup.fuzzy.lsh import LSH, band_buckets, lsh_probability, optimal_bands
from curator_dask.dedup.fuzzy.minhash import SIGNATURE_FIELD, MinHash, signature_matrix
from curator_dask.dedup.fuzzy.workflow import FuzzyDeduplicationWorkflow, FuzzyDedupResult

__all__ = [
    "FUZZY_DUPLICATE_REASON",
    "LSH",
    "SIGNATURE_FIELD",
    "FuzzyDedupResult",
    "FuzzyDeduplicationWorkflow",
    "FuzzyDuplicates",
    "FuzzyDuplicatesConfig",
    "MinHash",
    "UnionFind",
    "band_buckets",
    "char_ngram_jaccard",
    "check_false_positives",
    "connected_components",
    "distributed_components",
    "lsh_probability",
    "optimal_bands",
    "signature_matrix",
    "streamed_components",
    "union_find_components",
]
