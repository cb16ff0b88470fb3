"""The numeric kernels of semantic dedup, written once over a small array namespace.

Every kernel takes an :class:`ArrayOps`: :class:`NumpyOps` on a CPU, :class:`TorchOps` on
a CUDA device (or, to test that path without a GPU, on the CPU). The kernels see only
the operations below, so the CPU and the GPU run the same arithmetic in the same order:
float32 products, float64 sums. Inputs and outputs are host numpy arrays; a kernel moves
its data to the device and back itself.

* :func:`nearest_centroids`: each row's nearest centroid and squared distance, one
  matrix product per chunk of rows, the ``rows x centroids`` distance matrix kept
  under :data:`MAX_BLOCK_ELEMENTS` (on a CPU, under 4 MiB, so it stays in cache).
* :func:`lloyd_partial`: one block's share of a Lloyd step (per-centroid sums and
  counts, and the inertia), each chunk's rows added to the sums while in cache.
* :func:`max_similarity_before`: for every row of a ranked cluster, the highest cosine
  similarity to a row ranked before it, and which row that is, computed tile by tile so
  no similarity matrix is larger than ``block_size x block_size``.

Examples
--------
>>> x = np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32)
>>> similarity, before = max_similarity_before(NumpyOps(), x, block_size=2)
>>> similarity.astype(float).round(2).tolist(), before.tolist()
([-inf, 0.8, 0.6], [-1, 0, 1])
"""

from __future__ import annotations

import numba
import numpy as np

# NVIDIA_CONTROL_DEVICE is imported here too for the code that has always found it here.
from curator_dask.devices import NVIDIA_CONTROL_DEVICE, check_device_name, compute_device
from curator_dask.errors import InvalidArgumentError

__all__ = [
    "MAX_BLOCK_ELEMENTS",
    "NVIDIA_CONTROL_DEVICE",
    "ArrayOps",
    "NumpyOps",
    "TorchOps",
    "array_ops",
    "check_device",
    "lloyd_partial",
    "max_similarity_before",
    "nearest_centroids",
    "resolve_ops",
]

#: The most elements one distance matrix of :func:`nearest_centroids` holds (64 MiB of
#: float32) on a GPU: rows are taken in chunks of ``MAX_BLOCK_ELEMENTS // n_centroids``.
MAX_BLOCK_ELEMENTS = 1 << 24
# On a CPU, 2^20 distances (4 MiB) at most: as fast as larger chunks, and in cache.
MAX_CPU_CHUNK_ELEMENTS = 1 << 20


