"""Semantic duplicates (SemDeDup): embed, cluster with k-means, compare within clusters.

:class:`SemanticDuplicates` holds the parameters and computes each phase lazily over a
dataset; :meth:`SemanticDuplicates.identify` runs them all with each phase's result
written under a directory. The
:class:`~curator_dask.dedup.semantic.workflow.SemanticDeduplicationWorkflow` runs the
same phases on files and reuses finished ones on a rerun.

What is a duplicate follows NeMo Curator's SemDeDup: within each k-means cluster the
documents are ranked (``which_to_keep``), and a document is a duplicate when its cosine
similarity to some document ranked before it in its cluster is at least ``1 - eps``.
The first document of every cluster is always kept, so a group of near-identical
documents keeps its first-ranked one:

``"hard"``
    the document farthest from the cluster's centroid first (ties: the highest id);
``"easy"``
    the one nearest to the centroid first (ties: the lowest id);
``"random"``
    a random order, seeded by ``random_state`` and the cluster.

The distance to the centroid is the cosine distance (``sim_metric="cosine"``) or the
Euclidean one (``"l2"``); the comparison between documents is always cosine.
"""

from __future__ import annotations

import logging
import posixpath

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import is_cudf, to_host
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.cache import read_parquet_parts, write_phase
from curator_dask.dedup.config import (
    SIM_METRICS,
    WHICH_TO_KEEP,
    Configured,
    SemanticDedupConfig,
    takes_config,
)
from curator_dask.dedup.ids import check_unique_ids, repeated_ids
from curator_dask.dedup.removal import (
    default_shuffle_method,
    remove_ids,
)
from curator_dask.dedup.semantic.kernels import (
    check_device,
    max_similarity_before,
    nearest_centroids,
)
from curator_dask.dedup.semantic.kmeans import DEFAULT_BLOCK_BYTES, KMeansFit, fit_kmeans
from curator_dask.errors import ArgumentTypeError
from curator_dask.io.errors import InputError
from curator_dask.io.guard import guarded
from curator_dask.io.planner import task_input_bytes
from curator_dask.stages.columns import ColumnNotFoundError
from curator_dask.task_names import delayed_task, scoped, task_name

__all__ = [
    "CLUSTER_FIELD",
    "DUPLICATE_OF_FIELD",
    "GROUP_FIELD",
    "SEMANTIC_DUPLICATE_REASON",
    "SIMILARITY_FIELD",
    "SIM_METRICS",
    "WHICH_TO_KEEP",
    "EmbeddingColumnError",
    "SemanticDuplicates",
    "embedding_matrix",
]

logger = logging.getLogger(__name__)

#: The drop reason removal records (see ``DocumentDataset.dropped_counts``).
SEMANTIC_DUPLICATE_REASON = "semantic_duplicate"
#: The k-means cluster of a document.
CLUSTER_FIELD = "cluster"
#: In the pairs table: the document ranked before this one that it is most similar to.
DUPLICATE_OF_FIELD = "duplicate_of"
#: In the pairs table: the cosine similarity of the document and ``duplicate_of``.
SIMILARITY_FIELD = "cosine_similarity"
#: In the list of documents to remove: the kept document each one stands for.
GROUP_FIELD = "group"
DISTANCE_FIELD = "_distance_to_centroid"



class EmbeddingColumnError(InputError):
    """An embedding column that is missing, not vectors, ragged, null or not finite."""


# -- embeddings as arrays --------------------------------------------------------------------

