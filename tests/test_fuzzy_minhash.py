"""MinHash stage: signatures per partition, their column, and an unbiased Jaccard estimate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from curator_dask import DocumentDataset
from curator_dask.dedup.exact import NullTextError
from curator_dask.dedup.fuzzy import SIGNATURE_FIELD, MinHash, signature_matrix
from curator_dask.dedup.fuzzy.minhash_kernel import generate_permutations, minhash32
from curator_dask.testing.fuzzy import planted_near_duplicates, similar_pairs

TEXTS = ["the cat sat on the mat and looked around", "the cat sat on a mat and looked around",
         "", "short", "ünïcödé text with accents, repeated: ünïcödé text with accents"]


def dataset(texts, npartitions=2, ids=None):
    ids = list(range(100, 100 + len(texts))) if ids is None else ids
    return DocumentDataset.from_pandas(pd.DataFrame({"id": ids, "text": texts}),
                                       npartitions=npartitions)


def test_signatures_are_the_kernel_with_nemo_curator_seeds():
    out = MinHash(seed=7, char_ngrams=5, num_hashes=16)(dataset(TEXTS, 3)).df.compute()
    a, b = generate_permutations(7, 16)
    expected = minhash32(TEXTS, a, b, seed=int(a[0]), char_ngrams=5)
    assert out["id"].tolist() == list(range(100, 105))
    np.testing.assert_array_equal(signature_matrix(out[SIGNATURE_FIELD]), expected)


def test_output_is_id_and_one_arrow_list_column_matching_the_meta():
    ddf = MinHash(char_ngrams=5, num_hashes=8)(dataset(TEXTS)).df
    out = ddf.compute()
    assert list(out.columns) == ["id", SIGNATURE_FIELD]
    assert out.dtypes.equals(ddf._meta.dtypes)
    assert out[SIGNATURE_FIELD].dtype == pd.ArrowDtype(pa.list_(pa.uint32()))
    assert out[SIGNATURE_FIELD].map(len).eq(8).all()


def test_64_bit_signatures_are_uint64_below_the_mersenne_prime():
    out = MinHash(char_ngrams=5, num_hashes=8, use_64_bit_hash=True)(dataset(TEXTS)).df.compute()
    matrix = signature_matrix(out[SIGNATURE_FIELD])
    assert matrix.dtype == np.uint64 and matrix.shape == (5, 8)
    assert int(matrix.max()) < (1 << 61) - 1


def test_empty_texts_share_the_all_zero_signature():
    out = MinHash(char_ngrams=5, num_hashes=8)(dataset(["", "", "x"])).df.compute()
    matrix = signature_matrix(out[SIGNATURE_FIELD])
    assert (matrix[:2] == 0).all() and (matrix[2] != 0).any()


def test_null_text_is_an_error_naming_the_document():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"id": [1, 2], "text": ["a b c", None]}))
    with pytest.raises(NullTextError, match="id=2"):
        MinHash(char_ngrams=3, num_hashes=4)(ds).df.compute()


def test_missing_columns_are_named_before_anything_runs():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a"]}))
    with pytest.raises(KeyError, match="AddId"):
        MinHash()(ds)


def test_signature_matrix_is_a_zero_copy_view_and_rejects_ragged_rows():
    out = MinHash(char_ngrams=5, num_hashes=8)(dataset(TEXTS, 1)).df.compute()
    column = out[SIGNATURE_FIELD]
    matrix = signature_matrix(column)
    assert np.shares_memory(matrix, column.array._pa_array.chunk(0).flatten().to_numpy())
    lists = pa.array([[1, 2], [3]], pa.list_(pa.uint32()))
    ragged = pd.Series(pd.arrays.ArrowExtensionArray(lists))
    with pytest.raises(ValueError, match="must all have 2 values"):
        signature_matrix(ragged)


def test_signatures_do_not_depend_on_partitioning():
    texts = planted_near_duplicates(40, seed=5)["text"].tolist()
    stage = MinHash(char_ngrams=24, num_hashes=26)
    one = stage(dataset(texts, 1)).df.compute()
    many = stage(dataset(texts, 13)).df.compute()
    np.testing.assert_array_equal(signature_matrix(one[SIGNATURE_FIELD]),
                                  signature_matrix(many[SIGNATURE_FIELD]))


@pytest.mark.slow
def test_estimated_jaccard_is_unbiased():
    # Over many pairs of known similarity, the fraction of equal signature values
    # estimates the Jaccard similarity with zero mean error (within a 99.9% interval).
    corpus = planted_near_duplicates(300, variants=(1, 3), words=(60, 120),
                                     mutation_rates=(0.0, 0.2), seed=11)
    pairs = similar_pairs(corpus["text"], corpus["id"], min_jaccard=0.05)
    assert len(pairs) > 500
    assert pairs["jaccard"].between(0.05, 0.95).mean() > 0.8  # a spread of similarities
    out = MinHash(seed=3)(dataset(corpus["text"].tolist(), 4, corpus["id"].tolist()))
    out = out.df.compute().set_index("id")
    matrix = signature_matrix(out[SIGNATURE_FIELD])
    row = pd.Series(np.arange(len(out)), index=out.index)
    a, b = matrix[row[pairs["id_a"]].to_numpy()], matrix[row[pairs["id_b"]].to_numpy()]
    errors = (a == b).mean(axis=1) - pairs["jaccard"].to_numpy()
    standard_error = errors.std(ddof=1) / np.sqrt(len(errors))
    assert abs(errors.mean()) < 3.3 * standard_error
    assert abs(errors.mean()) < 0.005
    # Each estimate is a mean of 260 Bernoulli draws: spread as the binomial predicts.
    predicted = np.sqrt((pairs["jaccard"] * (1 - pairs["jaccard"])).mean() / 260)
    assert 0.8 * predicted < errors.std() < 1.25 * predicted
