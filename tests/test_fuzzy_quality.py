"""Fuzzy dedup finds planted near-duplicates, checked against brute-force Jaccard similarity.

The corpus: families of a random base document and up to four copies with 0-6% of their
words edited, so pair similarities spread from 1.0 down to ~0.4, and documents of different
families share nothing. The truth is computed with Python sets (``synthetic``), not with
the code under test.
"""

from __future__ import annotations

from itertools import combinations

import pandas as pd
import pytest

from curator_dask import DocumentDataset
from curator_dask.dedup.fuzzy import FuzzyDuplicates
from curator_dask.testing.fuzzy import (
    jaccard,
    planted_near_duplicates,
    shingles,
    similar_pairs,
)


@pytest.fixture(scope="module")
def corpus() -> pd.DataFrame:
    return planted_near_duplicates(500, variants=(0, 4), words=(100, 200),
                                   mutation_rates=(0.0, 0.06), seed=2026)


@pytest.fixture(scope="module")
def similar(corpus) -> pd.DataFrame:
    """Every pair with Jaccard >= 0.9 (exact)."""
    return similar_pairs(corpus["text"], corpus["id"], min_jaccard=0.9)


def groups_of(corpus, npartitions: int, **options) -> pd.Series:
    ds = DocumentDataset.from_pandas(corpus[["id", "text"]], npartitions=npartitions)
    groups = FuzzyDuplicates(**options).identify(ds).df.compute()
    return groups.set_index("id")["group"].sort_index()


@pytest.fixture(scope="module")
def default_groups(corpus) -> pd.Series:
    return groups_of(corpus, 4)


def grouped_pairs(corpus, groups: pd.Series) -> pd.DataFrame:
    """Every pair of documents placed in one group, with its exact similarity."""
    text = corpus.set_index("id")["text"]
    rows = []
    for members in groups.groupby(groups).groups.values():
        sets = {i: shingles(text[i]) for i in members}
        rows += [(a, b, jaccard(sets[a], sets[b])) for a, b in combinations(sorted(members), 2)]
    return pd.DataFrame(rows, columns=["id_a", "id_b", "jaccard"])


@pytest.mark.slow
def test_recall_of_pairs_at_or_above_0_9_is_at_least_0_97(similar, default_groups):
    assert len(similar) >= 200
    a = similar["id_a"].map(default_groups)
    b = similar["id_b"].map(default_groups)
    recall = ((a == b) & a.notna()).mean()
    assert recall >= 0.97


def test_almost_no_pair_under_0_5_shares_a_group(corpus, default_groups):
    pairs = grouped_pairs(corpus, default_groups)
    assert len(pairs) >= 500
    assert (pairs["jaccard"] < 0.5).mean() <= 0.01


def test_documents_of_different_families_never_share_a_group(corpus, default_groups):
    family = corpus.set_index("id")["family"]
    assert (family[default_groups.index].groupby(default_groups.to_numpy()).nunique() == 1).all()


def test_one_and_thirteen_partitions_give_the_same_groups(corpus, default_groups):
    assert groups_of(corpus, 1).equals(default_groups)
    assert groups_of(corpus, 13).equals(default_groups)


@pytest.mark.slow
def test_false_positive_check_keeps_recall_and_drops_dissimilar_pairs(corpus, similar,
                                                                       default_groups):
    checked = groups_of(corpus, 4, false_positive_check=True, jaccard_threshold=0.8)
    a, b = similar["id_a"].map(checked), similar["id_b"].map(checked)
    assert ((a == b) & a.notna()).mean() >= 0.97
    pairs = grouped_pairs(corpus, checked)
    assert (pairs["jaccard"] < 0.5).sum() == 0
    assert len(checked) < len(default_groups)  # candidates under 0.8 were cut
