"""LSH: band choice, bucket ids, and edges from buckets to their lowest id."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.dedup.fuzzy import LSH, band_buckets, lsh_probability, optimal_bands
from curator_dask.dedup.fuzzy.lsh import planned_bands_per_iteration
from curator_dask.dedup.fuzzy.minhash import SIGNATURE_FIELD, signature_series
from curator_dask.io.planner import WorkerMemory


def signatures(matrix, ids, npartitions=1) -> DocumentDataset:
    matrix = np.asarray(matrix, dtype=np.uint32)
    df = pd.DataFrame({"id": np.asarray(ids, dtype=np.int64),
                       SIGNATURE_FIELD: signature_series(matrix)})
    return DocumentDataset.from_pandas(df, npartitions=npartitions)


def edge_set(ds_or_df) -> set[tuple[int, int]]:
    df = ds_or_df.df if isinstance(ds_or_df, DocumentDataset) else ds_or_df
    return set(map(tuple, df.compute().values.tolist()))


def noisy_copies(rng, families: int, width: int, rows: int):
    """Signatures of ``rows`` documents, each a copy of one of ``families`` with 30% of
    its values replaced at random, and their distinct random ids."""
    bases = rng.integers(0, 50, size=(families, width), dtype=np.uint32)
    matrix = bases[rng.integers(0, families, size=rows)]
    noise = rng.random(matrix.shape) < 0.3
    matrix = np.where(noise, rng.integers(0, 2**32, size=matrix.shape), matrix).astype(np.uint32)
    return matrix, rng.permutation(10**6)[:rows]


@pytest.mark.parametrize("threshold, num_hashes", [(0.8, 260), (0.5, 128), (0.9, 260),
                                                   (0.7, 200), (0.3, 64), (0.95, 100)])
def test_optimal_bands_agrees_with_datasketch(threshold, num_hashes):
    lsh = pytest.importorskip("datasketch.lsh")
    assert optimal_bands(threshold, num_hashes) == lsh._optimal_param(threshold, num_hashes,
                                                                      0.5, 0.5)


def test_optimal_bands_puts_the_steepest_point_near_the_threshold():
    for threshold in (0.5, 0.7, 0.85):
        b, r = optimal_bands(threshold, 256)
        assert b * r <= 256
        below, above = lsh_probability([threshold - 0.15, threshold + 0.15], b, r)
        assert below < 0.5 < above


def test_optimal_bands_rejects_thresholds_outside_0_1():
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        optimal_bands(1.0, 128)


def test_band_buckets_are_equal_exactly_when_the_band_values_are():
    rng = np.random.default_rng(0)
    matrix = rng.integers(0, 2**32, size=(1000, 12), dtype=np.uint32)
    matrix[500:, 4:8] = matrix[:500, 4:8]  # rows i and i+500 share band 1 only
    ids = band_buckets(matrix, [0, 1, 2], 4)
    assert ids.dtype == np.uint64 and ids.shape == (1000, 3)
    assert (ids[:500, 1] == ids[500:, 1]).all()
    assert not (ids[:500, 0] == ids[500:, 0]).any()
    assert len(np.unique(ids[:500])) == 1500  # no collisions otherwise


def test_the_same_values_in_different_bands_get_different_buckets():
    matrix = np.tile(np.arange(4, dtype=np.uint32), (3, 2))  # band 0 == band 1 values
    ids = band_buckets(matrix, [0, 1], 4)
    assert (ids[:, 0] != ids[:, 1]).all()


def test_band_buckets_need_enough_signature_columns():
    with pytest.raises(ValueError, match="num_hashes >= num_bands"):
        band_buckets(np.zeros((2, 10), np.uint32), [0, 1, 2], 4)


def test_bucket_members_are_linked_to_the_lowest_id_not_to_each_other():
    base = np.arange(8, dtype=np.uint32)
    matrix = [base, base, base + 100, base, base + 200]  # ids 9, 3, 4, 7, 1
    lsh = LSH(num_bands=2, minhashes_per_band=4)
    assert edge_set(lsh.edges(signatures(matrix, [9, 3, 4, 7, 1])).df.drop_duplicates()) == {
        (3, 9), (3, 7)}


def test_a_pair_sharing_only_one_band_is_found():
    rng = np.random.default_rng(1)
    matrix = rng.integers(0, 2**32, size=(2, 20), dtype=np.uint32)
    matrix[1, 15:20] = matrix[0, 15:20]
    lsh = LSH(num_bands=4, minhashes_per_band=5, bands_per_iteration=1)
    assert edge_set(lsh.edges(signatures(matrix, [10, 20])).df) == {(10, 20)}
    assert edge_set(lsh.band_edges(signatures(matrix, [10, 20]), range(0, 3))) == set()


def test_an_empty_partition_gives_no_edges_and_no_error():
    base = np.arange(8, dtype=np.uint32)
    ds = signatures([base, base + 100, base], [1, 2, 3], npartitions=3)
    emptied = DocumentDataset(ds.df.map_partitions(lambda df: df[df["id"] != 2]))
    lsh = LSH(num_bands=2, minhashes_per_band=4)
    assert edge_set(lsh.edges(emptied).df.drop_duplicates()) == {(1, 3)}


@pytest.mark.slow
def test_edges_do_not_depend_on_partitions_or_bands_per_iteration():
    matrix, ids = noisy_copies(np.random.default_rng(2), families=40, width=12, rows=300)
    results = []
    for npartitions, per_iteration in ((1, 6), (7, 1), (13, 4)):
        lsh = LSH(num_bands=6, minhashes_per_band=2, bands_per_iteration=per_iteration)
        edges = lsh.edges(signatures(matrix, ids, npartitions)).df.drop_duplicates()
        results.append(edge_set(edges))
    assert results[0] and results[0] == results[1] == results[2]
    assert all(x < y for x, y in results[0])


@pytest.mark.slow
def test_small_and_large_bucket_shuffles_on_a_cluster_find_the_same_edges(client):
    # 3 x 3 pieces run as plain tasks, 13 x 13 as a P2P shuffle: the same edges either way.
    matrix, ids = noisy_copies(np.random.default_rng(5), families=30, width=8, rows=200)
    lsh = LSH(num_bands=4, minhashes_per_band=2, bands_per_iteration=4)
    small, large = (edge_set(lsh.edges(signatures(matrix, ids, n)).df.drop_duplicates())
                    for n in (3, 13))
    assert small and small == large


def test_lsh_needs_integer_ids():
    df = pd.DataFrame({"id": ["a"], SIGNATURE_FIELD: signature_series(np.zeros((1, 4), np.uint32))})
    with pytest.raises(TypeError, match="AddId"):
        LSH(num_bands=2, minhashes_per_band=2).edges(DocumentDataset.from_pandas(df))


@given(bands=st.integers(1, 64), documents=st.integers(0, 10**11),
       workers=st.integers(1, 64), limit=st.integers(2**26, 2**38))
def test_planned_bands_shuffle_no_more_pairs_than_the_cluster_holds(bands, documents,
                                                                    workers, limit):
    memory = WorkerMemory(workers=workers, threads=1, limit=limit)
    per = planned_bands_per_iteration(bands, documents, memory)
    assert 1 <= per <= bands
    pairs = 16 * max(documents, 1)  # an id and a bucket id, 8 bytes each, a band
    if per > 1:
        assert per * pairs <= workers * limit  # the shuffle fits the cluster's memory
    if per < bands:
        assert (per + 1) * pairs > workers * limit  # and takes as many bands as fit
    assert planned_bands_per_iteration(bands, documents * 2 + 1, memory) <= per


def test_without_a_document_count_bands_go_five_at_a_time():
    assert [len(r) for r in LSH(num_bands=12).iterations()] == [5, 5, 2]
    assert [len(r) for r in LSH(num_bands=12, bands_per_iteration=4).iterations(10)] == [4] * 3


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_a_given_bands_per_iteration_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match="bands_per_iteration must be a positive integer"):
        LSH(bands_per_iteration=value)
