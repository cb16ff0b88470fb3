"""The false-positive check: exact Jaccard of char n-gram sets, joined to the edges."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask import DocumentDataset
from curator_dask.dedup.fuzzy import char_ngram_jaccard, check_false_positives
from curator_dask.testing.fuzzy import jaccard, shingles


def random_texts(rng, n):
    alphabet = [*list("abc déf ğü"), "😀"]
    return ["".join(rng.choice(alphabet, size=rng.integers(0, 40))) for _ in range(n)]


def test_matches_python_sets_on_random_unicode_short_and_empty_texts():
    rng = np.random.default_rng(0)
    a, b = random_texts(rng, 400), random_texts(rng, 400)
    b[::3] = [t[: len(t) // 2] + "x" + t[len(t) // 2 + 1:] for t in a[::3]]  # near pairs
    for width in (2, 5, 24):
        got = char_ngram_jaccard(a, b, width)
        expected = [
            jaccard(shingles(s, width), shingles(t, width)) for s, t in zip(a, b, strict=True)
        ]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="pairs need one of each"):
        char_ngram_jaccard(["a"], ["a", "b"], 3)


@pytest.mark.parametrize("num_edges", [3, None])  # broadcast, and the shuffle join
def test_check_keeps_only_pairs_at_or_above_the_threshold(num_edges):
    base = "the quick brown fox jumps over the lazy dog while the cat sleeps by the door"
    texts = {1: base, 2: base.replace("door", "door!"), 3: base[::-1], 4: "unrelated text",
             5: base}
    frame = pd.DataFrame({"id": list(texts), "text": list(texts.values())})
    ds = DocumentDataset.from_pandas(frame, npartitions=3)
    edges = dd.from_pandas(pd.DataFrame({"id_x": [1, 1, 1, 1, 2], "id_y": [2, 3, 5, 2, 5]}),
                           npartitions=2)
    out = check_false_positives(edges, ds, char_ngrams=5, jaccard_threshold=0.8,
                                num_edges=num_edges).compute()
    out = out.sort_values(["id_x", "id_y"])
    assert out[["id_x", "id_y"]].values.tolist() == [[1, 2], [1, 5], [2, 5]]
    expected = jaccard(shingles(texts[1], 5), shingles(texts[2], 5))
    assert 0.8 < expected < 1
    assert out["jaccard"].iloc[0] == pytest.approx(expected, rel=1e-6)
    assert out["jaccard"].iloc[1] == 1.0
