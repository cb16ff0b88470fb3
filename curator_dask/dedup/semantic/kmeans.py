"""k-means over embeddings spread across Dask partitions: k-means++ on a sample, then Lloyd.

1. **Blocks.** One pass over the partitions counts their rows and sums each dimension
   and its square (for ``tol``). Consecutive partitions are then joined into blocks of
   at most ``block_bytes`` (128 MiB by default: 87,381 embeddings of 384 float32s), each
   one C-contiguous float32 array with its rows' squared norms, persisted on the
   workers for every later step. A Lloyd step is one task per block, so many small
   partitions cost no more scheduling than a few large ones.
2. **Initialisation on a bounded sample.** ``init_size`` documents (by default
   ``40 x n_clusters``; faiss warns below 39 a centroid), drawn uniformly without
   replacement, come to the client. Greedy k-means++ (scikit-learn's: ``2 + log k``
   trials a centroid) picks ``n_clusters`` of the first half of them, and Lloyd steps
   on the whole sample move the centroids until they converge (the same ``tol`` and
   ``max_iter``). Most of the movement happens there, at a cost that does not grow
   with the corpus, so fewer passes over the corpus follow. A larger ``init_size``
   seeds from more documents: closer to scikit-learn's inertia with many clusters, at
   ``k x init_size / 2 x d`` multiply-adds a trial.
3. **Lloyd steps over the blocks.** Each block returns per-centroid float64 sums and
   counts; the client adds them (a tree of additions, eight at a time, in a fixed
   order) and moves every centroid to its mean. A centroid that loses all its
   documents stays where it was. The loop stops after ``max_iter`` steps, or when the
   centroids moved less than ``tol`` times the mean variance of the embedding
   dimensions (scikit-learn's criterion), summed over the centroids.

When every embedding fits in one block, steps 2 and 3 run inside one task where the
block is, with no round trip a step: ``block_bytes`` is both that threshold and the
most memory one process gives to embeddings. Above it, no process holds more than one
block (a worker holds its blocks), and the client holds the sample: ``4 x dimensions
x init_size`` bytes (59 MiB at 1,000 clusters of 384 dimensions).

The random draws happen on the host with numpy whatever the device, the
initialisation runs on the host, and the sums are added in a fixed order, so the same
embeddings, partitions and ``random_state`` give the same centroids on every run, and
on a CPU and a GPU up to float32 rounding in the distances (see :mod:`.kernels`).

Examples
--------
>>> import dask
>>> rng = np.random.default_rng(0)
>>> blobs = np.concatenate([rng.normal(c, 0.1, size=(50, 2)) for c in (0, 5, 10)])
>>> parts = [dask.delayed(p) for p in np.array_split(blobs.astype(np.float32), 4)]
>>> fit = fit_kmeans(parts, 3, random_state=0)
>>> (np.sort(fit.centroids[:, 0]).round(0) + 0.0).tolist(), fit.converged
([0.0, 5.0, 10.0], True)
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import dask
import numba
import numpy as np

from curator_dask.dedup.semantic.kernels import (
    ArrayOps,
    NumpyOps,
    check_device,
    lloyd_partial,
)
from curator_dask.errors import InvalidArgumentError
from curator_dask.task_names import delayed_task

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "INIT_SAMPLE_PER_CLUSTER",
    "KMeansBlock",
    "KMeansFit",
    "fit_kmeans",
    "kmeans_plusplus",
]

logger = logging.getLogger(__name__)

#: The most bytes of embeddings in one k-means block (one task of a Lloyd step).
DEFAULT_BLOCK_BYTES = 128 << 20
#: Default ``init_size``: documents sampled for the initialisation, per cluster.
INIT_SAMPLE_PER_CLUSTER = 40
# Partial results added together at once in the reduce.
_FAN_IN = 8


@dataclass
class KMeansFit:
    """Fitted centroids and how the fit went."""

    #: ``n_clusters x d`` float32.
    centroids: np.ndarray
    #: Lloyd steps taken over the whole corpus (not counting those on the sample).
    iterations: int
    #: Summed squared distance of every document to its nearest centroid before the
    #: last step.
    inertia: float
    converged: bool
    documents: int
    #: Documents nearest to each centroid before the last step.
    counts: np.ndarray
    #: Blocks the corpus was held in (1: the whole fit ran in one task).
    blocks: int = 1
    #: Lloyd steps on the initialisation sample.
    sample_iterations: int = 0


@dataclass
class KMeansBlock:
    """Consecutive partitions' embeddings as one C-contiguous float32 array, with the
    squared norm of each row (computed once, used by every Lloyd step)."""

    x: np.ndarray
    sq_norms: np.ndarray

    @classmethod
    def of(cls, *arrays) -> KMeansBlock:
        parts = [np.asarray(a, dtype=np.float32) for a in arrays if len(a)]
        x = np.ascontiguousarray(parts[0] if len(parts) == 1 else np.concatenate(parts))
        return cls(x, np.einsum("ij,ij->i", x, x))

    def __len__(self) -> int:
        return len(self.x)

    def __sizeof__(self) -> int:
        # Dask sizes task results with sys.getsizeof: without the arrays counted it saw
        # ~50 bytes, ignored the block when placing a step's task, and work stealing
        # moved blocks between workers on every step.
        return object.__sizeof__(self) + self.x.nbytes + self.sq_norms.nbytes


# -- per-partition and per-block tasks ----------------------------------------------------

def _task(func):
    """``dask.delayed(func)``, its calls named ``<scope>/kmeans``."""
    return delayed_task(func, "kmeans", scope="semantic_dedup")


@numba.njit(cache=True, nogil=True)
def _column_moments(x):
    sums = np.zeros(x.shape[1], dtype=np.float64)
    squares = np.zeros(x.shape[1], dtype=np.float64)
    for row in range(x.shape[0]):
        for col in range(x.shape[1]):
            value = np.float64(x[row, col])
            sums[col] += value
            squares[col] += value * value
    return sums, squares


def _stats(x) -> tuple[int, int, np.ndarray, np.ndarray]:
    x = np.asarray(x)
    if x.ndim != 2:
        raise InvalidArgumentError(f"k-means needs 2-d arrays of embeddings, got shape {x.shape}")
    if len(x) == 0:
        return 0, 0, np.zeros(0), np.zeros(0)
    return (len(x), x.shape[1], *_column_moments(np.ascontiguousarray(x, dtype=np.float32)))


def _rows(block: KMeansBlock, positions: np.ndarray) -> np.ndarray:
    return block.x[positions]


def _block_partial(ops, block: KMeansBlock, centroids: np.ndarray):
    return lloyd_partial(ops, block.x, centroids, block.sq_norms)


def _add(*parts):
    if isinstance(parts[0], tuple):
        return tuple(_add(*values) for values in zip(*parts, strict=True))
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _tree_sum(parts: list):
    """The sum of delayed values, as a tree of ``_FAN_IN``-way additions in a fixed
    order; the last addition happens here, saving a task and a transfer a step."""
    while len(parts) > _FAN_IN:
        parts = [_task(_add)(*parts[i:i + _FAN_IN]) if len(parts[i:i + _FAN_IN]) > 1
                 else parts[i] for i in range(0, len(parts), _FAN_IN)]
    return _add(*dask.compute(*parts))


def _group(sizes: np.ndarray, dim: int, block_bytes: int) -> list[list[int]]:
    """Consecutive non-empty partitions, in runs of at most ``block_bytes`` (a larger
    partition is a block of its own)."""
    groups, current, used = [], [], 0
    for index, rows in enumerate(sizes):
        if rows == 0:
            continue
        size = int(rows) * 4 * dim
        if current and used + size > block_bytes:
            groups.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    return [*groups, current] if current else groups


# -- the algorithm, wherever it runs ------------------------------------------------------

@dataclass
class _Settings:
    n_clusters: int
    max_iter: int
    tol_abs: float
    documents: int
    ops: ArrayOps | str
    #: Of the sample, the rows k-means++ seeds from.
    seed_size: int


def _lloyd(step, centroids: np.ndarray, max_iter: int, tol_abs: float):
    """Lloyd steps; ``step(centroids)`` returns the summed ``(sums, counts, inertia)``."""
    inertia, counts, converged, iterations = math.inf, None, False, 0
    for iterations in range(1, max_iter + 1):
        sums, counts, inertia = step(centroids)
        moved = np.where(counts[:, None] > 0,
                         sums / np.maximum(counts, 1)[:, None], centroids).astype(np.float32)
        shift = float(((moved.astype(np.float64) - centroids) ** 2).sum())
        centroids = moved
        logger.debug("k-means step %d: inertia %.6g, shift %.3g", iterations, inertia, shift)
        if shift <= tol_abs:
            converged = True
            break
    return centroids, iterations, float(inertia), np.asarray(counts), converged


def _initial_centroids(sample: np.ndarray, settings: _Settings, rng: np.random.Generator
                       ) -> tuple[np.ndarray, int]:
    """k-means++ on the head of the sample (rows in the order drawn, so the head is a
    uniform sample too), then Lloyd on all of it, on the host."""
    k = settings.n_clusters
    seeds = sample[:settings.seed_size]
    centroids = kmeans_plusplus(seeds, np.ones(len(seeds)), k, rng)
    if len(sample) == settings.documents:  # the sample is the corpus: Lloyd follows anyway
        return centroids, 0
    block, ops = KMeansBlock.of(sample), NumpyOps()
    centroids, iterations, *_ = _lloyd(lambda c: _block_partial(ops, block, c), centroids,
                                       settings.max_iter, settings.tol_abs)
    return centroids, iterations


def _in_draw_order(rows: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The sample's rows, read in position order, back in the order they were drawn."""
    out = np.empty_like(rows)
    out[order] = rows
    return out


