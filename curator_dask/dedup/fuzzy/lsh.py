"""Locality-sensitive hashing: MinHash signatures to buckets to candidate edges.

A signature of ``num_bands * minhashes_per_band`` values is cut into bands. Two documents
land in the same bucket of a band when all ``minhashes_per_band`` values of that band
agree, which for documents of Jaccard similarity ``s`` happens with probability
``s ** r``; they become candidates when that happens in any band:
``1 - (1 - s ** r) ** b``. NeMo Curator's defaults (20 bands of 13) put the 50% point
of that curve near ``s = 0.79``; :func:`optimal_bands` picks ``(b, r)`` for another
threshold.

How the work is laid out
------------------------
1. Where the signatures lie, each band's values are hashed into one 64-bit bucket id
   (:func:`band_buckets`): vectorised multiply-xorshift mixing (MurmurHash3's 64-bit
   finaliser) over the band's columns, seeded by the band number so equal values in
   different bands never share a bucket. The same integer arithmetic runs on numpy and
   cupy arrays, so CPU and GPU partitions agree on every bucket id.
2. Only ``(id, bucket)`` pairs, 16 bytes a document a band, are shuffled on the bucket
   (P2P on a cluster: spilled through disk, bounded memory). ``bands_per_iteration``
   bounds how many bands are in one shuffle, so the shuffled volume at a time is
   ``16 * documents * bands_per_iteration`` bytes whatever ``num_bands`` is. By default
   it is planned (:func:`planned_bands_per_iteration`): every band in one shuffle while
   that volume fits the cluster's memory, since each iteration reads every signature
   again and sets up a shuffle of its own (four iterations of five bands were 1.2 s of
   a 3.6 s run on 100 MB, one of twenty 0.4 s).
3. In each bucket, every member is linked to the bucket's lowest id (``m - 1`` edges for
   ``m`` members, not ``m * (m - 1) / 2`` pairs): connected components only need the
   bucket connected, and the lowest id makes the edges independent of partitioning.

Two different bands' contents share a 64-bit bucket id by accident with probability
about ``pairs / 2**64``: a few spurious edges in a trillion-entry corpus, which the
optional false-positive check removes like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import dask.dataframe as dd
import numpy as np
import pandas as pd

from curator_dask.backends import array_module, frame_like
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.fuzzy.minhash import SIGNATURE_FIELD, signature_matrix
from curator_dask.dedup.removal import default_shuffle_method
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.io.planner import WorkerMemory, with_known_limit, worker_memory
from curator_dask.stages.columns import require_columns
from curator_dask.task_names import task_name

__all__ = [
    "BUCKET_FIELD",
    "EDGE_FIELDS",
    "LSH",
    "band_buckets",
    "bucket_edges",
    "lsh_probability",
    "optimal_bands",
    "planned_bands_per_iteration",
]

logger = logging.getLogger(__name__)

BUCKET_FIELD = "_bucket_id"
#: Columns of an edge list: the anchor (lowest id of the bucket) and the member.
EDGE_FIELDS = ("id_x", "id_y")

_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53
_GOLDEN = 0x9E3779B97F4A7C15
_ROWS_PER_CHUNK = 8192  # rows hashed at a time: a band slice of them stays in L2 cache
#: Bytes a document adds to a band's shuffle: its id and its bucket id.
BUCKET_PAIR_BYTES = 16
#: Bands a shuffle when the number of documents is not known (NeMo Curator's default).
DEFAULT_BANDS_PER_ITERATION = 5


# -- choosing bands -------------------------------------------------------------------------

def planned_bands_per_iteration(num_bands: int, documents: int | None,
                                memory: WorkerMemory | None = None) -> int:
    """How many bands to shuffle together: all ``num_bands`` while their ``(id, bucket)``
    pairs (:data:`BUCKET_PAIR_BYTES` a document a band) fit the memory of the cluster's
    workers (``memory``, default :func:`~curator_dask.io.planner.worker_memory`: the
    smallest limit times the workers; the machine's memory where no limit is known),
    otherwise as many as fit, at least one. A shuffle spills to disk, so this bounds the
    disk a shuffle takes more than any worker's memory. Without a document count,
    :data:`DEFAULT_BANDS_PER_ITERATION`.

    Examples
    --------
    >>> from curator_dask.io.planner import WorkerMemory
    >>> two_gib = WorkerMemory(workers=2, threads=1, limit=2**30)
    >>> planned_bands_per_iteration(20, 1_000_000, two_gib)      # 320 MB of pairs
    20
    >>> planned_bands_per_iteration(20, 50_000_000, two_gib)     # 800 MB a band
    2
    """
    if documents is None:
        return min(num_bands, DEFAULT_BANDS_PER_ITERATION)
    memory = with_known_limit(memory or worker_memory())
    fits = memory.limit * memory.workers // (BUCKET_PAIR_BYTES * max(int(documents), 1))
    return int(max(1, min(num_bands, fits)))


def lsh_probability(similarity, num_bands: int, minhashes_per_band: int):
    """Probability that two documents of Jaccard ``similarity`` share a bucket in some band.

    Examples
    --------
    >>> round(float(lsh_probability(0.9, 20, 13)), 4), round(float(lsh_probability(0.5, 20, 13)), 4)
    (0.9972, 0.0024)
    """
    s = np.asarray(similarity, dtype=np.float64)
    return 1.0 - (1.0 - s ** minhashes_per_band) ** num_bands


def optimal_bands(threshold: float, num_hashes: int, false_positive_weight: float = 0.5,
                  false_negative_weight: float = 0.5) -> tuple[int, int]:
    """The ``(num_bands, minhashes_per_band)`` that best separate pairs at ``threshold``.

    Minimises ``false_positive_weight * FP + false_negative_weight * FN`` over all
    ``b * r <= num_hashes``, where FP is the area under the candidate probability
    :func:`lsh_probability` below the threshold and FN the area above it under its
    complement: datasketch's ``MinHashLSH`` parameter choice (``_optimal_param``). The
    integrands are polynomials of degree ``b * r``, so Gauss-Legendre quadrature with
    ``num_hashes // 2 + 1`` nodes integrates them exactly (up to 512 hashes; beyond, 257
    nodes, accurate far past what the choice needs), vectorised over every ``(b, r)``.

    Parameters
    ----------
    threshold : float
        Jaccard similarity, strictly between 0 and 1.
    num_hashes : int
        Signature length available.

    Returns
    -------
    (num_bands, minhashes_per_band) : tuple of int

    Examples
    --------
    >>> optimal_bands(0.8, 260)
    (17, 15)
    >>> optimal_bands(0.5, 128)
    (25, 5)
    """
    if not 0.0 < threshold < 1.0:
        raise InvalidArgumentError(f"threshold must be strictly between 0 and 1, got {threshold!r}")
    if not isinstance(num_hashes, (int, np.integer)) or num_hashes < 1:
        raise InvalidArgumentError(f"num_hashes must be a positive integer, got {num_hashes!r}")
    bands = np.concatenate([np.full(num_hashes // b, b) for b in range(1, num_hashes + 1)])
    rows = np.concatenate([np.arange(1, num_hashes // b + 1) for b in range(1, num_hashes + 1)])
    nodes, weights = np.polynomial.legendre.leggauss(min(num_hashes // 2 + 1, 257))
    error = np.empty(len(bands))
    chunk = max(1, 2_000_000 // len(nodes))
    for start in range(0, len(bands), chunk):
        b = bands[start:start + chunk, None].astype(np.float64)
        r = rows[start:start + chunk, None].astype(np.float64)
        s_low = threshold * (nodes + 1.0) / 2.0
        s_high = threshold + (1.0 - threshold) * (nodes + 1.0) / 2.0
        fp = (1.0 - (1.0 - s_low ** r) ** b) @ weights * threshold / 2.0
        fn = ((1.0 - s_high ** r) ** b) @ weights * (1.0 - threshold) / 2.0
        error[start:start + chunk] = false_positive_weight * fp + false_negative_weight * fn
    best = int(np.argmin(error))  # first minimum in (b, r) order, as datasketch's loop
    return int(bands[best]), int(rows[best])


# -- bucket ids -----------------------------------------------------------------------------

_array_module = array_module


def _fmix64(h):
    h ^= h >> 33
    h *= _C1
    h ^= h >> 33
    h *= _C2
    h ^= h >> 33
    return h


def band_buckets(matrix, bands: Sequence[int], minhashes_per_band: int):
    """The bucket id of each row in each of ``bands``: an ``(n, len(bands))`` uint64 array.

    Band ``i`` covers signature columns ``[i * r, (i + 1) * r)`` with
    ``r = minhashes_per_band``. Equal band values give equal ids; the band number is
    mixed in, so band 0 and band 1 never share an id by construction. ``matrix`` may be
    a numpy or a cupy array; the result is of the same kind and the same values.

    Examples
    --------
    >>> sig = np.array([[1, 2, 3, 4], [1, 2, 9, 4], [3, 4, 1, 2]], dtype=np.uint32)
    >>> ids = band_buckets(sig, [0, 1], 2)
    >>> bool(ids[0, 0] == ids[1, 0]), bool(ids[0, 1] == ids[1, 1]), bool(ids[0, 0] == ids[2, 1])
    (True, False, False)
    """
    xp = _array_module(matrix)
    n, width = matrix.shape
    bands = list(bands)
    if bands and (max(bands) + 1) * minhashes_per_band > width:
        raise InvalidArgumentError(
            f"band {max(bands)} needs signature columns up to "
            f"{(max(bands) + 1) * minhashes_per_band}, but signatures have {width}; compute "
            "MinHash with num_hashes >= num_bands * minhashes_per_band"
        )
    out = xp.empty((n, len(bands)), dtype=xp.uint64)
    step = _ROWS_PER_CHUNK if xp is np else max(n, 1)
    for lo in range(0, n, step):
        block = matrix[lo:lo + step]
        for k, band in enumerate(bands):
            seed = _fmix64(np.array([((band + 1) * _GOLDEN) % (1 << 64)], dtype=np.uint64))[0]
            h = xp.full(block.shape[0], seed, dtype=xp.uint64)
            for column in range(band * minhashes_per_band, (band + 1) * minhashes_per_band):
                h ^= block[:, column].astype(xp.uint64)
                h = _fmix64(h)
            out[lo:lo + step, k] = h
    return out


# -- partition functions ----------------------------------------------------------------------

_frame = frame_like


def _bucket_partition(df, id_field: str, bands: Sequence[int], minhashes_per_band: int):
    """``(id, _bucket_id)`` of one signature partition: one row a document a band."""
    # An empty partition (every document filtered out upstream) has no row to tell the
    # signature width from; the bands need only their own columns.
    width = None if len(df) else (max(bands, default=-1) + 1) * minhashes_per_band
    matrix = signature_matrix(df[SIGNATURE_FIELD], width)
    buckets = band_buckets(matrix, bands, minhashes_per_band)
    xp = _array_module(buckets)
    ids = df[id_field].values
    return _frame(df, {id_field: xp.repeat(xp.asarray(ids), len(bands)),
                       BUCKET_FIELD: buckets.reshape(-1)})


def bucket_edges(df, id_field: str):
    """Edges ``(lowest id of the bucket, member)`` of the buckets in one partition of
    ``(id, _bucket_id)`` rows that holds each of its buckets whole (after a shuffle on
    the bucket)."""
    x, y = EDGE_FIELDS
    anchor = df.groupby(BUCKET_FIELD, sort=False)[id_field].transform("min")
    edges = _frame(df, {x: anchor.values, y: df[id_field].values})
    edges = edges[edges[x].values != edges[y].values]
    # The same pair collides in several bands; those in this partition go at once.
    return edges.drop_duplicates(ignore_index=True)


def _empty_edges(id_dtype) -> pd.DataFrame:
    return pd.DataFrame({f: pd.Series([], dtype=id_dtype) for f in EDGE_FIELDS})


class LSH:
    """Candidate duplicate pairs from MinHash signatures, band by band.

    Parameters
    ----------
    num_bands : int, default 20
    minhashes_per_band : int, default 13
        Signatures must have at least ``num_bands * minhashes_per_band`` values.
    bands_per_iteration : int, optional
        Bands shuffled together. Fewer bound the shuffle's size (``16 * documents * n``
        bytes); more mean fewer passes. By default planned from the number of documents
        (:func:`planned_bands_per_iteration`), or 5 where that is not known.
    id_field : str, default "id"
        Integer document ids.
    output_partitions : int, optional
        Partitions of each bucket shuffle; the signatures' count by default.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask.dedup.fuzzy.minhash import MinHash
    >>> texts = ["a quick brown fox jumps over", "a quick brown fox jumps over!", "lorem ipsum"]
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"id": [7, 3, 5], "text": texts}))
    >>> sigs = MinHash(char_ngrams=5, num_hashes=40)(ds)
    >>> edges = LSH(num_bands=20, minhashes_per_band=2).edges(sigs).df
    >>> edges.drop_duplicates().compute().values.tolist()
    [[3, 7]]
    """

    def __init__(self, num_bands: int = 20, minhashes_per_band: int = 13,
                 bands_per_iteration: int | None = None, id_field: str = "id",
                 output_partitions: int | None = None):
        given = {"num_bands": num_bands, "minhashes_per_band": minhashes_per_band}
        if bands_per_iteration is not None:  # None: planned (see iterations)
            given["bands_per_iteration"] = bands_per_iteration
        for name, value in given.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
        self.num_bands = num_bands
        self.minhashes_per_band = minhashes_per_band
        self.bands_per_iteration = bands_per_iteration
        self.id_field = id_field
        self.output_partitions = output_partitions

    def __repr__(self) -> str:
        return (f"LSH(num_bands={self.num_bands}, minhashes_per_band={self.minhashes_per_band}, "
                f"bands_per_iteration={self.bands_per_iteration})")

    def iterations(self, documents: int | None = None) -> list[range]:
        """The bands of each shuffle, in order, for ``documents`` documents (see
        ``bands_per_iteration``)."""
        step = (self.bands_per_iteration
                or planned_bands_per_iteration(self.num_bands, documents))
        return [range(lo, min(lo + step, self.num_bands)) for lo in range(0, self.num_bands, step)]

    def _signatures(self, signatures) -> dd.DataFrame:
        df = signatures.df if isinstance(signatures, DocumentDataset) else signatures
        require_columns("LSH", df.columns, [self.id_field, SIGNATURE_FIELD],
                        fix="Compute them with MinHash first.")
        if not pd.api.types.is_integer_dtype(df._meta[self.id_field].dtype):
            raise ArgumentTypeError(
                f"LSH needs integer ids, but {self.id_field!r} is "
                f"{df._meta[self.id_field].dtype}; assign them with AddId() (no id_prefix)"
            )
        return df

    def buckets(self, signatures, bands: Sequence[int]) -> dd.DataFrame:
        """``(id, _bucket_id)`` for ``bands``, one row a document a band (lazy, not shuffled)."""
        df = self._signatures(signatures)
        meta = pd.DataFrame({self.id_field: pd.Series([], dtype=df._meta[self.id_field].dtype),
                             BUCKET_FIELD: pd.Series([], dtype=np.uint64)})
        return df.map_partitions(_bucket_partition, self.id_field, list(bands),
                                 self.minhashes_per_band, meta=meta,
                                 align_dataframes=False, enforce_metadata=False,
                                 token=task_name("lsh", scope="fuzzy_dedup"))

    def band_edges(self, signatures, bands: Sequence[int]) -> dd.DataFrame:
        """Edges found in ``bands``: one shuffle of their ``(id, bucket)`` pairs (lazy)."""
        df = self._signatures(signatures)
        buckets = self.buckets(df, bands)
        npartitions = self.output_partitions or df.npartitions
        # A small shuffle (a few partitions each way) runs as plain tasks: P2P's setup,
        # once per iteration of bands, cost more than the routing itself.
        shuffled = buckets.shuffle(on=BUCKET_FIELD, ignore_index=True, npartitions=npartitions,
                                   shuffle_method=default_shuffle_method(
                                       df.npartitions * npartitions))
        return shuffled.map_partitions(bucket_edges, self.id_field,
                                       meta=_empty_edges(df._meta[self.id_field].dtype),
                                       align_dataframes=False, enforce_metadata=False,
                                       token=task_name("lsh", scope="fuzzy_dedup"))

    def edges(self, signatures, documents: int | None = None) -> DocumentDataset:
        """Edges of all bands, ``(id_x, id_y)`` with ``id_x < id_y`` (lazy), the bands
        shuffled in :meth:`iterations` for ``documents``.

        A pair that collides in several bands (or iterations) may appear more than
        once; connected components do not mind. The workflow writes each iteration to
        its cache instead, so one shuffle is in flight at a time.
        """
        parts = [self.band_edges(signatures, bands) for bands in self.iterations(documents)]
        return DocumentDataset(parts[0] if len(parts) == 1 else dd.concat(parts))
