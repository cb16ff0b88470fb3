"""The modifier model: a :class:`DocumentModifier` rewrites a whole partition's text, and
the :class:`Modify` stage applies it to a :class:`~curator_dask.DocumentDataset`.

A modifier whose ``backend`` is ``"pandas"`` gets a pandas text column even when
partitions are cuDF; the copy to host and back happens in :func:`modify_text` only.
"""

from __future__ import annotations

import pandas as pd

from curator_dask.backends import is_cudf
from curator_dask.compat import nemo_keywords
from curator_dask.errors import ArgumentTypeError
from curator_dask.stages.base import ProcessingStage
from curator_dask.stages.filters.base import snake_case
from curator_dask.text import like_input, to_pandas_text

__all__ = ["DocumentModifier", "Modify", "modify_text"]


class DocumentModifier:
    """Base class of text modifiers.

    Subclasses implement :meth:`modify` over a whole text Series. A modifier ported from
    NeMo Curator may implement the per-document ``modify_document(text)`` instead; the
    base class then loops over documents (correct, but slower than a vectorised
    :meth:`modify`).

    Attributes
    ----------
    name : str
        The stage's name; a class that does not set it is named after itself in snake
        case (``Upper`` -> ``upper``).
    backend : {"pandas", "any"}
        ``"pandas"``: :meth:`modify` needs a pandas Series; cuDF input is converted.

    Examples
    --------
    >>> import pandas as pd
    >>> class Upper(DocumentModifier):
    ...     name = "upper"
    ...     backend = "any"
    ...     def modify(self, text):
    ...         return text.str.upper()
    >>> Upper().modify_document("abc")
    'ABC'
    """

    name: str = "document_modifier"
    backend: str = "pandas"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in vars(cls):
            cls.name = snake_case(cls.__name__)

    def modify(self, text):
        """The modified text, one string per document, on the same index."""
        if type(self).modify_document is DocumentModifier.modify_document:
            raise NotImplementedError(
                f"{type(self).__name__} must implement modify(text) over a whole text Series "
                "(or, slower, modify_document(text) for one document)"
            )
        values = [self.modify_document(v if isinstance(v, str) else "")
                  for v in to_pandas_text(text).tolist()]
        return like_input(values, text, "str")

    def modify_document(self, text: str) -> str:
        """One document, modified."""
        return self.modify(pd.Series([text], dtype="str")).iloc[0]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def modify_text(modifier: DocumentModifier, text):
    """``modifier.modify(text)`` on the backend it needs, returned on ``text``'s backend
    with ``text``'s index and dtype."""
    if is_cudf(text) and modifier.backend == "pandas":
        out = like_input(modifier.modify(to_pandas_text(text)), text, "str")
    else:
        out = modifier.modify(text)
    out.index = text.index
    if out.dtype != text.dtype:
        out = out.astype(text.dtype)
    return out


class Modify(ProcessingStage):
    """Rewrite the text column of every document with a modifier.

    Parameters
    ----------
    modifier : DocumentModifier
    text_field : str, default "text"

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> from curator_dask.stages.modifiers import NewlineNormalizer
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a\\n\\n\\n\\nb"]}))
    >>> Modify(NewlineNormalizer())(ds).df.compute()["text"].tolist()
    ['a\\n\\nb']
    """

    @nemo_keywords()
    def __init__(self, modifier: DocumentModifier, text_field: str = "text"):
        if not isinstance(modifier, DocumentModifier):
            raise ArgumentTypeError(
                f"Modify takes a DocumentModifier, got {type(modifier).__name__}")
        self.modifier = modifier
        self.text_field = text_field
        self.name = modifier.name

    @property
    def input_columns(self) -> list[str]:
        return [self.text_field]

    def process(self, df):
        return df.assign(**{self.text_field: modify_text(self.modifier, df[self.text_field])})