def _fit_in_one_task(arrays: list, positions: np.ndarray, order: np.ndarray,
                     settings: _Settings, rng: np.random.Generator):
    block = KMeansBlock.of(*arrays)
    del arrays
    sample = _in_draw_order(block.x[positions], order)
    centroids, sample_iterations = _initial_centroids(sample, settings, rng)
    return (
        *_lloyd(
            lambda c: _block_partial(settings.ops, block, c),
            centroids,
            settings.max_iter,
            settings.tol_abs,
        ),
        sample_iterations,
    )


# -- the driver -------------------------------------------------------------------------

def fit_kmeans(arrays: list, n_clusters: int, *, max_iter: int = 100, tol: float = 1e-4,
               random_state: int = 1234, ops: ArrayOps | str = "cpu",
               init_size: int | None = None,
               block_bytes: int = DEFAULT_BLOCK_BYTES) -> KMeansFit:
    """Fit ``n_clusters`` centroids to the rows of ``arrays``.

    Parameters
    ----------
    arrays : list of dask Delayed or Future
        One 2-d float32 array per partition. They are read twice (once to count, once
        into blocks), so persist them first; they are not needed once the blocks are
        made.
    n_clusters : int
        At most the number of rows.
    max_iter, tol, random_state
        As in scikit-learn's ``KMeans``.
    ops : ArrayOps or str, default "cpu"
        Where the distances are computed: an :class:`~.kernels.ArrayOps`, or a device
        name for :func:`~.kernels.array_ops`, resolved inside each task (so ``"auto"``
        uses the GPU of a worker that has one).
    init_size : int, optional
        Documents sampled for the initialisation (default ``40 * n_clusters``; at
        least ``n_clusters``, at most all of them). They take ``4 * dimensions *
        init_size`` bytes, on the client when there is more than one block.
    block_bytes : int, default 128 MiB
        The most embedding bytes in one block. Corpora up to this size are fitted in
        one task.

    Raises
    ------
    ValueError
        If there are fewer rows than ``n_clusters``, or partitions disagree on the
        number of dimensions.
    """
    if not isinstance(ops, ArrayOps):
        check_device(ops)  # a bad device name fails here, not in a task
    for name, value in (("n_clusters", n_clusters), ("max_iter", max_iter),
                        ("init_size", 1 if init_size is None else init_size),
                        ("block_bytes", block_bytes)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
    stats = dask.compute(*[_task(_stats)(a) for a in arrays])
    sizes = np.array([s[0] for s in stats], dtype=np.int64)
    documents = int(sizes.sum())
    if documents < n_clusters:
        raise InvalidArgumentError(
            f"n_clusters={n_clusters} is more than the {documents} documents to cluster; "
            "pass a smaller n_clusters (a cluster should hold tens to thousands of documents)")
    dims = {s[1]: i for i, s in enumerate(stats) if s[0]}
    if len(dims) > 1:
        (a, i), (b, j) = list(dims.items())[:2]
        raise InvalidArgumentError(f"k-means: partition {i} has {a}-dimensional embeddings and "
                                   f"partition {j} {b}-dimensional ones; embed them with one model")
    dim = next(iter(dims))
    mean = sum(s[2] for s in stats if s[0]) / documents
    variance = sum(s[3] for s in stats if s[0]) / documents - mean * mean
    requested = init_size or INIT_SAMPLE_PER_CLUSTER * n_clusters
    sample_size = min(documents, max(n_clusters, requested))
    # Half the sample (of what was asked, so a small corpus seeds from all of it):
    # k-means++ costs n_clusters x seed_size x d a trial, Lloyd on the sample less a row.
    settings = _Settings(n_clusters, max_iter, float(tol * np.maximum(variance, 0).mean()),
                         documents, ops, min(sample_size, max(n_clusters, requested // 2)))

    groups = _group(sizes, dim, block_bytes)
    rng = np.random.default_rng(random_state)
    drawn = rng.choice(documents, sample_size, replace=False)
    order = np.argsort(drawn, kind="stable")
    picks = drawn[order]  # read in position order, block by block
    starts = np.cumsum([0] + [int(sizes[g].sum()) for g in groups])
    cuts = np.searchsorted(picks, starts)
    positions = [picks[cuts[b]:cuts[b + 1]] - starts[b] for b in range(len(groups))]
    if len(groups) == 1:
        task = _task(_fit_in_one_task)([arrays[i] for i in groups[0]], positions[0],
                                              order, settings, rng)
        del arrays
        *fit, sample_iterations = dask.compute(task)[0]
    else:
        blocks = dask.persist(*[_task(KMeansBlock.of)(*[arrays[i] for i in g])
                                for g in groups])
        del arrays  # the scheduler frees a partition once its block is made
        sample = _in_draw_order(np.concatenate(dask.compute(
            *[_task(_rows)(b, p) for b, p in zip(blocks, positions, strict=True)])), order)
        centroids, sample_iterations = _initial_centroids(sample, settings, rng)
        del sample

        def step(centroids):
            # The centroids travel inside each task (1.5 MiB at 1,000 x 384): as a key
            # of their own, every worker but one fetched them before it could start.
            return _tree_sum([_task(_block_partial)(ops, b, centroids) for b in blocks])

        fit = _lloyd(step, centroids, max_iter, settings.tol_abs)
    centroids, iterations, inertia, counts, converged = fit
    empty = int((counts == 0).sum())
    if empty:
        logger.warning("k-means: %d of %d clusters are empty (fewer distinct embeddings "
                       "than clusters?)", empty, n_clusters)
    logger.info("k-means: %d documents in %d block(s), %d clusters, %d steps on a sample of "
                "%d, %d on all (%s), inertia %.6g", documents, len(groups), n_clusters,
                sample_iterations, sample_size, iterations,
                "converged" if converged else "max_iter reached", inertia)
    return KMeansFit(centroids=centroids, iterations=iterations, inertia=inertia,
                     converged=converged, documents=documents, counts=counts,
                     blocks=len(groups), sample_iterations=sample_iterations)


def kmeans_plusplus(points: np.ndarray, weights: np.ndarray, n_clusters: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Weighted k-means++ seeding with ``2 + log(k)`` local trials (as scikit-learn).

    Runs on the host (float32 products, float64 sums), so it is the same whatever
    device the Lloyd steps use. With fewer distinct points than ``n_clusters``, the
    rest repeat points.

    Examples
    --------
    >>> pts = np.array([[0, 0], [0, 0.1], [9, 9], [9, 9.1]], dtype=np.float32)
    >>> c = kmeans_plusplus(pts, np.ones(4), 2, np.random.default_rng(0))
    >>> sorted(c[:, 0].round().tolist())
    [0.0, 9.0]
    """
    points32 = np.ascontiguousarray(points, dtype=np.float32)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones(len(points))
    norms = np.einsum("ij,ij->i", points32, points32).astype(np.float64)

    def d2_to(index):
        cross = points32[index] @ points32.T
        return np.maximum(norms[index][:, None] - 2 * cross + norms[None, :], 0)

    trials = 2 + int(math.log(n_clusters))
    chosen = [int(rng.choice(len(points), p=weights / weights.sum()))]
    closest = d2_to(np.array(chosen))[0]
    for _ in range(1, n_clusters):
        potential = weights * closest
        total = potential.sum()
        if total <= 0:  # every point coincides with a chosen one
            chosen.append(chosen[len(chosen) % len(chosen)])
            continue
        picks = np.searchsorted(np.cumsum(potential), rng.random(trials) * total)
        picks = np.minimum(picks, len(points) - 1)
        distances = np.minimum(closest[None, :], d2_to(picks))
        best = int(np.argmin(distances @ weights))
        chosen.append(int(picks[best]))
        closest = distances[best]
    return points32[np.array(chosen)].copy()
