"""SemanticDedup: semantic deduplication as a pipeline barrier (a whole-dataset stage)."""

from __future__ import annotations

import logging

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.config import SemanticDedupConfig, field_names, takes_config
from curator_dask.dedup.ids import DuplicateIdError
from curator_dask.dedup.semantic.duplicates import (
    GROUP_FIELD,
    SEMANTIC_DUPLICATE_REASON,
    SemanticDuplicates,
)
from curator_dask.dedup.stats import DedupStats, group_sizes
from curator_dask.stages.base import WholeDatasetStage

__all__ = ["SemanticDedup"]

logger = logging.getLogger(__name__)


class SemanticDedup(WholeDatasetStage):
    """Remove semantic duplicates: embeddings, k-means, cosine within clusters (a barrier).

    The parameters are those of :class:`~curator_dask.dedup.semantic.SemanticDuplicates`
    (NeMo Curator's ``SemDedupConfig`` names). Each phase is written under the
    executor's cache directory for this stage; the pairs table, for auditing, is in its
    ``pairs/`` subdirectory. Removed documents are counted as ``semantic_duplicate``,
    and :attr:`last_run` holds a :class:`~curator_dask.dedup.stats.DedupStats` (a group
    is a kept document and the duplicates removed for it).

    Ids must be unique (``AddId`` before this stage); a repeated id raises
    :class:`~curator_dask.dedup.ids.DuplicateIdError` naming the stage.

    Parameters
    ----------
    n_clusters, max_iter, tol, random_state, which_to_keep, sim_metric, eps_thresholds,
    eps_to_extract, pairwise_batch_size, embedding_column, embedding_model_name_or_path,
    embedding_batch_size, embedding_max_chars, id_field, text_field, device,
    removal_strategy, broadcast_threshold
        As for :class:`~curator_dask.dedup.semantic.SemanticDuplicates`.
    name : str, default "semantic_dedup"
    config : SemanticDedupConfig, optional
        The parameters above but ``name`` as one object (then leave them at their
        defaults), shared with the workflow and
        :class:`~curator_dask.dedup.SemanticDuplicates`.

    Examples
    --------
    >>> import dask, numpy as np, pandas as pd
    >>> frame = pd.DataFrame({"id": [1, 2, 3], "text": ["a", "b", "c"]})
    >>> frame["embeddings"] = [np.array(v, np.float32) for v in ([1, 0], [1, 0.01], [0, 1])]
    >>> with dask.config.set({"dataframe.convert-string": False}):
    ...     ds = DocumentDataset.from_pandas(frame)
    >>> stage = SemanticDedup(n_clusters=2)
    >>> sorted(stage(ds).df.compute()["id"]), stage.last_run.cluster_sizes
    ([1, 3], {2: 1})
    """

    working_set = "embeddings"  # memory per input byte: see io/planner.py

    @takes_config(SemanticDedupConfig, positional=(*field_names(SemanticDedupConfig), "name"))
    def __init__(self, name: str = "semantic_dedup", *,
                 config: SemanticDedupConfig | None = None):
        self.dedup = SemanticDuplicates(config=config)
        self.name = name
        self.last_run = None

    def fingerprint(self) -> dict:
        """The parameters that decide which documents are kept (not where or how fast)."""
        return {"stage": "curator_dask.dedup.stages.SemanticDedup",
                "params": self.dedup.parameters()}

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """Compute every phase under ``cache_path``, then remove the duplicates."""
        try:
            found = self.dedup.identify(ds, cache_path)
        except DuplicateIdError as err:
            raise DuplicateIdError(f"stage {self.name!r}: {err}") from None
        removed = DocumentDataset(found.df.persist())
        sizes = group_sizes(removed.df, GROUP_FIELD) + 1
        self.last_run = DedupStats.from_group_sizes(SEMANTIC_DUPLICATE_REASON, sizes)
        logger.info("%s: %d semantic duplicates in %d groups", self.name,
                    self.last_run.duplicate_documents, self.last_run.duplicate_groups)
        return self.dedup.remove(ds, removed)

    def __repr__(self) -> str:
        return f"<SemanticDedup {self.name!r} (whole dataset, {self.dedup!r})>"
