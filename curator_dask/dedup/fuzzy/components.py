"""Connected components of the duplicate graph: which documents form one group.

Every document in an edge belongs to one group, labelled with its lowest id (so the
label does not depend on partitioning or on the algorithm, and removal keeps the
document whose id is the label). Two algorithms give the same labels:

``union_find_components``
    Exact union-find in numba (the root with the lower id wins, path halving) over ids
    numbered by a hash table in one pass, no sort; edge ends are looked up again to be
    joined rather than kept numbered. Runs on one worker, on the edge list gathered in
    one partition: 2 million edges among 250,000 ids (a duplicate graph repeats ids)
    peak at 34 bytes an edge with the concatenated input (42 with a number kept per
    endpoint); edges between ids all distinct at about 70. The table is sized once from
    the edge count: grown by doubling, it left 43 MB in the process that the allocator
    kept after the task (2 million edges, system allocator). Used while the edge list
    fits the smallest worker's memory at :data:`UNION_FIND_BYTES_PER_EDGE`
    (:func:`local_edge_capacity`: 9 million edges on a 1 GiB worker, 220 million on 16
    GiB), or up to ``max_local_edges`` when it is given.
``distributed_components``
    Alternating large-star / small-star (Kiveris et al., "Connected Components in
    MapReduce and Beyond", SoCC 2014) over Dask dataframes: each step is one shuffle of
    the edge list on a node and one vectorised group-min per partition, so no worker ever
    holds more than a partition of edges. It converges, in O(log^2 n) rounds at worst and
    a handful in practice, to a forest of stars, each centred on its component's lowest
    id. Used beyond.

scipy's ``csgraph.connected_components`` would serve for the first; the numba loop needs
no extra dependency (numba is already in the base install) and returns the lowest-id
label directly. scipy checks it in the tests.
"""

from __future__ import annotations

import logging

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.fuzzy.lsh import EDGE_FIELDS
from curator_dask.dedup.removal import default_shuffle_method
from curator_dask.errors import ComputationError, InvalidArgumentError
from curator_dask.io.planner import WorkerMemory, task_budget, worker_memory
from curator_dask.numba_cache import njit
from curator_dask.stages.columns import require_columns
from curator_dask.task_names import delayed_task, task_name

__all__ = [
    "GROUP_FIELD",
    "UNION_FIND_BYTES_PER_EDGE",
    "connected_components",
    "distributed_components",
    "local_edge_capacity",
    "union_find_components",
]

logger = logging.getLogger(__name__)

GROUP_FIELD = "group"
#: Peak memory of union-find per edge that plans it, its input included: between a
#: duplicate graph's (34) and that of edges between distinct ids (70).
UNION_FIND_BYTES_PER_EDGE = 45
#: The most edges union-find takes (its numbering is int32).
_MOST_LOCAL_EDGES = 2**30 - 1

_U, _V = "_u", "_v"
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53


# -- union-find on one worker ---------------------------------------------------------------

_GOLDEN = 0x9E3779B97F4A7C15


@njit(nogil=True)
def _slot(slots, ids, v):
    """The slot of id ``v`` in the open-addressing table (linear probing): the slot that
    holds its number, or the empty one where it would go."""
    mask = np.uint64(slots.shape[0] - 1)
    h = ((np.uint64(v) * np.uint64(_GOLDEN)) >> np.uint64(32)) & mask
    while slots[h] != -1 and ids[slots[h]] != v:
        h = (h + np.uint64(1)) & mask
    return h


@njit(nogil=True)
def _number_ids(x, y):
    """Number the distinct ids of both columns ``0..m-1`` in order of first appearance
    (``x`` then ``y``) in an open-addressing table at most 2/3 full. Returns the table
    (``slots``: number by slot) and the ids by number."""
    n = x.shape[0]
    size = 16
    while size < 3 * n:
        size <<= 1
    slots = np.full(size, -1, np.int32)
    ids = np.empty(2 * n, np.int64)
    count = 0
    for k in range(2 * n):
        v = x[k] if k < n else y[k - n]
        h = _slot(slots, ids, v)
        if slots[h] == -1:
            slots[h] = count
            ids[count] = v
            count += 1
    return slots, ids[:count]


