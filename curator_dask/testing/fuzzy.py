"""A generated corpus with planted near-duplicates, and exact similarities to check against.

Tests and the benchmark need documents whose true similarities are known. Each *family*
is a base document (words drawn uniformly from a random vocabulary) and a few variants
of it, each made by editing a given fraction of its words (replace, delete or insert a
random word). Documents of different families share no 24-character shingle in practice:
that would take several consecutive words in common, each one of thousands.

:func:`similar_pairs` finds every pair above a similarity with Python sets (prefix
filtering keeps that brute force affordable), independently of the numba code under test.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

import numpy as np
import pandas as pd

from curator_dask.errors import InvalidArgumentError

__all__ = ["jaccard", "planted_near_duplicates", "shingles", "similar_pairs"]

_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _vocabulary(rng: np.random.Generator, size: int) -> np.ndarray:
    lengths = rng.integers(2, 11, size=size)
    letters = rng.choice(_LETTERS, size=int(lengths.sum()))
    ends = np.cumsum(lengths)
    return np.array(
        ["".join(letters[e - n : e]) for n, e in zip(lengths, ends, strict=True)], dtype=object
    )


def _mutate(words: list[str], rate: float, rng: np.random.Generator,
            vocabulary: np.ndarray) -> list[str]:
    out: list[str] = []
    edits = rng.random(len(words)) < rate
    kinds = rng.integers(0, 3, size=len(words))
    fresh = vocabulary[rng.integers(0, len(vocabulary), size=len(words))]
    for word, edit, kind, new in zip(words, edits, kinds, fresh, strict=True):
        if not edit:
            out.append(word)
        elif kind == 0:  # replace
            out.append(new)
        elif kind == 1:  # insert before
            out.extend((new, word))
        # kind == 2: delete
    return out


def planted_near_duplicates(num_families: int, *, variants: tuple[int, int] = (0, 3),
                            words: tuple[int, int] = (150, 400),
                            mutation_rates: tuple[float, float] = (0.0, 0.12),
                            vocabulary_size: int = 20_000, seed: int = 0,
                            shuffle: bool = True) -> pd.DataFrame:
    """Families of a base document and its edited copies.

    Parameters
    ----------
    num_families : int
        Base documents.
    variants : (int, int)
        Each base gets between these many edited copies (inclusive), uniformly.
    words : (int, int)
        Words per base document (inclusive range); ~6.5 characters a word with spaces.
    mutation_rates : (float, float)
        Each copy edits a fraction of words drawn uniformly from this range. A 24-character
        shingle spans about 4.5 words, so a rate ``p`` leaves Jaccard similarity near
        ``q / (2 - q)`` with ``q = (1 - p) ** 4.5``: 0.01 -> 0.92, 0.05 -> 0.66.
    seed : int
    shuffle : bool, default True
        Shuffle rows so families are spread over partitions.

    Returns
    -------
    pandas.DataFrame
        ``id`` (0..n-1 in row order), ``text``, ``family`` and ``mutation_rate`` (0 for a base).

    Examples
    --------
    >>> df = planted_near_duplicates(3, variants=(1, 1), words=(5, 5), seed=1)
    >>> len(df), sorted(df["family"].value_counts().tolist())
    (6, [2, 2, 2])
    """
    rng = np.random.default_rng(seed)
    vocabulary = _vocabulary(rng, vocabulary_size)
    texts, families, rates = [], [], []
    for family in range(num_families):
        n_words = int(rng.integers(words[0], words[1] + 1))
        base = list(vocabulary[rng.integers(0, len(vocabulary), size=n_words)])
        texts.append(" ".join(base))
        families.append(family)
        rates.append(0.0)
        for _ in range(int(rng.integers(variants[0], variants[1] + 1))):
            rate = float(rng.uniform(*mutation_rates))
            texts.append(" ".join(_mutate(base, rate, rng, vocabulary)))
            families.append(family)
            rates.append(rate)
    df = pd.DataFrame({"text": pd.array(texts, dtype="str"), "family": families,
                       "mutation_rate": rates})
    if shuffle:
        df = df.iloc[rng.permutation(len(df))].reset_index(drop=True)
    df.insert(0, "id", np.arange(len(df), dtype=np.int64))
    return df


def shingles(text: str, char_ngrams: int = 24) -> set[str]:
    """The set of ``char_ngrams``-character substrings (a shorter text is one shingle)."""
    if not text:
        return set()
    if len(text) <= char_ngrams:
        return {text}
    return {text[i:i + char_ngrams] for i in range(len(text) - char_ngrams + 1)}


def jaccard(a: set, b: set) -> float:
    """Jaccard similarity of two sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def similar_pairs(texts, ids=None, *, char_ngrams: int = 24,
                  min_jaccard: float = 0.5) -> pd.DataFrame:
    """Every pair of texts with Jaccard similarity at least ``min_jaccard``, exactly.

    Brute force made affordable by prefix filtering (Bayardo et al., "Scaling up all
    pairs similarity search", WWW 2007): order every set's shingles by one global order;
    two sets with similarity ``>= t`` must share a shingle among the first
    ``|x| - ceil(t * |x|) + 1`` of each. Only pairs sharing a prefix shingle are compared,
    with Python sets, so no pair at or above the threshold is missed.

    Returns
    -------
    pandas.DataFrame
        ``id_a < id_b`` and ``jaccard``, sorted by ids.

    Examples
    --------
    >>> similar_pairs(["abcdef", "abcdeX", "zzzzzz"], char_ngrams=3)
       id_a  id_b  jaccard
    0     0     1      0.6
    """
    if not 0.0 < min_jaccard <= 1.0:
        raise InvalidArgumentError(f"min_jaccard must be in (0, 1], got {min_jaccard!r}")
    texts = list(texts)
    ids = list(range(len(texts))) if ids is None else [int(i) for i in ids]
    sets = [shingles(t, char_ngrams) for t in texts]
    index: dict[str, list[int]] = defaultdict(list)
    for position, shingle_set in enumerate(sets):
        size = len(shingle_set)
        prefix = size - int(np.ceil(min_jaccard * size - 1e-9)) + 1
        # Any total order works, if it is the same for every set.
        for shingle in sorted(shingle_set, key=lambda x: (hash(x), x))[:prefix]:
            index[shingle].append(position)
    candidates: set[tuple[int, int]] = set()
    for positions in index.values():
        if len(positions) > 1:
            candidates.update(combinations(positions, 2))
    rows = []
    for i, j in candidates:
        similarity = jaccard(sets[i], sets[j])
        if similarity >= min_jaccard:
            a, b = sorted((ids[i], ids[j]))
            rows.append((a, b, similarity))
    out = pd.DataFrame(rows, columns=["id_a", "id_b", "jaccard"])
    return out.sort_values(["id_a", "id_b"], ignore_index=True)
