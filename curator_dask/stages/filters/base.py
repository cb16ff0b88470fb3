"""The filter model: a :class:`DocumentFilter` scores and judges whole partitions, and
four stages apply filters and scores to a :class:`~curator_dask.DocumentDataset`.

A filter splits *measuring* from *deciding* (as NeMo Curator's ``score_document`` /
``keep_document``), so a score can be stored as a column without filtering, and a
stored score can be filtered on later:

- :class:`ScoreFilter` scores the text, optionally keeps the score column, drops the
  documents the filter rejects and counts them under the filter's ``name``;
- :class:`Score` only adds the score column;
- :class:`Filter` drops documents by an existing score column;
- ``Modify`` (in :mod:`curator_dask.stages.modifiers`) rewrites the text.

Every dropped document is counted (``DocumentDataset.dropped_counts()``). A composite
filter (Gopher, C4) names the rule that dropped each document, e.g.
``gopher_quality.word_count``; a document failing several rules counts once, under the
first failing rule in the filter's documented order.

Backends: a filter whose ``backend`` is ``"pandas"`` gets a pandas text column even when
partitions are cuDF; the copy to host and back happens here, in :func:`compute_scores`,
and nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from curator_dask.backends import is_cudf, rows_where
from curator_dask.dropped import record_dropped
from curator_dask.errors import ArgumentTypeError
from curator_dask.stages.base import ProcessingStage
from curator_dask.text import like_input, to_pandas_text

__all__ = [
    "DocumentFilter",
    "Filter",
    "Score",
    "ScoreFilter",
    "compute_scores",
    "dtype_name",
    "snake_case",
]


def dtype_name(dtype) -> str:
    """A score dtype as filters name them: ``int`` -> ``"int64"``, ``str`` -> ``"str"``.

    Examples
    --------
    >>> dtype_name(int), dtype_name(float), dtype_name(str), dtype_name("float32")
    ('int64', 'float64', 'str', 'float32')
    """
    if dtype in (str, "str", "string", object):
        return "str"
    return np.dtype(dtype).name


def snake_case(name: str) -> str:
    """A class name in snake case: the default name of a filter or modifier class.

    Examples
    --------
    >>> snake_case("HasDigit"), snake_case("URLRatioFilter"), snake_case("C4Rules2")
    ('has_digit', 'url_ratio_filter', 'c4_rules2')
    """
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class DocumentFilter:
    """Base class of document filters: vectorised scoring and keeping over a partition.

    Subclasses implement :meth:`score` (one value per document of a text Series) and
    :meth:`keep` (a bool Series from scores). A filter ported from NeMo Curator may
    instead implement the per-document ``score_document(text)`` and
    ``keep_document(score)``; the base class then loops over documents, which works but
    is much slower than a vectorised :meth:`score`.

    Attributes
    ----------
    name : str
        The drop reason documents rejected by this filter are counted under. A class that
        does not set it is named after itself in snake case (``HasDigit`` ->
        ``has_digit``), so two filter classes never count under one name.
    score_dtype : str
        dtype of the score column (``"float64"``, ``"int64"``, ``"bool"`` or ``"str"``).
    backend : {"pandas", "any"}
        ``"pandas"``: :meth:`score` needs a pandas Series (Arrow-backed strings); cuDF
        input is converted for it. ``"any"``: :meth:`score` uses only Series methods that
        pandas and cuDF share.
    default_field : str
        The column :class:`ScoreFilter` scores when not given ``text_field``
        (``"text"``; ``"url"`` for the URL filters).

    Examples
    --------
    >>> import pandas as pd
    >>> class HasDigit(DocumentFilter):
    ...     name = "has_digit"
    ...     score_dtype = "bool"
    ...     def score(self, text):
    ...         return text.str.contains("[0-9]", regex=True).astype(bool)
    ...     def keep(self, scores):
    ...         return scores
    >>> f = HasDigit()
    >>> f.score(pd.Series(["a1", "b"])).tolist(), f.keep_document(f.score_document("a1"))
    ([True, False], True)
    """

    name: str = "document_filter"
    score_dtype: str = "float64"
    backend: str = "pandas"
    default_field: str = "text"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in vars(cls):
            cls.name = snake_case(cls.__name__)

    def score(self, text):
        """One score per document of ``text`` (a Series), on the same index."""
        if type(self).score_document is DocumentFilter.score_document:
            raise NotImplementedError(
                f"{type(self).__name__} must implement score(text) over a whole text Series "
                "(or, slower, score_document(text) for one document)"
            )
        values = [self.score_document(_as_str(v)) for v in to_pandas_text(text).tolist()]
        return like_input(np.asarray(values, dtype=_numpy_dtype(self.score_dtype)), text,
                          self.score_dtype)

    def keep(self, scores):
        """A bool Series: True for the documents to keep."""
        if type(self).keep_document is DocumentFilter.keep_document:
            raise NotImplementedError(
                f"{type(self).__name__} must implement keep(scores) over a score Series "
                "(or, slower, keep_document(score) for one score)"
            )
        values = [bool(self.keep_document(v)) for v in scores.tolist()]
        return like_input(np.asarray(values, dtype=bool), scores)

    def drop_reasons(self, scores) -> pd.Series | None:
        """For composite filters: the rule that rejected each document of ``scores``
        (only rejected documents are passed), as a Series of rule names; ``None`` means
        every rejection counts under :attr:`name`."""
        return None

    # -- one document at a time: NeMo Curator's interface, for porting and testing ---------
    def score_document(self, text: str):
        """The score of one document."""
        return self.score(pd.Series([text], dtype="str")).iloc[0]

    def keep_document(self, score) -> bool:
        """Whether a document with this score is kept."""
        return bool(self.keep(pd.Series([score], dtype=self.score_dtype)).iloc[0])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _as_str(value) -> str:
    return value if isinstance(value, str) else ""


def _numpy_dtype(dtype: str):
    return object if dtype == "str" else np.dtype(dtype)


def compute_scores(filter_obj: DocumentFilter, text):
    """``filter_obj.score(text)`` on the backend it needs, returned on ``text``'s backend,
    with the filter's score dtype."""
    if is_cudf(text) and getattr(filter_obj, "backend", "pandas") == "pandas":
        scores = filter_obj.score(to_pandas_text(text))
        return like_input(scores, text, filter_obj.score_dtype)
    scores = filter_obj.score(text)
    return _with_dtype(scores, text, filter_obj.score_dtype)


