"""Newline and whitespace normalisation, as whole-partition regular expressions."""

from __future__ import annotations

import pyarrow.compute as pc

from curator_dask.stages.modifiers.base import DocumentModifier
from curator_dask.text import arrow_text, like_input, re2_class

__all__ = ["NewlineNormalizer", "WhitespaceNormalizer"]


class NewlineNormalizer(DocumentModifier):
    """Replace 3 or more consecutive newlines with 2 (and 3 or more ``\\r\\n`` with 2),
    as NeMo Curator's ``NewlineNormalizer``.

    Runs on pandas and cuDF partitions alike (``Series.str.replace``).

    Examples
    --------
    >>> import pandas as pd
    >>> NewlineNormalizer().modify(pd.Series(["a\\n\\n\\n\\nb", "c\\r\\n\\r\\n\\r\\nd"])).tolist()
    ['a\\n\\nb', 'c\\r\\n\\r\\nd']
    """

    name = "newline_normalizer"
    backend = "any"

    def modify(self, text):
        text = text.str.replace(r"(\n){3,}", "\n\n", regex=True)
        return text.str.replace(r"(\r\n){3,}", "\r\n\r\n", regex=True)


class WhitespaceNormalizer(DocumentModifier):
    """Normalise whitespace while keeping line structure:

    - every run of whitespace other than ``\\n`` (spaces, tabs, ``\\r``, no-break and
      other Unicode spaces: whatever ``str.isspace`` accepts) becomes one space;
    - spaces at the start and end of each line are removed;
    - the document is stripped.

    Blank lines are kept; collapse them with :class:`NewlineNormalizer`.

    Examples
    --------
    >>> import pandas as pd
    >>> texts = pd.Series(["  a \\t b\\u00a0c \\r\\n d  \\n\\n e ", None])
    >>> WhitespaceNormalizer().modify(texts).tolist()
    ['a b c\\nd\\n\\ne', '']
    """

    name = "whitespace_normalizer"

    def modify(self, text):
        arr = arrow_text(text)
        arr = pc.replace_substring_regex(arr, f"[{re2_class('space', exclude=chr(10))}]+", " ")
        arr = pc.replace_substring_regex(arr, " ?\n ?", "\n")
        return like_input(pc.utf8_trim_whitespace(arr).to_pandas(), text, "str")
