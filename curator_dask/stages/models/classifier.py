"""ClassifierStage: label every document with a sequence classifier, optionally filter.

The model is any Hugging Face ``AutoModelForSequenceClassification`` saved in a local
directory (a fine-tuned BERT/DeBERTa/RoBERTa quality or domain classifier). Labels come
from the config's ``id2label`` unless given. Batching, lifecycle and devices are those
of :class:`~curator_dask.stages.models.base.ModelStage`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from curator_dask.backends import is_cudf, rows_where
from curator_dask.compat import nemo_keywords
from curator_dask.dropped import record_distribution, record_dropped
from curator_dask.errors import CuratorError
from curator_dask.resources import Resources
from curator_dask.stages.models.backend import VECTOR_DTYPE, column_like
from curator_dask.stages.models.base import ModelStage

__all__ = [
    "ClassifierOptionError",
    "ClassifierStage",
    "check_filter_by",
    "keep_labels",
    "labelled",
]


class ClassifierOptionError(CuratorError, ValueError):
    """A classifier option that cannot work with its model (a label it does not predict)."""


def check_filter_by(owner: str, filter_by, labels: Sequence) -> list | None:
    """``filter_by`` as a list, checked against the ``labels`` a classifier predicts.

    >>> check_filter_by("quality", "High", ["Low", "Medium", "High"])
    ['High']
    """
    if filter_by is None:
        return None
    if isinstance(filter_by, (str, bool)):
        filter_by = [filter_by]
    filter_by = list(filter_by)
    unknown = [label for label in filter_by if label not in list(labels)]
    if unknown:
        raise ClassifierOptionError(
            f"{owner}: filter_by names label(s) {unknown} that the model does not predict; "
            f"its labels are {list(labels)}")
    return filter_by


def labelled(df, stage_name: str, column: str, values):
    """``df`` with ``values`` counted as the label distribution of ``column`` (see
    :func:`~curator_dask.dropped.record_distribution`)."""
    return record_distribution(df, stage_name, column, values)


def keep_labels(df, stage_name: str, labels: np.ndarray, filter_by: Sequence | None):
    """The rows of ``df`` whose label (``labels``, one per row) is in ``filter_by``.

    The other rows are counted as dropped per label, ``"<stage name>.<label>"``. Without
    ``filter_by``, ``df`` itself.
    """
    if filter_by is None:
        return df
    labels = np.asarray(labels)
    keep = np.isin(labels, np.asarray(filter_by, dtype=labels.dtype))
    out = rows_where(df, column_like(keep, df, "bool") if is_cudf(df) else keep)
    dropped, counts = np.unique(labels[~keep].astype(str), return_counts=True)
    for label, count in zip(dropped.tolist(), counts.tolist(), strict=True):
        record_dropped(out, f"{stage_name}.{label}", count)
    return out


class ClassifierStage(ModelStage):
    """Predict a label per document; keep only ``filter_by`` labels if given.

    Adds ``pred_column`` (the label, ``str``) and, when ``prob_column`` is given, the
    probability of every label (float32 vectors in ``labels`` order, as NeMo Curator's
    classifiers). With ``filter_by``, documents predicted as another label are dropped
    and counted per label as ``"<stage name>.<label>"`` (see
    ``DocumentDataset.dropped_counts()``).

    Parameters
    ----------
    model_path : str or path-like
        Local ``save_pretrained`` directory of a sequence-classification model and its
        tokenizer.
    labels : sequence of str, optional
        Class names in class-index order; default the config's ``id2label``.
    text_field : str, default "text"
    pred_column : str, default "label"
    prob_column : str, optional
        Column for the probabilities of all labels.
    filter_by : sequence of str, optional
        Labels to keep; others are dropped.
    model_inference_batch_size : int, default 256
    max_chars : int or None, default 6000
    device : {"auto", "cpu", "cuda", "cuda:N"}, default "auto"
    dtype : {"auto", "float32", "bfloat16", "float16"}, default "auto"
    max_tokens_per_batch, max_length, pretokenized, input_ids_column
        See :class:`~curator_dask.stages.models.base.ModelStage`.
    trust_remote_code, name, resources
        See :class:`~curator_dask.stages.models.base.ModelStage`.

    Examples
    --------
    >>> from curator_dask.stages.models import ClassifierStage
    >>> quality = ClassifierStage("models/quality-deberta", filter_by=["High", "Medium"],
    ...                           prob_column="quality_probs")  # doctest: +SKIP
    >>> kept = quality(ds)                                        # doctest: +SKIP
    >>> kept.dropped_counts()                                     # doctest: +SKIP
    {'quality-deberta_classifier.Low': 1234}
    """

    model_kind = "sequence-classification"
    output_suffix = "classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike, labels: Sequence[str] | None = None, *,
                 text_field: str = "text", pred_column: str = "label",
                 prob_column: str | None = None, filter_by: Sequence[str] | None = None,
                 model_inference_batch_size: int = 256, max_chars: int | None = 6000,
                 device: str = "auto", dtype: str = "auto",
                 max_tokens_per_batch: int | None = None, max_length: int | None = None,
                 pretokenized: bool = False, input_ids_column: str = "input_ids",
                 trust_remote_code: bool = False, name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(model_path, text_field=text_field,
                         model_inference_batch_size=model_inference_batch_size,
                         max_tokens_per_batch=max_tokens_per_batch, max_chars=max_chars,
                         max_length=max_length, device=device, dtype=dtype,
                         pretokenized=pretokenized, input_ids_column=input_ids_column,
                         trust_remote_code=trust_remote_code, name=name, resources=resources)
        self.labels = self._resolve_labels(labels)
        self.pred_column = pred_column
        self.prob_column = prob_column
        self.filter_by = check_filter_by(self.name, filter_by, self.labels)
        self.output_columns = {pred_column: "str"}
        if prob_column is not None:
            self.output_columns[prob_column] = VECTOR_DTYPE

    def _resolve_labels(self, labels) -> list[str]:
        config_labels = self.model_dir.labels
        if labels is None:
            if config_labels is None:
                raise ClassifierOptionError(
                    f"{self.model_path}/config.json has no id2label; pass labels= (class "
                    "names in class-index order)"
                )
            return config_labels
        labels = [str(label) for label in labels]
        if config_labels is not None and len(labels) != len(config_labels):
            raise ClassifierOptionError(
                f"labels= has {len(labels)} names but the model in {self.model_path} has "
                f"{len(config_labels)} classes ({config_labels})"
            )
        if len(set(labels)) != len(labels):
            raise ClassifierOptionError(f"labels= must be distinct, got {labels}")
        return labels

    def logits(self, input_ids, attention_mask):
        """The class logits of one padded batch (the model's own forward)."""
        return self._model.model(input_ids=input_ids, attention_mask=attention_mask).logits

    def forward_batch(self, input_ids, attention_mask):
        return self.logits(input_ids, attention_mask).float().softmax(dim=-1)

    def attach(self, df, probs):
        if probs is None:
            probs = np.empty((0, len(self.labels)), dtype=np.float32)
        predicted = probs.argmax(axis=1) if len(probs) else np.empty(0, dtype=np.int64)
        names = np.asarray(self.labels, dtype=object)[predicted]
        columns = {self.pred_column: column_like(names, df, "str")}
        if self.prob_column is not None:
            columns[self.prob_column] = column_like(probs, df, "vectors")
        df = labelled(df.assign(**columns), self.name, self.pred_column, names)
        return keep_labels(df, self.name, names, self.filter_by)
