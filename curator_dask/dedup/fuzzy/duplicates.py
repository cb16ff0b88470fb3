"""Fuzzy duplicates of a dataset in memory: MinHash -> LSH -> [Jaccard check] -> components.

:class:`FuzzyDuplicates` chains the phases for interactive use (a notebook, a test). The
:class:`~curator_dask.dedup.fuzzy.workflow.FuzzyDeduplicationWorkflow` runs the same
phases on files with each phase's result written to a cache, so a rerun resumes.
"""

from __future__ import annotations

import logging

import dask.dataframe as dd
import pandas as pd

from curator_dask.backends import is_cudf
from curator_dask.compat import FuzzyDuplicatesConfig, nemo_keywords, renamed
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.config import Configured, FuzzyDedupConfig, takes_config
from curator_dask.dedup.fuzzy.components import (
    GROUP_FIELD,
    connected_components,
)
from curator_dask.dedup.fuzzy.jaccard import check_false_positives, pair_similarities
from curator_dask.dedup.fuzzy.lsh import LSH
from curator_dask.dedup.fuzzy.minhash import MinHash
from curator_dask.dedup.held import InputHold
from curator_dask.dedup.ids import check_unique_ids, repeated_ids
from curator_dask.dedup.removal import listed_at_most, remove_ids
from curator_dask.observe import progress
from curator_dask.task_names import scoped, task_name

__all__ = ["FUZZY_DUPLICATE_REASON", "FuzzyDuplicates"]

logger = logging.getLogger(__name__)

#: The drop reason removal records (see ``DocumentDataset.dropped_counts``).
FUZZY_DUPLICATE_REASON = "fuzzy_duplicate"

#: NeMo Curator's parameters without a counterpart here, and what to write instead.
def _ids_to_remove(df, id_field: str):
    return df.loc[df[id_field] != df[GROUP_FIELD], [id_field]]


#: What the tasks of fuzzy dedup are called outside a pipeline stage (``fuzzy_dedup/lsh``).
FUZZY_SCOPE = "fuzzy_dedup"


