"""Semantic deduplication of a corpus on disk, end to end, resumable phase by phase.

read -> assign ids (if missing) -> embeddings -> k-means -> clusters (shuffle by
cluster) -> pairs (cosine within each cluster, in tiles) -> removal -> write Parquet.

Every phase writes its result under ``cache_path/semantic/`` and marks it complete last
(``_COMPLETE.json``, the protocol of the other dedup caches); a rerun reads back each
phase whose marker matches the input files and the parameters, and computes only what
follows. Changing ``eps_to_extract`` (to another value of ``eps_thresholds``) redoes only
the removal; changing ``which_to_keep`` redoes the pairs and the removal.

==============  =====================================================  =====================
phase           result under ``cache_path/semantic/``                  bytes a document
==============  =====================================================  =====================
embeddings      ``embeddings/``: ``(id, embeddings)``, unit length      4 x dimensions + 8
kmeans          ``kmeans/``: ``(cluster, centroid, documents)``          (n_clusters rows)
clusters        ``clusters/``: ``(id, embeddings, cluster, distance)``   4 x dimensions + 16
pairs           ``pairs/``: ``(id, duplicate_of, cosine_similarity,      24 a pair (the audit
                cluster)``                                              table)
removal         ``removal/_COMPLETE.json`` (counts); the output          the kept documents
==============  =====================================================  =====================
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass, field
from typing import Literal

import dask
import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import to_host
from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.dedup.cache import (
    OutputMode,
    PhaseResult,
    check_workflow_options,
    output_mode_for,
    read_parquet_parts,
    read_phase,
    removal_output_intact,
    workflow_run,
    write_phase,
    write_removal,
)
from curator_dask.dedup.config import SemanticDedupConfig, takes_config
from curator_dask.dedup.semantic.duplicates import (
    CLUSTER_FIELD,
    GROUP_FIELD,
    SEMANTIC_DUPLICATE_REASON,
    SEMANTIC_SCOPE,
    SIMILARITY_FIELD,
    VECTOR_TYPE,
    SemanticDuplicates,
    id_arrow_type,
    vector_series,
)
from curator_dask.dedup.stats import group_sizes
from curator_dask.dedup.workflow import input_files
from curator_dask.faults import faults_explained
from curator_dask.io.identity import files_identity
from curator_dask.stages.ids import AddId
from curator_dask.task_names import delayed_task, scoped

__all__ = ["PHASES", "SemanticDedupResult", "SemanticDeduplicationWorkflow"]

logger = logging.getLogger(__name__)

PHASES = ("embeddings", "kmeans", "clusters", "pairs", "removal")
#: How the phases store ids by default (documents numbered by ``AddId``).
INT64_IDS = pa.int64()


@dataclass
class SemanticDedupResult:
    """What a run did. ``input_documents == kept_documents + duplicate_documents``."""

    input_documents: int
    #: Documents removed (or, without removal, to remove) at ``eps_to_extract``.
    duplicate_documents: int
    #: Kept documents that stand for at least one removed one.
    duplicate_groups: int
    kept_documents: int
    #: Documents to remove at each of ``eps_thresholds``.
    duplicates_by_eps: dict[float, int] = field(default_factory=dict)
    #: k-means: Lloyd steps taken, whether it converged, the largest cluster.
    kmeans_iterations: int = 0
    kmeans_converged: bool = False
    largest_cluster: int = 0
    #: The phases read back from ``cache_path`` instead of computed, in order.
    phases_from_cache: list[str] = field(default_factory=list)
    #: Wall-clock seconds of each phase this run computed or read.
    phase_seconds: dict[str, float] = field(default_factory=dict)
    #: The pairs table (Parquet): ``(id, duplicate_of, cosine_similarity, cluster)``.
    pairs_path: str = ""
    #: The written output (None when ``perform_removal=False``).
    output: WriteResult | None = None


class SemanticDeduplicationWorkflow:
    """Read a corpus, find semantic duplicates, and (optionally) remove them.

    Runs on the current Dask scheduler: a ``distributed.Client`` if one is active (then
    the shuffle is P2P and spills to disk), otherwise local threads.

    Parameters
    ----------
    input_path : str or list of str
        Files or directories (any fsspec URL).
    cache_path : str
        Directory for each phase's result (``semantic/...``), kept for reruns; it must
        not be, contain or lie inside an input path.
    output_path : str, optional
        Directory for ``part-*.parquet`` of the kept documents; needed with
        ``perform_removal=True``. Rules as for
        :class:`~curator_dask.dedup.FuzzyDeduplicationWorkflow`.
    perform_removal : bool, default False
        Remove the duplicates at ``eps_to_extract`` and write the rest. Without it, the
        run ends with the pairs table in ``cache_path/semantic/pairs``.
    n_clusters, max_iter, tol, random_state, which_to_keep, sim_metric, eps_thresholds,
    eps_to_extract, pairwise_batch_size, embedding_column, embedding_model_name_or_path,
    embedding_batch_size, embedding_max_chars, device, removal_strategy,
    broadcast_threshold
        As for :class:`~curator_dask.dedup.semantic.SemanticDuplicates`.
    config : SemanticDedupConfig, optional
        The algorithm's parameters (``n_clusters`` ... ``broadcast_threshold``,
        ``id_field``, ``text_field``) as one object (then leave them at their defaults),
        shared with :class:`~curator_dask.dedup.SemanticDuplicates` and the
        ``SemanticDedup`` stage.
    input_filetype : {"jsonl", "parquet"}
    input_blocksize : int or str, optional
        Bytes per partition. Reruns must use the same value, or ids (and the
        k-means sample) change and nothing is reused.
    id_field, text_field : str
        Ids are added with :class:`~curator_dask.AddId` when the input has none. Ids the
        input has must be unique: a repeated id raises
        :class:`~curator_dask.dedup.ids.DuplicateIdError` after the embeddings phase.
    output_mode : {"error", "overwrite", "overwrite_all"}
        As for :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.
    storage_options : dict, optional
        For fsspec, used for input, cache and output.
    force : bool, default False
        As for :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.
    """

    @takes_config(SemanticDedupConfig)
    def __init__(self, input_path, cache_path: str, output_path: str | None = None, *,
                 perform_removal: bool = False,
                 input_filetype: Literal["jsonl", "parquet"] = "jsonl",
                 input_blocksize: int | str | None = None, output_mode: OutputMode = "error",
                 storage_options: dict | None = None,
                 config: SemanticDedupConfig | None = None, force: bool = False):
        check_workflow_options(input_filetype, output_mode, perform_removal=perform_removal,
                               output_path=output_path)
        self.input_path = input_path
        self.cache_path = cache_path
        self.output_path = output_path
        self.perform_removal = perform_removal
        self.input_filetype = input_filetype
        self.input_blocksize = input_blocksize
        self.output_mode = output_mode
        self.storage_options = storage_options
        self.force = force
        self.dedup = SemanticDuplicates(config=config)

    def __repr__(self) -> str:
        return (f"SemanticDeduplicationWorkflow(input_path={self.input_path!r}, "
                f"cache_path={self.cache_path!r}, {self.dedup!r})")

    # -- inputs ---------------------------------------------------------------------------------
    def read(self) -> DocumentDataset:
        """The input with ids, as the run sees it."""
        reader = (DocumentDataset.read_jsonl if self.input_filetype == "jsonl"
                  else DocumentDataset.read_parquet)
        ds = reader(self.input_path, blocksize=self.input_blocksize,
                    text_field=self.dedup.text_field, storage_options=self.storage_options)
        if self.dedup.id_field not in ds.df.columns:
            ds = AddId(id_field=self.dedup.id_field)(ds)
        return ds

    def fingerprints(self) -> dict[str, dict]:
        """What each phase depends on: the input files (the identity of each, see
        :mod:`curator_dask.io.identity`), how they are read, the parameters of that phase
        and of every phase before it."""
        fs, files = input_files(self.input_path, self.input_filetype, self.storage_options)
        params = self.dedup.parameters()
        out = {}
        upstream = {"files": files_identity(fs, [f.path for f in files]),
                    "input_filetype": self.input_filetype,
                    "input_blocksize": str(self.input_blocksize)}
        for phase, key in (("embeddings", "embeddings"), ("kmeans", "kmeans"),
                           ("clusters", "clusters"), ("pairs", "pairwise"),
                           ("removal", "removal")):
            upstream = {**upstream, key: params[key]}
            out[phase] = upstream
        out["removal"] = {**out["removal"], "output_path": self.output_path}
        return out

    def _path(self, *parts: str) -> str:
        return posixpath.join(self.cache_path.rstrip("/"), "semantic", *parts)

    @property
    def pairs_path(self) -> str:
        """Where the pairs table is: ``cache_path/semantic/pairs``."""
        return self._path("pairs")

    # -- the run ----------------------------------------------------------------------------------
    @scoped(SEMANTIC_SCOPE)
    def run(self) -> SemanticDedupResult:
        """Deduplicate; resumes after the last phase found complete in ``cache_path``."""
        with faults_explained(setting="input_blocksize"):
            return self._run()

    def _run(self) -> SemanticDedupResult:
        ds = self.read()
        with workflow_run(self, ds):
            return self._dedup(ds, self.fingerprints())

    def _dedup(self, ds: DocumentDataset, fingerprints: dict) -> SemanticDedupResult:
        if self.perform_removal:  # an output this run may not replace: refuse before embedding
            output_mode_for(self.output_path, self.output_mode, resuming=True,
                            fingerprint=fingerprints["removal"],
                            storage_options=self.storage_options)
        id_type = id_arrow_type(ds.df._meta[self.dedup.id_field].dtype)
        from_cache: list[str] = []
        seconds: dict[str, float] = {}

        def phase(name: str, compute) -> PhaseResult:
            start = time.perf_counter()
            done = read_phase(self._path(name), fingerprint=fingerprints[name],
                              storage_options=self.storage_options)
            if done is not None and name == "removal" and not self._output_intact(done):
                done = None
            if done is None:
                logger.info("semantic dedup: computing %s", name)
                done = compute()
            else:
                from_cache.append(name)
            seconds[name] = round(time.perf_counter() - start, 3)
            return done

        embeddings = phase("embeddings", lambda: write_phase(
            self.dedup.embeddings(ds), self._path("embeddings"),
            fingerprint=fingerprints["embeddings"], storage_options=self.storage_options))
        self._check_ids(id_type)  # every run: a cached phase may predate the check
        kmeans = phase("kmeans", lambda: self._kmeans(id_type, fingerprints["kmeans"]))
        clusters = phase("clusters", lambda: self._clusters(id_type, fingerprints["clusters"]))
        pairs = phase("pairs", lambda: self._pairs(id_type, fingerprints["pairs"]))
        by_eps = {float(eps): count for eps, count in pairs.stats["duplicates_by_eps"]}
        duplicates = by_eps[self.dedup.eps_to_extract]
        result = SemanticDedupResult(
            input_documents=embeddings.rows, duplicate_documents=duplicates,
            duplicate_groups=pairs.stats["groups"], kept_documents=embeddings.rows - duplicates,
            duplicates_by_eps=by_eps, kmeans_iterations=kmeans.stats["iterations"],
            kmeans_converged=kmeans.stats["converged"],
            largest_cluster=clusters.stats["largest_cluster"], phases_from_cache=from_cache,
            phase_seconds=seconds, pairs_path=pairs.path)
        if self.perform_removal:
            removal = phase("removal", lambda: self._removal(
                ds, id_type, fingerprints["removal"], resuming=bool(from_cache)))
            stats = removal.stats
            result.output = WriteResult(path=stats["path"], files=stats["files"],
                                        rows=stats["rows"], bytes=stats["bytes"],
                                        dropped=stats["dropped"])
            removed = stats["dropped"].get(SEMANTIC_DUPLICATE_REASON, 0)
            if removed != duplicates:
                logger.warning("removal dropped %d documents but the pairs table lists %d "
                               "duplicates", removed, duplicates)
            result.duplicate_documents = removed
            result.kept_documents = stats["rows"]
        logger.info("semantic dedup: %d documents in, %d duplicates at eps=%g in %d groups, "
                    "%d kept (phases from cache: %s)", result.input_documents,
                    result.duplicate_documents, self.dedup.eps_to_extract,
                    result.duplicate_groups, result.kept_documents, from_cache or "none")
        return result

    # -- phases ---------------------------------------------------------------------------------
    def embeddings(self, id_type: pa.DataType = INT64_IDS):
        """The cached ``(id, embeddings)``, one partition per file."""
        return self.dedup.read_embeddings(self._path("embeddings"), id_type,
                                          self.storage_options)

    def centroids(self) -> np.ndarray:
        """The cached k-means centroids (``n_clusters x dimensions``, float32)."""
        schema = pa.schema([(CLUSTER_FIELD, pa.int32()), ("centroid", VECTOR_TYPE),
                            ("documents", pa.int64())])
        frame = read_parquet_parts(self._path("kmeans"), schema,
                                   storage_options=self.storage_options).compute()
        frame = frame.sort_values(CLUSTER_FIELD)
        return np.stack([np.asarray(v, np.float32) for v in frame["centroid"]])

    def pairs(self, id_type: pa.DataType = INT64_IDS):
        """The cached pairs table (see :meth:`SemanticDuplicates.pairs`)."""
        return self.dedup.read_pairs(self._path("pairs"), id_type, self.storage_options)

    def _check_ids(self, id_type: pa.DataType) -> None:
        self.dedup.check_ids(self.embeddings(id_type), who="SemanticDeduplicationWorkflow")

    def _kmeans(self, id_type: pa.DataType, fingerprint: dict) -> PhaseResult:
        fit = self.dedup.kmeans(self.embeddings(id_type))
        frame = pd.DataFrame({CLUSTER_FIELD: np.arange(len(fit.centroids), dtype=np.int32)})
        frame["centroid"] = vector_series(fit.centroids, frame.index)
        frame["documents"] = fit.counts.astype(np.int64)
        stats = {"iterations": fit.iterations, "converged": fit.converged,
                 "inertia": fit.inertia}
        return write_phase(DocumentDataset.from_pandas(frame), self._path("kmeans"),
                           fingerprint=fingerprint, stats=lambda _: stats,
                           storage_options=self.storage_options)

    def _clusters(self, id_type: pa.DataType, fingerprint: dict) -> PhaseResult:
        clusters = self.dedup.clusters(self.embeddings(id_type), self.centroids())

        def sizes(_: PhaseResult) -> dict:
            read = self.dedup.read_clusters(self._path("clusters"), id_type,
                                            self.storage_options)
            counts = group_sizes(read, CLUSTER_FIELD)
            return {"clusters": len(counts),
                    "largest_cluster": int(counts.max()) if len(counts) else 0}

        return write_phase(clusters, self._path("clusters"), fingerprint=fingerprint,
                           stats=sizes, storage_options=self.storage_options)

    def _pairs(self, id_type: pa.DataType, fingerprint: dict) -> PhaseResult:
        clusters = self.dedup.read_clusters(self._path("clusters"), id_type,
                                            self.storage_options)

        def counts(_: PhaseResult) -> dict:
            pairs = self.pairs(id_type)
            thresholds = [self.dedup.min_similarity(eps) for eps in self.dedup.eps_thresholds]
            counted = [delayed_task(_pairs_at, "stats")(part, thresholds)
                       for part in pairs.to_delayed()]
            by_eps = sum(dask.compute(*counted), np.zeros(len(thresholds), np.int64))
            groups = group_sizes(self.dedup.duplicates(pairs), GROUP_FIELD)
            return {"duplicates_by_eps": [[eps, int(n)] for eps, n
                                          in zip(self.dedup.eps_thresholds, by_eps, strict=True)],
                    "groups": len(groups)}

        return write_phase(self.dedup.pairs(clusters), self._path("pairs"),
                           fingerprint=fingerprint, stats=counts,
                           storage_options=self.storage_options)

    def _removal(self, ds: DocumentDataset, id_type: pa.DataType, fingerprint: dict,
                 resuming: bool) -> PhaseResult:
        return write_removal(lambda: self.dedup.remove(
            ds, self.dedup.duplicates(self.pairs(id_type))), self.output_path,
                             self.output_mode, self._path("removal"), fingerprint=fingerprint,
                             resuming=resuming, storage_options=self.storage_options)

    def _output_intact(self, removal: PhaseResult) -> bool:
        return removal_output_intact(self.output_path, removal, self.storage_options)


def _pairs_at(pairs, thresholds: list[float]) -> np.ndarray:
    """How many of a partition's pairs reach each similarity threshold."""
    similarity = to_host(pairs[SIMILARITY_FIELD]).to_numpy(dtype=np.float64)
    return np.array([(similarity >= t).sum() for t in thresholds], np.int64)
