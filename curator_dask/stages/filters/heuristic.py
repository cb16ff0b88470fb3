"""NeMo Curator's heuristic document filters, vectorised over partitions.

Names, parameters, defaults and scores follow ``nemo_curator/filters/heuristic_filter.py``
(NVIDIA NeMo Curator), which adapts rules from Gopher (Rae et al. 2021, "Scaling Language
Models: Methods, Analysis & Insights from Training Gopher", arXiv:2112.11446, appendix
A.1.1) and C4 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a
Unified Text-to-Text Transformer", JMLR 21(140), section 2.2). The defaults are those of
NeMo Curator's ``config/heuristic_filter_en.yaml``.

Words are ``text.split()``, lines ``text.split("\\n")`` without blank lines, and
paragraphs ``text.split("\\n\\n")``, as in NeMo Curator. Missing text counts as ``""``.

Documents with nothing to measure (no characters, words or lines, where NeMo Curator
would divide by zero) get the score that drops them; NeMo Curator does the same for
empty text in its character-ratio filters (score 1.0). The exceptions, kept because
they break no rule, are stated on each filter: :class:`LongWordFilter` and
:class:`PornographicUrlsFilter` score 0. The per-filter values are tabled in
``docs/filters.md``.

The n-gram and repeated-line filters live in :mod:`.repetition`; the filters on which
words a document holds (common English words, letters, URLs, tokens, a substring) in
:mod:`.vocabulary`.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.text import (
    arrow_text,
    char_table,
    count_chars,
    count_words,
    lengths,
    like_input,
    nonblank_lines,
    ratio,
    register_chars,
    split_segments,
    words,
)

__all__ = [
    "BULLETS",
    "COMMON_ENGLISH_WORDS",
    "ELLIPSIS_MARKS",
    "END_MARKS",
    "POLICY_SUBSTRINGS",
    "URL_PATTERN",
    "BoilerPlateStringFilter",
    "BulletsFilter",
    "EllipsisFilter",
    "LongWordFilter",
    "MeanWordLengthFilter",
    "NonAlphaNumericFilter",
    "NumbersFilter",
    "ParenthesesFilter",
    "PunctuationFilter",
    "SymbolsToWordsFilter",
    "UrlsFilter",
    "WhiteSpaceFilter",
    "WordCountFilter",
    "alternation",
    "check_lang",
]

# -- NeMo Curator's constants (nemo_curator/utils/constants.py) ------------------------------
END_MARKS = (".", "?", "!", '"', "'")
ELLIPSIS_MARKS = ("...", "[...]", "…", "(...)", "[…]", "-»", "read more..", "read more")
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "privacy overview",
    "use of cookies",
    "use cookies",
    "privacy & cookies policy",
    "privacy and cookies policy",
    "this website uses cookies to improve your experience while you navigate through the "
    "website. out of these cookies, the cookies that are categorized as necessary are stored "
    "on your browser as they are essential for the working of basic functionalities of the "
    "website. we also use third-party cookies that help us analyze and understand how you use "
    "this website. these cookies will be stored in your browser only with your consent. you "
    "also have the option to opt-out of these cookies. but opting out of some of these cookies "
    "may have an effect on your browsing experience.",
    "necessary cookies are absolutely essential for the website to function properly. this "
    "category only includes cookies that ensures basic functionalities and security features "
    "of the website. these cookies do not store any personal information.",
    "any cookies that may not be particularly necessary for the website to function and is "
    "used specifically to collect user personal data via analytics, ads, other embedded "
    "contents are termed as non-necessary cookies. it is mandatory to procure user consent "
    "prior to running these cookies on your website.",
    "this site uses cookies, including for analytics, personalization, and advertising "
    "purposes. for more information or to change your cookie settings, click here.",
    "if you continue to browse this site without changing your cookie settings, you agree to "
    "this use. acceptread more",
)
COMMON_ENGLISH_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
BULLETS = ("•", "‣", "⁃", "⁌", "⁍", "∙", "○", "●", "◘", "◦", "⦾", "⦿")
#: NeMo Curator's URL pattern ``http[s]?://(?:[a-zA-Z]|[0-9]|[$-_@.&+]|[!*\\(\\),]|%xx)+``
#: written as the single character class it amounts to (``$-_`` is the range
#: U+0024..U+005F, which holds the digits, capitals, ``@.&+*(),`` and ``%``).
URL_PATTERN = r"https?://[!\x24-\x5fa-z]+"

_ALNUM = register_chars("nemo_alphanumeric", (ord("a"), ord("z")), (ord("A"), ord("Z")),
                        (ord("0"), ord("9")), "\n?!,.")
_DIGIT = register_chars("ascii_digit", (ord("0"), ord("9")))
_WHITESPACE = register_chars("nemo_whitespace", "\t\n\r\b ")
_PARENTHESES = register_chars("nemo_parentheses", "{}⟨⟩[]()")
_HASH = register_chars("hash", "#")


def alternation(strings) -> str:
    """One regular expression matching any of ``strings`` literally (for pyarrow's regex
    kernels, which take a pattern rather than a list).

    Examples
    --------
    >>> alternation(["yes", "no"])
    'yes|no'
    """
    return "|".join(re.escape(s) for s in strings)


def check_lang(lang: str) -> None:
    """Refuse ``lang`` where the word filters' whitespace splitting cannot find words
    (Chinese, Japanese), with the fix in the message: a ValueError."""
    if lang.lower() in ("zh", "ja"):
        raise InvalidArgumentError(
            f"lang={lang!r}: words are split on whitespace, which does not segment Chinese or "
            "Japanese; segment the text first (jieba, MeCab) and join the words with spaces"
        )


class _UpperBound(DocumentFilter):
    """A score that must not exceed a cutoff (``score <= cutoff``)."""

    _cutoff: float

    def keep(self, scores):
        return scores <= self._cutoff


class NonAlphaNumericFilter(_UpperBound):
    """Drop documents whose share of characters outside ``[a-zA-Z0-9\\n?!,.]`` exceeds
    ``max_non_alpha_numeric_to_text_ratio``. Source: adapted from Gopher (Rae et al. 2021).

    Score: non-alphanumeric characters / characters; 1.0 for empty text.

    Examples
    --------
    >>> import pandas as pd
    >>> NonAlphaNumericFilter().score(pd.Series(["ab%%", "abc.", ""])).tolist()
    [0.5, 0.0, 1.0]
    """

    name = "alpha_numeric"

    def __init__(self, max_non_alpha_numeric_to_text_ratio: float = 0.25):
        self._cutoff = max_non_alpha_numeric_to_text_ratio

    def score(self, text):
        arr = arrow_text(text)
        nchar = lengths(arr)
        alnum = count_chars(arr, char_table(_ALNUM))
        return like_input(ratio(nchar - alnum, nchar, empty=1.0), text)


class SymbolsToWordsFilter(_UpperBound):
    """Drop documents whose symbol-to-word ratio exceeds ``max_symbol_to_word_ratio``.
    Source: Gopher (Rae et al. 2021): "symbol-to-word ratio greater than 0.1 for either
    the hash symbol or the ellipsis".

    A word counts as a symbol when it is one of NeMo Curator's ellipsis marks or when its
    runs of ``#`` outnumber half its characters (NeMo counts ``#`` *runs*, so ``"#"`` and
    ``"#a#"`` are symbols but ``"##"`` is not). Score: symbol words / words; 1.0 when the
    document has no words.

    Examples
    --------
    >>> import pandas as pd
    >>> SymbolsToWordsFilter().score(pd.Series(["# a ... b", "##"])).tolist()
    [0.5, 0.0]
    """

    name = "symbol_to_word"

    def __init__(self, max_symbol_to_word_ratio: float = 0.1, lang: str = "en"):
        check_lang(lang)
        self._cutoff = max_symbol_to_word_ratio

    def score(self, text):
        arr = arrow_text(text)
        w = words(arr)
        symbol = pc.is_in(w.values, value_set=pa.array(ELLIPSIS_MARKS, pa.large_string()))
        symbol = symbol.to_numpy(zero_copy_only=False)
        has_hash = np.flatnonzero(count_chars(w.values, char_table(_HASH)) > 0)
        if len(has_hash):
            runs = pc.count_substring_regex(w.values.take(pa.array(has_hash)), "#+")
            runs = runs.to_numpy(zero_copy_only=False)
            symbol[has_hash] |= runs / w.nchars[has_hash] > 0.5
        return like_input(ratio(w.per_doc_sum(symbol), w.per_doc_count(), empty=1.0), text)


class NumbersFilter(_UpperBound):
    """Drop documents whose share of digit characters (``0-9``) exceeds
    ``max_number_to_text_ratio``. Score: digits / characters; 1.0 for empty text.

    Examples
    --------
    >>> import pandas as pd
    >>> NumbersFilter().score(pd.Series(["a1b2", ""])).tolist()
    [0.5, 1.0]
    """

    name = "numbers_ratio"

    def __init__(self, max_number_to_text_ratio: float = 0.15):
        self._cutoff = max_number_to_text_ratio

    def score(self, text):
        arr = arrow_text(text)
        return like_input(ratio(count_chars(arr, char_table(_DIGIT)), lengths(arr), empty=1.0),
                          text)


class UrlsFilter(_UpperBound):
    """Drop documents whose share of characters inside URLs exceeds
    ``max_url_to_text_ratio``. Score: URL characters (:data:`URL_PATTERN`) / characters;
    1.0 for empty text.

    Examples
    --------
    >>> import pandas as pd
    >>> UrlsFilter().score(pd.Series(["http://a.io and others", ""])).tolist()
    [0.5, 1.0]
    """

    name = "urls_ratio"

    def __init__(self, max_url_to_text_ratio: float = 0.2):
        self._cutoff = max_url_to_text_ratio

    def score(self, text):
        arr = arrow_text(text)
        nchar = lengths(arr)
        # URLs are ASCII, so the characters removed are the URL characters.
        rest = lengths(pc.replace_substring_regex(arr, URL_PATTERN, ""))
        return like_input(ratio(nchar - rest, nchar, empty=1.0), text)


class BulletsFilter(_UpperBound):
    """Drop documents where more than ``max_bullet_lines_ratio`` of the non-blank lines
    start with a bullet (:data:`BULLETS`). Source: Gopher (Rae et al. 2021).

    Score: bullet lines / non-blank lines; 1.0 when there is no non-blank line.

    Examples
    --------
    >>> import pandas as pd
    >>> BulletsFilter().score(pd.Series(["• a\\n  ● b\\nc\\n\\n", " "])).tolist()
    [0.6666666666666666, 1.0]
    """

    name = "bullet_ratio"

    def __init__(self, max_bullet_lines_ratio: float = 0.9):
        self._cutoff = max_bullet_lines_ratio

    def score(self, text):
        lines = nonblank_lines(arrow_text(text))
        pattern = "^(?:" + alternation(BULLETS) + ")"
        bullet = pc.match_substring_regex(pc.utf8_ltrim_whitespace(lines.values), pattern)
        bullet = bullet.to_numpy(zero_copy_only=False)
        return like_input(ratio(lines.per_doc_sum(bullet), lines.per_doc_count(), empty=1.0),
                          text)


class WhiteSpaceFilter(_UpperBound):
    """Drop documents whose share of ``\\t \\n \\r \\b`` and space characters exceeds
    ``max_white_space_ratio``. Score: those characters / characters; 1.0 for empty text.

    Examples
    --------
    >>> import pandas as pd
    >>> WhiteSpaceFilter().score(pd.Series(["a b\\n", ""])).tolist()
    [0.5, 1.0]
    """

    name = "white_space"

    def __init__(self, max_white_space_ratio: float = 0.25):
        self._cutoff = max_white_space_ratio

    def score(self, text):
        arr = arrow_text(text)
        return like_input(
            ratio(count_chars(arr, char_table(_WHITESPACE)), lengths(arr), empty=1.0), text)


class ParenthesesFilter(_UpperBound):
    """Drop documents whose share of bracket characters ``{}⟨⟩[]()`` exceeds
    ``max_parentheses_ratio``. Score: brackets / characters; 1.0 for empty text.

    Examples
    --------
    >>> import pandas as pd
    >>> ParenthesesFilter().score(pd.Series(["(ab)", ""])).tolist()
    [0.5, 1.0]
    """

    name = "parentheses_ratio"

    def __init__(self, max_parentheses_ratio: float = 0.1):
        self._cutoff = max_parentheses_ratio

    def score(self, text):
        arr = arrow_text(text)
        return like_input(
            ratio(count_chars(arr, char_table(_PARENTHESES)), lengths(arr), empty=1.0), text)


class LongWordFilter(_UpperBound):
    """Drop documents with a word longer than ``max_word_length`` characters (catches
    minified code and other unbroken runs). Source: C4 (Raffel et al. 2020).

    Score: the longest word's length (int); 0 when there is no word, so such documents
    are kept by this filter.

    Examples
    --------
    >>> import pandas as pd
    >>> LongWordFilter(max_word_length=3).score(pd.Series(["a bcde", ""])).tolist()
    [4, 0]
    """

    name = "max_word_length"
    score_dtype = "int64"

    def __init__(self, max_word_length: int = 1000, lang: str = "en"):
        check_lang(lang)
        self._cutoff = max_word_length

    def score(self, text):
        w = words(arrow_text(text))
        return like_input(w.per_doc_max(w.nchars, empty=0), text, "int64")


class WordCountFilter(DocumentFilter):
    """Keep documents with ``min_words`` to ``max_words`` words (inclusive).

    Score: number of words (int).

    Examples
    --------
    >>> import pandas as pd
    >>> f = WordCountFilter(min_words=2, max_words=3)
    >>> scores = f.score(pd.Series(["a b", " a\\tb c d ", "", None]))
    >>> scores.tolist(), f.keep(scores).tolist()
    ([2, 4, 0, 0], [True, False, False, False])
    """

    name = "word_count"
    score_dtype = "int64"

    def __init__(self, min_words: int = 50, max_words: int = 100000, lang: str = "en"):
        check_lang(lang)
        self._min_words = min_words
        self._max_words = max_words

    def score(self, text):
        return like_input(count_words(arrow_text(text)), text, "int64")

    def keep(self, scores):
        return (scores >= self._min_words) & (scores <= self._max_words)


class BoilerPlateStringFilter(_UpperBound):
    """Drop documents where more than ``max_boilerplate_string_ratio`` of the paragraphs
    hold a policy notice (:data:`POLICY_SUBSTRINGS`: "terms of use", "privacy policy",
    cookie notices), and any document with "lorem ipsum". Source: adapted from C4
    (Raffel et al. 2020). Matching is case-insensitive.

    Score: boilerplate paragraphs / paragraphs, or 1.0 if "lorem ipsum" occurs.
    ``remove_if_at_top_or_bottom`` is accepted for compatibility; as in NeMo Curator it
    does not change the score.

    Examples
    --------
    >>> import pandas as pd
    >>> texts = pd.Series(["Hi\\n\\nOur Privacy Policy", "Lorem ipsum"])
    >>> BoilerPlateStringFilter().score(texts).tolist()
    [0.5, 1.0]
    """

    name = "boilerplate_string_ratio"

    def __init__(self, remove_if_at_top_or_bottom: bool = True,
                 max_boilerplate_string_ratio: float = 0.4):
        self._remove_if_at_top_or_bottom = remove_if_at_top_or_bottom
        self._cutoff = max_boilerplate_string_ratio

    def score(self, text):
        arr = arrow_text(text)
        paragraphs = split_segments(arr, "\n\n")
        lowered = pc.utf8_lower(paragraphs.values)
        policy = pc.match_substring_regex(lowered, alternation(POLICY_SUBSTRINGS))
        policy = policy.to_numpy(zero_copy_only=False)
        # "lorem ipsum" has no "\n\n", so it is in a paragraph iff it is in the text.
        lorem = pc.match_substring(pc.utf8_lower(arr), "lorem ipsum").to_numpy(zero_copy_only=False)
        scores = ratio(paragraphs.per_doc_sum(policy), paragraphs.per_doc_count(), empty=1.0)
        scores[lorem] = 1.0
        return like_input(scores, text)


class MeanWordLengthFilter(DocumentFilter):
    """Keep documents whose mean word length is within ``[min_mean_word_length,
    max_mean_word_length]``. Source: Gopher (Rae et al. 2021).

    Score: mean characters per word; 0.0 when there is no word.

    Examples
    --------
    >>> import pandas as pd
    >>> MeanWordLengthFilter().score(pd.Series(["ab abcd", ""])).tolist()
    [3.0, 0.0]
    """

    name = "mean_word_length"

    def __init__(self, min_mean_word_length: int = 3, max_mean_word_length: int = 10,
                 lang: str = "en"):
        check_lang(lang)
        self._min_cutoff = min_mean_word_length
        self._max_cutoff = max_mean_word_length

    def score(self, text):
        w = words(arrow_text(text))
        return like_input(ratio(w.per_doc_sum(w.nchars), w.per_doc_count(), empty=0.0), text)

    def keep(self, scores):
        return (scores >= self._min_cutoff) & (scores <= self._max_cutoff)


class PunctuationFilter(_UpperBound):
    """Drop documents where more than ``max_num_sentences_without_endmark_ratio`` of the
    non-blank lines do not end in a terminal mark (:data:`END_MARKS`). Source: C4
    (Raffel et al. 2020).

    Score: lines without an end mark / non-blank lines; 1.0 when there is none.

    Examples
    --------
    >>> import pandas as pd
    >>> PunctuationFilter().score(pd.Series(["Done.\\nnot done\\n'quoted' ", ""])).tolist()
    [0.3333333333333333, 1.0]
    """

    name = "punctuation"

    def __init__(self, max_num_sentences_without_endmark_ratio: float = 0.85):
        self._cutoff = max_num_sentences_without_endmark_ratio

    def score(self, text):
        lines = nonblank_lines(arrow_text(text))
        pattern = "(?:" + alternation(END_MARKS) + ")$"
        ended = pc.match_substring_regex(pc.utf8_rtrim_whitespace(lines.values), pattern)
        without = ~ended.to_numpy(zero_copy_only=False)
        return like_input(ratio(lines.per_doc_sum(without), lines.per_doc_count(), empty=1.0),
                          text)


class EllipsisFilter(_UpperBound):
    """Drop documents where more than ``max_num_lines_ending_with_ellipsis_ratio`` of the
    non-blank lines end with an ellipsis (:data:`ELLIPSIS_MARKS`, case-insensitive).
    Source: C4 (Raffel et al. 2020).

    Score: ellipsis lines / non-blank lines; 1.0 when there is none.

    Examples
    --------
    >>> import pandas as pd
    >>> EllipsisFilter().score(pd.Series(["To be continued…\\nRead More\\nend.\\nok", ""])).tolist()
    [0.5, 1.0]
    """

    name = "ellipsis"

    def __init__(self, max_num_lines_ending_with_ellipsis_ratio: float = 0.3):
        self._cutoff = max_num_lines_ending_with_ellipsis_ratio

    def score(self, text):
        lines = nonblank_lines(arrow_text(text))
        stripped = pc.utf8_lower(pc.utf8_rtrim_whitespace(lines.values))
        pattern = "(?:" + alternation(ELLIPSIS_MARKS) + ")$"
        ending = pc.match_substring_regex(stripped, pattern).to_numpy(zero_copy_only=False)
        return like_input(ratio(lines.per_doc_sum(ending), lines.per_doc_count(), empty=1.0),
                          text)
