"""The FineWeb-Edu classifiers: an educational-value score from 0 to 5 per document.

``HuggingFaceFW/fineweb-edu-classifier`` and NVIDIA's two classifiers trained on the same
documents with other annotators (Mixtral 8x22B, Nemotron-4 340B) are standard
``transformers`` sequence classifiers (BERT, on Snowflake arctic-embed-m) with one
regression output. As NeMo Curator computes them, each document gets

- ``pred_column``: the score, clipped to [0, 5] (float32);
- ``int_column``: that score rounded half to even, as an integer (int64);
- ``quality_label_column`` (when set): ``"high_quality"`` for a score of 2.5 or more,
  else ``"low_quality"``; ``filter_by`` keeps those labels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from curator_dask.compat import nemo_keywords
from curator_dask.resources import Resources
from curator_dask.stages.models.backend import column_like
from curator_dask.stages.models.base import ModelStage
from curator_dask.stages.models.classifier import check_filter_by, keep_labels, labelled
from curator_dask.stages.models.model_dir import ModelDir
from curator_dask.stages.models.named import (
    constructor_arguments,
    whole_document,
)
from curator_dask.stages.models.published import (
    check_layout,
    inspect_published_dir,
    resolve_model_dir,
)

__all__ = [
    "EDU_LABELS",
    "HIGH_QUALITY_FROM",
    "FineWebEduClassifier",
    "FineWebEduScorer",
    "FineWebMixtralEduClassifier",
    "FineWebNemotronEduClassifier",
]

#: The labels of ``quality_label_column``, and the score from which a document is high.
EDU_LABELS = ("high_quality", "low_quality")
HIGH_QUALITY_FROM = 2.5
MAX_SCORE = 5


class FineWebEduScorer(ModelStage):
    """Base of the FineWeb-Edu classifiers; see :class:`FineWebEduClassifier`."""

    model_kind = "sequence-classification"
    default_name = "fineweb_edu_scorer"

    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 cache_dir: str | os.PathLike | None = None, text_field: str = "text",
                 pred_column: str = "score", int_column: str = "score-int",
                 quality_label_column: str | None = None,
                 filter_by: Sequence[str] | None = None, max_chars: int | None = None,
                 max_length: int = 512, model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        self.cache_dir = cache_dir
        super().__init__(model_path, text_field=text_field,
                         model_inference_batch_size=model_inference_batch_size,
                         max_tokens_per_batch=max_tokens_per_batch,
                         max_chars=whole_document(max_chars), max_length=max_length,
                         device=device, dtype=dtype, pretokenized=pretokenized,
                         input_ids_column=input_ids_column, name=name,
                         resources=resources)
        self.pred_column = pred_column
        self.int_column = int_column
        self.quality_label_column = quality_label_column
        self.filter_by = check_filter_by(self.name, filter_by, EDU_LABELS)
        self.output_columns = {pred_column: "float32", int_column: "int64"}
        if quality_label_column is not None:
            self.output_columns[quality_label_column] = "str"

    def inspect(self, model_path, pretokenized: bool) -> ModelDir:
        owner = type(self).__name__
        path = resolve_model_dir(owner, model_path, self.cache_dir)
        model_dir = inspect_published_dir(owner, path, need_model_type=True,
                                          need_tokenizer=not pretokenized)
        labels = model_dir.config.get("num_labels", len(model_dir.config.get("id2label", {})))
        check_layout(owner, model_dir, [] if labels == 1 else [
            f"config.json describes {labels} outputs, not the one regression score"])
        return model_dir

    def forward_batch(self, input_ids, attention_mask):
        logits = self._model.model(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits.squeeze(-1).float()

    def attach(self, df, scores):
        if scores is None:
            scores = np.empty(0, dtype=np.float32)
        clipped = np.clip(scores, 0, MAX_SCORE).astype(np.float32)
        labels = np.where(scores >= HIGH_QUALITY_FROM, *EDU_LABELS).astype(object)
        columns = {self.pred_column: column_like(clipped, df, "values"),
                   self.int_column: column_like(np.rint(clipped).astype(np.int64), df, "values")}
        if self.quality_label_column is not None:
            columns[self.quality_label_column] = column_like(labels, df, "str")
        df = labelled(df.assign(**columns), self.name, self.int_column,
                      np.rint(clipped).astype(np.int64))
        return keep_labels(df, self.name, labels, self.filter_by)


class FineWebEduClassifier(FineWebEduScorer):
    """Score each document's educational value from 0 to 5 (FineWeb-Edu's classifier).

    Model: ``HuggingFaceFW/fineweb-edu-classifier`` (Apache-2.0), BERT (Snowflake
    arctic-embed-m) with one regression output, reading up to 512 tokens.

    Parameters
    ----------
    model_path : str or path-like, optional
        Local copy of the model (a ``save_pretrained`` directory). Default: its snapshot
        in the local Hugging Face cache (``cache_dir``); an error says how to download
        it when there is none.
    cache_dir : str or path-like, optional
        The Hugging Face cache to look in. Nothing is downloaded.
    text_field : str, default "text"
    pred_column : str, default "fineweb-edu-score"
        The score clipped to [0, 5] (float32).
    int_column : str, default "fineweb-edu-score-int"
        The clipped score rounded half to even (int64).
    quality_label_column : str, optional
        ``"high_quality"`` (score >= 2.5) or ``"low_quality"``; not written by default.
    filter_by : sequence of str, optional
        ``["high_quality"]`` keeps documents scoring 2.5 or more; the others are counted
        as ``"<name>.low_quality"``.
    max_chars : int or None, default None
        Characters of each document read (None or -1: all).
    max_length : int, default 512
    model_inference_batch_size : int, default 256
    max_tokens_per_batch, device, dtype, pretokenized, input_ids_column, name, resources
        See :class:`~curator_dask.stages.models.base.ModelStage`.

    Notes
    -----
    NeMo Curator 1.x's ``float_score_field``, ``int_score_field`` and ``label_field``
    name the same three columns (with a ``NeMoCuratorWarning``).

    Examples
    --------
    >>> from curator_dask.stages.models import FineWebEduClassifier
    >>> edu = FineWebEduClassifier("models/fineweb-edu-classifier")  # doctest: +SKIP
    >>> edu(ds).df["fineweb-edu-score-int"].value_counts()            # doctest: +SKIP
    """

    default_name = "fineweb_edu_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 cache_dir: str | os.PathLike | None = None, text_field: str = "text",
                 pred_column: str = "fineweb-edu-score",
                 int_column: str = "fineweb-edu-score-int",
                 quality_label_column: str | None = None,
                 filter_by: Sequence[str] | None = None, max_chars: int | None = None,
                 max_length: int = 512, model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(**constructor_arguments(locals()))


class FineWebMixtralEduClassifier(FineWebEduScorer):
    """Educational value from 0 to 5, trained on Mixtral 8x22B's annotations (NVIDIA).

    Model: ``nvidia/nemocurator-fineweb-mixtral-edu-classifier``, BERT with one
    regression output, reading up to 512 tokens. Parameters as
    :class:`FineWebEduClassifier`'s, with the columns ``fineweb-mixtral-edu-score``,
    ``fineweb-mixtral-edu-score-int`` and ``fineweb-mixtral-edu-score-label`` (written
    by default) and ``model_inference_batch_size=1024``.
    """

    default_name = "fineweb_mixtral_edu_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 cache_dir: str | os.PathLike | None = None, text_field: str = "text",
                 pred_column: str = "fineweb-mixtral-edu-score",
                 int_column: str = "fineweb-mixtral-edu-score-int",
                 quality_label_column: str | None = "fineweb-mixtral-edu-score-label",
                 filter_by: Sequence[str] | None = None, max_chars: int | None = None,
                 max_length: int = 512, model_inference_batch_size: int = 1024,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(**constructor_arguments(locals()))


class FineWebNemotronEduClassifier(FineWebEduScorer):
    """Educational value from 0 to 5, trained on Nemotron-4 340B's annotations (NVIDIA).

    Model: ``nvidia/nemocurator-fineweb-nemotron-4-edu-classifier``, BERT with one
    regression output, reading up to 512 tokens. Parameters as
    :class:`FineWebEduClassifier`'s, with the columns ``fineweb-nemotron-edu-score``,
    ``fineweb-nemotron-edu-score-int`` and ``fineweb-nemotron-edu-score-label`` (written
    by default) and ``model_inference_batch_size=1024``.
    """

    default_name = "fineweb_nemotron_edu_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 cache_dir: str | os.PathLike | None = None, text_field: str = "text",
                 pred_column: str = "fineweb-nemotron-edu-score",
                 int_column: str = "fineweb-nemotron-edu-score-int",
                 quality_label_column: str | None = "fineweb-nemotron-edu-score-label",
                 filter_by: Sequence[str] | None = None, max_chars: int | None = None,
                 max_length: int = 512, model_inference_batch_size: int = 1024,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(**constructor_arguments(locals()))