def _arrow_vectors(column) -> pa.Array | None:
    if is_cudf(column):
        arr = column.to_arrow()
    elif isinstance(column.dtype, pd.ArrowDtype):
        arr = pa.array(column)
    else:
        return None
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def embedding_matrix(column, *, where: str = "the dataset") -> np.ndarray:
    """One partition's vector column as a ``documents x dimensions`` float32 array.

    Accepts the column types embeddings come in: ``object`` columns of numpy arrays or
    lists (what :class:`~curator_dask.stages.models.EmbeddingStage` adds), Arrow
    ``list``/``fixed_size_list`` columns (Parquet read back) and cuDF list columns.

    Raises
    ------
    EmbeddingColumnError
        For strings, nulls, vectors of different lengths or values that are not finite,
        naming ``where``, the column and the first bad row.

    Examples
    --------
    >>> column = pd.Series([np.array([1, 0], np.float32), [0.5, 0.5]], name="embeddings")
    >>> embedding_matrix(column).tolist()
    [[1.0, 0.0], [0.5, 0.5]]
    """
    name = column.name
    if len(column) == 0:
        return np.empty((0, 0), dtype=np.float32)
    arr = _arrow_vectors(column)
    if arr is not None:
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)
                or pa.types.is_fixed_size_list(arr.type)):
            _bad(name, where, 0, f"holds {arr.type}, not vectors")
        if arr.null_count:
            _bad(name, where, int(np.flatnonzero(arr.is_null().to_numpy(False))[0]),
                 "is null")
        lengths = pa.compute.list_value_length(arr).to_numpy(zero_copy_only=False)
        flat = arr.flatten().to_numpy(zero_copy_only=False)
    else:
        values = column.to_numpy()
        if values.dtype != object:
            _bad(name, where, 0, f"holds {column.dtype}, not vectors")
        missing = pd.isna(column).to_numpy()
        if missing.any():
            _bad(name, where, int(np.flatnonzero(missing)[0]), "is null")
        if isinstance(values[0], str):
            _bad(name, where, 0, "holds strings, not vectors (an object column of "
                 "vectors converted to strings by dask's 'dataframe.convert-string'?)")
        lengths = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
        if len(np.unique(lengths)) == 1:
            return _finite(np.stack(values).astype(np.float32, copy=False), name, where)
        flat = None
    if len(np.unique(lengths)) != 1:
        row = int(np.flatnonzero(lengths != lengths[0])[0])
        _bad(name, where, row, f"has {lengths[row]} dimensions where row 0 has {lengths[0]}")
    matrix = np.asarray(flat, dtype=np.float32).reshape(len(column), int(lengths[0]))
    return _finite(matrix, name, where)


def _finite(matrix: np.ndarray, name, where: str) -> np.ndarray:
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        _bad(name, where, int(np.flatnonzero(~finite)[0]), "holds NaN or infinite values")
    return matrix


def _bad(name, where: str, row: int, what: str):
    raise EmbeddingColumnError(
        f"embedding column {name!r} in {where}, row {row}: the vector {what}. Semantic "
        "dedup needs one finite vector of the same length per document: fix or drop "
        "those rows, or leave the column out so the embedding model computes it")


def normalized(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero: similar to nothing)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1).astype(np.float32)


def vector_series(matrix: np.ndarray, index) -> pd.Series:
    """A ``list<float32>`` Arrow column of the rows of ``matrix``."""
    n, width = matrix.shape if matrix.size else (len(matrix), 0)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * width)
    values = pa.array(np.ascontiguousarray(matrix, dtype=np.float32).ravel())
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.ListArray.from_arrays(offsets, values)),
                     index=index)


VECTOR_TYPE = pa.list_(pa.float32())


def _where(partition_info) -> str:
    return f"partition {partition_info['number']}" if partition_info else "a partition"


# -- per-partition steps ----------------------------------------------------------------------

def _embedding_rows(df, id_field: str, column: str, partition_info=None):
    df = to_host(df)
    matrix = normalized(embedding_matrix(df[column], where=_where(partition_info)))
    return pd.DataFrame({id_field: df[id_field].to_numpy(),
                         column: vector_series(matrix, pd.RangeIndex(len(df)))})


def _matrix(df, column: str) -> np.ndarray:
    return embedding_matrix(df[column])


