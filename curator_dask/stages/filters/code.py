"""Filters for source code, from NeMo Curator's code filters (after StarCoder,
Li et al. 2023, arXiv:2305.06161): names, parameters, defaults and drop reasons as in
``nemo_curator/filters/code.py``.

The comment-ratio filters (which need a parser per language), the tokenizer-fertility
filter (a SentencePiece model; :class:`~curator_dask.stages.filters.TokenCountFilter`
takes a tokenizer) and the HTML boilerplate filter (BeautifulSoup) are not here.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.text import arrow_text, count_classes, lengths, like_input, ratio

__all__ = ["AlphaFilter", "NumberOfLinesOfCodeFilter", "XMLHeaderFilter"]


class NumberOfLinesOfCodeFilter(DocumentFilter):
    """Keep files of ``min_lines`` to ``max_lines`` lines (inclusive).

    Score: ``len(text.split("\\n"))``, so an empty file has one line.

    Examples
    --------
    >>> import pandas as pd
    >>> f = NumberOfLinesOfCodeFilter(min_lines=2)
    >>> s = f.score(pd.Series(["x = 1", "x = 1\\ny = 2\\n", ""]))
    >>> s.tolist(), f.keep(s).tolist()
    ([1, 3, 1], [False, True, False])
    """

    name = "num_lines"
    score_dtype = "int64"

    def __init__(self, min_lines: int = 10, max_lines: int = 20000):
        self.min_lines, self.max_lines = min_lines, max_lines

    def score(self, text):
        newlines = pc.count_substring(arrow_text(text), "\n").to_numpy(zero_copy_only=False)
        return like_input(newlines.astype(np.int64) + 1, text, "int64")

    def keep(self, scores):
        return (scores >= self.min_lines) & (scores <= self.max_lines)


class XMLHeaderFilter(DocumentFilter):
    """Drop files whose first ``char_prefix_search_length`` (100) characters hold an XML
    declaration (``<?xml version=``): XML saved under a code file's extension.

    Score: 1 if found, else 0.

    Examples
    --------
    >>> import pandas as pd
    >>> XMLHeaderFilter().score(pd.Series(['<?xml version="1.0"?><a/>', "int main() {}"])).tolist()
    [1, 0]
    """

    name = "xml_header"
    score_dtype = "int64"

    def __init__(self, char_prefix_search_length: int = 100):
        self.char_prefix_search_length = char_prefix_search_length

    def score(self, text):
        prefix = pc.utf8_slice_codeunits(arrow_text(text), 0, self.char_prefix_search_length)
        found = pc.match_substring(prefix, "<?xml version=").to_numpy(zero_copy_only=False)
        return like_input(found.astype(np.int64), text, "int64")

    def keep(self, scores):
        return scores != 1


class AlphaFilter(DocumentFilter):
    """Keep files in which at least ``min_alpha_ratio`` (25%) of the characters are
    letters: files of numbers (tensors, tables) saved as code fall below.

    Score: letters / characters; 0.0 for an empty file (NeMo Curator divides by zero).
    A letter is what ``str.isalpha`` accepts; NeMo Curator uses ``regex``'s
    ``[[:alpha:]]`` (Unicode *Alphabetic*), which also accepts combining vowel signs and
    letter numerals such as Ⅻ.

    Examples
    --------
    >>> import pandas as pd
    >>> AlphaFilter().score(pd.Series(["abcd", "1, 2, 3, 4", ""])).tolist()
    [1.0, 0.0, 0.0]
    """

    name = "alpha_filter"
    score_dtype = "float64"

    def __init__(self, min_alpha_ratio: float = 0.25):
        self.min_alpha_ratio = min_alpha_ratio

    def score(self, text):
        arr = arrow_text(text)
        letters = count_classes(arr, "alpha")[:, 0]
        return like_input(ratio(letters, lengths(arr), empty=0.0), text, "float64")

    def keep(self, scores):
        return scores >= self.min_alpha_ratio
