"""Whole-dataset deduplication: exact (hash + shuffle), fuzzy (MinHash + LSH), removal.

The fuzzy phases live in :mod:`curator_dask.dedup.fuzzy`; its main entry points are
re-exported here.
"""

from curator_dask.dedup.config import ExactDedupConfig, FuzzyDedupConfig
from curator_dask.dedup.exact import ExactDuplicates, NullTextError, hash_texts
from curator_dask.dedup.ids import DuplicateIdError, DuplicateListMismatchError
from curator_dask.dedup.removal import remove_ids
from curator_dask.dedup.workflow import ExactDedupResult, ExactDeduplicationWorkflow
from curator_dask.dedup.fuzzy import (
    LSH,
    FuzzyDedupResult,
    FuzzyDeduplicationWorkflow,
    FuzzyDuplicates,
    MinHash,
    optimal_bands,
)

__all__ = [
    "DuplicateIdError",
    "DuplicateListMismatchError",
    "ExactDedupConfig",
    "FuzzyDedupConfig",
    "LSH",
    "ExactDedupResult",
    "ExactDeduplicationWorkflow",
    "ExactDuplicates",
    "FuzzyDedupResult",
    "FuzzyDeduplicationWorkflow",
    "FuzzyDuplicates",
    "MinHash",
    "NullTextError",
    "hash_texts",
    "optimal_bands",
    "remove_ids",
]