def _assign(df, centroids: np.ndarray, id_field: str, column: str, sim_metric: str,
            device: str):
    x = embedding_matrix(df[column])
    if len(df) == 0:
        labels, distance = np.empty(0, np.int32), np.empty(0, np.float32)
    else:
        labels, d2 = nearest_centroids(device, x, centroids)
        if sim_metric == "l2":
            distance = np.sqrt(d2)
        else:
            nearest = centroids[labels]
            norms = np.linalg.norm(nearest, axis=1)
            cosine = np.einsum("ij,ij->i", x, nearest) / np.where(norms > 0, norms, 1)
            distance = (1 - cosine).astype(np.float32)
    # The shuffle after this step moves frames through Arrow and back by their pandas
    # metadata, which cannot rebuild an Arrow list dtype (pandas 3.1, pyarrow 26): the
    # vectors travel as an object column of arrays instead.
    vectors = np.empty(len(df), dtype=object)
    vectors[:] = list(x) if len(df) else []
    return pd.DataFrame({id_field: df[id_field].reset_index(drop=True), column: vectors,
                         CLUSTER_FIELD: labels.astype(np.int32),
                         DISTANCE_FIELD: distance.astype(np.float32)})


def _ranked(df, id_field: str, which_to_keep: str):
    """Rows sorted by cluster, then in the order that decides which document is kept."""
    if which_to_keep == "hard":
        order = ([CLUSTER_FIELD, DISTANCE_FIELD, id_field], [True, False, False])
    else:  # "easy", and "random" before its shuffle
        order = ([CLUSTER_FIELD, DISTANCE_FIELD, id_field], [True, True, True])
        if which_to_keep == "random":
            order = ([CLUSTER_FIELD, id_field], [True, True])
    return df.sort_values(order[0], ascending=order[1], kind="stable", ignore_index=True)


def _cluster_pairs(df, *, id_field: str, column: str, which_to_keep: str,
                   random_state: int, min_similarity: float, block_size: int, device: str,
                   blocks=None):
    """``(id, duplicate_of, cosine_similarity, cluster)`` of every document of this
    partition whose similarity to one ranked before it is at least ``min_similarity``."""
    df = _ranked(df, id_field, which_to_keep)
    x = embedding_matrix(df[column]) if len(df) else np.empty((0, 0), np.float32)
    clusters = df[CLUSTER_FIELD].to_numpy()
    ids = df[id_field].to_numpy()
    bounds = np.flatnonzero(np.diff(clusters)) + 1
    starts = np.concatenate([[0], bounds]).astype(np.int64)
    stops = np.concatenate([bounds, [len(df)]]).astype(np.int64)
    found_rows, found_before, found_similarity = [], [], []
    # One step per cluster (a partition holds a few); the work inside is vectorised.
    for start, stop in zip(starts, stops, strict=True):
        if stop - start < 2:
            continue
        positions = np.arange(start, stop)
        if which_to_keep == "random":
            rng = np.random.default_rng([random_state, int(clusters[start])])
            positions = start + rng.permutation(stop - start)
        similarity, before = max_similarity_before(device, x[positions], block_size,
                                                   on_block=blocks)
        hit = similarity.astype(np.float64) >= min_similarity
        found_rows.append(positions[hit])
        found_before.append(positions[before[hit]])
        found_similarity.append(similarity[hit])
    rows = np.concatenate(found_rows) if found_rows else np.empty(0, np.int64)
    before = np.concatenate(found_before) if found_before else np.empty(0, np.int64)
    return pd.DataFrame({
        id_field: pd.Series(ids[rows], dtype=df[id_field].dtype),
        DUPLICATE_OF_FIELD: pd.Series(ids[before], dtype=df[id_field].dtype),
        SIMILARITY_FIELD: (np.concatenate(found_similarity) if found_similarity
                           else np.empty(0, np.float32)).astype(np.float32),
        CLUSTER_FIELD: clusters[rows].astype(np.int32),
    })


def _groups(pairs, id_field: str, min_similarity: float):
    """The documents to remove at a threshold, each with the kept document it stands for.

    A removed document's ``duplicate_of`` may be removed too (a chain); following the
    links until a kept document ends each chain, since every link points to a document
    ranked earlier in the same cluster (which the partition holds whole).
    """
    removed = pairs[pairs[SIMILARITY_FIELD].to_numpy().astype(np.float64) >= min_similarity]
    ids = pd.Index(removed[id_field].to_numpy())
    parent = removed[DUPLICATE_OF_FIELD].to_numpy()
    group = parent.copy()
    while len(group):
        position = ids.get_indexer(group)
        linked = position >= 0
        if not linked.any():
            break
        group[linked] = parent[position[linked]]
    return pd.DataFrame({id_field: removed[id_field].to_numpy(), GROUP_FIELD: group},
                        index=pd.RangeIndex(len(removed))).astype(
        {id_field: removed[id_field].dtype, GROUP_FIELD: removed[id_field].dtype})


