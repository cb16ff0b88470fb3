"""NeMo Curator's repetition filters: repeated lines, paragraphs and word n-grams.

The rules are Gopher's (Rae et al. 2021, "Scaling Language Models: Methods, Analysis &
Insights from Training Gopher", arXiv:2112.11446, appendix A.1.1, table A1: duplicate
line/paragraph fractions, top 2-4-gram and duplicate 5-10-gram character fractions);
names, parameters, defaults and scores follow NeMo Curator's ``heuristic_filter.py``.
For the rules exactly as the Gopher paper and datatrove state them, use
:class:`~curator_dask.stages.filters.gopher.GopherRepetitionFilter`.

Lines are ``text.split("\\n")`` without blank lines; paragraphs ``text.split("\\n\\n")``;
words ``text.split()``. N-grams are compared exactly (as word tuples), with one hash
table per document inside a compiled loop over the partition.
"""

from __future__ import annotations

import numpy as np

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.stages.filters.heuristic import check_lang
from curator_dask.text import (
    arrow_text,
    buffers,
    char_table,
    kernels,
    lengths,
    like_input,
    nonblank_lines,
    ratio,
    split_segments,
    words,
)

__all__ = [
    "RepeatedLinesByCharFilter",
    "RepeatedLinesFilter",
    "RepeatedParagraphsByCharFilter",
    "RepeatedParagraphsFilter",
    "RepeatingDuplicateNGramsFilter",
    "RepeatingTopNGramsFilter",
]


class _LowerBound(DocumentFilter):
    """A score that must reach a cutoff (``score >= cutoff``)."""

    _cutoff: float

    def keep(self, scores):
        return scores >= self._cutoff


def _unique_share(segments, by_chars: bool, empty: float) -> np.ndarray:
    first = segments.first_in_doc()
    if by_chars:
        nchars = segments.nchars
        return ratio(segments.per_doc_sum(nchars * first), segments.per_doc_sum(nchars),
                     empty=empty)
    return ratio(segments.per_doc_sum(first), segments.per_doc_count(), empty=empty)


class RepeatedLinesFilter(_LowerBound):
    """Drop documents where distinct lines are fewer than ``max_repeated_line_fraction``
    of the non-blank lines (the document would shrink by more than 30% in lines if
    duplicates were removed). Source: Gopher (Rae et al. 2021).

    Score: distinct lines / non-blank lines (lines compared unstripped); 0.0 when there
    is no non-blank line.

    Examples
    --------
    >>> import pandas as pd
    >>> RepeatedLinesFilter().score(pd.Series(["a\\nb\\na\\na", ""])).tolist()
    [0.5, 0.0]
    """

    name = "repeated_lines"

    def __init__(self, max_repeated_line_fraction: float = 0.7):
        self._cutoff = max_repeated_line_fraction

    def score(self, text):
        lines = nonblank_lines(arrow_text(text))
        return like_input(_unique_share(lines, by_chars=False, empty=0.0), text)


class RepeatedParagraphsFilter(_LowerBound):
    """Drop documents where distinct paragraphs are fewer than
    ``max_repeated_paragraphs_ratio`` of the paragraphs. Source: Gopher (Rae et al. 2021).

    Score: distinct paragraphs / paragraphs (empty paragraphs included, as in NeMo
    Curator; empty text is one empty paragraph and scores 1.0).

    Examples
    --------
    >>> import pandas as pd
    >>> RepeatedParagraphsFilter().score(pd.Series(["a\\n\\nb\\n\\na\\n\\na", ""])).tolist()
    [0.5, 1.0]
    """

    name = "repeated_paragraphs"

    def __init__(self, max_repeated_paragraphs_ratio: float = 0.7):
        self._cutoff = max_repeated_paragraphs_ratio

    def score(self, text):
        paragraphs = split_segments(arrow_text(text), "\n\n")
        return like_input(_unique_share(paragraphs, by_chars=False, empty=0.0), text)


class RepeatedLinesByCharFilter(_LowerBound):
    """Drop documents where the characters of distinct lines are fewer than
    ``max_repeated_lines_char_ratio`` of the characters of all non-blank lines. Source:
    Gopher (Rae et al. 2021).

    Score: characters in distinct lines / characters in non-blank lines; 0.0 when there
    is no non-blank line.

    Examples
    --------
    >>> import pandas as pd
    >>> RepeatedLinesByCharFilter().score(pd.Series(["aaa\\nb\\naaa", ""])).tolist()
    [0.5714285714285714, 0.0]
    """

    name = "repeated_lines_char"

    def __init__(self, max_repeated_lines_char_ratio: float = 0.8):
        self._cutoff = max_repeated_lines_char_ratio

    def score(self, text):
        lines = nonblank_lines(arrow_text(text))
        return like_input(_unique_share(lines, by_chars=True, empty=0.0), text)


