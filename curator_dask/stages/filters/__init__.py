"""Document filters and the stages that apply them (NeMo Curator names and defaults).

Usage::

    from curator_dask.stages.filters import ScoreFilter, WordCountFilter
    ds = ScoreFilter(WordCountFilter(min_words=50), score_field="word_count")(ds)
    ds.dropped_counts()   # {"word_count": ...}

Layout: :mod:`.base` (the filter model and the ``ScoreFilter``/``Score``/``Filter``
stages), :mod:`.heuristic` (character, word and line ratios), :mod:`.vocabulary`
(which words a document holds), :mod:`.repetition` (repeated lines, paragraphs,
n-grams), :mod:`.gopher`, :mod:`.c4` and :mod:`.fineweb`
(the published rule sets as single filters that name the rule dropping each document),
:mod:`.code` (NeMo Curator's source-code filters), :mod:`.url`
(blocked domains and banned words in the ``url`` column).
"""

from curator_dask.stages.filters.base import DocumentFilter, Filter, Score, ScoreFilter
from curator_dask.stages.filters.c4 import C4QualityFilter
from curator_dask.stages.filters.code import AlphaFilter, NumberOfLinesOfCodeFilter, XMLHeaderFilter
from curator_dask.stages.filters.fineweb import FineWebQualityFilter
from curator_dask.stages.filters.gopher import GopherQualityFilter, GopherRepetitionFilter
from curator_dask.stages.filters.heuristic import (
    BoilerPlateStringFilter,
    BulletsFilter,
    EllipsisFilter,
    LongWordFilter,
    MeanWordLengthFilter,
    NonAlphaNumericFilter,
    NumbersFilter,
    ParenthesesFilter,
    PunctuationFilter,
    SymbolsToWordsFilter,
    UrlsFilter,
    WhiteSpaceFilter,
    WordCountFilter,
)
from curator_dask.stages.filters.repetition import (
    RepeatedLinesByCharFilter,
    RepeatedLinesFilter,
    RepeatedParagraphsByCharFilter,
    RepeatedParagraphsFilter,
    RepeatingDuplicateNGramsFilter,
    RepeatingTopNGramsFilter,
)
from curator_dask.stages.filters.url import DomainBlocklistFilter, UrlKeywordFilter
from curator_dask.stages.filters.vocabulary import (
    CommonEnglishWordsFilter,
    PornographicUrlsFilter,
    SubstringFilter,
    TokenCountFilter,
    WordsWithoutAlphabetsFilter,
)

__all__ = [
    "AlphaFilter",
    "BoilerPlateStringFilter",
    "BulletsFilter",
    "C4QualityFilter",
    "CommonEnglishWordsFilter",
    "DocumentFilter",
    "DomainBlocklistFilter",
    "EllipsisFilter",
    "Filter",
    "FineWebQualityFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "LongWordFilter",
    "MeanWordLengthFilter",
    "NonAlphaNumericFilter",
    "NumberOfLinesOfCodeFilter",
    "NumbersFilter",
    "ParenthesesFilter",
    "PornographicUrlsFilter",
    "PunctuationFilter",
    "RepeatedLinesByCharFilter",
    "RepeatedLinesFilter",
    "RepeatedParagraphsByCharFilter",
    "RepeatedParagraphsFilter",
    "RepeatingDuplicateNGramsFilter",
    "RepeatingTopNGramsFilter",
    "Score",
    "ScoreFilter",
    "SubstringFilter",
    "SymbolsToWordsFilter",
    "TokenCountFilter",
    "UrlKeywordFilter",
    "UrlsFilter",
    "WhiteSpaceFilter",
    "WordCountFilter",
    "WordsWithoutAlphabetsFilter",
    "XMLHeaderFilter",
]