#: What the tasks of semantic dedup are called outside a pipeline stage
#: (``semantic_dedup/kmeans``).
SEMANTIC_SCOPE = "semantic_dedup"


class SemanticDuplicates(Configured):
    """Find semantic duplicates: embeddings, k-means, similarity within each cluster.

    Parameter names and defaults follow NeMo Curator's ``SemDedupConfig``.

    Parameters
    ----------
    n_clusters : int, default 1000
        k-means clusters. Documents are compared only within their cluster, so more
        clusters mean less work and more pairs missed across cluster borders; aim for
        clusters of hundreds to tens of thousands of documents.
    max_iter : int, default 100
    tol : float, default 1e-4
        k-means stops after ``max_iter`` Lloyd steps, or when its centroids moved less
        than ``tol`` times the mean variance of the embeddings (scikit-learn's rule).
    random_state : int, default 1234
        Seeds the k-means sample and seeding, and ``which_to_keep="random"``.
    which_to_keep : {"hard", "easy", "random"}, default "hard"
        Which document of a group of duplicates is kept: the one farthest from its
        cluster's centroid, the nearest one, or a random one.
    sim_metric : {"cosine", "l2"}, default "cosine"
        The distance to the centroid that ranks the documents for ``which_to_keep``.
    eps_thresholds : sequence of float, default (0.01, 0.001)
        The ``eps`` values whose duplicate counts are reported; pairs with similarity at
        least ``1 - max(eps_thresholds)`` are kept in the pairs table.
    eps_to_extract : float, default 0.01
        The ``eps`` that removes: a document whose similarity to one ranked before it
        is at least ``1 - eps_to_extract`` is a duplicate. Must be in ``eps_thresholds``.
    pairwise_batch_size : int, default 1024
        Rows and columns of a similarity tile: the largest similarity matrix is
        ``pairwise_batch_size ** 2`` float32 values (4 MiB at 1024), however large a
        cluster is.
    embedding_column : str, default "embeddings"
        The column of embeddings. If the dataset has it, it is used as it is
        (normalised); otherwise ``embedding_model_name_or_path`` computes it.
    embedding_model_name_or_path : str, optional
        Local directory of an encoder (e.g. all-MiniLM-L6-v2), for
        :class:`~curator_dask.stages.models.EmbeddingStage` (mean pooling).
    embedding_batch_size : int, default 128
        Documents per batch of the embedding model.
    embedding_max_chars : int, default 6000
        Characters of each text the embedding model reads.
    id_field, text_field : str
        Ids must be unique (integers or strings): a repeated id raises
        :class:`~curator_dask.dedup.ids.DuplicateIdError` before anything is clustered.
    device : {"auto", "cpu", "cuda", "cuda:N"}, default "auto"
        Where k-means and the similarity tiles run: numpy on the CPU, or torch on a
        GPU; ``"auto"`` takes the worker's GPU when torch sees one. The embedding model
        chooses its own device the same way.
    removal_strategy, broadcast_threshold
        See :func:`~curator_dask.dedup.removal.remove_ids`.
    config : SemanticDedupConfig, optional
        All the parameters above as one object (then leave them at their defaults),
        shared with the workflow and the pipeline stage.

    Examples
    --------
    >>> import tempfile
    >>> import dask
    >>> vectors = [[1, 0, 0], [0.99, 0.1, 0], [0, 0.7, 0.7], [0, 0, 1], [0, 0.05, 1]]
    >>> frame = pd.DataFrame({"id": [1, 2, 3, 4, 5], "text": list("abcde")})
    >>> frame["embeddings"] = [np.array(v, np.float32) for v in vectors]
    >>> with dask.config.set({"dataframe.convert-string": False}):
    ...     ds = DocumentDataset.from_pandas(frame, npartitions=2)
    >>> dedup = SemanticDuplicates(n_clusters=2, eps_thresholds=[0.01], eps_to_extract=0.01)
    >>> removed = dedup.identify(ds, tempfile.mkdtemp())
    >>> sorted(removed.df.compute().values.tolist())
    [[2, 1], [5, 4]]
    >>> sorted(dedup.remove(ds, removed).df.compute()["id"])
    [1, 3, 4]
    """

    @takes_config(SemanticDedupConfig, positional=("n_clusters",))
    def __init__(self, *, config: SemanticDedupConfig | None = None):
        self.config = config
        #: Where the kernels run: the config's device, checked (or an ``ArrayOps``).
        self.device = check_device(config.device)

    def __repr__(self) -> str:
        return (f"SemanticDuplicates(n_clusters={self.n_clusters}, "
                f"eps_to_extract={self.eps_to_extract}, which_to_keep={self.which_to_keep!r})")

    @staticmethod
    def min_similarity(eps: float) -> float:
        """The least cosine similarity of a duplicate at ``eps``: ``1 - eps``."""
        return 1.0 - float(eps)

    def parameters(self) -> dict:
        """What each phase's result depends on, by phase (for cache fingerprints)."""
        return {
            "embeddings": {"id_field": self.id_field, "text_field": self.text_field,
                           "embedding_column": self.embedding_column,
                           "model": self._model_fingerprint()},
            # "init" names the initialisation: centroids cached by an earlier one are
            # not what this version would fit from the same seed.
            "kmeans": {"n_clusters": self.n_clusters, "max_iter": self.max_iter,
                       "tol": self.tol, "random_state": self.random_state,
                       "init": "k-means++ on a sample"},
            "clusters": {"sim_metric": self.sim_metric},
            "pairwise": {"which_to_keep": self.which_to_keep,
                         "eps_thresholds": list(self.eps_thresholds),
                         "random_state": self.random_state},
            "removal": {"eps_to_extract": self.eps_to_extract},
        }

    def _model_fingerprint(self):
        if self.embedding_model_name_or_path is None:
            return None
        return {"path": str(self.embedding_model_name_or_path),
                "max_chars": self.embedding_max_chars}

    # -- the phases, each lazy ----------------------------------------------------------------
    def embedding_stage(self):
        """The :class:`~curator_dask.stages.models.EmbeddingStage` that computes the
        embeddings when the dataset has none."""
        from curator_dask.stages.models import EmbeddingStage

        return EmbeddingStage(self.embedding_model_name_or_path, pooling="mean",
                              embedding_column=self.embedding_column,
                              text_field=self.text_field,
                              model_inference_batch_size=self.embedding_batch_size,
                              max_chars=self.embedding_max_chars,
                              device=self.device if isinstance(self.device, str) else "auto")

    @scoped(SEMANTIC_SCOPE)
    def embeddings(self, ds: DocumentDataset) -> dd.DataFrame:
        """``(id, embeddings)`` of every document, normalised to unit length."""
        df = ds.df
        if self.id_field not in df.columns:
            raise ColumnNotFoundError(
                f"semantic dedup needs an id column {self.id_field!r} (columns: "
                f"{list(df.columns)}); add ids with AddId first")
        if self.embedding_column not in df.columns:
            if self.embedding_model_name_or_path is None:
                raise EmbeddingColumnError(
                    f"the dataset has no embedding column {self.embedding_column!r} "
                    f"(columns: {list(df.columns)}) and no embedding model was given: pass "
                    "embedding_column= naming the column of vectors, or "
                    "embedding_model_name_or_path= (a local model directory) to compute it")
            df = self.embedding_stage()(DocumentDataset(df[[self.id_field, self.text_field]])).df
        meta = pd.DataFrame({
            self.id_field: pd.Series([], dtype=df._meta[self.id_field].dtype),
            self.embedding_column: pd.Series([], dtype=pd.ArrowDtype(VECTOR_TYPE))})
        return df[[self.id_field, self.embedding_column]].map_partitions(
            _embedding_rows, self.id_field, self.embedding_column, meta=meta,
            align_dataframes=False, enforce_metadata=False, token=task_name("embed"))

    @scoped(SEMANTIC_SCOPE)
    def check_ids(self, embeddings: dd.DataFrame, who: str = "SemanticDuplicates") -> None:
        """Raise DuplicateIdError if an id is on more than one document."""
        check_unique_ids(repeated_ids(embeddings[[self.id_field]], self.id_field),
                         self.id_field, who=who)

    @scoped(SEMANTIC_SCOPE)
    def kmeans(self, embeddings: dd.DataFrame) -> KMeansFit:
        """Fit the centroids (the embeddings are held on the workers while it runs, in
        blocks of :data:`~.kmeans.DEFAULT_BLOCK_BYTES`, or smaller where the workers'
        memory holds less: :func:`~curator_dask.io.planner.task_input_bytes`)."""
        # Not persisted: fit_kmeans reads each partition twice (to count, then into its
        # block), which costs less than holding the partitions beside the blocks.
        arrays = [delayed_task(_matrix, "kmeans")(part, self.embedding_column)
                  for part in embeddings.to_delayed()]
        fits = task_input_bytes("kmeans")
        block_bytes = max(min(DEFAULT_BLOCK_BYTES, fits or DEFAULT_BLOCK_BYTES), 1 << 20)
        return fit_kmeans(arrays, self.n_clusters, max_iter=self.max_iter, tol=self.tol,
                          random_state=self.random_state, ops=self.device,
                          block_bytes=block_bytes)

    @scoped(SEMANTIC_SCOPE)
    def clusters(self, embeddings: dd.DataFrame, centroids: np.ndarray) -> dd.DataFrame:
        """``(id, embeddings, cluster, distance)``, shuffled so that each partition holds
        whole clusters."""
        meta = pd.DataFrame({
            self.id_field: pd.Series([], dtype=embeddings._meta[self.id_field].dtype),
            self.embedding_column: pd.Series([], dtype=object),
            CLUSTER_FIELD: np.array([], np.int32), DISTANCE_FIELD: np.array([], np.float32)})
        assigned = embeddings.map_partitions(
            _assign, delayed_task(np.asarray, "clusters", pure=True)(centroids, np.float32),
            self.id_field, self.embedding_column, self.sim_metric, self.device, meta=meta,
            align_dataframes=False, enforce_metadata=False, token=task_name("clusters"))
        npartitions = max(1, min(self.n_clusters, embeddings.npartitions))
        return assigned.shuffle(on=CLUSTER_FIELD, npartitions=npartitions,
                                shuffle_method=default_shuffle_method())

    @scoped(SEMANTIC_SCOPE)
    def pairs(self, clusters: dd.DataFrame) -> dd.DataFrame:
        """The pairs table: ``(id, duplicate_of, cosine_similarity, cluster)`` of every
        document at least ``1 - max(eps_thresholds)`` similar to one ranked before it.

        ``clusters`` must hold each cluster in one partition (as :meth:`clusters` does).
        """
        id_dtype = clusters._meta[self.id_field].dtype
        meta = pd.DataFrame({self.id_field: pd.Series([], dtype=id_dtype),
                             DUPLICATE_OF_FIELD: pd.Series([], dtype=id_dtype),
                             SIMILARITY_FIELD: np.array([], np.float32),
                             CLUSTER_FIELD: np.array([], np.int32)})
        return clusters.map_partitions(
            _cluster_pairs, id_field=self.id_field, column=self.embedding_column,
            which_to_keep=self.which_to_keep, random_state=self.random_state,
            min_similarity=self.min_similarity(max(self.eps_thresholds)),
            block_size=self.pairwise_batch_size, device=self.device, meta=meta,
            align_dataframes=False, enforce_metadata=False, token=task_name("pairs"))

    @scoped(SEMANTIC_SCOPE)
    def duplicates(self, pairs, eps: float | None = None) -> dd.DataFrame:
        """``(id, group)`` of every document to remove at ``eps`` (default
        ``eps_to_extract``): ``group`` is the id of the kept document it duplicates."""
        df = pairs.df if isinstance(pairs, DocumentDataset) else pairs
        eps = self.eps_to_extract if eps is None else float(eps)
        id_dtype = df._meta[self.id_field].dtype
        meta = pd.DataFrame({self.id_field: pd.Series([], dtype=id_dtype),
                             GROUP_FIELD: pd.Series([], dtype=id_dtype)})
        return df.map_partitions(_groups, self.id_field, self.min_similarity(eps), meta=meta,
                                 align_dataframes=False, enforce_metadata=False,
                                 token=task_name("duplicates"))

    @scoped(SEMANTIC_SCOPE)
    def remove(self, ds: DocumentDataset, duplicates) -> DocumentDataset:
        """``ds`` less the documents in ``duplicates``, counted as ``semantic_duplicate``."""
        df = duplicates.df if isinstance(duplicates, DocumentDataset) else duplicates
        return remove_ids(ds, df[[self.id_field]], id_field=self.id_field,
                          strategy=self.removal_strategy,
                          broadcast_threshold=self.broadcast_threshold,
                          reason=SEMANTIC_DUPLICATE_REASON)

    # -- reading phases back ------------------------------------------------------------------
    def read_embeddings(self, path: str, id_type: pa.DataType,
                        storage_options: dict | None = None) -> dd.DataFrame:
        schema = pa.schema([(self.id_field, id_type), (self.embedding_column, VECTOR_TYPE)])
        return read_parquet_parts(path, schema, storage_options=storage_options)

    def read_clusters(self, path: str, id_type: pa.DataType,
                      storage_options: dict | None = None) -> dd.DataFrame:
        schema = pa.schema([(self.id_field, id_type), (self.embedding_column, VECTOR_TYPE),
                            (CLUSTER_FIELD, pa.int32()), (DISTANCE_FIELD, pa.float32())])
        return read_parquet_parts(path, schema, storage_options=storage_options)

    def read_pairs(self, path: str, id_type: pa.DataType,
                   storage_options: dict | None = None) -> dd.DataFrame:
        schema = pa.schema([(self.id_field, id_type), (DUPLICATE_OF_FIELD, id_type),
                            (SIMILARITY_FIELD, pa.float32()), (CLUSTER_FIELD, pa.int32())])
        return read_parquet_parts(path, schema, storage_options=storage_options)

    # -- all together -------------------------------------------------------------------------
    @scoped(SEMANTIC_SCOPE)
    def identify(self, ds: DocumentDataset, cache_path: str, *,
                 storage_options: dict | None = None) -> DocumentDataset:
        """Run every phase, each written under ``cache_path`` (replacing what is there),
        and return ``(id, group)`` of the documents to remove at ``eps_to_extract``.

        The pairs table for auditing is in ``cache_path/pairs``.
        """
        def path(name):
            return posixpath.join(cache_path.rstrip("/"), name)

        with guarded(cache_path, "cache directory", inputs=[ds.sources],
                     storage_options=storage_options):
            embeddings = self.embeddings(ds)
            id_type = id_arrow_type(embeddings._meta[self.id_field].dtype)
            write_phase(embeddings, path("embeddings"), fingerprint=None,
                        storage_options=storage_options)
            embeddings = self.read_embeddings(path("embeddings"), id_type, storage_options)
            self.check_ids(embeddings)
            fit = self.kmeans(embeddings)
            write_phase(self.clusters(embeddings, fit.centroids), path("clusters"),
                        fingerprint=None, storage_options=storage_options)
            clusters = self.read_clusters(path("clusters"), id_type, storage_options)
            write_phase(self.pairs(clusters), path("pairs"), fingerprint=None,
                        storage_options=storage_options)
            pairs = self.read_pairs(path("pairs"), id_type, storage_options)
        return DocumentDataset(self.duplicates(pairs))

    def __call__(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """The deduplicated dataset."""
        return self.remove(ds, self.identify(ds, cache_path))


def id_arrow_type(dtype) -> pa.DataType:
    """The Arrow type the phases store ids as: int64, or strings."""
    if pd.api.types.is_integer_dtype(dtype):
        return pa.int64()
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        return pa.large_string()
    raise ArgumentTypeError(f"semantic dedup needs integer or string ids, not {dtype}")

