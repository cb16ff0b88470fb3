"""Gopher's quality and repetition rules, each set as one filter that names the rule
dropping each document.

Source: Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from
Training Gopher" (arXiv:2112.11446), appendix A.1.1 ("Quality filtering" and
"Repetition removal", table A1). The rules, their order and their defaults follow
datatrove's ``GopherQualityFilter`` and ``GopherRepetitionFilter``
(``src/datatrove/pipeline/filters/gopher_{quality,repetition}_filter.py``), so drop
decisions match datatrove's when it is given a whitespace word tokenizer.

Differences from datatrove, on purpose:

- words are ``text.split()``; datatrove's default English tokenizer (NLTK/spaCy) also
  splits punctuation off words;
- duplicate n-grams are compared as word tuples; datatrove joins their words without a
  separator, so ``("ab", "c")`` and ``("a", "bc")`` compare equal there;
- where a ratio's denominator is zero (no words, no lines, empty text) the rule passes;
  datatrove raises ``ZeroDivisionError`` (with default settings, documents without
  words fail ``word_count`` first).

The score of both filters is the name of the first rule a document fails, in the
order listed on each class, or missing (NA) when it passes them all; ``ScoreFilter``
counts drops as ``gopher_quality.<rule>`` / ``gopher_repetition.<rule>``.
:meth:`measure` gives the statistics behind the rules as columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.text import (
    arrow_text,
    count_classes,
    kernels,
    lengths,
    like_input,
    ratio,
    register_chars,
    split_runs,
    split_segments,
    splitlines,
    words,
)

__all__ = ["STOP_WORDS", "GopherQualityFilter", "GopherRepetitionFilter"]

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")

#: datatrove's ``PUNCTUATION_SET`` (``datatrove/utils/text.py``: ASCII and CJK
#: punctuation, control characters and Unicode terminal punctuation), as code point
#: ranges. A word made only of these is a "symbol" word, not counted as a word.
_PUNCTUATION = register_chars("datatrove_punctuation", *[
    (0x0, 0x8), (0xB, 0x1F), (0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x9F),
    (0xAB, 0xAB), (0xB4, 0xB4), (0xBB, 0xBB), (0x589, 0x589), (0x61D, 0x61F),
    (0x6D4, 0x6D4), (0x700, 0x702), (0x7F9, 0x7F9), (0x837, 0x837), (0x839, 0x839),
    (0x83D, 0x83E), (0x964, 0x965), (0x104A, 0x104B), (0x1362, 0x1362), (0x1367, 0x1368),
    (0x166E, 0x166E), (0x1735, 0x1736), (0x17D4, 0x17D6), (0x17D9, 0x17DA),
    (0x1803, 0x1803), (0x1809, 0x1809), (0x1944, 0x1945), (0x1AA8, 0x1AAB),
    (0x1B5A, 0x1B5B), (0x1B5E, 0x1B5F), (0x1B7D, 0x1B7E), (0x1C3B, 0x1C3C),
    (0x1C7E, 0x1C7F), (0x2013, 0x2014), (0x2019, 0x2019), (0x201C, 0x201E),
    (0x2026, 0x2026), (0x203C, 0x203D), (0x2047, 0x2049), (0x2236, 0x2236),
    (0x2501, 0x2501), (0x25BA, 0x25BA), (0x2E2E, 0x2E2E), (0x2E3C, 0x2E3C),
    (0x2E53, 0x2E54), (0x3001, 0x3002), (0x3008, 0x300D), (0x3010, 0x3011),
    (0xA4FF, 0xA4FF), (0xA60E, 0xA60F), (0xA6F3, 0xA6F3), (0xA6F7, 0xA6F7),
    (0xA876, 0xA877), (0xA8CE, 0xA8CF), (0xA92F, 0xA92F), (0xA9C8, 0xA9C9),
    (0xAA5D, 0xAA5F), (0xAAF0, 0xAAF1), (0xABEB, 0xABEB), (0xFE52, 0xFE52),
    (0xFE56, 0xFE57), (0xFF01, 0xFF01), (0xFF05, 0xFF05), (0xFF08, 0xFF09),
    (0xFF0C, 0xFF0C), (0xFF0E, 0xFF0E), (0xFF11, 0xFF11), (0xFF1A, 0xFF1B),
    (0xFF1F, 0xFF1F), (0xFF5E, 0xFF5E), (0xFF61, 0xFF61), (0x10A56, 0x10A57),
    (0x10F55, 0x10F59), (0x10F86, 0x10F89), (0x11047, 0x11048), (0x110BE, 0x110C1),
    (0x11141, 0x11143), (0x111C5, 0x111C6), (0x111CD, 0x111CD), (0x111DE, 0x111DF),
    (0x11238, 0x11239), (0x1123B, 0x1123C), (0x112A9, 0x112A9), (0x1144B, 0x1144C),
    (0x115C2, 0x115C3), (0x115C9, 0x115D7), (0x11641, 0x11642), (0x1173C, 0x1173E),
    (0x11944, 0x11944), (0x11946, 0x11946), (0x11A42, 0x11A43), (0x11A9B, 0x11A9C),
    (0x11C41, 0x11C42), (0x11EF7, 0x11EF8), (0x11F43, 0x11F44), (0x16A6E, 0x16A6F),
    (0x16AF5, 0x16AF5), (0x16B37, 0x16B38), (0x16B44, 0x16B44), (0x16E98, 0x16E98),
    (0x1BC9F, 0x1BC9F), (0x1DA88, 0x1DA88),
])


_HASH = register_chars("hash", "#")
_ELLIPSIS_CHAR = register_chars("ellipsis_char", "…")


class RuleSetFilter(DocumentFilter):
    """A filter whose score is the first failed rule's name (missing when all pass).

    The base of the Gopher and FineWeb rule sets; not a filter of its own (not in the
    stage catalog).
    """

    score_dtype = "str"

    def _rules(self, stats: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
        raise NotImplementedError

    def measure(self, text) -> pd.DataFrame:
        """The statistics the rules compare, one row per document (pandas)."""
        raise NotImplementedError

    def score(self, text):
        stats = self.measure(text)
        first_failed = np.full(len(stats), None, dtype=object)
        with np.errstate(invalid="ignore"):
            rules = self._rules(stats)
        for rule, failed in reversed(rules):
            first_failed[np.asarray(failed, dtype=bool)] = rule
        return like_input(first_failed, text, "str")

    def keep(self, scores):
        return scores.isna()

    def drop_reasons(self, scores):
        return scores


class GopherQualityFilter(RuleSetFilter):
    """Gopher's quality rules (Rae et al. 2021, appendix A.1.1), in this order:

    1. ``word_count``: fewer than ``min_doc_words`` (50) or more than ``max_doc_words``
       (100,000) words, not counting words made only of punctuation;
    2. ``mean_word_length``: their mean length outside ``[min_avg_word_length,
       max_avg_word_length]`` (3 to 10 characters);
    3. ``hash_ratio``: ``#`` characters per word above ``max_symbol_word_ratio`` (0.1);
    4. ``ellipsis_ratio``: ellipses (``...``, ``…``) per word above
       ``max_symbol_word_ratio``;
    5. ``bullet_lines``: more than ``max_bullet_lines_ratio`` (90%) of the lines start
       with a bullet (``•`` or ``-``);
    6. ``ellipsis_lines``: more than ``max_ellipsis_lines_ratio`` (30%) of the lines end
       with an ellipsis;
    7. ``alpha_words``: fewer than ``max_non_alpha_words_ratio`` (80%) of the words
       contain a letter (datatrove's name for this parameter, kept for migration);
    8. ``stop_words``: fewer than ``min_stop_words`` (2) distinct stop words
       (:data:`STOP_WORDS`: "the", "be", "to", "of", "and", "that", "have", "with").

    Lines are ``text.splitlines()``. Any threshold set to ``None`` (or 0) turns its rule
    off, as in datatrove.

    Examples
    --------
    >>> import pandas as pd
    >>> good = " ".join(["the quick brown fox jumps over the lazy dog and runs"] * 5)
    >>> GopherQualityFilter().score(pd.Series([good, "too short", "#" * 60 + " " + good])).tolist()
    [nan, 'word_count', 'hash_ratio']
    """

    name = "gopher_quality"

    def __init__(self, min_doc_words: int | None = 50, max_doc_words: int | None = 100000,
                 min_avg_word_length: int | None = 3, max_avg_word_length: int | None = 10,
                 max_symbol_word_ratio: float | None = 0.1,
                 max_bullet_lines_ratio: float | None = 0.9,
                 max_ellipsis_lines_ratio: float | None = 0.3,
                 max_non_alpha_words_ratio: float | None = 0.8,
                 min_stop_words: int | None = 2, stop_words: Sequence[str] | None = None):
        self.min_doc_words = min_doc_words
        self.max_doc_words = max_doc_words
        self.min_avg_word_length = min_avg_word_length
        self.max_avg_word_length = max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        self.max_non_alpha_words_ratio = max_non_alpha_words_ratio
        self.min_stop_words = min_stop_words
        self.stop_words = tuple(dict.fromkeys(STOP_WORDS if stop_words is None else stop_words))

    def measure(self, text) -> pd.DataFrame:
        """Columns: ``words``, ``non_symbol_words``, ``mean_word_length``,
        ``hash_ratio``, ``ellipsis_ratio``, ``bullet_lines_ratio``,
        ``ellipsis_lines_ratio``, ``alpha_words_ratio``, ``stop_words`` (NaN where a
        ratio has nothing to divide by)."""
        arr = arrow_text(text)
        w = words(arr)
        n_words = w.per_doc_count()
        punctuation, letters = count_classes(w.values, _PUNCTUATION, "alpha").T
        non_symbol = punctuation < w.nchars
        n_non_symbol = w.per_doc_sum(non_symbol)
        mean_length = ratio(w.per_doc_sum(w.nchars * non_symbol), n_non_symbol, empty=np.nan)

        hashes, ellipsis_chars = count_classes(arr, _HASH, _ELLIPSIS_CHAR).T
        ellipses = ellipsis_chars + pc.count_substring(arr, "...").to_numpy(zero_copy_only=False)

        lines = splitlines(arr)
        bullet = pc.match_substring_regex(pc.utf8_ltrim_whitespace(lines.values), "^[•-]")
        ellipsis_end = pc.match_substring_regex(pc.utf8_rtrim_whitespace(lines.values),
                                                r"(?:\.\.\.|…)$")
        n_lines = lines.per_doc_count()

        has_letter = letters > 0

        stop_index = pc.index_in(w.values, value_set=pa.array(self.stop_words,
                                                              pa.large_string()))
        found = stop_index.is_valid().to_numpy(zero_copy_only=False)
        stop_index = stop_index.drop_null().to_numpy(zero_copy_only=False).astype(np.int64)
        key = w.parent[found] * len(self.stop_words) + stop_index
        distinct = np.unique(key) // max(len(self.stop_words), 1)
        stop_words = np.bincount(distinct, minlength=len(arr))

        return pd.DataFrame({
            "words": n_words,
            "non_symbol_words": n_non_symbol.astype(np.int64),
            "mean_word_length": mean_length,
            "hash_ratio": ratio(hashes, n_words, empty=np.nan),
            "ellipsis_ratio": ratio(ellipses, n_words, empty=np.nan),
            "bullet_lines_ratio": ratio(lines.per_doc_sum(bullet.to_numpy(zero_copy_only=False)),
                                        n_lines, empty=np.nan),
            "ellipsis_lines_ratio": ratio(
                lines.per_doc_sum(ellipsis_end.to_numpy(zero_copy_only=False)), n_lines,
                empty=np.nan),
            "alpha_words_ratio": ratio(w.per_doc_sum(has_letter), n_words, empty=np.nan),
            "stop_words": stop_words.astype(np.int64),
        })

    def _rules(self, s):
        off = np.zeros(len(s), dtype=bool)
        words_ = s["non_symbol_words"].to_numpy()
        mean = s["mean_word_length"].to_numpy()
        return [
            ("word_count",
             (words_ < self.min_doc_words if self.min_doc_words else off)
             | (words_ > self.max_doc_words if self.max_doc_words else off)),
            ("mean_word_length",
             (mean < self.min_avg_word_length if self.min_avg_word_length else off)
             | (mean > self.max_avg_word_length if self.max_avg_word_length else off)),
            ("hash_ratio", s["hash_ratio"].to_numpy() > self.max_symbol_word_ratio
             if self.max_symbol_word_ratio else off),
            ("ellipsis_ratio", s["ellipsis_ratio"].to_numpy() > self.max_symbol_word_ratio
             if self.max_symbol_word_ratio else off),
            ("bullet_lines", s["bullet_lines_ratio"].to_numpy() > self.max_bullet_lines_ratio
             if self.max_bullet_lines_ratio else off),
            ("ellipsis_lines",
             s["ellipsis_lines_ratio"].to_numpy() > self.max_ellipsis_lines_ratio
             if self.max_ellipsis_lines_ratio else off),
            ("alpha_words",
             s["alpha_words_ratio"].to_numpy() < self.max_non_alpha_words_ratio
             if self.max_non_alpha_words_ratio else off),
            ("stop_words", s["stop_words"].to_numpy() < self.min_stop_words
             if self.min_stop_words else off),
        ]


_TOP_N_GRAMS = ((2, 0.2), (3, 0.18), (4, 0.16))
_DUP_N_GRAMS = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))


class GopherRepetitionFilter(RuleSetFilter):
    """Gopher's repetition rules (Rae et al. 2021, appendix A.1.1, table A1), in this
    order:

    1. ``duplicate_paragraphs``: more than ``dup_para_frac`` (30%) of the paragraphs
       (``re.split(r"\\n{2,}", text.strip())``) repeat an earlier one;
    2. ``duplicate_paragraph_chars``: repeated paragraphs hold more than
       ``dup_para_char_frac`` (20%) of the text's characters;
    3. ``duplicate_lines``: more than ``dup_line_frac`` (30%) of the lines
       (``re.split(r"\\n+", text)``) repeat an earlier one;
    4. ``duplicate_line_chars``: repeated lines hold more than ``dup_line_char_frac``
       (20%) of the characters;
    5. ``top_{n}gram`` for each ``(n, fraction)`` of ``top_n_grams`` (2: 0.20, 3: 0.18,
       4: 0.16): the most frequent word n-gram (its words joined by spaces) times its
       number of occurrences covers more than ``fraction`` of the characters;
    6. ``duplicate_{n}grams`` for each ``(n, fraction)`` of ``dup_n_grams`` (5 to 10:
       0.15 down to 0.10): repeated word n-grams, scanned left to right and skipped
       past once counted, cover more than ``fraction`` of the characters (their words'
       characters, without spaces, as datatrove counts them).

    Any fraction set to ``None`` (or 0) turns its rule off.

    Examples
    --------
    >>> import pandas as pd
    >>> f = GopherRepetitionFilter()
    >>> varied = " ".join(f"w{i}" for i in range(40))
    >>> f.score(pd.Series([varied, "same line\\nsame line\\nother", "a b " * 30])).tolist()
    [nan, 'duplicate_lines', 'top_2gram']
    """

    name = "gopher_repetition"

    def __init__(self, dup_line_frac: float | None = 0.3, dup_para_frac: float | None = 0.3,
                 dup_line_char_frac: float | None = 0.2,
                 dup_para_char_frac: float | None = 0.2,
                 top_n_grams: Sequence[tuple[int, float]] = _TOP_N_GRAMS,
                 dup_n_grams: Sequence[tuple[int, float]] = _DUP_N_GRAMS):
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        self.top_n_grams = tuple((int(n), frac) for n, frac in top_n_grams)
        self.dup_n_grams = tuple((int(n), frac) for n, frac in dup_n_grams)

    def measure(self, text) -> pd.DataFrame:
        """Columns: ``paragraphs``, ``duplicate_paragraphs``,
        ``duplicate_paragraph_chars``, ``lines``, ``duplicate_lines``,
        ``duplicate_line_chars``, ``top_{n}gram_chars`` and ``duplicate_{n}gram_chars``
        (character counts; divide by ``chars`` for the fractions), ``chars``."""
        arr = arrow_text(text)
        stats = {"chars": lengths(arr)}
        for label, pieces in (
            ("paragraph", split_segments(pc.utf8_trim_whitespace(arr), r"\n{2,}", regex=True)),
            ("line", split_runs(arr, "\n")),
        ):
            repeat = ~pieces.first_in_doc()
            stats[f"{label}s"] = pieces.per_doc_count()
            stats[f"duplicate_{label}s"] = pieces.per_doc_sum(repeat).astype(np.int64)
            stats[f"duplicate_{label}_chars"] = pieces.per_doc_sum(
                pieces.nchars * repeat).astype(np.int64)

        w = words(arr)
        if self.top_n_grams or self.dup_n_grams:
            ids, prefix = w.ids, w.prefix_hashes
            cum = np.concatenate([[0], np.cumsum(w.nchars)])
        for n, _ in self.top_n_grams:
            _, top_start, top_count = kernels.ngram_counts(ids, prefix, w.doc_offsets, n)
            chars = np.zeros(len(arr), np.int64)
            has = top_start >= 0
            starts = top_start[has]
            chars[has] = (cum[starts + n] - cum[starts] + (n - 1)) * top_count[has]
            stats[f"top_{n}gram_chars"] = chars
        for n, _ in self.dup_n_grams:
            stats[f"duplicate_{n}gram_chars"] = kernels.skipping_duplicate_ngram_chars(
                ids, prefix, w.nchars, w.doc_offsets, n)
        return pd.DataFrame(stats)

    def _rules(self, s):
        off = np.zeros(len(s), dtype=bool)
        chars = s["chars"].to_numpy()

        def share(column):
            return ratio(s[column].to_numpy(), chars, empty=np.nan)

        rules = [
            ("duplicate_paragraphs",
             ratio(s["duplicate_paragraphs"], s["paragraphs"], empty=np.nan) > self.dup_para_frac
             if self.dup_para_frac else off),
            ("duplicate_paragraph_chars",
             share("duplicate_paragraph_chars") > self.dup_para_char_frac
             if self.dup_para_char_frac else off),
            ("duplicate_lines",
             ratio(s["duplicate_lines"], s["lines"], empty=np.nan) > self.dup_line_frac
             if self.dup_line_frac else off),
            ("duplicate_line_chars",
             share("duplicate_line_chars") > self.dup_line_char_frac
             if self.dup_line_char_frac else off),
        ]
        rules += [(f"top_{n}gram", share(f"top_{n}gram_chars") > frac if frac else off)
                  for n, frac in self.top_n_grams]
        rules += [(f"duplicate_{n}grams", share(f"duplicate_{n}gram_chars") > frac
                   if frac else off) for n, frac in self.dup_n_grams]
        return rules
