"""Dedup against an index as pipeline barriers: :class:`ExactIndexDedup`, :class:`FuzzyIndexDedup`.

Each compares the whole dataset with an index directory (see
:mod:`curator_dask.dedup.index`), streams on from the documents it keeps, and with
``append=True`` adds the batch to the index as its next generation. The append happens
before the pipeline writes its output; a rerun of the same pipeline on the same input
(after a crash, or a resumed run) hands the stage the same files, which the index
recognises: it compares them with the generation before their own, so they keep the
same documents and are not appended twice.

Usage::

    from curator_dask import JsonlReader, ParquetWriter, Pipeline
    from curator_dask.dedup.index import FuzzyIndexDedup

    p = (Pipeline("monthly")
         .add_stage(JsonlReader("crawl-2026-11/"))
         .add_stage(FuzzyIndexDedup("s3://bucket/fuzzy-index", append=True))
         .add_stage(ParquetWriter("clean-2026-11/")))
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.config import ExactDedupConfig, FuzzyDedupConfig
from curator_dask.dedup.index.exact import EXACT_INDEX_REASON, ExactDedupIndex
from curator_dask.dedup.index.fuzzy import FUZZY_INDEX_REASON, FuzzyDedupIndex
from curator_dask.observe.progress import phase
from curator_dask.stages.base import WholeDatasetStage

__all__ = ["ExactIndexDedup", "FuzzyIndexDedup", "IndexDedupStats"]

logger = logging.getLogger(__name__)


@dataclass
class IndexDedupStats:
    """What one run of an index dedup stage did.

    Attributes
    ----------
    reason : str
        The drop reason of documents the index already held.
    removed : dict of str to int
        Documents removed, by reason (duplicates of the index, and within the batch).
    documents : int
        Documents compared.
    base_generation : int
        The index generation the batch was compared with.
    appended_as : int or None
        The generation the batch became (None without ``append``).
    """

    reason: str
    removed: dict[str, int] = field(default_factory=dict)
    documents: int = 0
    base_generation: int = 0
    appended_as: int | None = None


class _IndexDedup(WholeDatasetStage):
    index_class: type
    reason: str

    def __init__(self, index_path: str, append: bool, partitions: int | None, config,
                 name: str, storage_options: dict | None):
        self.index_path = index_path
        self.append = append
        self.partitions = partitions
        self.config = config
        self.name = name
        self.storage_options = storage_options
        self.last_run: IndexDedupStats | None = None

    def index(self):
        """The index this stage compares with (opened, parameters checked)."""
        return self.index_class(self.index_path, config=self.config,
                                partitions=self.partitions,
                                storage_options=self.storage_options)

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """Compare the dataset with the index; append it when asked."""
        with phase("compare with the index"):
            query = self.index().query(ds)
        if self.append:
            query.append()
        self.last_run = IndexDedupStats(self.reason, dict(query.removed), query.documents,
                                        query.base_generation, query.appended_as)
        logger.info("%s: %d documents compared with generation %d, removed %s%s",
                    self.name, query.documents, query.base_generation, query.removed,
                    f"; appended as generation {query.appended_as}" if self.append else "")
        return query.kept

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r} (whole dataset, "
                f"index {self.index_path!r}{', append' if self.append else ''})>")


class ExactIndexDedup(_IndexDedup):
    """Remove documents whose text an exact dedup index holds, and copies within the
    dataset (a barrier).

    Parameters
    ----------
    index_path : str
        The :class:`~curator_dask.dedup.ExactDedupIndex` directory (created by the first
        append).
    append : bool, default False
        Add the kept documents' hashes to the index as its next generation.
    partitions : int, optional
        For a new index; see :class:`~curator_dask.dedup.ExactDedupIndex`.
    config : ExactDedupConfig, optional
        Default: the index's own ``hash_method``.
    name : str, default "exact_index_dedup"
    storage_options : dict, optional

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> path = tempfile.mkdtemp() + "/index"
    >>> old = DocumentDataset.from_pandas(pd.DataFrame({"id": [0], "text": ["seen"]}))
    >>> _ = ExactIndexDedup(path, append=True)(old)
    >>> new = DocumentDataset.from_pandas(pd.DataFrame({"id": [0, 1], "text": ["seen", "new"]}))
    >>> stage = ExactIndexDedup(path)
    >>> stage(new).df.compute()["text"].tolist(), stage.last_run.removed
    (['new'], {'exact_duplicate': 0, 'exact_duplicate_of_index': 1})
    """

    index_class = ExactDedupIndex
    reason = EXACT_INDEX_REASON

    def __init__(self, index_path: str, append: bool = False, partitions: int | None = None,
                 config: ExactDedupConfig | None = None, name: str = "exact_index_dedup",
                 storage_options: dict | None = None):
        super().__init__(index_path, append, partitions, config, name, storage_options)


class FuzzyIndexDedup(_IndexDedup):
    """Remove documents near those a fuzzy dedup index holds, and near duplicates within
    the dataset (a barrier). Ids must be unique integers (``AddId``).

    Parameters
    ----------
    index_path : str
        The :class:`~curator_dask.dedup.FuzzyDedupIndex` directory (created by the first
        append).
    append : bool, default False
        Add the dataset's buckets to the index as its next generation.
    partitions : int, optional
        For a new index; see :class:`~curator_dask.dedup.FuzzyDedupIndex`.
    config : FuzzyDedupConfig, optional
        Default: the index's own MinHash and LSH parameters.
    name : str, default "fuzzy_index_dedup"
    storage_options : dict, optional
    """

    index_class = FuzzyDedupIndex
    reason = FUZZY_INDEX_REASON

    def __init__(self, index_path: str, append: bool = False, partitions: int | None = None,
                 config: FuzzyDedupConfig | None = None, name: str = "fuzzy_index_dedup",
                 storage_options: dict | None = None):
        super().__init__(index_path, append, partitions, config, name, storage_options)