class FuzzyDuplicates(Configured):
    """Find groups of near-duplicate documents, and remove all but the lowest id of each.

    As NeMo Curator's (and :class:`~curator_dask.dedup.ExactDuplicates`): calling the
    object returns the duplicates, ``(id, group)``, or with ``perform_removal=True`` the
    dataset without them; :meth:`identify` and :meth:`remove` do one step each.

    Parameters
    ----------
    seed, char_ngrams, use_64_bit_hash, device
        As for :class:`~curator_dask.dedup.fuzzy.MinHash` (``device="cuda"`` computes
        the signatures on the workers' GPU with torch; the later phases run on pandas).
    num_bands : int, default 20
    minhashes_per_band : int, default 13
        The signature has ``num_bands * minhashes_per_band`` hashes. Pairs of similarity
        ``s`` become candidates with probability ``1 - (1 - s**13)**20``: 0.997 at 0.9,
        0.68 at 0.8, 0.002 at 0.5 (see :func:`~curator_dask.dedup.fuzzy.optimal_bands`).
    bands_per_iteration : int, optional
        Bands shuffled at once (see :class:`~curator_dask.dedup.fuzzy.LSH`); by default
        planned from the number of documents where it is known before the shuffles are
        built (the workflow, and :meth:`identify` on an input it holds in the cluster's
        memory, whose rows it counts first), else 5 (:meth:`identify` on an input it
        reads again, counted in the same pass as the edges).
    false_positive_check : bool, default False
        Check every candidate pair's true Jaccard similarity before connecting it.
    jaccard_threshold : float, default 0.8
        The least similarity a checked pair needs.
    id_field, text_field : str
        Ids must be unique integers (``AddId``): the groups are groups of ids.
        ``identify`` counts the documents of every id and raises
        :class:`~curator_dask.dedup.ids.DuplicateIdError` if any id is on more than one.
    max_local_edges : int, optional
        See :func:`~curator_dask.dedup.fuzzy.connected_components` (default: decided
        from the workers' memory).
    removal_strategy, broadcast_threshold
        See :func:`~curator_dask.dedup.removal.remove_ids`.
    perform_removal : bool, default False
        Calling the object returns the deduplicated dataset instead of the duplicates.
    hold_input : bool, optional
        Keep the partitions ``identify`` parses in the cluster's memory for the
        ``remove`` of the same dataset (and for the false-positive check), which then
        do not read the input again. By default only where a ``distributed`` client
        runs and the input, read from files, fits comfortably in the workers' memory;
        ``False`` never, ``True`` always. See :mod:`curator_dask.dedup.held`.
    config : FuzzyDedupConfig, optional
        All the parameters above (but ``perform_removal`` and ``hold_input``) as one
        object (then leave them at their defaults), shared with the workflow and the
        pipeline stage. NeMo Curator's configuration object
        (:class:`~curator_dask.compat.FuzzyDuplicatesConfig`) is accepted too, and warns
        with curator-dask's names.

    Examples
    --------
    >>> import pandas as pd
    >>> base = "the quick brown fox jumps over the lazy dog " * 4
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"id": [1, 2, 3],
    ...     "text": [base, base.replace("lazy", "LAZY", 1), "something else entirely"]}))
    >>> dedup = FuzzyDuplicates(char_ngrams=5, num_bands=10, minhashes_per_band=4)
    >>> groups = dedup(ds)
    >>> groups.df.compute().values.tolist()
    [[1, 1], [2, 1]]
    >>> sorted(dedup.remove(ds, groups).df.compute()["id"])
    [1, 3]
    >>> removing = FuzzyDuplicates(char_ngrams=5, num_bands=10, minhashes_per_band=4,
    ...                            perform_removal=True)
    >>> sorted(removing(ds).df.compute()["id"])
    [1, 3]
    """

    @nemo_keywords(nemo_config=FuzzyDuplicatesConfig)
    @takes_config(FuzzyDedupConfig,
                  positional=("seed", "char_ngrams", "num_bands", "minhashes_per_band"))
    def __init__(self, *, perform_removal: bool = False, hold_input: bool | None = None,
                 config: FuzzyDedupConfig | None = None):
        self.config = config
        self.perform_removal = perform_removal
        self.held = InputHold(hold_input)
        self.minhash = MinHash(seed=config.seed, char_ngrams=config.char_ngrams,
                               num_hashes=config.num_bands * config.minhashes_per_band,
                               use_64_bit_hash=config.use_64_bit_hash,
                               text_field=config.text_field, id_field=config.id_field,
                               device=config.device)
        self.lsh = LSH(num_bands=config.num_bands,
                       minhashes_per_band=config.minhashes_per_band,
                       bands_per_iteration=config.bands_per_iteration,
                       id_field=config.id_field)

    def __repr__(self) -> str:
        return (f"FuzzyDuplicates(seed={self.minhash.seed}, "
                f"char_ngrams={self.minhash.char_ngrams}, num_bands={self.lsh.num_bands}, "
                f"minhashes_per_band={self.lsh.minhashes_per_band}, "
                f"false_positive_check={self.false_positive_check}, "
                f"perform_removal={self.perform_removal})")

    def parameters(self) -> dict:
        """What each phase's result depends on, by phase (for cache fingerprints)."""
        m, lsh = self.minhash, self.lsh
        return {
            "minhash": {"seed": m.seed, "char_ngrams": m.char_ngrams,
                        "num_hashes": m.num_hashes, "use_64_bit_hash": m.use_64_bit_hash,
                        "id_field": self.id_field, "text_field": self.text_field},
            "lsh": {"num_bands": lsh.num_bands, "minhashes_per_band": lsh.minhashes_per_band},
            "components": {"false_positive_check": self.false_positive_check,
                           "jaccard_threshold": (self.jaccard_threshold
                                                 if self.false_positive_check else None)},
        }

    # -- the phases, each lazy ---------------------------------------------------------------
    @scoped(FUZZY_SCOPE)
    def signatures(self, ds: DocumentDataset) -> DocumentDataset:
        """``(id, _minhash_signature)`` of every document."""
        return self.minhash(ds)

    @scoped(FUZZY_SCOPE)
    def candidate_edges(self, signatures: DocumentDataset,
                        documents: int | None = None) -> DocumentDataset:
        """``(id_x, id_y)`` pairs that share an LSH bucket (a pair may repeat); the bands
        shuffled together are planned for ``documents`` where it is given (see
        :meth:`LSH.iterations <curator_dask.dedup.fuzzy.LSH.iterations>`)."""
        return self.lsh.edges(signatures, documents)

    @scoped(FUZZY_SCOPE)
    def checked_edges(self, edges, ds: DocumentDataset, num_edges: int | None = None):
        """The candidate edges whose true Jaccard similarity reaches the threshold."""
        return check_false_positives(edges, ds, char_ngrams=self.minhash.char_ngrams,
                                     jaccard_threshold=self.jaccard_threshold,
                                     id_field=self.id_field, text_field=self.text_field,
                                     num_edges=num_edges,
                                     broadcast_threshold=self.broadcast_threshold)

    @scoped(FUZZY_SCOPE)
    def pair_similarities(self, edges, ds: DocumentDataset, num_edges: int | None = None):
        """Every candidate pair once, with its true Jaccard similarity (unfiltered)."""
        return pair_similarities(edges, ds, char_ngrams=self.minhash.char_ngrams,
                                 id_field=self.id_field, text_field=self.text_field,
                                 num_edges=num_edges,
                                 broadcast_threshold=self.broadcast_threshold)

    @scoped(FUZZY_SCOPE)
    def groups(self, edges, num_edges: int | None = None,
               num_ids: int | None = None) -> dd.DataFrame:
        """``(id, group)`` of every document in an edge (group = lowest id); ``num_edges``
        and ``num_ids`` (the documents) as for
        :func:`~curator_dask.dedup.fuzzy.connected_components`."""
        return connected_components(edges, id_field=self.id_field,
                                    max_local_edges=self.max_local_edges, num_edges=num_edges,
                                    num_ids=num_ids)

    # -- all together ------------------------------------------------------------------------
    @nemo_keywords()
    @scoped(FUZZY_SCOPE)
    def identify(self, ds: DocumentDataset) -> DocumentDataset:
        """``(id, group)`` of every document in a group of two or more.

        Computes the edges (persisted, and counted for the choice of connected-components
        algorithm); the groups themselves are lazy.

        Raises
        ------
        DuplicateIdError
            If an id is on more than one document: the groups would join unrelated
            documents. The ids are counted in the same pass as the signatures.
        """
        with self.held.holding(ds) as held:
            # Partitions held in the cluster's memory are counted in a moment: LSH's
            # bands are then planned from the count, as the workflow plans them (all
            # in one shuffle where they fit, not DEFAULT_BANDS_PER_ITERATION at a time).
            planned = _rows(held) if held is not ds else None
            return self._identify(held, planned)

    def _identify(self, ds: DocumentDataset, documents: int | None = None) -> DocumentDataset:
        signatures = self.signatures(ds)
        # Persisting each step also keeps the expressions dask optimises small; the id
        # check and the document count share the MinHash pass with the edges.
        edges, repeated, documents = progress.persist(
            self.candidate_edges(signatures, documents).df,
            repeated_ids(signatures.df, self.id_field), _row_counts(signatures.df))
        check_unique_ids(repeated, self.id_field, who="FuzzyDuplicates")
        if self.false_positive_check:
            edges = self.checked_edges(edges, ds, num_edges=len(edges)).persist()
        # The documents bound the distinct ids of the edges (see connected_components).
        return DocumentDataset(self.groups(edges, num_edges=len(edges),
                                           num_ids=int(documents.sum().compute())))

    @nemo_keywords()
    def identify_duplicates(self, ds: DocumentDataset) -> DocumentDataset:
        """NeMo Curator's name of :meth:`identify` (warns)."""
        renamed("FuzzyDuplicates.identify_duplicates(ds)", "FuzzyDuplicates.identify(ds)")
        return self.identify(ds)

    @scoped(FUZZY_SCOPE)
    def ids_to_remove(self, groups) -> dd.DataFrame:
        """Every id in ``groups`` but the lowest of its group."""
        df = groups.df if isinstance(groups, DocumentDataset) else groups
        return df.map_partitions(_ids_to_remove, self.id_field,
                                 meta=df._meta[[self.id_field]], align_dataframes=False,
                                 enforce_metadata=False, token=task_name("remove"))

    @nemo_keywords()
    @scoped(FUZZY_SCOPE)
    def remove(self, ds: DocumentDataset, groups) -> DocumentDataset:
        """``ds`` less all but the lowest id of each group, counted as ``fuzzy_duplicate``
        (from the partitions ``identify`` kept, where it kept those of ``ds``)."""
        ds = self.held.take(ds)
        ids = self.ids_to_remove(groups)
        if is_cudf(ds.df._meta):
            ids = ids.to_backend("cudf")  # the anti-join runs where the documents are
        return remove_ids(ds, ids, id_field=self.id_field,
                          strategy=self.removal_strategy,
                          broadcast_threshold=self.broadcast_threshold,
                          reason=FUZZY_DUPLICATE_REASON, most_ids=listed_at_most(groups))

    @nemo_keywords()
    @scoped(FUZZY_SCOPE)
    def __call__(self, ds: DocumentDataset) -> DocumentDataset:
        """The duplicates (:meth:`identify`), or with ``perform_removal=True`` the
        deduplicated dataset."""
        groups = self.identify(ds)
        return self.remove(ds, groups) if self.perform_removal else groups


def _row_count(df) -> pd.Series:
    return pd.Series([len(df)], dtype="int64")


def _row_counts(df: dd.DataFrame) -> dd.Series:
    """Each partition's number of rows (lazy)."""
    return df.map_partitions(_row_count, meta=_row_count(df._meta), align_dataframes=False,
                             enforce_metadata=False, token=task_name("count"))


def _rows(ds: DocumentDataset) -> int:
    """The rows of a dataset whose partitions are persisted (the count waits for them)."""
    return int(progress.compute(_row_counts(ds.df).sum())[0])
