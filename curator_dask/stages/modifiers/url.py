"""URL removal, as one whole-partition regular expression."""

from __future__ import annotations

import pyarrow.compute as pc

from curator_dask.stages.modifiers.base import DocumentModifier
from curator_dask.text import arrow_text, like_input, re2_class

__all__ = ["UrlRemover"]


class UrlRemover(DocumentModifier):
    """Remove URLs: ``https?://`` or ``www.`` (any case) up to the next whitespace, as
    NeMo Curator's ``UrlRemover`` (``re.compile(r"https?://\\S+|www\\.\\S+", re.I)``).

    Whitespace is Python's (``str.isspace``), so the result equals NeMo Curator's.

    Examples
    --------
    >>> import pandas as pd
    >>> UrlRemover().modify(pd.Series(["see https://a.io/x?y=1 and WWW.b.org."])).tolist()
    ['see  and ']
    """

    name = "url_remover"

    def modify(self, text):
        non_space = f"[^{re2_class('space')}]+"
        pattern = f"(?i)https?://{non_space}|www\\.{non_space}"
        return like_input(pc.replace_substring_regex(arrow_text(text), pattern, "").to_pandas(),
                          text, "str")
