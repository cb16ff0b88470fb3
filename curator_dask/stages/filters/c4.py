"""C4's cleaning rules (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer", JMLR 21(140), section 2.2 "The Colossal Clean
Crawled Corpus"), as implemented by TensorFlow Datasets' ``c4_utils.py`` and datatrove's
``C4QualityFilter`` (``src/datatrove/pipeline/filters/c4_filters.py``), whose parameters
and defaults are used here.

C4 works line by line. Each line (``text.splitlines()``, stripped) is removed when

1. a word is longer than ``max_word_length`` (1000) characters;
2. after removing Wikipedia citation marks (``[1]``, ``[edit]``, ``[citation needed]``)
   it does not end in terminal punctuation (``. ? ! " '``), or ends in ``...``;
3. it has fewer than ``min_words_per_line`` (3) words;
4. it mentions "javascript" (any case);
5. it holds a cookie or policy notice ("terms of use", "privacy policy", "cookie
   policy", "uses cookies", "use of cookies", "use cookies"; any case);

and the whole document is dropped when a line that survived rules 1-3 contains
"lorem ipsum" (``lorem_ipsum``) or, after also surviving rule 4, a curly bracket
(``curly_bracket``) — whichever such line comes first — or when the kept lines hold
fewer than ``min_num_sentences`` (5) sentences (``too_few_sentences``).

The document-level verdicts are :class:`C4QualityFilter`; the line removal is
:class:`~curator_dask.stages.modifiers.C4LineCleaner`. Apply the filter first, then the
cleaner (the filter judges the original lines, as C4 does).

Sentences are counted without NLTK's punkt model (which datatrove and TFDS use and which
cannot be downloaded here): each kept line counts its runs of ``.``, ``?`` or ``!``
followed by a space or the line's end (closing quotes and brackets allowed between),
and at least one. Abbreviations such as "Mr." therefore count as sentence ends.
C4's bad-words rule needs the external LDNOOBW word list and is not included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.stages.filters.heuristic import alternation
from curator_dask.text import (
    Segments,
    arrow_text,
    like_input,
    re2_class,
    splitlines,
    words,
)

__all__ = ["C4_POLICY_SUBSTRINGS", "C4QualityFilter", "c4_lines"]

C4_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies",
                        "use of cookies", "use cookies")
C4_END_PUNCTUATION = (".", "?", "!", '"', "'")
# Python's \d (used by TFDS and datatrove) is any Unicode decimal digit.
_CITATION = r"\[\p{Nd}*\]|\[edit\]|\[citation needed\]"


def _sentence_end() -> str:
    # Python's \s (whitespace as str.isspace), not RE2's ASCII-only \s.
    return r"[.?!]+[\"'”’)\]]*(?:[" + re2_class("space") + "]|$)"


@dataclass
class C4Lines:
    """Every line of every document after C4's line rules."""

    lines: Segments          # stripped lines with citations removed, per document
    kept: np.ndarray         # bool per line
    reason: np.ndarray       # per document: the document-level rule it fails, or None