def _with_dtype(values, text, dtype):
    if isinstance(values, pd.Series) or is_cudf(values):
        if str(values.dtype) != dtype:
            values = values.astype(dtype)
        values.index = text.index
        return values
    return like_input(values, text, dtype)


def _mask(keep, df):
    """A boolean mask aligned with ``df`` on its backend (missing counts as False)."""
    if is_cudf(df):
        return keep.fillna(False).astype(bool)
    if isinstance(keep, pd.Series):
        keep = keep.fillna(False) if keep.hasnans else keep
        return keep.to_numpy(dtype=bool)
    return np.asarray(keep, dtype=bool)


def _drop_and_count(df, keep, name: str, reasons: Callable | None):
    """Rows of ``df`` where ``keep``; the rest counted under ``name`` (or per rule)."""
    mask = _mask(keep, df)
    n_dropped = len(mask) - int(mask.sum())
    out = rows_where(df, mask)
    if not n_dropped:
        return out
    rules = reasons(~mask) if reasons is not None else None
    if rules is None:
        return record_dropped(out, name, n_dropped)
    rules = to_pandas_text(rules) if is_cudf(rules) else rules
    counted = 0
    for rule, count in rules.value_counts(dropna=True).items():
        record_dropped(out, f"{name}.{rule}", int(count))
        counted += int(count)
    return record_dropped(out, name, n_dropped - counted)


class ScoreFilter(ProcessingStage):
    """Score every document with a filter, drop the rejected ones and count them.

    Parameters
    ----------
    filter_obj : DocumentFilter
    text_field : str, optional
        The column scored; default: the filter's ``default_field`` (``"text"``).
    score_field : str, optional
        Keep the scores in this column (otherwise they are discarded).
    score_type : str or type, optional
        dtype of the score column (``"float32"``, ``int``); default: the filter's
        ``score_dtype``.
    invert : bool, default False
        Keep the documents the filter rejects instead; the others are counted under
        ``"<name>.inverted"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> from curator_dask.stages.filters import WordCountFilter
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["one two three", "one"]}))
    >>> kept = ScoreFilter(WordCountFilter(min_words=2), score_field="word_count")(ds)
    >>> kept.df.compute()[["text", "word_count"]].values.tolist()
    [['one two three', 3]]
    >>> kept.dropped_counts()
    {'word_count': 1}
    >>> ScoreFilter(WordCountFilter(), score_field="n", score_type=float).output_columns
    {'n': 'float64'}
    """

    def __init__(self, filter_obj: DocumentFilter, text_field: str | None = None,
                 score_field: str | None = None, score_type: str | type | None = None,
                 invert: bool = False):
        _check_filter(filter_obj, "ScoreFilter")
        self.filter_obj = filter_obj
        self.text_field = text_field if text_field is not None else filter_obj.default_field
        self.score_field = score_field
        self.score_type = dtype_name(score_type) if score_type is not None \
            else filter_obj.score_dtype
        self.invert = invert
        self.name = filter_obj.name
        self.output_columns = {score_field: self.score_type} if score_field else {}

    @property
    def input_columns(self) -> list[str]:
        return [self.text_field]

    def process(self, df):
        scores = compute_scores(self.filter_obj, df[self.text_field])
        keep = self.filter_obj.keep(scores)
        if self.score_field is not None:
            stored = scores if str(scores.dtype) == self.score_type \
                else scores.astype(self.score_type)
            df = df.assign(**{self.score_field: stored})
        if self.invert:
            return _drop_and_count(df, ~_mask(keep, df), f"{self.name}.inverted", None)
        return _drop_and_count(df, keep, self.name, _reasons(self.filter_obj, scores))