class ArrayOps:
    """The operations the kernels need; subclasses implement them for one library."""

    name = "abstract"

    def asarray(self, values: np.ndarray):
        raise NotImplementedError

    def to_numpy(self, values) -> np.ndarray:
        raise NotImplementedError

    def matmul_t(self, a, b):
        """``a @ b.T``."""
        raise NotImplementedError

    def row_sq_norms(self, a):
        raise NotImplementedError

    def min_argmin(self, a):
        """Minimum of each row and its (first) column."""
        raise NotImplementedError

    def max_argmax(self, a):
        """Maximum of each row and its (first) column."""
        raise NotImplementedError

    def mask_not_before(self, s, row_start: int, col_start: int):
        """``s`` with ``-inf`` where the column's position is not before the row's."""
        raise NotImplementedError

    def add_cluster_sums(self, x, labels, sums, counts) -> None:
        """Add the rows of ``x`` to ``sums[label]`` (float64, ``k x d``, in place) and
        count them in ``counts``."""
        raise NotImplementedError

    def zeros_sums(self, k: int, d: int):
        """Zeroed ``(sums, counts)`` for :meth:`add_cluster_sums`."""
        raise NotImplementedError

    def chunk_rows(self, n_centroids: int, dimensions: int) -> int:
        """Rows of ``x`` whose distances to the centroids one step computes: at most
        :data:`MAX_BLOCK_ELEMENTS` distances."""
        return max(1, MAX_BLOCK_ELEMENTS // max(1, n_centroids))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(vars(self).items()))))


class NumpyOps(ArrayOps):
    """numpy on the host."""

    name = "numpy"

    def asarray(self, values):
        return np.ascontiguousarray(values, dtype=np.float32)

    def to_numpy(self, values):
        return np.asarray(values)

    def matmul_t(self, a, b):
        return a @ b.T

    def row_sq_norms(self, a):
        return np.einsum("ij,ij->i", a, a)

    def min_argmin(self, a):
        index = np.argmin(a, axis=1)
        return np.take_along_axis(a, index[:, None], axis=1)[:, 0], index

    def max_argmax(self, a):
        index = np.argmax(a, axis=1)
        return np.take_along_axis(a, index[:, None], axis=1)[:, 0], index

    def mask_not_before(self, s, row_start, col_start):
        rows = row_start + np.arange(s.shape[0])[:, None]
        cols = col_start + np.arange(s.shape[1])[None, :]
        return np.where(cols < rows, s, np.float32(-np.inf))

    def add_cluster_sums(self, x, labels, sums, counts):
        # One compiled pass in row order; sorting by label and np.add.reduceat in
        # float64 took ~25x longer (mostly the float64 copy and reduceat's axis=0 loop).
        _add_label_sums(x, labels, sums, counts)

    def zeros_sums(self, k, d):
        return np.zeros((k, d), dtype=np.float64), np.zeros(k, dtype=np.int64)

    def chunk_rows(self, n_centroids, dimensions):
        # Small enough that the chunk is still in cache when its rows are added to
        # the sums after the product (at most 2 MiB of rows, 4 MiB of distances).
        return max(64, min(MAX_CPU_CHUNK_ELEMENTS // max(1, n_centroids),
                           (2 << 20) // (4 * max(1, dimensions))))


class TorchOps(ArrayOps):
    """torch on ``device`` (``"cuda"``, ``"cuda:1"``; ``"cpu"`` runs the GPU code path on
    the host)."""

    name = "torch"

    def __init__(self, device: str = "cuda"):
        self.device = device

    def _torch(self):
        import torch

        return torch

    def asarray(self, values):
        torch = self._torch()
        values = np.ascontiguousarray(values, dtype=np.float32)
        if not values.flags.writeable:  # Arrow-backed: torch wants memory it may write
            values = values.copy()
        return torch.as_tensor(values, device=self.device)

    def to_numpy(self, values):
        return values.detach().cpu().numpy()

    def matmul_t(self, a, b):
        return a @ b.T

    def row_sq_norms(self, a):
        return (a * a).sum(dim=1)

    def min_argmin(self, a):
        torch = self._torch()
        index = torch.argmin(a, dim=1)
        return a.gather(1, index[:, None])[:, 0], index

    def max_argmax(self, a):
        torch = self._torch()
        index = torch.argmax(a, dim=1)
        return a.gather(1, index[:, None])[:, 0], index

    def mask_not_before(self, s, row_start, col_start):
        torch = self._torch()
        rows = row_start + torch.arange(s.shape[0], device=s.device)[:, None]
        cols = col_start + torch.arange(s.shape[1], device=s.device)[None, :]
        return torch.where(cols < rows, s, torch.full_like(s, float("-inf")))

    def add_cluster_sums(self, x, labels, sums, counts):
        sums.index_add_(0, labels, x.to(sums.dtype))
        counts += self._torch().bincount(labels, minlength=len(counts))

    def zeros_sums(self, k, d):
        torch = self._torch()
        return (torch.zeros((k, d), dtype=torch.float64, device=self.device),
                torch.zeros(k, dtype=torch.int64, device=self.device))

    def __repr__(self) -> str:
        return f"TorchOps({self.device!r})"


def check_device(device: str | ArrayOps) -> str | ArrayOps:
    """``device`` if it is one :func:`array_ops` understands (or an :class:`ArrayOps`,
    e.g. ``TorchOps("cpu")`` to run the GPU code path on a CPU), else a ValueError."""
    if isinstance(device, ArrayOps):
        return device
    return check_device_name(device)


def array_ops(device: str = "auto") -> ArrayOps:
    """The kernels' namespace for ``device``, chosen where the kernel runs.

    ``"cpu"``: numpy. ``"cuda"`` / ``"cuda:N"``: torch on that GPU. ``"auto"``: torch on
    the process's CUDA device when torch sees one, else numpy (see
    :func:`~curator_dask.devices.compute_device`).

    Examples
    --------
    >>> array_ops("cpu")
    NumpyOps()
    """
    device = compute_device(device)
    return NumpyOps() if device == "cpu" else TorchOps(device)


def resolve_ops(ops: ArrayOps | str) -> ArrayOps:
    """``ops`` itself, or :func:`array_ops` of a device name (resolved where the kernel
    runs, so ``"auto"`` finds the worker's GPU, not the client's)."""
    return ops if isinstance(ops, ArrayOps) else array_ops(ops)


@numba.njit(cache=True, nogil=True)
def _add_label_sums(x, labels, sums, counts):
    for row in range(x.shape[0]):
        label = labels[row]
        counts[label] += 1
        for col in range(x.shape[1]):
            sums[label, col] += x[row, col]


def _nearest_chunks(ops: ArrayOps, x: np.ndarray, centroids: np.ndarray,
                    x_sq_norms: np.ndarray | None):
    """``(start, rows, labels, d2)`` chunk by chunk: the rows and labels on the device,
    the squared distances (float32, at least 0) on the host."""
    c = ops.asarray(centroids)
    c_norms = ops.row_sq_norms(c)
    # |x - c|^2 = |x|^2 - 2 x.c + |c|^2; the row's |x|^2 does not change the argmin.
    # Scaling by -2 is exact, so x.(-2c) + |c|^2 is the same number as |c|^2 - 2 x.c,
    # without a second pass over the matrix.
    c_minus_2 = ops.asarray(-2 * np.asarray(centroids, dtype=np.float32))
    step = ops.chunk_rows(len(centroids), x.shape[1] if x.ndim == 2 else 1)
    for start in range(0, len(x), step):
        chunk = ops.asarray(x[start:start + step])
        partial = ops.matmul_t(chunk, c_minus_2)
        partial += c_norms[None, :]
        best, index = ops.min_argmin(partial)
        chunk_norms = (ops.row_sq_norms(chunk) if x_sq_norms is None
                       else ops.asarray(x_sq_norms[start:start + step]))
        yield start, chunk, index, np.maximum(ops.to_numpy(best + chunk_norms), 0)


def nearest_centroids(ops: ArrayOps | str, x: np.ndarray, centroids: np.ndarray,
                      x_sq_norms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The nearest centroid of each row of ``x`` (int32) and the squared Euclidean
    distance to it (float32, at least 0).

    ``x_sq_norms``, the rows' squared norms, saves computing them when the caller holds
    them (a k-means block keeps them across iterations).

    Examples
    --------
    >>> x = np.array([[0, 0], [2, 2], [3, 3]], dtype=np.float32)
    >>> labels, d2 = nearest_centroids(NumpyOps(), x, np.array([[0, 0], [3, 3]], np.float32))
    >>> labels.tolist(), d2.tolist()
    ([0, 1, 1], [0.0, 2.0, 0.0])
    """
    ops = resolve_ops(ops)
    labels = np.empty(len(x), dtype=np.int32)
    distances = np.empty(len(x), dtype=np.float32)
    if len(x) == 0:
        return labels, distances
    for start, chunk, index, d2 in _nearest_chunks(ops, x, centroids, x_sq_norms):
        labels[start:start + len(chunk)] = ops.to_numpy(index)
        distances[start:start + len(chunk)] = d2
    return labels, distances


def lloyd_partial(ops: ArrayOps | str, x: np.ndarray, centroids: np.ndarray,
                  x_sq_norms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """One block's share of a Lloyd step: per-centroid sums of its rows (float64,
    ``k x d``), the row counts, and the summed squared distances (the inertia).

    Examples
    --------
    >>> x = np.array([[0, 0], [2, 2], [4, 4]], dtype=np.float32)
    >>> sums, counts, inertia = lloyd_partial(NumpyOps(), x, np.array([[0, 0], [3, 3]], np.float32))
    >>> sums.tolist(), counts.tolist(), inertia
    ([[0.0, 0.0], [6.0, 6.0]], [1, 2], 4.0)
    """
    ops = resolve_ops(ops)
    k = len(centroids)
    if len(x) == 0:
        return np.zeros((k, np.shape(centroids)[1]), np.float64), np.zeros(k, np.int64), 0.0
    sums, counts = ops.zeros_sums(k, x.shape[1])
    inertia = 0.0
    # Chunk by chunk, so the rows are still in cache when they are added to the sums.
    for _, chunk, index, d2 in _nearest_chunks(ops, x, centroids, x_sq_norms):
        ops.add_cluster_sums(chunk, index, sums, counts)
        inertia += float(d2.astype(np.float64).sum())
    return (np.asarray(ops.to_numpy(sums), dtype=np.float64),
            np.asarray(ops.to_numpy(counts), dtype=np.int64), inertia)


def max_similarity_before(ops: ArrayOps | str, x: np.ndarray, block_size: int = 1024,
                          on_block=None) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a ranked cluster, the highest cosine similarity to a row ranked
    before it, and the position of that row.

    ``x`` holds the cluster's L2-normalised embeddings in rank order (the document to keep
    first). Row ``j``'s answer is ``max_{i < j} x_i . x_j``: ``-inf`` and ``-1`` for the
    first row. The work goes tile by tile: rows ``[r, r + block_size)`` against columns
    ``[c, c + block_size)`` for ``c <= r``, keeping a running maximum, so the largest
    similarity matrix is ``block_size x block_size`` however large the cluster (memory:
    the cluster's embeddings plus one tile). ``on_block``, if given, is called with the
    shape of every tile.
    """
    ops = resolve_ops(ops)
    if block_size < 1:
        raise InvalidArgumentError(f"block_size must be a positive integer, got {block_size!r}")
    n = len(x)
    best = np.full(n, -np.inf, dtype=np.float32)
    before = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return best, before
    data = ops.asarray(x)
    for row in range(0, n, block_size):
        rows = data[row:row + block_size]
        row_best = np.full(len(rows), -np.inf, dtype=np.float32)
        row_before = np.full(len(rows), -1, dtype=np.int64)
        for col in range(0, min(row + len(rows) - 1, n), block_size):
            cols = data[col:min(col + block_size, row + len(rows) - 1)]
            tile = ops.matmul_t(rows, cols)
            if on_block is not None:
                on_block(tuple(tile.shape))
            if col + len(cols) > row:  # the tile crosses the diagonal
                tile = ops.mask_not_before(tile, row, col)
            value, index = ops.max_argmax(tile)
            value, index = ops.to_numpy(value), ops.to_numpy(index)
            # Strictly greater: of equal similarities the earlier tile, the earlier row.
            better = value > row_best
            row_best[better] = value[better]
            row_before[better] = col + index[better]
        best[row:row + len(rows)] = row_best
        before[row:row + len(rows)] = row_before
    return best, before