def c4_lines(arr: pa.Array, *, remove_citations: bool = True,
             filter_no_terminal_punct: bool = True, min_num_sentences: int = 5,
             min_words_per_line: int = 3, max_word_length: int = 1000,
             filter_lorem_ipsum: bool = True, filter_javascript: bool = True,
             filter_curly_bracket: bool = True, filter_policy: bool = True) -> C4Lines:
    """Apply C4's line rules to every document of ``arr`` at once."""
    raw = splitlines(arr)
    stripped = pc.utf8_trim_whitespace(raw.values)
    n_lines = len(stripped)
    line_words = words(stripped)
    n_words = line_words.per_doc_count()
    drop = np.zeros(n_lines, dtype=bool)
    if max_word_length != -1:
        drop |= line_words.per_doc_max(line_words.nchars, empty=0) > max_word_length
    cleaned = pc.replace_substring_regex(stripped, _CITATION, "") if remove_citations else stripped
    if filter_no_terminal_punct:
        ended = pc.match_substring_regex(cleaned, "(?:" + alternation(C4_END_PUNCTUATION) + ")$")
        ended = ended.to_numpy(zero_copy_only=False)
        drop |= ~ended | pc.ends_with(cleaned, "...").to_numpy(zero_copy_only=False)
    drop |= n_words < min_words_per_line
    lowered = pc.utf8_lower(cleaned)

    def contains(values, pattern):
        return pc.match_substring(values, pattern).to_numpy(zero_copy_only=False)

    no_lines = np.zeros(n_lines, bool)
    lorem = ~drop & contains(lowered, "lorem ipsum") if filter_lorem_ipsum else no_lines
    drop |= lorem
    if filter_javascript:
        drop |= contains(lowered, "javascript")
    curly = ~drop & contains(cleaned, "{") if filter_curly_bracket else no_lines
    drop |= curly
    if filter_policy:
        drop |= pc.match_substring_regex(lowered, alternation(C4_POLICY_SUBSTRINGS)).to_numpy(
            zero_copy_only=False)
    kept = ~drop

    n_docs = len(arr)
    reason = np.full(n_docs, None, dtype=object)
    if min_num_sentences != -1:
        ends = pc.count_substring_regex(cleaned, _sentence_end()).to_numpy(zero_copy_only=False)
        sentences = raw.per_doc_sum(np.maximum(ends, 1) * kept)
        reason[sentences < min_num_sentences] = "too_few_sentences"
    fatal = np.flatnonzero(lorem | curly)  # in line order, documents in order
    if len(fatal):
        docs, first = np.unique(raw.parent[fatal], return_index=True)
        reason[docs] = np.where(lorem[fatal[first]], "lorem_ipsum", "curly_bracket")
    if cleaned.type != pa.large_string():
        cleaned = cleaned.cast(pa.large_string())
    lines = Segments(cleaned, raw.doc_offsets)
    return C4Lines(lines=lines, kept=kept, reason=reason)


class C4QualityFilter(DocumentFilter):
    """C4's document-level rules (see the module docstring for the line rules they build
    on): score is the failed rule — ``lorem_ipsum``, ``curly_bracket`` or
    ``too_few_sentences`` — or missing when the document is kept.

    Parameters are datatrove's: ``split_paragraph`` (only ``True``, C4's line split, is
    supported), ``remove_citations``, ``filter_no_terminal_punct``,
    ``min_num_sentences`` (-1 turns it off), ``min_words_per_line``,
    ``max_word_length`` (-1 turns it off), ``filter_lorem_ipsum``,
    ``filter_javascript``, ``filter_curly_bracket``, ``filter_policy``.

    Examples
    --------
    >>> import pandas as pd
    >>> good = "\\n".join(["This line is a full sentence."] * 5)
    >>> texts = [good, good + "\\nLorem ipsum dolor sit.", "Hi."]
    >>> C4QualityFilter().score(pd.Series(texts)).tolist()
    [nan, 'lorem_ipsum', 'too_few_sentences']
    """

    name = "c4_quality"
    score_dtype = "str"

    def __init__(self, split_paragraph: bool = True, remove_citations: bool = True,
                 filter_no_terminal_punct: bool = True, min_num_sentences: int = 5,
                 min_words_per_line: int = 3, max_word_length: int = 1000,
                 filter_lorem_ipsum: bool = True, filter_javascript: bool = True,
                 filter_curly_bracket: bool = True, filter_policy: bool = True):
        if not split_paragraph:
            raise InvalidArgumentError(
                "C4QualityFilter(split_paragraph=False) needs a sentence tokenizer (NLTK punkt), "
                "which is not available; use the default line split"
            )
        self.options = dict(
            remove_citations=remove_citations, filter_no_terminal_punct=filter_no_terminal_punct,
            min_num_sentences=min_num_sentences, min_words_per_line=min_words_per_line,
            max_word_length=max_word_length, filter_lorem_ipsum=filter_lorem_ipsum,
            filter_javascript=filter_javascript, filter_curly_bracket=filter_curly_bracket,
            filter_policy=filter_policy,
        )

    def score(self, text):
        return like_input(c4_lines(arrow_text(text), **self.options).reason, text, "str")

    def keep(self, scores):
        return scores.isna()

    def drop_reasons(self, scores):
        return scores