class Score(ProcessingStage):
    """Add a score column without filtering.

    Parameters
    ----------
    score_fn : DocumentFilter or callable
        A filter (its :meth:`~DocumentFilter.score` is used) or a function of the whole
        text Series returning one value per document.
    score_field : str
        Column to write.
    text_field : str, default "text"
    score_type : str, optional
        dtype of the column; defaults to the filter's ``score_dtype``, or ``"float64"``
        for a function.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["ab", "abcd"]}))
    >>> lengths = Score(lambda text: text.str.len(), "length", score_type="int64")(ds)
    >>> lengths.df.compute()["length"].tolist()
    [2, 4]
    """

    def __init__(self, score_fn: DocumentFilter | Callable, score_field: str,
                 text_field: str = "text", score_type: str | None = None):
        if not isinstance(score_fn, DocumentFilter) and not callable(score_fn):
            raise ArgumentTypeError(
                f"Score takes a DocumentFilter or a function, got {type(score_fn).__name__}")
        self.score_fn = score_fn
        self.score_field = score_field
        self.text_field = text_field
        if score_type is None:
            score_type = score_fn.score_dtype if isinstance(score_fn, DocumentFilter) else "float64"
        self.score_type = score_type
        self.name = f"score_{score_field}"
        self.output_columns = {score_field: score_type}

    @property
    def input_columns(self) -> list[str]:
        return [self.text_field]

    def process(self, df):
        text = df[self.text_field]
        if isinstance(self.score_fn, DocumentFilter):
            scores = compute_scores(self.score_fn, text)
            if str(scores.dtype) != self.score_type:
                scores = scores.astype(self.score_type)
        else:
            scores = _with_dtype(self.score_fn(text), text, self.score_type)
        return df.assign(**{self.score_field: scores})


class Filter(ProcessingStage):
    """Drop documents by an existing score column, counting them.

    Parameters
    ----------
    filter_fn : DocumentFilter or callable
        A filter (its :meth:`~DocumentFilter.keep` is used) or a function of the score
        Series returning a bool Series (True = keep).
    filter_field : str
        The score column.
    invert : bool, default False
        Keep the documents that would be dropped.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> from curator_dask.stages.filters import WordCountFilter
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a b c", "a"], "n": [3, 1]}))
    >>> out = Filter(WordCountFilter(min_words=2), "n")(ds)
    >>> out.df.compute()["text"].tolist(), out.dropped_counts()
    (['a b c'], {'word_count': 1})
    """

    def __init__(self, filter_fn: DocumentFilter | Callable, filter_field: str,
                 invert: bool = False):
        if not isinstance(filter_fn, DocumentFilter) and not callable(filter_fn):
            raise ArgumentTypeError(
                f"Filter takes a DocumentFilter or a function, got {type(filter_fn).__name__}")
        self.filter_fn = filter_fn
        self.filter_field = filter_field
        self.invert = invert
        self.name = (filter_fn.name if isinstance(filter_fn, DocumentFilter)
                     else getattr(filter_fn, "__name__", "filter"))

    @property
    def input_columns(self) -> list[str]:
        return [self.filter_field]

    def process(self, df):
        scores = df[self.filter_field]
        if isinstance(self.filter_fn, DocumentFilter):
            keep = self.filter_fn.keep(scores)
            reasons = _reasons(self.filter_fn, scores)
        else:
            keep = self.filter_fn(scores)
            reasons = None
        if self.invert:
            return _drop_and_count(df, ~_mask(keep, df), f"{self.name}.inverted", None)
        return _drop_and_count(df, keep, self.name, reasons)


def _reasons(filter_obj: DocumentFilter, scores):
    if type(filter_obj).drop_reasons is DocumentFilter.drop_reasons:
        return None

    def reasons(dropped_mask):
        return filter_obj.drop_reasons(scores[dropped_mask])

    return reasons


def _check_filter(filter_obj, stage: str) -> None:
    if not isinstance(filter_obj, DocumentFilter):
        raise ArgumentTypeError(
            f"{stage} takes a DocumentFilter, got {type(filter_obj).__name__}; wrap a scoring "
            "function with Score(fn, score_field) and filter on it with Filter(fn, score_field)"
        )
