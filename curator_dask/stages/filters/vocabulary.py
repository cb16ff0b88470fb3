"""NeMo Curator's heuristic filters on which words a document holds, vectorised over
partitions: common English words, words with letters, pornographic URLs, tokens, a
substring.

Names, parameters, defaults and scores follow ``nemo_curator/filters/heuristic_filter.py``
(NVIDIA NeMo Curator); the conventions (what a word is, what text without words scores)
are those of :mod:`.heuristic`, whose constants these filters share.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.stages.filters.heuristic import COMMON_ENGLISH_WORDS, URL_PATTERN, check_lang
from curator_dask.text import (
    arrow_text,
    char_table,
    count_chars,
    like_input,
    ratio,
    to_pandas_text,
    words,
)

__all__ = [
    "CommonEnglishWordsFilter",
    "PornographicUrlsFilter",
    "SubstringFilter",
    "TokenCountFilter",
    "WordsWithoutAlphabetsFilter",
]


class CommonEnglishWordsFilter(DocumentFilter):
    """Keep documents with at least ``min_num_common_words`` occurrences of common
    lower-case English words (:data:`COMMON_ENGLISH_WORDS`; lower case on purpose, to
    catch over-capitalised text). Source: Gopher's stop-word rule (Rae et al. 2021).

    Score: occurrences (int), capped at ``min_num_common_words`` when
    ``stop_at_false`` (NeMo Curator stops counting there).

    Examples
    --------
    >>> import pandas as pd
    >>> f = CommonEnglishWordsFilter(stop_at_false=False)
    >>> f.score(pd.Series(["the cat and the hat", "THE END", ""])).tolist()
    [3, 0, 0]
    """

    name = "common_english_words"
    score_dtype = "int64"

    def __init__(self, min_num_common_words: int = 2, stop_at_false: bool = True):
        self._cutoff = min_num_common_words
        self._stop_at_false = stop_at_false

    def score(self, text):
        w = words(arrow_text(text))
        common = pc.is_in(w.values, value_set=pa.array(COMMON_ENGLISH_WORDS, pa.large_string()))
        counts = w.per_doc_sum(common.to_numpy(zero_copy_only=False)).astype(np.int64)
        if self._stop_at_false:
            counts = np.minimum(counts, self._cutoff)
        return like_input(counts, text, "int64")

    def keep(self, scores):
        return scores >= self._cutoff


class WordsWithoutAlphabetsFilter(DocumentFilter):
    """Keep documents where at least ``min_words_with_alphabets`` of the words contain a
    letter. Source: Gopher (Rae et al. 2021): "80% of words in a document contain at
    least one alphabetic character".

    A letter is what ``str.isalpha`` accepts (Unicode categories L*). NeMo Curator uses
    the ``regex`` module's ``[[:alpha:]]`` (Unicode "Alphabetic"), which also accepts
    combining vowel signs and letter-like numerals (Ⅻ); a word made only of those is
    counted differently.

    Score: words with a letter / words; 0.0 when there is no word.

    Examples
    --------
    >>> import pandas as pd
    >>> WordsWithoutAlphabetsFilter().score(pd.Series(["abc 123 été 4x", ""])).tolist()
    [0.75, 0.0]
    """

    name = "words_without_alphabets"

    def __init__(self, min_words_with_alphabets: float = 0.8, lang: str = "en"):
        check_lang(lang)
        self._cutoff = min_words_with_alphabets

    def score(self, text):
        w = words(arrow_text(text))
        has_letter = count_chars(w.values, char_table("alpha")) > 0
        return like_input(ratio(w.per_doc_sum(has_letter), w.per_doc_count(), empty=0.0), text)

    def keep(self, scores):
        return scores >= self._cutoff


class PornographicUrlsFilter(DocumentFilter):
    """Drop documents with a URL (:data:`URL_PATTERN`) that contains "porn".

    Score: 1 if such a URL occurs, else 0 (so text without URLs is kept).

    Examples
    --------
    >>> import pandas as pd
    >>> PornographicUrlsFilter().score(pd.Series(["x https://a.porn.com", "porn", ""])).tolist()
    [1, 0, 0]
    """

    name = "pornographic_urls"
    score_dtype = "int64"
    backend = "any"

    # A URL match is a maximal run of URL characters after "http(s)://", and "porn" is
    # made of URL characters, so "porn inside some URL" is one regular expression.
    _pattern = URL_PATTERN[:-1] + "*porn"

    def score(self, text):
        return text.str.contains(self._pattern, regex=True).fillna(False).astype("int64")

    def keep(self, scores):
        return scores != 1


class TokenCountFilter(DocumentFilter):
    """Keep documents with ``min_tokens`` to ``max_tokens`` tokens (inclusive).

    Parameters
    ----------
    tokenizer
        A Hugging Face ``transformers`` tokenizer (called on the whole partition's texts
        at once), a ``tokenizers.Tokenizer`` (``encode_batch``), or any object with
        ``encode(text) -> list`` (called per document).
    min_tokens : int, default 0
    max_tokens : int or float, default inf

    Notes
    -----
    Score: number of tokens, as ``tokenizer.encode(text)`` counts them (special tokens
    included, as in NeMo Curator).

    Examples
    --------
    >>> import pandas as pd
    >>> class Chars:
    ...     def encode(self, text):
    ...         return list(text)
    >>> TokenCountFilter(Chars(), min_tokens=2).score(pd.Series(["abc", ""])).tolist()
    [3, 0]
    """

    name = "token_count"
    score_dtype = "int64"

    def __init__(self, tokenizer, min_tokens: int = 0, max_tokens: int | float = math.inf):
        self._tokenizer = tokenizer
        self._min_tokens = min_tokens
        self._max_tokens = max_tokens

    def score(self, text):
        texts = [v if isinstance(v, str) else "" for v in to_pandas_text(text).tolist()]
        tok = self._tokenizer
        if hasattr(tok, "encode_batch"):  # tokenizers.Tokenizer
            counts = [len(e.ids) for e in tok.encode_batch(texts)]
        elif hasattr(tok, "batch_encode_plus") and callable(tok):  # transformers
            counts = [len(ids) for ids in tok(texts)["input_ids"]]
        else:
            counts = [len(tok.encode(t)) for t in texts]
        return like_input(np.asarray(counts, dtype=np.int64), text, "int64")

    def keep(self, scores):
        return (scores >= self._min_tokens) & (scores <= self._max_tokens)


class SubstringFilter(DocumentFilter):
    """Keep documents that contain ``substring`` at ``position`` (``"prefix"``,
    ``"suffix"`` or ``"any"``). Score: 1 if found there, else 0.

    Examples
    --------
    >>> import pandas as pd
    >>> SubstringFilter("ab", "prefix").score(pd.Series(["abc", "cab", ""])).tolist()
    [1, 0, 0]
    """

    name = "substring"
    score_dtype = "int64"
    backend = "any"

    def __init__(self, substring: str, position: str):
        if position not in ("prefix", "suffix", "any"):
            raise InvalidArgumentError(
                f"Invalid position: {position}. Must be one of: prefix, suffix, any.")
        self._substring = substring
        self._position = position

    def score(self, text):
        text = text.fillna("")
        if self._position == "prefix":
            found = text.str.startswith(self._substring)
        elif self._position == "suffix":
            found = text.str.endswith(self._substring)
        else:
            found = text.str.contains(self._substring, regex=False)
        return found.astype("int64")

    def keep(self, scores):
        return scores == 1
