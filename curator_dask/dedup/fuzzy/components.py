"""Connected components of the duplicate graph: which documents form one group.

Every document in an edge belongs to one group, labelled with its lowest id (so the
label does not depend on partitioning or on the algorithm, and removal keeps the
document whose id is the label). Two algorithms give the same labels:

``streamed_components``
    Exact union-find in numba (:class:`UnionFind`: the root with the lower id wins, path
    halving) over ids numbered by a hash table, no sort, fed one edge partition after
    the other by a chain of tasks on one worker: its state grows with the distinct ids
    (64 bytes an id at peak with the result: 2 million edges among 250,000 ids in 16 MB),
    never with the edges, of which a task holds one partition. Used while the distinct
    ids (at most twice the edges, at most the documents) fit the smallest worker's
    memory at :data:`UNION_FIND_BYTES_PER_ID` (:func:`local_id_capacity`: 5.5 million ids
    on a 1 GiB worker, 126 million on 16 GiB), or up to ``max_local_edges`` edges when it
    is given. :func:`union_find_components` is the same over arrays in memory.
``distributed_components``
    Alternating large-star / small-star (Kiveris et al., "Connected Components in
    MapReduce and Beyond", SoCC 2014) over Dask dataframes: each step is one shuffle of
    the edge list on a node and one vectorised group-min per partition, so no worker ever
    holds more than a partition of edges. It converges, in O(log^2 n) rounds at worst and
    a handful in practice, to a forest of stars, each centred on its component's lowest
    id. Used beyond.

scipy's ``csgraph.connected_components`` takes the whole edge list as one sparse matrix,
which is what the stream avoids; the numba loop needs no extra dependency (numba is
already in the base install) and returns the lowest-id label directly. scipy checks it
in the tests.
"""

from __future__ import annotations

import functools
import logging

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.fuzzy.lsh import EDGE_FIELDS
from curator_dask.dedup.removal import default_shuffle_method
from curator_dask.errors import ComputationError, InvalidArgumentError
from curator_dask.io.planner import WorkerMemory, task_budget, with_known_limit, worker_memory
from curator_dask.numba_cache import njit
from curator_dask.stages.columns import require_columns
from curator_dask.task_names import delayed_task, task_name

__all__ = [
    "GROUP_FIELD",
    "UNION_FIND_BYTES_PER_ID",
    "UnionFind",
    "connected_components",
    "distributed_components",
    "local_id_capacity",
    "streamed_components",
    "union_find_components",
]

logger = logging.getLogger(__name__)

GROUP_FIELD = "group"
#: Memory of :class:`UnionFind` per distinct id that plans it: 64 bytes at peak measured
#: (2 million edges among 250,000 ids folded in 40 partitions, traced): 21 for the state,
#: the rest while it doubles and for its ``(id, group)`` frame; and a margin.
UNION_FIND_BYTES_PER_ID = 80
#: The most distinct ids union-find takes (its numbering is int32).
_MOST_LOCAL_IDS = 2**31 - 1

_U, _V = "_u", "_v"
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53


# -- union-find on one worker ---------------------------------------------------------------

_GOLDEN = 0x9E3779B97F4A7C15
#: Ids a new :class:`UnionFind` has room for before it first grows.
_FIRST_CAPACITY = 1024


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
def _find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]  # path halving
        i = parent[i]
    return i


@njit(nogil=True)
def _number(slots, ids, parent, count, v):
    """The number of id ``v``, numbering it ``count`` (its own root) if it is new; and
    the count of ids numbered after it."""
    h = _slot(slots, ids, v)
    if slots[h] == -1:
        slots[h] = count
        ids[count] = v
        parent[count] = count
        count += 1
    return slots[h], count


