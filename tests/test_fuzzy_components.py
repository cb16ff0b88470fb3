"""Connected components: union-find and the distributed algorithm agree on random graphs."""

from __future__ import annotations

import itertools

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from dask.sizeof import sizeof
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask.dedup.fuzzy import (
    connected_components,
    distributed_components,
    union_find_components,
)
from curator_dask.dedup.fuzzy.components import (
    UNION_FIND_BYTES_PER_ID,
    UnionFind,
    local_id_capacity,
    streamed_components,
)
from curator_dask.io.planner import WorkerMemory


def random_graph(seed: int, nodes: int, edges: int):
    rng = np.random.default_rng(seed)
    ids = rng.choice(10**12, size=nodes, replace=False).astype(np.int64)
    return ids[rng.integers(0, nodes, edges)], ids[rng.integers(0, nodes, edges)]


def edge_frame(x, y, npartitions: int) -> dd.DataFrame:
    return dd.from_pandas(pd.DataFrame({"id_x": x, "id_y": y}), npartitions=npartitions)


def labels(df: pd.DataFrame) -> pd.Series:
    return df.set_index("id")["group"].sort_index()


def reference(x, y) -> pd.Series:
    """Components by breadth-first search, each labelled with its lowest id."""
    neighbours: dict[int, set[int]] = {}
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    label: dict[int, int] = {}
    for start in sorted(neighbours):
        if start in label:
            continue
        frontier = [start]
        label[start] = start
        while frontier:
            node = frontier.pop()
            for other in neighbours[node]:
                if other not in label:
                    label[other] = start
                    frontier.append(other)
    return pd.Series(label).sort_index()


GRAPHS = [  # (seed, nodes, edges): sparse forests, a giant component, isolated pairs
    (0, 2000, 600), (1, 1500, 1400), (2, 300, 900), (3, 5000, 2500), (4, 40, 20)]


@pytest.mark.parametrize("seed, nodes, edges", GRAPHS)
def test_union_find_matches_breadth_first_search_and_scipy(seed, nodes, edges):
    x, y = random_graph(seed, nodes, edges)
    ids, groups = union_find_components(x, y)
    expected = reference(x, y)
    assert pd.Series(groups, index=ids).sort_index().equals(expected)
    scipy_graph = pytest.importorskip("scipy.sparse.csgraph")
    from scipy.sparse import coo_matrix

    nodes = np.unique(np.concatenate([x, y]))
    index = np.searchsorted(nodes, np.concatenate([x, y]))
    matrix = coo_matrix((np.ones(len(x)), (index[:len(x)], index[len(x):])),
                        shape=(len(nodes), len(nodes)))
    _, component = scipy_graph.connected_components(matrix, directed=False)
    lowest = pd.Series(nodes).groupby(component).transform("min").to_numpy()
    assert (pd.Series(groups, index=ids).sort_index().to_numpy() == lowest).all()


#: Ids from both ends of int64, so that hashing and ordering see extremes and negatives.
ID_POOL = st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=40, unique=True)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), pool=ID_POOL)
def test_union_find_equals_breadth_first_search_on_generated_graphs(data, pool):
    edges = data.draw(st.lists(st.tuples(st.sampled_from(pool), st.sampled_from(pool)),
                               max_size=60))
    x = np.array([a for a, _ in edges], dtype=np.int64)
    y = np.array([b for _, b in edges], dtype=np.int64)
    ids, groups = union_find_components(x, y)
    # Every id once, in order of first appearance: x[0], y[0], x[1], ...
    assert ids.tolist() == list(dict.fromkeys(np.column_stack([x, y]).ravel().tolist()))
    assert dict(zip(ids.tolist(), groups.tolist(), strict=True)) == reference(x, y).to_dict()


def edge_partitions(data, pool) -> list[pd.DataFrame]:
    """Edges over ``pool`` cut into partitions, some empty, ids repeated across them."""
    edges = data.draw(st.lists(st.tuples(st.sampled_from(pool), st.sampled_from(pool)),
                               max_size=60))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(edges)), max_size=6)))
    bounds = [0, *cuts, len(edges)]
    return [pd.DataFrame({"id_x": np.array([a for a, _ in edges[i:j]], dtype=np.int64),
                          "id_y": np.array([b for _, b in edges[i:j]], dtype=np.int64)})
            for i, j in itertools.pairwise(bounds)]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), pool=ID_POOL, capacity=st.integers(1, 64))
