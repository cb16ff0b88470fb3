"""C4's line cleaning as a modifier (the rules are in
:mod:`curator_dask.stages.filters.c4`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.stages.filters.c4 import c4_lines
from curator_dask.stages.modifiers.base import DocumentModifier
from curator_dask.text import arrow_text, like_input

__all__ = ["C4LineCleaner"]


class C4LineCleaner(DocumentModifier):
    """Keep only the lines C4 keeps (Raffel et al. 2020, section 2.2): lines ending in
    terminal punctuation, with at least ``min_words_per_line`` words, no word over
    ``max_word_length`` characters, no "javascript" and no cookie or policy notice;
    Wikipedia citation marks are removed. Kept lines are stripped and joined with
    ``\\n``, as datatrove's ``C4QualityFilter`` rewrites documents.

    This modifier never drops a document; drop those C4 rejects whole ("lorem ipsum",
    curly brackets, fewer than 5 sentences) with
    ``ScoreFilter(C4QualityFilter())`` before cleaning. A document with no kept line
    becomes ``""``.

    Examples
    --------
    >>> import pandas as pd
    >>> text = ("Menu\\nThis is a real sentence.[1]\\nEnable JavaScript to see it.\\n"
    ...         "We use cookies here.")
    >>> C4LineCleaner().modify(pd.Series([text])).tolist()
    ['This is a real sentence.']
    """

    name = "c4_line_cleaner"

    def __init__(self, remove_citations: bool = True, filter_no_terminal_punct: bool = True,
                 min_words_per_line: int = 3, max_word_length: int = 1000,
                 filter_javascript: bool = True, filter_policy: bool = True):
        self.options = dict(
            remove_citations=remove_citations, filter_no_terminal_punct=filter_no_terminal_punct,
            min_words_per_line=min_words_per_line, max_word_length=max_word_length,
            filter_javascript=filter_javascript, filter_policy=filter_policy,
            min_num_sentences=-1, filter_lorem_ipsum=False, filter_curly_bracket=False,
        )

    def modify(self, text):
        arr = arrow_text(text)
        result = c4_lines(arr, **self.options)
        kept = result.lines.filter(result.kept)
        offsets = pa.array(kept.doc_offsets.astype(np.int64), pa.int64())
        lists = pa.LargeListArray.from_arrays(offsets, kept.values)
        joined = pc.binary_join(lists, pa.scalar("\n", pa.large_string()))
        return like_input(pc.utf8_trim_whitespace(joined).to_pandas(), text, "str")
