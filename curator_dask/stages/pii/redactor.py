"""The ``PiiRedactor`` stage: find personal information and replace, mask, hash or drop it."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import is_cudf, rows_where
from curator_dask.compat import nemo_keywords
from curator_dask.dropped import record_counter, record_dropped
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.resources import Resources
from curator_dask.stages.base import ProcessingStage
from curator_dask.stages.pii.patterns import PATTERN_ENTITIES, Spans, find_pattern_spans
from curator_dask.stages.pii.presidio import PRESIDIO_ENTITIES, PresidioFinder
from curator_dask.text import arrow_text

__all__ = ["ACTIONS", "SPANS_DTYPE", "PiiRedactor"]

#: What a found entity becomes.
ACTIONS = ("replace", "mask", "hash", "drop")

#: The type of the ``detect_only`` column: per document, a list of its entities.
SPANS_DTYPE = pd.ArrowDtype(pa.list_(pa.struct([("type", pa.string()), ("start", pa.int64()),
                                                ("end", pa.int64())])))


class PiiRedactor(ProcessingStage):
    """Find personal information in every document and redact it, or drop the document.

    Patterned entities (``EMAIL_ADDRESS``, ``PHONE_NUMBER``, ``IP_ADDRESS`` v4 and v6,
    ``CREDIT_CARD`` with the Luhn check, ``IBAN_CODE`` with the mod-97 check, ``US_SSN``
    with the invalid-number rules, ``URL``) are found with regular expressions over the
    whole partition (see :mod:`curator_dask.stages.pii.patterns`). Names, places and
    other entities (``PERSON``, ``LOCATION``, ``DATE_TIME``, ...) are found by Microsoft
    Presidio over a spaCy pipeline loaded from ``nlp_model_dir`` (the ``pii`` extra);
    that path runs a model over every document and is much slower.

    Overlapping entities: the longest wins; over the same characters a patterned type
    wins over a model-found one, and among patterned types the one listed first in
    :data:`~curator_dask.stages.pii.patterns.PATTERN_ENTITIES`.

    Every entity found is counted per type in the run's counters
    (``RunResult.counters``, ``DocumentDataset.counters()``) as ``"<name>.<TYPE>"``;
    with ``action="drop"`` each dropped document is also counted as a drop under the
    type of its first entity, so documents in = documents out + drops.

    Parameters
    ----------
    entities : sequence of str, optional
        Entity types to find. Default: every patterned type, and with ``nlp_model_dir``
        also NeMo Curator's model-found defaults
        (:data:`~curator_dask.stages.pii.presidio.PRESIDIO_ENTITIES`).
    action : {"replace", "mask", "hash", "drop"}, default "replace"
        ``replace``: the entity becomes its type in angle brackets (``<EMAIL_ADDRESS>``,
        Presidio's and NeMo Curator's default); ``mask``: each of its characters becomes
        ``mask_char`` (offsets are kept); ``hash``: it becomes
        ``<TYPE:digest>``, the first ``hash_length`` hex digits of HMAC-SHA256 keyed with
        ``salt`` (the same entity and salt give the same digest on every run, so
        occurrences stay linkable without being readable); ``drop``: documents with
        any entity are removed.
    detect_only : bool, default False
        Change nothing; add ``spans_field``, a list per document of its entities as
        ``{"type", "start", "end"}`` (character offsets into the text, end exclusive).
    text_field : str, default "text"
    spans_field : str, default "pii_spans"
    mask_char : str, default "*"
    salt : str, optional
        The HMAC key for ``action="hash"`` (required there). Keep it secret: whoever has
        it can test guesses against the digests.
    hash_length : int, default 16
        Hex digits of the digest kept (16 = 64 bits).
    nlp_model_dir : str, optional
        A spaCy pipeline directory (``nlp.to_disk``) for Presidio's model-found entities.
    language : str, default "en"
    score_threshold : float, default 0.0
        Presidio results scoring lower are ignored.
    presidio_batch_size : int, default 32
        Documents per spaCy batch.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": [
    ...     "Mail jane@example.com or call 415-555-2671.", "Nothing to see."]}))
    >>> out = PiiRedactor()(ds)
    >>> out.df.compute()["text"].tolist()
    ['Mail <EMAIL_ADDRESS> or call <PHONE_NUMBER>.', 'Nothing to see.']
    >>> out.counters()
    {'pii_redactor.EMAIL_ADDRESS': 1, 'pii_redactor.PHONE_NUMBER': 1}
    >>> spans = PiiRedactor(detect_only=True)(ds).df.compute()["pii_spans"]
    >>> spans.iloc[0]  # doctest: +NORMALIZE_WHITESPACE
    [{'type': 'EMAIL_ADDRESS', 'start': 5, 'end': 21},
     {'type': 'PHONE_NUMBER', 'start': 30, 'end': 42}]
    """

    @nemo_keywords()
    def __init__(self, entities: Sequence[str] | None = None, action: str = "replace",
                 detect_only: bool = False, text_field: str = "text",
                 spans_field: str = "pii_spans", mask_char: str = "*",
                 salt: str | None = None, hash_length: int = 16,
                 nlp_model_dir: str | None = None, language: str = "en",
                 score_threshold: float = 0.0, presidio_batch_size: int = 32):
        if action not in ACTIONS:
            raise InvalidArgumentError(f"action must be one of {list(ACTIONS)}, got {action!r}")
        if action == "hash" and not detect_only and not salt:
            raise InvalidArgumentError(
                "action='hash' needs salt= (a secret string): the digests are "
                "HMAC-SHA256 keyed with it, stable across runs for one salt")
        if not isinstance(mask_char, str) or len(mask_char) != 1:
            raise InvalidArgumentError(f"mask_char must be one character, got {mask_char!r}")
        if not 1 <= int(hash_length) <= 64:
            raise InvalidArgumentError(
                f"hash_length must be 1 to 64 hex digits, got {hash_length!r}")
        if entities is None:
            entities = PATTERN_ENTITIES + (PRESIDIO_ENTITIES if nlp_model_dir else ())
        elif isinstance(entities, str):
            entities = [entities]
        entities = tuple(dict.fromkeys(entities))
        if not entities:
            raise InvalidArgumentError("entities is empty: name at least one entity type")
        model_found = tuple(e for e in entities if e not in PATTERN_ENTITIES)
        if model_found and nlp_model_dir is None:
            raise InvalidArgumentError(
                f"entity type(s) {list(model_found)} are found by a model, not a pattern: "
                "pass nlp_model_dir= (a spaCy pipeline directory) or keep to the patterned "
                f"types {list(PATTERN_ENTITIES)}")
        self.entities = entities
        self.pattern_entities = tuple(e for e in PATTERN_ENTITIES if e in entities)
        # Where a model and a pattern mark the same characters, the checked pattern wins.
        self._types = self.pattern_entities + model_found
        self.action = action
        self.detect_only = detect_only
        self.text_field = text_field
        self.spans_field = spans_field
        self.mask_char = mask_char
        self.salt = salt
        self.hash_length = int(hash_length)
        self.nlp_model_dir = nlp_model_dir
        self.language = language
        self.presidio = (PresidioFinder(nlp_model_dir, model_found, language, score_threshold,
                                        presidio_batch_size) if model_found else None)
        self.name = "pii_redactor"
        self.resources = Resources(cpus=1)
        self.output_columns = {spans_field: SPANS_DTYPE} if detect_only else {}

    # -- lifecycle --------------------------------------------------------------------------
    def setup(self) -> None:
        if self.presidio is not None:
            self.presidio.load()

    def teardown(self) -> None:
        if self.presidio is not None:
            self.presidio.release()

    @property
    def input_columns(self) -> list[str]:
        return [self.text_field]

    # -- work -------------------------------------------------------------------------------
    def find(self, text: pd.Series) -> Spans:
        """The entities of a text Series, overlaps resolved, sorted by document and start;
        ``docs`` are row positions."""
        arr = arrow_text(text)
        parts = [find_pattern_spans(arr, self.pattern_entities)]
        if self.presidio is not None:
            parts.append(self.presidio.find(arr.to_pylist()))
        return Spans.concat(parts, self._types).resolve_overlaps()

    def process(self, df):
        if is_cudf(df):
            raise ArgumentTypeError(f"stage {self.name!r} works on pandas partitions; move the "
                                    "dataset to pandas first with ds.to_backend('pandas')")
        text = df[self.text_field]
        spans = self.find(text)
        counts = np.bincount(spans.kinds, minlength=len(spans.types))
        if self.detect_only:
            out = df.assign(**{self.spans_field: _spans_column(spans, len(df), df.index)})
        elif self.action == "drop":
            out = self._drop(df, spans)
        else:
            out = df.assign(**{self.text_field: self._redact(text, spans)})
        for entity, count in zip(spans.types, counts, strict=True):
            record_counter(out, f"{self.name}.{entity}", int(count))
        return out

    def _drop(self, df, spans: Spans):
        first = np.r_[True, spans.docs[1:] != spans.docs[:-1]] if len(spans) else \
            np.zeros(0, bool)
        keep = np.ones(len(df), bool)
        keep[spans.docs] = False
        out = rows_where(df, keep)
        per_type = np.bincount(spans.kinds[first], minlength=len(spans.types))
        for entity, count in zip(spans.types, per_type, strict=True):
            record_dropped(out, f"{self.name}.{entity}", int(count))
        return out

    def _replacement(self, entity: str, value: str) -> str:
        if self.action == "replace":
            return f"<{entity}>"
        if self.action == "mask":
            return self.mask_char * len(value)
        digest = hmac.new(self.salt.encode("utf-8"), value.encode("utf-8"), hashlib.sha256)
        return f"<{entity}:{digest.hexdigest()[:self.hash_length]}>"

    def _redact(self, text: pd.Series, spans: Spans) -> pd.Series:
        if not len(spans):
            return text
        # Only documents with an entity are rebuilt; the work is per entity, and every
        # other document keeps its original value (byte for byte, nulls included).
        changed, first = np.unique(spans.docs, return_index=True)
        bounds = np.r_[first, len(spans)]
        originals = text.iloc[changed].tolist()
        rebuilt = []
        for i, original in enumerate(originals):
            pieces, pos = [], 0
            for k in range(bounds[i], bounds[i + 1]):
                start, end = int(spans.starts[k]), int(spans.ends[k])
                pieces.append(original[pos:start])
                pieces.append(self._replacement(spans.types[spans.kinds[k]],
                                                original[start:end]))
                pos = end
            pieces.append(original[pos:])
            rebuilt.append("".join(pieces))
        out = text.copy()
        out.iloc[changed] = rebuilt
        return out


def _spans_column(spans: Spans, n_docs: int, index) -> pd.Series:
    offsets = np.zeros(n_docs + 1, np.int32)
    np.cumsum(np.bincount(spans.docs, minlength=n_docs), out=offsets[1:])
    types = pa.array(np.asarray(spans.types, dtype=object)[spans.kinds]
                     if len(spans) else [], pa.string())
    items = pa.StructArray.from_arrays([types, pa.array(spans.starts, pa.int64()),
                                        pa.array(spans.ends, pa.int64())],
                                       names=["type", "start", "end"])
    lists = pa.ListArray.from_arrays(pa.array(offsets), items)
    return pd.Series(pd.arrays.ArrowExtensionArray(lists), index=index)