def test_union_find_fed_partition_by_partition_equals_breadth_first_search(data, pool,
                                                                           capacity):
    # A small first capacity makes the state grow while partitions are folded in.
    parts = edge_partitions(data, pool)
    state = UnionFind(capacity)
    for part in parts:
        state.add_partition(part)
    ids, groups = state.components()
    edges = pd.concat(parts)
    assert len(ids) == len(set(ids.tolist())) == len(state)
    assert (dict(zip(ids.tolist(), groups.tolist(), strict=True))
            == reference(edges["id_x"], edges["id_y"]).to_dict())


@settings(max_examples=25, deadline=None)
@given(data=st.data(), pool=ID_POOL)
def test_streamed_components_over_dask_partitions_equal_breadth_first_search(data, pool):
    parts = edge_partitions(data, pool)
    edges = dd.from_delayed([dask.delayed(part) for part in parts], meta=parts[0].iloc[:0],
                            verify_meta=False)
    out = streamed_components(edges).compute()
    assert out["id"].is_unique
    expected = pd.concat(parts)
    assert (out.set_index("id")["group"].to_dict()
            == reference(expected["id_x"], expected["id_y"]).to_dict())


def test_union_find_memory_follows_the_distinct_ids_not_the_edges():
    x, y = random_graph(3, 5000, 2500)
    once = UnionFind().add_edges(x, y)
    many = UnionFind()
    for _ in range(50):  # 50 times the edges, the same ids
        many.add_edges(x, y)
    assert sizeof(many) == sizeof(once)
    assert [a.tolist() for a in many.components()] == [a.tolist() for a in once.components()]


@pytest.mark.slow
@pytest.mark.parametrize("seed, nodes, edges", GRAPHS)
def test_distributed_components_equal_union_find(seed, nodes, edges):
    x, y = random_graph(seed, nodes, edges)
    ids, groups = union_find_components(x, y)
    out = labels(distributed_components(edge_frame(x, y, 1 + seed * 2)).compute())
    assert out.equals(pd.Series(groups, index=ids).sort_index().rename("group")
                      .rename_axis("id"))


@pytest.mark.slow
def test_distributed_components_on_a_long_path_in_shuffled_order():
    # The worst case for label propagation: diameter n - 1.
    order = np.random.default_rng(7).permutation(3000).astype(np.int64)
    out = labels(distributed_components(edge_frame(order[:-1], order[1:], 6)).compute())
    assert len(out) == 3000 and (out == 0).all()


def test_self_loops_and_repeated_edges_change_nothing():
    x = np.array([5, 5, 9, 9, 2, 2], dtype=np.int64)
    y = np.array([9, 9, 5, 9, 3, 2], dtype=np.int64)
    expected = {2: 2, 3: 2, 5: 5, 9: 5}
    assert dict(zip(*[a.tolist() for a in union_find_components(x, y)], strict=True)) == expected
    assert labels(distributed_components(edge_frame(x, y, 2)).compute()).to_dict() == expected


@pytest.mark.parametrize("max_local_edges", [0, 10**9])
def test_the_size_threshold_picks_an_algorithm_with_the_same_result(max_local_edges):
    x, y = random_graph(11, 800, 500)
    out = connected_components(edge_frame(x, y, 4), max_local_edges=max_local_edges)
    ids, groups = union_find_components(x, y)
    assert labels(out.compute()).tolist() == pd.Series(groups, index=ids).sort_index().tolist()
    assert out.npartitions == (1 if max_local_edges else 4)


def test_no_edges_no_groups():
    empty = np.array([], dtype=np.int64)
    assert len(connected_components(edge_frame(empty, empty, 1)).compute()) == 0
    assert len(distributed_components(edge_frame(empty, empty, 1)).compute()) == 0


def test_the_choice_of_algorithm_follows_the_workers_memory():
    # Union-find on one worker takes as many distinct ids as fit the smallest worker's
    # budget (at most two an edge, at most num_ids); more go to the distributed
    # algorithm, with the same groups.
    small, big = WorkerMemory(4, 1, 2**30), WorkerMemory(4, 1, 16 * 2**30)
    assert 0 < local_id_capacity(small) < local_id_capacity(big)
    assert local_id_capacity(small) * UNION_FIND_BYTES_PER_ID < 2**30
    x, y = random_graph(5, 300, 200)
    ids, groups = union_find_components(x, y)
    expected = pd.Series(groups, index=ids).sort_index().tolist()
    beyond = local_id_capacity() // 2 + 1  # edges whose ends might not fit
    for num_edges, num_ids, partitions in ((len(x), None, 1), (beyond, None, 3),
                                           (beyond, 300, 1)):
        out = connected_components(edge_frame(x, y, 3), num_edges=num_edges, num_ids=num_ids)
        assert out.npartitions == partitions
        assert labels(out.compute()).tolist() == expected
