"""Names, places and other entities without a fixed shape, through Microsoft Presidio and a
spaCy pipeline loaded from a local directory (no model hub is contacted).

Presidio's ``AnalyzerEngine`` runs the spaCy pipeline over every document, so this path
costs a model pass per document (batched with ``nlp.pipe``) and is much slower than the
patterns; it runs only for the entity types the patterns do not cover.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np

from curator_dask.errors import MissingDependencyError
from curator_dask.stages.models.model_dir import ModelDirectoryError
from curator_dask.stages.pii.patterns import Spans

__all__ = ["PRESIDIO_ENTITIES", "PresidioFinder", "check_spacy_dir"]

logger = logging.getLogger(__name__)

#: NeMo Curator's default PII entities that the patterns do not cover (its ``ADDRESS``
#: recognizer is NeMo's own and is not included).
PRESIDIO_ENTITIES = ("PERSON", "LOCATION", "DATE_TIME", "US_PASSPORT", "US_DRIVER_LICENSE")


def check_spacy_dir(path: str | os.PathLike) -> str:
    """The absolute path of a spaCy pipeline directory, or a :class:`ModelDirectoryError`
    that says what is missing (checked on the client, before any worker loads it)."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isdir(path):
        raise ModelDirectoryError(
            f"spaCy model directory {path!r} does not exist; save a pipeline there with "
            "nlp.to_disk(path) (or `python -m spacy package`) and pass its path as "
            "nlp_model_dir")
    if not os.path.isfile(os.path.join(path, "config.cfg")):
        raise ModelDirectoryError(
            f"{path!r} is not a spaCy pipeline directory: it has no config.cfg (found "
            f"{sorted(os.listdir(path))[:8]}); save the pipeline with nlp.to_disk(path)")
    return path


def _require_presidio() -> None:
    # Only looked up: importing Presidio imports transformers (and torch where installed),
    # which takes seconds; that happens where the model is loaded, on the workers.
    from importlib.util import find_spec

    missing = [name for name in ("presidio_analyzer", "spacy") if find_spec(name) is None]
    if missing:
        raise MissingDependencyError(
            f"entities found by a model (PERSON, LOCATION, ...) need {' and '.join(missing)}: "
            "pip install 'curator-dask[pii]'")


class PresidioFinder:
    """Find ``entities`` with Presidio over a spaCy pipeline in ``model_dir``.

    Parameters
    ----------
    model_dir : str
        A spaCy pipeline saved with ``nlp.to_disk`` (its ``ner`` labels are mapped to
        Presidio's entity types: ``PERSON``/``PER`` to ``PERSON``, ``GPE``/``LOC`` to
        ``LOCATION``, ...).
    entities : sequence of str
        Presidio entity types to report.
    language : str
    score_threshold : float
        Results scoring lower are ignored (Presidio's default is 0).
    batch_size : int
        Documents per ``nlp.pipe`` batch.
    """

    def __init__(self, model_dir: str, entities: Sequence[str], language: str = "en",
                 score_threshold: float = 0.0, batch_size: int = 32):
        self.model_dir = check_spacy_dir(model_dir)
        _require_presidio()
        self.entities = tuple(entities)
        self.language = language
        self.score_threshold = score_threshold
        self.batch_size = batch_size
        self._batch = None

    def load(self) -> None:
        from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine, RecognizerRegistry
        from presidio_analyzer.nlp_engine import SpacyNlpEngine

        engine = SpacyNlpEngine(models=[{"lang_code": self.language,
                                         "model_name": self.model_dir}])
        engine.load()
        registry = RecognizerRegistry(supported_languages=[self.language])
        registry.load_predefined_recognizers(languages=[self.language], nlp_engine=engine)
        analyzer = AnalyzerEngine(registry=registry, nlp_engine=engine,
                                  supported_languages=[self.language])
        self._batch = BatchAnalyzerEngine(analyzer)
        logger.debug("Presidio loaded with the spaCy pipeline in %s", self.model_dir)

    def release(self) -> None:
        self._batch = None

    def find(self, texts: Sequence[str]) -> Spans:
        """The entities of each text; ``docs`` are positions in ``texts``."""
        if self._batch is None:
            self.load()
        results = self._batch.analyze_iterator(
            list(texts), language=self.language, entities=list(self.entities),
            score_threshold=self.score_threshold, batch_size=self.batch_size)
        docs, starts, ends, kinds = [], [], [], []
        index = {e: k for k, e in enumerate(self.entities)}
        for doc, found in enumerate(results):
            for r in found:
                if r.entity_type in index:
                    docs.append(doc)
                    starts.append(r.start)
                    ends.append(r.end)
                    kinds.append(index[r.entity_type])
        return Spans(np.asarray(docs, np.int64), np.asarray(starts, np.int64),
                     np.asarray(ends, np.int64), np.asarray(kinds, np.int64), self.entities)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_batch"] = None  # loaded again on the worker, from model_dir
        return state
