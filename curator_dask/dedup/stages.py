"""Deduplication as pipeline stages: whole-dataset barriers for a :class:`~curator_dask.Pipeline`.

:class:`ExactDedup` and :class:`FuzzyDedup` wrap :class:`~curator_dask.dedup.ExactDuplicates`
and :class:`~curator_dask.dedup.FuzzyDuplicates`; :class:`SemanticDedup` (from
:mod:`curator_dask.dedup.semantic`) wraps :class:`~curator_dask.dedup.SemanticDuplicates`.
An executor streams the partition stages before one into its cache directory, hands it the
whole dataset, and streams on from the documents it keeps: the lowest id of each group of
duplicates. Removed documents are counted as ``exact_duplicate`` / ``fuzzy_duplicate``.
Exact dedup removes by row, so it keeps one copy of each text even where ids repeat; fuzzy
dedup needs unique ids and stops with
:class:`~curator_dask.dedup.ids.DuplicateIdError` (naming the stage) if they are not.

After a run each stage holds what it found in :attr:`last_run` (a :class:`DedupStats`): the
duplicates removed, the groups, and how many groups there were of each size, which the
curation report (:mod:`curator_dask.observe.report`) plots.

Usage::

    from curator_dask import AddId, JsonlReader, ParquetWriter, Pipeline
    from curator_dask.dedup.stages import ExactDedup, FuzzyDedup

    p = (Pipeline("dedup")
         .add_stage(JsonlReader("raw/"))
         .add_stage(AddId())                    # unique integer ids (FuzzyDedup needs them)
         .add_stage(ExactDedup())
         .add_stage(FuzzyDedup(char_ngrams=24))
         .add_stage(ParquetWriter("clean/")))
"""

from __future__ import annotations

import logging
import posixpath

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.config import (
    ExactDedupConfig,
    FuzzyDedupConfig,
    field_names,
    takes_config,
)
from curator_dask.dedup.exact import DUPLICATE_REASON, HASH_FIELD, ExactDuplicates
from curator_dask.dedup.fuzzy.components import GROUP_FIELD
from curator_dask.dedup.fuzzy.duplicates import FUZZY_DUPLICATE_REASON, FuzzyDuplicates
from curator_dask.dedup.ids import DuplicateIdError
from curator_dask.dedup.semantic.stage import SemanticDedup
from curator_dask.dedup.stats import DedupStats, group_sizes
from curator_dask.observe.progress import phase
from curator_dask.stages.base import WholeDatasetStage

__all__ = ["DedupStats", "ExactDedup", "FuzzyDedup", "SemanticDedup"]

logger = logging.getLogger(__name__)


class ExactDedup(WholeDatasetStage):
    """Remove documents whose text is identical to a kept one (a pipeline barrier).

    Parameters
    ----------
    id_field : str, default "id"
        Integer or string ids (``AddId``); the lowest id of each group is kept. Ids may
        repeat: documents are removed by row, and of copies sharing the lowest id the
        first is kept.
    text_field : str, default "text"
    hash_method : {"md5", "xxh3_128"}, default "md5"
    on_null : {"error", "skip"}, default "error"
    removal_strategy : {"auto", "broadcast", "shuffle"}, default "auto"
    broadcast_threshold : int
    hash_partitions : int, optional
        See :class:`~curator_dask.dedup.ExactDuplicates`.
    name : str, default "exact_dedup"
    config : ExactDedupConfig, optional
        The parameters above but ``name`` as one object (then leave them at their
        defaults), shared with the workflow and :class:`~curator_dask.dedup.ExactDuplicates`.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"id": [1, 2, 3, 4], "text": ["a", "b", "a", "a"]}), npartitions=2)
    >>> stage = ExactDedup()
    >>> sorted(stage(ds).df.compute()["id"])
    [1, 2]
    >>> stats = stage.last_run
    >>> stats.reason, stats.duplicate_documents, stats.duplicate_groups, stats.cluster_sizes
    ('exact_duplicate', 2, 1, {3: 1})
    """

    working_set = "exact"  # memory per input byte: see io/planner.py

    @takes_config(ExactDedupConfig, positional=(*field_names(ExactDedupConfig), "name"))
    def __init__(self, name: str = "exact_dedup", *, config: ExactDedupConfig | None = None):
        # The executor decides what stays in memory between stages.
        self.dedup = ExactDuplicates(config=config, hold_input=False)
        self.name = name
        self.last_run: DedupStats | None = None

    def fingerprint(self) -> dict:
        """The parameters that decide which documents are kept (not how fast)."""
        return {"stage": "curator_dask.dedup.stages.ExactDedup",
                "params": self.dedup.config.decisive()}

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """Identify the duplicates (written under ``cache_path``), then remove them."""
        self.dedup.cache_path = posixpath.join(cache_path, "exact")
        with phase("identify"):
            duplicates = self.dedup.identify(ds)  # written to the cache and read back
        sizes = group_sizes(duplicates.df, HASH_FIELD)
        self.last_run = DedupStats.from_group_sizes(DUPLICATE_REASON, sizes)
        logger.info("%s: %d duplicates in %d groups", self.name,
                    self.last_run.duplicate_documents, self.last_run.duplicate_groups)
        return self.dedup.remove(ds, duplicates)

    def __repr__(self) -> str:
        return f"<ExactDedup {self.name!r} (whole dataset, {self.dedup.hash_method})>"