class RepeatedParagraphsByCharFilter(_LowerBound):
    """Drop documents where the characters of distinct paragraphs are fewer than
    ``max_repeated_paragraphs_char_ratio`` of all paragraph characters. Source: Gopher
    (Rae et al. 2021).

    Score: characters in distinct paragraphs / characters in paragraphs; 0.0 when the
    paragraphs hold no character (empty text, or only paragraph breaks).

    Examples
    --------
    >>> import pandas as pd
    >>> RepeatedParagraphsByCharFilter().score(pd.Series(["aaa\\n\\nb\\n\\naaa", ""])).tolist()
    [0.5714285714285714, 0.0]
    """

    name = "repeated_paragraphs_char"

    def __init__(self, max_repeated_paragraphs_char_ratio: float = 0.8):
        self._cutoff = max_repeated_paragraphs_char_ratio

    def score(self, text):
        paragraphs = split_segments(arrow_text(text), "\n\n")
        return like_input(_unique_share(paragraphs, by_chars=True, empty=0.0), text)


class RepeatingTopNGramsFilter(DocumentFilter):
    """Drop documents where the most frequent word ``n``-gram covers more than
    ``max_repeating_ngram_ratio`` of the characters. Source: Gopher (Rae et al. 2021),
    table A1: top 2-, 3-, 4-gram character fractions 0.20, 0.18, 0.16.

    Score, as NeMo Curator computes it: take the most frequent n-gram, join its words
    with single spaces, and measure how many characters deleting every (non-overlapping)
    occurrence of that string from the text removes, over the text's length. Ties go to
    the n-gram that occurs first (NeMo Curator's choice among ties depends on Python's
    string hashing and so varies between runs). A document with fewer than ``n`` words
    scores 1.0 (NeMo Curator's choice, so it is dropped).

    Examples
    --------
    >>> import pandas as pd
    >>> f = RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.2)
    >>> f.score(pd.Series(["a b a b c", "one"])).tolist()
    [0.6666666666666666, 1.0]
    """

    def __init__(self, n: int = 2, max_repeating_ngram_ratio: float = 0.2, lang: str = "en"):
        check_lang(lang)
        if n < 1:
            raise InvalidArgumentError(f"n must be at least 1, got {n}")
        self._n = n
        self._cutoff = max_repeating_ngram_ratio
        self.name = f"repeating_top_{n}grams"

    def score(self, text):
        arr = arrow_text(text)
        data, offsets = buffers(arr)
        removed = kernels.top_ngram_removed_chars(data, offsets, char_table("space"), self._n)
        scores = ratio(removed, lengths(arr), empty=1.0)
        scores[removed < 0] = 1.0
        return like_input(scores, text)

    def keep(self, scores):
        return scores <= self._cutoff


class RepeatingDuplicateNGramsFilter(DocumentFilter):
    """Drop documents where repeated word ``n``-grams cover more than
    ``max_repeating_duplicate_ngram_ratio`` of the characters. Source: Gopher (Rae et al.
    2021), table A1: duplicate 5- to 10-gram character fractions 0.15 down to 0.10.

    Score, as NeMo Curator computes it: walk the n-grams in order; each occurrence of an
    n-gram seen before adds the characters of its words not already counted by the
    previous such occurrence, plus the spaces between them; divide by the text's
    length. A document with fewer than ``n`` words scores 1.0 (dropped, as in NeMo
    Curator).

    Examples
    --------
    >>> import pandas as pd
    >>> f = RepeatingDuplicateNGramsFilter(n=2, max_repeating_duplicate_ngram_ratio=0.2)
    >>> f.score(pd.Series(["a b a b", "one"])).tolist()
    [0.42857142857142855, 1.0]
    """

    def __init__(self, n: int = 2, max_repeating_duplicate_ngram_ratio: float = 0.2,
                 lang: str = "en"):
        check_lang(lang)
        if n < 1:
            raise InvalidArgumentError(f"n must be at least 1, got {n}")
        self._n = n
        self._cutoff = max_repeating_duplicate_ngram_ratio
        self.name = f"repeating_dup_{n}gram"

    def score(self, text):
        arr = arrow_text(text)
        w = words(arr)
        first, _, _ = kernels.ngram_counts(w.ids, w.prefix_hashes, w.doc_offsets, self._n)
        duplicated = kernels.nemo_duplicate_ngram_chars(first, w.nchars, w.doc_offsets,
                                                        self._n)
        scores = ratio(duplicated, lengths(arr), empty=1.0)
        scores[w.per_doc_count() < self._n] = 1.0
        return like_input(scores, text)

    def keep(self, scores):
        return scores <= self._cutoff