@njit(nogil=True)
def _find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]  # path halving
        i = parent[i]
    return i


@njit(nogil=True)
def _union_edges(x, y, slots, ids, parent):
    """Join the components of each edge's ends (numbered in ``slots``/``ids``)."""
    for k in range(x.shape[0]):
        a = _find(parent, slots[_slot(slots, ids, x[k])])
        b = _find(parent, slots[_slot(slots, ids, y[k])])
        # The root with the smaller id wins, so every root is its component's lowest id.
        if a != b:
            if ids[a] < ids[b]:
                parent[b] = a
            else:
                parent[a] = b


@njit(nogil=True)
def _lowest_ids(parent, ids):
    groups = np.empty(ids.shape[0], np.int64)
    for i in range(ids.shape[0]):
        groups[i] = ids[_find(parent, i)]
    return groups


def union_find_components(id_x, id_y) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, groups)``: every id in an edge, and the lowest id of its component.

    Each id is numbered once in a hash table (no sort, no copy of the edges); the edges
    are then joined in a second pass that looks their ends up again, so no number is
    kept per endpoint.

    Parameters
    ----------
    id_x, id_y : array_like of int
        Edge endpoints (self-loops and repeated edges are fine); fewer than 2**30 edges.

    Returns
    -------
    ids, groups : numpy.ndarray of int64
        ``ids`` in order of first appearance (``id_x`` first, then ``id_y``).

    Examples
    --------
    >>> ids, groups = union_find_components([5, 9, 2], [9, 7, 3])
    >>> ids.tolist(), groups.tolist()
    ([5, 9, 2, 7, 3], [5, 5, 2, 5, 2])
    """
    x = np.ascontiguousarray(id_x, dtype=np.int64)
    y = np.ascontiguousarray(id_y, dtype=np.int64)
    if x.shape != y.shape or x.ndim != 1:
        raise InvalidArgumentError(
            f"id_x and id_y must be 1-d and of one length, got {x.shape} and "
            f"{y.shape}")
    if len(x) >= 2**30:
        raise InvalidArgumentError(f"{len(x)} edges are too many for one worker's union-find; use "
                                   "distributed_components")
    slots, ids = _number_ids(x, y)
    parent = np.arange(len(ids), dtype=np.int32)
    _union_edges(x, y, slots, ids, parent)
    del slots
    return ids, _lowest_ids(parent, ids)


def _local_components(df, id_field: str):
    x, y = EDGE_FIELDS
    ids, groups = union_find_components(df[x].to_numpy(), df[y].to_numpy())
    return pd.DataFrame({id_field: ids, GROUP_FIELD: groups})


# -- large-star / small-star over Dask --------------------------------------------------------

def _large_star(df):
    """Link each node's larger neighbours to the smallest of its neighbourhood (incl. itself).

    ``df`` holds both directions of every edge, routed on ``_u``; emits ``(v, m)`` with
    ``v > m``.
    """
    df = df.drop_duplicates()
    u = df[_U].to_numpy()
    v = df[_V].to_numpy()
    smallest = np.minimum(df.groupby(_U, sort=False)[_V].transform("min").to_numpy(), u)
    larger = v > u
    return pd.DataFrame({_U: v[larger], _V: smallest[larger]})


def _small_star(df):
    """Link a node and its smaller neighbours to the smallest of them.

    ``df`` holds edges ``(u, v)`` with ``u > v``, routed on ``_u``; emits ``(w, m)`` with
    ``w > m``.
    """
    df = df.drop_duplicates()
    u = df[_U].to_numpy()
    v = df[_V].to_numpy()
    smallest = df.groupby(_U, sort=False)[_V].transform("min").to_numpy()
    moved = v != smallest
    out = pd.DataFrame({_U: np.concatenate([v[moved], u]),
                        _V: np.concatenate([smallest[moved], smallest])})
    return out.drop_duplicates(ignore_index=True)


def _fingerprint(df) -> np.ndarray:
    """Count and wrap-around hash sum of a partition's oriented edges ``u > v``, deduplicated."""
    df = df.drop_duplicates()
    u = df[_U].to_numpy()
    v = df[_V].to_numpy()
    keep = u > v
    h = (u[keep].astype(np.uint64) * np.uint64(_C1)) ^ (v[keep].astype(np.uint64) * np.uint64(_C2))
    h ^= h >> np.uint64(29)
    return np.array([int(keep.sum()), int(h.sum(dtype=np.uint64))], dtype=np.uint64)


