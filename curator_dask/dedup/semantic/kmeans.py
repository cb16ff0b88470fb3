"""k-means over embeddings spread across Dask partitions: k-means|| init, then Lloyd.

No process ever holds every embedding: each step is a map over the partitions (their
arrays persisted on the workers) and a reduce of small results on the client.

1. **k-means|| initialisation** (Bahmani et al., 2012). One uniformly random document
   starts the candidate set; then, for ``init_rounds`` rounds, every partition keeps
   each of its documents with probability ``min(1, l * d^2 / phi)`` (``d^2`` its squared
   distance to the candidates so far, ``phi`` the sum of those over the corpus, ``l =
   oversampling_factor * n_clusters``), drawn from a generator seeded by
   ``(random_state, round, partition)``. The candidates (about ``l * init_rounds``
   documents) are weighted by how many documents are nearest to each, and weighted
   k-means++ on the client picks ``n_clusters`` of them.
2. **Lloyd iterations.** Each partition returns the per-centroid sums of its documents
   (float64) and their counts; the client adds them up (a tree of additions, eight at
   a time) and moves every centroid to its mean. A centroid that loses all its
   documents stays where it was. The loop stops after ``max_iter`` steps, or when the
   centroids moved less than ``tol`` times the mean variance of the embedding
   dimensions (scikit-learn's criterion), summed over the centroids.

The random draws happen on the host with numpy whatever the device, and the sums are
added in a fixed order, so the same embeddings, partitions and ``random_state`` give
the same centroids on every run, and on a CPU and a GPU up to float32 rounding in the
distances (see :mod:`.kernels`).

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
import numpy as np

from curator_dask.dedup.semantic.kernels import (
    ArrayOps,
    NumpyOps,
    check_device,
    lloyd_partial,
    nearest_centroids,
)

__all__ = ["KMeansFit", "fit_kmeans", "kmeans_plusplus", "DEFAULT_INIT_ROUNDS",
           "DEFAULT_OVERSAMPLING_FACTOR"]

logger = logging.getLogger(__name__)

#: Rounds of k-means|| sampling (Bahmani et al. find 5 as good as more).
DEFAULT_INIT_ROUNDS = 5
#: Candidates drawn per round, as a multiple of ``n_clusters`` (their ``l = 2k``).
DEFAULT_OVERSAMPLING_FACTOR = 2.0
#: Lloyd steps on the weighted candidates before the distributed ones (Spark's choice).
_LOCAL_ITERATIONS = 30
# Partial results added together at once in the reduce.
_FAN_IN = 8


@dataclass
class KMeansFit:
    """Fitted centroids and how the fit went."""

    #: ``n_clusters x d`` float32.
    centroids: np.ndarray
    #: Lloyd steps taken.
    iterations: int
    #: Summed squared distance of every document to its nearest centroid before the
    #: last step.
    inertia: float
    converged: bool
    documents: int
    #: Documents nearest to each centroid before the last step.
    counts: np.ndarray


# -- per-partition tasks ------------------------------------------------------------------

def _moments(x: np.ndarray):
    x64 = x.astype(np.float64)
    return len(x), x64.sum(axis=0), (x64 * x64).sum(axis=0)


def _row(x: np.ndarray, row: int) -> np.ndarray:
    return np.array(x[row], dtype=np.float32)


def _min_d2(ops: ArrayOps, x: np.ndarray, centers: np.ndarray, previous):
    _, d2 = nearest_centroids(ops, x, centers)
    return d2 if previous is None else np.minimum(previous, d2)


def _sum(values: np.ndarray) -> float:
    return float(values.astype(np.float64).sum())


def _sample(x: np.ndarray, d2: np.ndarray, scale: float, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    draw = rng.random(len(x))
    return np.array(x[draw < d2.astype(np.float64) * scale], dtype=np.float32)


def _candidate_counts(ops: ArrayOps, x: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    labels, _ = nearest_centroids(ops, x, candidates)
    return np.bincount(labels, minlength=len(candidates)).astype(np.float64)


def _add(*parts):
    if isinstance(parts[0], tuple):
        return tuple(_add(*values) for values in zip(*parts))
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _tree_sum(parts: list):
    """The sum of delayed values, as a tree of ``_FAN_IN``-way additions (fixed order)."""
    while len(parts) > 1:
        parts = [dask.delayed(_add)(*parts[i:i + _FAN_IN]) if len(parts[i:i + _FAN_IN]) > 1
                 else parts[i] for i in range(0, len(parts), _FAN_IN)]
    return parts[0]


# -- the driver -------------------------------------------------------------------------

def fit_kmeans(arrays: list, n_clusters: int, *, max_iter: int = 100, tol: float = 1e-4,
               random_state: int = 1234, ops: ArrayOps | str = "cpu",
               init_rounds: int = DEFAULT_INIT_ROUNDS,
               oversampling_factor: float = DEFAULT_OVERSAMPLING_FACTOR) -> KMeansFit:
    """Fit ``n_clusters`` centroids to the rows of ``arrays``.

    Parameters
    ----------
    arrays : list of dask Delayed or Future
        One 2-d float32 array per partition (persist them first: every step reads them).
    n_clusters : int
        At most the number of rows.
    max_iter, tol, random_state
        As in scikit-learn's ``KMeans``.
    ops : ArrayOps or str, default "cpu"
        Where the distances are computed: an :class:`~.kernels.ArrayOps`, or a device
        name for :func:`~.kernels.array_ops`, resolved inside each task (so ``"auto"``
        uses the GPU of a worker that has one).
    init_rounds, oversampling_factor
        k-means|| sampling: rounds, and candidates a round per centroid.

    Raises
    ------
    ValueError
        If there are fewer rows than ``n_clusters``.
    """
    if not isinstance(ops, ArrayOps):
        check_device(ops)  # a bad device name fails here, not in a task
    if not isinstance(n_clusters, int) or n_clusters < 1:
        raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}")
    moments = dask.compute(*[dask.delayed(_moments)(a) for a in arrays])
    sizes = np.array([m[0] for m in moments], dtype=np.int64)
    documents = int(sizes.sum())
    if documents < n_clusters:
        raise ValueError(
            f"n_clusters={n_clusters} is more than the {documents} documents to cluster; "
            "pass a smaller n_clusters (a cluster should hold tens to thousands of documents)")
    mean = sum(m[1] for m in moments) / documents
    variance = sum(m[2] for m in moments) / documents - mean * mean
    tol_abs = float(tol * np.maximum(variance, 0).mean())
    rng = np.random.default_rng(random_state)
    centroids = _init_kmeans_parallel(arrays, sizes, n_clusters, rng, ops, random_state,
                                      init_rounds, oversampling_factor)
    inertia, counts, converged, iterations = math.inf, np.zeros(n_clusters, np.int64), False, 0
    for iterations in range(1, max_iter + 1):
        shared = dask.delayed(centroids, pure=True)
        partials = [dask.delayed(lloyd_partial)(ops, a, shared) for a in arrays]
        sums, counts, inertia = dask.compute(_tree_sum(partials))[0]
        moved = np.where(counts[:, None] > 0,
                         sums / np.maximum(counts, 1)[:, None], centroids).astype(np.float32)
        shift = float(((moved.astype(np.float64) - centroids) ** 2).sum())
        centroids = moved
        logger.debug("k-means step %d: inertia %.6g, shift %.3g", iterations, inertia, shift)
        if shift <= tol_abs:
            converged = True
            break
    empty = int((counts == 0).sum())
    if empty:
        logger.warning("k-means: %d of %d clusters are empty (fewer distinct embeddings "
                       "than clusters?)", empty, n_clusters)
    logger.info("k-means: %d documents, %d clusters, %d steps (%s), inertia %.6g",
                documents, n_clusters, iterations,
                "converged" if converged else "max_iter reached", inertia)
    return KMeansFit(centroids=centroids, iterations=iterations, inertia=float(inertia),
                     converged=converged, documents=documents, counts=np.asarray(counts))


def _init_kmeans_parallel(arrays, sizes, n_clusters, rng, ops, random_state, rounds,
                          oversampling_factor) -> np.ndarray:
    first = int(rng.integers(int(sizes.sum())))
    part = int(np.searchsorted(np.cumsum(sizes), first, side="right"))
    row = first - int(sizes[:part].sum())
    candidates = [dask.compute(dask.delayed(_row)(arrays[part], row))[0][None, :]]
    new = candidates[0]
    d2 = [None] * len(arrays)
    oversample = oversampling_factor * n_clusters
    for round_ in range(rounds):
        shared = dask.delayed(new, pure=True)
        d2 = list(dask.persist(*[dask.delayed(_min_d2)(ops, a, shared, previous)
                                 for a, previous in zip(arrays, d2)]))
        phi = sum(dask.compute(*[dask.delayed(_sum)(d) for d in d2]))
        if phi <= 0:
            break  # every document is a candidate already
        draws = dask.compute(*[dask.delayed(_sample)(a, d, oversample / phi,
                                                     [random_state, round_, i])
                               for i, (a, d) in enumerate(zip(arrays, d2))])
        new = np.concatenate(draws)
        if len(new) == 0:
            break
        candidates.append(new)
    candidates = np.concatenate(candidates)
    shared = dask.delayed(candidates, pure=True)
    weights = dask.compute(_tree_sum([dask.delayed(_candidate_counts)(ops, a, shared)
                                      for a in arrays]))[0]
    logger.debug("k-means||: %d candidates for %d clusters", len(candidates), n_clusters)
    seeds = kmeans_plusplus(candidates, weights, n_clusters, rng)
    return _weighted_lloyd(candidates, weights, seeds, _LOCAL_ITERATIONS)


def _weighted_lloyd(points: np.ndarray, weights: np.ndarray, centroids: np.ndarray,
                    iterations: int) -> np.ndarray:
    """Lloyd steps on the weighted candidates, on the host (as Spark's k-means|| ends)."""
    ops = NumpyOps()
    centroids = centroids.astype(np.float32)
    weighted = points.astype(np.float64) * weights[:, None]
    for _ in range(iterations):
        labels, _ = nearest_centroids(ops, points, centroids)
        mass = np.bincount(labels, weights=weights, minlength=len(centroids))
        sums = np.zeros((len(centroids), points.shape[1]))
        for dim in range(points.shape[1]):
            sums[:, dim] = np.bincount(labels, weights=weighted[:, dim],
                                       minlength=len(centroids))
        moved = np.where(mass[:, None] > 0, sums / np.maximum(mass, 1e-300)[:, None],
                         centroids).astype(np.float32)
        if np.array_equal(moved, centroids):
            break
        centroids = moved
    return centroids


def kmeans_plusplus(points: np.ndarray, weights: np.ndarray, n_clusters: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Weighted k-means++ seeding with ``2 + log(k)`` local trials (as scikit-learn).

    Runs on the host in float64 (the candidates are few), so it is the same on every
    device. With fewer distinct points than ``n_clusters``, the rest repeat points.

    Examples
    --------
    >>> pts = np.array([[0, 0], [0, 0.1], [9, 9], [9, 9.1]], dtype=np.float32)
    >>> c = kmeans_plusplus(pts, np.ones(4), 2, np.random.default_rng(0))
    >>> sorted(c[:, 0].round().tolist())
    [0.0, 9.0]
    """
    points64 = points.astype(np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones(len(points))
    norms = (points64 * points64).sum(axis=1)

    def d2_to(index):
        return np.maximum(norms[index][:, None] - 2 * points64[index] @ points64.T
                          + norms[None, :], 0)

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
        best = int(np.argmin((distances * weights[None, :]).sum(axis=1)))
        chosen.append(int(picks[best]))
        closest = distances[best]
    return points[np.array(chosen)].astype(np.float32)
