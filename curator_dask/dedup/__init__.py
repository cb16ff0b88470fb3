"""Whole-dataset deduplication: exact (hash + shuffle), fuzzy (MinHash + LSH), semantic
(embeddings + k-means), removal; indexes that remember earlier batches
(:mod:`curator_dask.dedup.index`); line and paragraph dedup (:mod:`curator_dask.dedup.lines`).

The fuzzy and semantic phases live in :mod:`curator_dask.dedup.fuzzy` and
:mod:`curator_dask.dedup.semantic`; their main entry points are re-exported here.
"""

from curator_dask.compat import FuzzyDuplicatesConfig
from curator_dask.dedup.config import ExactDedupConfig, FuzzyDedupConfig, SemanticDedupConfig
from curator_dask.dedup.exact import ExactDuplicates, NullTextError, hash_texts
from curator_dask.dedup.fuzzy import (
    LSH,
    FuzzyDeduplicationWorkflow,
    FuzzyDedupResult,
    FuzzyDuplicates,
    MinHash,
    optimal_bands,
)
from curator_dask.dedup.ids import DuplicateIdError, DuplicateListMismatchError
from curator_dask.dedup.index import (
    ExactDedupIndex,
    ExactIndexDedup,
    FuzzyDedupIndex,
    FuzzyIndexDedup,
    IndexChangedError,
    IndexParameterError,
    IndexQuery,
)
from curator_dask.dedup.lines import LineDedup, SpanDedupStats
from curator_dask.dedup.removal import remove_ids
from curator_dask.dedup.removal_workflow import RemovalResult, TextDuplicatesRemovalWorkflow
from curator_dask.dedup.semantic import (
    SemanticDeduplicationWorkflow,
    SemanticDedupResult,
    SemanticDuplicates,
)
from curator_dask.dedup.stages import DedupStats, ExactDedup, FuzzyDedup, SemanticDedup
from curator_dask.dedup.workflow import ExactDeduplicationWorkflow, ExactDedupResult

__all__ = [
    "LSH",
    "DedupStats",
    "DuplicateIdError",
    "DuplicateListMismatchError",
    "ExactDedup",
    "ExactDedupConfig",
    "ExactDedupIndex",
    "ExactDedupResult",
    "ExactDeduplicationWorkflow",
    "ExactDuplicates",
    "ExactIndexDedup",
    "FuzzyDedup",
    "FuzzyDedupConfig",
    "FuzzyDedupIndex",
    "FuzzyDedupResult",
    "FuzzyDeduplicationWorkflow",
    "FuzzyDuplicates",
    "FuzzyDuplicatesConfig",
    "FuzzyIndexDedup",
    "IndexChangedError",
    "IndexParameterError",
    "IndexQuery",
    "LineDedup",
    "MinHash",
    "NullTextError",
    "RemovalResult",
    "SemanticDedup",
    "SemanticDedupConfig",
    "SemanticDedupResult",
    "SemanticDeduplicationWorkflow",
    "SemanticDuplicates",
    "SpanDedupStats",
    "TextDuplicatesRemovalWorkflow",
    "hash_texts",
    "optimal_bands",
    "remove_ids",
]
