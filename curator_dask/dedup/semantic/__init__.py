"""Semantic deduplication (SemDeDup): embeddings, k-means, cosine similarity within clusters.

Each phase is usable on its own, and :class:`SemanticDeduplicationWorkflow` runs them all
on files with a resumable cache::

    embeddings (EmbeddingStage, or a column) -> k-means (k-means++ on a sample, Lloyd on Dask)
        -> clusters (shuffle by cluster) -> pairs (cosine in tiles) -> removal

The kernels (:mod:`.kernels`) are written once over numpy and torch, so a CPU and a GPU
find the same clusters and pairs.
"""

from curator_dask.dedup.semantic.duplicates import (
    SEMANTIC_DUPLICATE_REASON,
    EmbeddingColumnError,
    SemanticDuplicates,
    embedding_matrix,
)
from curator_dask.dedup.semantic.kmeans import KMeansFit, fit_kmeans
from curator_dask.dedup.semantic.workflow import SemanticDeduplicationWorkflow, SemanticDedupResult

__all__ = [
    "SEMANTIC_DUPLICATE_REASON",
    "EmbeddingColumnError",
    "KMeansFit",
    "SemanticDedupResult",
    "SemanticDeduplicationWorkflow",
    "SemanticDuplicates",
    "embedding_matrix",
    "fit_kmeans",
]