@njit(nogil=True)
def _fold_edges(x, y, start, slots, ids, parent, count):
    """Number the ends of edges ``start...`` (new ids in order of first appearance) and
    join their components; stop before an edge whose ends might not fit (``ids`` full, or
    the table over 2/3 full). Returns the next edge to fold and the ids numbered."""
    room = min(ids.shape[0], slots.shape[0] * 2 // 3) - 2
    for k in range(start, x.shape[0]):
        if count > room:
            return k, count
        a, count = _number(slots, ids, parent, count, x[k])
        b, count = _number(slots, ids, parent, count, y[k])
        a = _find(parent, a)
        b = _find(parent, b)
        # The root with the smaller id wins, so every root is its component's lowest id.
        if a != b:
            if ids[a] < ids[b]:
                parent[b] = a
            else:
                parent[a] = b
    return x.shape[0], count


@njit(nogil=True)
def _rehash(ids, count, slots):
    """Put the numbers ``0..count-1`` of ``ids`` into an empty table ``slots``."""
    for i in range(count):
        slots[_slot(slots, ids, ids[i])] = i


@njit(nogil=True)
def _lowest_ids(parent, ids, count):
    groups = np.empty(count, np.int64)
    for i in range(count):
        groups[i] = ids[_find(parent, i)]
    return groups


class UnionFind:
    """Connected components of edges given a batch at a time, in memory that grows with
    the distinct ids, not with the edges.

    Each id is numbered once, in an open-addressing hash table (no sort) at most 2/3
    full; an edge joins the components of its ends (the root with the lower id wins, path
    halving), so every root is its component's lowest id. Nothing is kept per edge: a
    batch of edges is folded in and can be dropped. The table, the ids and their parents
    double together when full: 2.0 million edges among 250,000 ids (a duplicate graph
    repeats ids) need 4 to 7 MB, against 68 MB for the edges themselves.

    Folding a batch changes the object in place and returns it, so that a chain of Dask
    tasks passes it on (each is its one consumer); folding the same edges again changes
    nothing.

    Examples
    --------
    >>> state = UnionFind().add_edges([5, 9], [9, 7]).add_edges([2], [3])
    >>> ids, groups = state.components()
    >>> ids.tolist(), groups.tolist()
    ([5, 9, 7, 2, 3], [5, 5, 5, 2, 2])
    """

    def __init__(self, capacity: int = _FIRST_CAPACITY):
        self.count = 0
        self._allocate(max(int(capacity), 2))

    def _allocate(self, capacity: int) -> None:
        size = 16
        while size * 2 < 3 * capacity:  # at most 2/3 full when ``capacity`` ids are in
            size <<= 1
        ids = np.empty(capacity, np.int64)
        parent = np.empty(capacity, np.int32)
        if self.count:
            ids[:self.count] = self.ids[:self.count]
            parent[:self.count] = self.parent[:self.count]
        self.slots = np.full(size, -1, np.int32)  # the old table goes before the rehash
        self.ids, self.parent = ids, parent
        _rehash(self.ids, self.count, self.slots)

    def add_edges(self, id_x, id_y) -> UnionFind:
        """Fold edges ``(id_x[k], id_y[k])`` in (self-loops and repeats are fine)."""
        x = np.ascontiguousarray(id_x, dtype=np.int64)
        y = np.ascontiguousarray(id_y, dtype=np.int64)
        if x.shape != y.shape or x.ndim != 1:
            raise InvalidArgumentError(
                f"id_x and id_y must be 1-d and of one length, got {x.shape} and "
                f"{y.shape}")
        done = 0
        while True:
            done, self.count = _fold_edges(x, y, done, self.slots, self.ids, self.parent,
                                           self.count)
            if done == len(x):
                return self
            if 2 * len(self.ids) > _MOST_LOCAL_IDS:
                raise InvalidArgumentError(
                    f"more than {_MOST_LOCAL_IDS} distinct ids are too many for one "
                    "worker's union-find; use distributed_components")
            self._allocate(2 * len(self.ids))

    def add_partition(self, df) -> UnionFind:
        """Fold in the edges of a frame with the columns :data:`EDGE_FIELDS`."""
        x, y = EDGE_FIELDS
        return self.add_edges(df[x].to_numpy(), df[y].to_numpy())

    def components(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, groups)``: every id folded in, in order of first appearance, and the
        lowest id of its component."""
        return self.ids[:self.count].copy(), _lowest_ids(self.parent, self.ids, self.count)

    def __len__(self) -> int:
        return self.count

    def __sizeof__(self) -> int:  # what Dask counts for this task result
        return self.slots.nbytes + self.ids.nbytes + self.parent.nbytes


def union_find_components(id_x, id_y) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, groups)``: every id in an edge, and the lowest id of its component
    (:class:`UnionFind` over one batch of edges).

    Parameters
    ----------
    id_x, id_y : array_like of int
        Edge endpoints (self-loops and repeated edges are fine).

    Returns
    -------
    ids, groups : numpy.ndarray of int64
        ``ids`` in order of first appearance (``id_x[0], id_y[0], id_x[1], ...``).

    Examples
    --------
    >>> ids, groups = union_find_components([5, 9, 2], [9, 7, 3])
    >>> ids.tolist(), groups.tolist()
    ([5, 9, 7, 2, 3], [5, 5, 5, 2, 2])
    """
    return UnionFind().add_edges(id_x, id_y).components()


def _start_union_find(capacity: int) -> UnionFind:
    return UnionFind(capacity)


def _fold_partition(state: UnionFind, df) -> UnionFind:
    return state.add_partition(df)


def _components_frame(state: UnionFind, id_field: str) -> pd.DataFrame:
    ids, groups = state.components()
    return pd.DataFrame({id_field: ids, GROUP_FIELD: groups})


def streamed_components(edges, *, id_field: str = "id",
                        capacity: int = _FIRST_CAPACITY) -> dd.DataFrame:
    """Connected components by :class:`UnionFind` on one worker, fed one edge partition
    after the other: a chain of tasks, each folding a partition into the state the one
    before passed on, so no task holds more edges than one partition.

    Parameters
    ----------
    edges : dask DataFrame or DocumentDataset
        ``(id_x, id_y)`` integer edges, in any number of partitions.
    capacity : int
        Distinct ids the state has room for before it first grows.

    Returns
    -------
    dask DataFrame
        One partition: ``(id, group)`` for every id in an edge, in order of first
        appearance; ``group`` is the component's lowest id.

    Examples
    --------
    >>> edges = dd.from_pandas(pd.DataFrame({"id_x": [5, 9, 2], "id_y": [9, 7, 3]}),
    ...                        npartitions=2)
    >>> streamed_components(edges).compute().values.tolist()
    [[5, 5], [9, 5], [7, 5], [2, 2], [3, 2]]
    """
    x, y = EDGE_FIELDS
    df = edges.df if isinstance(edges, DocumentDataset) else edges
    step = functools.partial(delayed_task, phase="components", scope="fuzzy_dedup")
    state = step(_start_union_find)(capacity)
    for part in df[[x, y]].to_delayed():
        state = step(_fold_partition)(state, part)
    meta = pd.DataFrame({id_field: pd.Series([], dtype=np.int64),
                         GROUP_FIELD: pd.Series([], dtype=np.int64)})
    return dd.from_delayed([step(_components_frame)(state, id_field)], meta=meta,
                           verify_meta=False)


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

def local_id_capacity(memory: WorkerMemory | None = None) -> int:
    """Distinct ids :class:`UnionFind` can take on one worker of ``memory`` (default: the
    current cluster's, :func:`~curator_dask.io.planner.worker_memory`): the smallest
    worker's task budget at :data:`UNION_FIND_BYTES_PER_ID`, or without a memory limit
    the same share of this machine's memory.

    >>> from curator_dask.io.planner import WorkerMemory
    >>> local_id_capacity(WorkerMemory(2, 1, 2**30)) // 10**5
    55
    """
    memory = with_known_limit(memory or worker_memory())
    return min(task_budget(memory) // UNION_FIND_BYTES_PER_ID, _MOST_LOCAL_IDS)


def connected_components(edges, *, id_field: str = "id",
                         max_local_edges: int | None = None,
                         num_edges: int | None = None,
                         num_ids: int | None = None) -> dd.DataFrame:
    """``(id, group)`` for every document in an edge; ``group`` is its component's lowest id.

    Parameters
    ----------
    edges : dask DataFrame or DocumentDataset
        ``(id_x, id_y)`` integer edges, from :class:`~curator_dask.dedup.fuzzy.LSH` or
        :func:`~curator_dask.dedup.fuzzy.check_false_positives`.
    max_local_edges : int, optional
        Up to this many edges, exact union-find on one worker, fed a partition of edges
        at a time (:func:`streamed_components`); beyond it, the distributed large-star /
        small-star algorithm. Both give identical groups. Default: union-find while the
        distinct ids of the edges (at most twice the edges, and at most ``num_ids``) fit
        the smallest worker's memory (:func:`local_id_capacity`).
    num_edges : int, optional
        The edge count if known (the workflow knows it from its cache); otherwise it is
        counted, which computes the edges once.
    num_ids : int, optional
        At most this many distinct ids are in the edges: the number of documents, when
        it is known. A bound that is too low costs memory, never a wrong group.

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
    most_ids = 2 * num_edges if num_ids is None else min(2 * num_edges, num_ids)
    if max_local_edges is not None:
        local, capacity = num_edges <= max_local_edges, f"{max_local_edges} edges"
    else:
        ids_that_fit = local_id_capacity()
        local, capacity = most_ids <= ids_that_fit, f"{ids_that_fit} ids"
    if local:
        logger.info("connected components: %d edges among at most %d ids, union-find on "
                    "one worker", num_edges, most_ids)
        return streamed_components(df[[x, y]], id_field=id_field)
    logger.info("connected components: %d edges among at most %d ids, more than union-find "
                "on one worker takes (%s), distributed large-star/small-star", num_edges,
                most_ids, capacity)
    return distributed_components(df[[x, y]], id_field=id_field)