def _sum_fingerprints(parts) -> tuple[int, int]:
    total = np.zeros(2, dtype=np.uint64)
    for p in parts:
        total += p
    return int(total[0]), int(total[1])


def _symmetric(edges: dd.DataFrame) -> dd.DataFrame:
    flipped = edges.rename(columns={_U: _V, _V: _U})[[_U, _V]]
    return dd.concat([edges, flipped])


def distributed_components(edges, *, id_field: str = "id", max_rounds: int = 64,
                           npartitions: int | None = None) -> dd.DataFrame:
    """Connected components with large-star / small-star rounds over Dask dataframes.

    Each round persists its edges and computes one small fingerprint (edge count and a
    hash sum) to see whether the round changed anything.

    Parameters
    ----------
    edges : dask DataFrame or DocumentDataset
        ``(id_x, id_y)`` integer edges.
    max_rounds : int, default 64
        A round limit that correct input never reaches; exceeding it is an error.
    npartitions : int, optional
        Partitions of the shuffles; the edges' count by default.

    Returns
    -------
    dask DataFrame
        ``(id, group)`` for every id in an edge; ``group`` is the component's lowest id.

    Examples
    --------
    >>> edges = dd.from_pandas(pd.DataFrame({"id_x": [5, 9, 2], "id_y": [9, 7, 3]}),
    ...                        npartitions=2)
    >>> distributed_components(edges).compute().sort_values("id").values.tolist()
    [[2, 2], [3, 2], [5, 5], [7, 5], [9, 5]]
    """
    x, _y = EDGE_FIELDS
    df = edges.df if isinstance(edges, DocumentDataset) else edges
    nparts = npartitions or df.npartitions
    method = default_shuffle_method()
    # Oriented u > v, self-loops dropped.
    phase = task_name("components", scope="fuzzy_dedup")
    current = df.map_partitions(_orient, meta=_edge_meta(df._meta[x].dtype), token=phase,
                                align_dataframes=False, enforce_metadata=False).persist()
    previous = None
    for round_number in range(1, max_rounds + 1):
        routed = _symmetric(current).shuffle(on=_U, npartitions=nparts, ignore_index=True,
                                             shuffle_method=method).persist()
        fingerprint = dask.compute(delayed_task(_sum_fingerprints, "components",
                                                scope="fuzzy_dedup")(
            [delayed_task(_fingerprint, "components", scope="fuzzy_dedup")(part)
             for part in routed.to_delayed()]))[0]
        logger.info("components round %d: %d edges", round_number, fingerprint[0])
        if fingerprint == previous:
            break
        previous = fingerprint
        large = routed.map_partitions(_large_star, meta=current._meta, token=phase,
                                      align_dataframes=False, enforce_metadata=False)
        small = large.shuffle(on=_U, npartitions=nparts, ignore_index=True,
                              shuffle_method=method)
        current = small.map_partitions(_small_star, meta=current._meta, token=phase,
                                       align_dataframes=False, enforce_metadata=False).persist()
    else:
        raise ComputationError(f"connected components did not converge in {max_rounds} rounds")
    # A star forest now: every edge is (member, lowest id of its component).
    members = current.rename(columns={_U: id_field, _V: GROUP_FIELD})
    centres = current[[_V]].assign(**{GROUP_FIELD: current[_V]}).rename(columns={_V: id_field})
    labels = dd.concat([members, centres]).groupby(id_field).agg(
        {GROUP_FIELD: "min"}, split_out=nparts, shuffle_method=method)
    return labels.reset_index()