class FuzzyDedup(WholeDatasetStage):
    """Remove near-duplicate documents: MinHash, LSH, connected components (a barrier).

    Parameters
    ----------
    seed : int, default 42
    char_ngrams : int, default 24
    num_bands : int, default 20
    minhashes_per_band : int, default 13
    bands_per_iteration : int, optional
        Bands shuffled at once; planned from the number of documents by default.
    use_64_bit_hash : bool, default False
    false_positive_check : bool, default False
    jaccard_threshold : float, default 0.8
    id_field, text_field : str
        Ids must be unique integers (``AddId``); a repeated id raises
        :class:`~curator_dask.dedup.ids.DuplicateIdError` before anything is removed.
    max_local_edges, removal_strategy, broadcast_threshold, device
        See :class:`~curator_dask.dedup.FuzzyDuplicates`.
    name : str, default "fuzzy_dedup"
    config : FuzzyDedupConfig, optional
        The parameters above but ``name`` as one object (then leave them at their
        defaults), shared with the workflow and :class:`~curator_dask.dedup.FuzzyDuplicates`.

    Notes
    -----
    The groups ``(id, group)`` (16 bytes a duplicate document) are held in cluster
    memory between finding and removing them.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> base = "the quick brown fox jumps over the lazy dog " * 4
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"id": [1, 2, 3],
    ...     "text": [base, base.replace("lazy", "LAZY", 1), "something else entirely"]}))
    >>> stage = FuzzyDedup(char_ngrams=5, num_bands=10, minhashes_per_band=4)
    >>> sorted(stage(ds).df.compute()["id"]), stage.last_run.cluster_sizes
    ([1, 3], {2: 1})
    """

    working_set = "minhash"  # memory per input byte: see io/planner.py

    @takes_config(FuzzyDedupConfig, positional=(*field_names(FuzzyDedupConfig), "name"))
    def __init__(self, name: str = "fuzzy_dedup", *, config: FuzzyDedupConfig | None = None):
        # The executor decides what stays in memory between stages.
        self.dedup = FuzzyDuplicates(config=config, hold_input=False)
        self.name = name
        self.last_run: DedupStats | None = None

    def fingerprint(self) -> dict:
        """The parameters that decide which documents are kept (not how fast)."""
        return {"stage": "curator_dask.dedup.stages.FuzzyDedup",
                "params": self.dedup.parameters()}

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """Find the groups of near duplicates and keep one document of each."""
        try:
            with phase("find groups"):
                found = self.dedup.identify(ds)
        except DuplicateIdError as err:
            raise DuplicateIdError(f"stage {self.name!r}: {err}") from None
        groups = DocumentDataset(found.df.persist())
        sizes = group_sizes(groups.df, GROUP_FIELD)
        self.last_run = DedupStats.from_group_sizes(FUZZY_DUPLICATE_REASON, sizes)
        logger.info("%s: %d near duplicates in %d groups", self.name,
                    self.last_run.duplicate_documents, self.last_run.duplicate_groups)
        return self.dedup.remove(ds, groups)

    def __repr__(self) -> str:
        return f"<FuzzyDedup {self.name!r} (whole dataset, {self.dedup!r})>"