def _orient(df):
    x, y = EDGE_FIELDS
    a = df[x].to_numpy()
    b = df[y].to_numpy()
    keep = a != b
    return pd.DataFrame({_U: np.maximum(a, b)[keep], _V: np.minimum(a, b)[keep]})


def _edge_meta(dtype) -> pd.DataFrame:
    return pd.DataFrame({_U: pd.Series([], dtype=dtype), _V: pd.Series([], dtype=dtype)})


# -- the choice --------------------------------------------------------------------------------

def local_edge_capacity(memory: WorkerMemory | None = None) -> int:
    """Edges union-find can take on one worker of ``memory`` (default: the current
    cluster's, :func:`~curator_dask.io.planner.worker_memory`): the smallest worker's
    task budget at :data:`UNION_FIND_BYTES_PER_EDGE`, or without a memory limit the
    same share of this machine's memory.

    >>> from curator_dask.io.planner import WorkerMemory
    >>> local_edge_capacity(WorkerMemory(2, 1, 2**30)) // 10**6
    9
    """
    memory = memory or worker_memory()
    if memory.limit is None:
        import psutil

        memory = WorkerMemory(memory.workers, memory.threads,
                              int(psutil.virtual_memory().total), memory.total_threads)
    return min(task_budget(memory) // UNION_FIND_BYTES_PER_EDGE, _MOST_LOCAL_EDGES)


def connected_components(edges, *, id_field: str = "id",
                         max_local_edges: int | None = None,
                         num_edges: int | None = None) -> dd.DataFrame:
    """``(id, group)`` for every document in an edge; ``group`` is its component's lowest id.

    Parameters
    ----------
    edges : dask DataFrame or DocumentDataset
        ``(id_x, id_y)`` integer edges, from :class:`~curator_dask.dedup.fuzzy.LSH` or
        :func:`~curator_dask.dedup.fuzzy.check_false_positives`.
    max_local_edges : int, optional
        Up to this many edges, exact union-find on one worker; beyond it, the
        distributed large-star / small-star algorithm. Both give identical groups.
        Default: as many as fit the smallest worker's memory
        (:func:`local_edge_capacity`).
    num_edges : int, optional
        The edge count if known (the workflow knows it from its cache); otherwise it is
        counted, which computes the edges once.

    Examples
    --------
    >>> edges = dd.from_pandas(pd.DataFrame({"id_x": [1, 4], "id_y": [2, 2]}), npartitions=1)
    >>> connected_components(edges).compute().sort_values("id").values.tolist()
    [[1, 1], [2, 1], [4, 1]]
    """
    x, y = EDGE_FIELDS
    df = edges.df if isinstance(edges, DocumentDataset) else edges
    require_columns("connected components", df.columns, EDGE_FIELDS,
                    fix="Edges are pairs of ids, as LSH.edges returns them.")
    if num_edges is None:
        num_edges = len(df)
    if max_local_edges is None:
        max_local_edges = local_edge_capacity()
    if num_edges <= max_local_edges:
        logger.info("connected components: %d edges, union-find on one worker", num_edges)
        meta = pd.DataFrame({id_field: pd.Series([], dtype=df._meta[x].dtype),
                             GROUP_FIELD: pd.Series([], dtype=df._meta[x].dtype)})
        return df[[x, y]].repartition(npartitions=1).map_partitions(
            _local_components, id_field, meta=meta, align_dataframes=False,
            enforce_metadata=False, token=task_name("components", scope="fuzzy_dedup"))
    logger.info("connected components: %d edges, more than union-find on one worker takes "
                "(%d), distributed large-star/small-star", num_edges, max_local_edges)
    return distributed_components(df[[x, y]], id_field=id_field)
