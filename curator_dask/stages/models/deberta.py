"""NVIDIA's DeBERTa classifiers: quality, domain, multilingual domain, content type.

Each is a DeBERTa-v3 (mDeBERTa-v3 for the multilingual one) backbone with a linear head
on the first token's state, saved with ``PyTorchModelHubMixin``: a ``config.json`` with
``base_model`` (the backbone's hub id), ``fc_dropout`` and ``id2label``, and one
``model.safetensors`` with the backbone (``model.*``) and the head (``fc.*``). The
backbone is built from its own ``config.json`` (``base_model_path``, or the local Hugging
Face cache) and gets its weights from the model's file: nothing is downloaded.

They run as :class:`~curator_dask.stages.models.ClassifierStage` does (sorted batching,
token budget, out-of-memory halving, one load per worker, CPU or GPU) and write what NeMo
Curator writes: the label in ``pred_column`` (``quality_pred``, ``domain_pred``,
``content_pred``) and, if ``prob_column`` is set, every label's probability.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from curator_dask.compat import nemo_keywords
from curator_dask.resources import Resources
from curator_dask.stages.models.classifier import ClassifierStage
from curator_dask.stages.models.loading import ModelBuilder
from curator_dask.stages.models.model_dir import ModelDir
from curator_dask.stages.models.named import (
    constructor_arguments,
    inspect_hub_mixin_dir,
    whole_document,
)

__all__ = [
    "ContentTypeClassifier",
    "DomainClassifier",
    "HubMixinClassifier",
    "MultilingualDomainClassifier",
    "QualityClassifier",
]


class HubMixinClassifier(ClassifierStage):
    """Base of the DeBERTa classifiers with a ``PyTorchModelHubMixin`` head.

    A subclass sets ``default_name`` and its defaults; see :class:`QualityClassifier`
    for the parameters.
    """

    model_kind = "hub-mixin first-token classifier"
    default_name = "hub_mixin_classifier"

    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 base_model_path: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 filter_by: Sequence[str] | None = None, text_field: str = "text",
                 pred_column: str = "pred", prob_column: str | None = None,
                 max_chars: int | None = 6000, max_length: int = 512,
                 model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        self.base_model_path = base_model_path
        self.cache_dir = cache_dir
        super().__init__(model_path, text_field=text_field, pred_column=pred_column,
                         prob_column=prob_column, filter_by=filter_by,
                         model_inference_batch_size=model_inference_batch_size,
                         max_chars=whole_document(max_chars), device=device, dtype=dtype,
                         max_tokens_per_batch=max_tokens_per_batch, max_length=max_length,
                         pretokenized=pretokenized, input_ids_column=input_ids_column,
                         name=name, resources=resources)

    def inspect(self, model_path, pretokenized: bool) -> ModelDir:
        model_dir, self.base_config_dir, self._tokenizer_path = inspect_hub_mixin_dir(
            type(self).__name__, model_path, cache_dir=self.cache_dir,
            base_model_path=self.base_model_path,
            config_keys=("base_model", "fc_dropout", "id2label"),
            tensor_prefixes=("model.", "fc.weight", "fc.bias"),
            need_tokenizer=not pretokenized)
        return model_dir

    def model_builder(self) -> ModelBuilder:
        return ModelBuilder("curator_dask.stages.models._heads:build_first_token_head",
                            (("base_config", self.base_config_dir),))

    def logits(self, input_ids, attention_mask):
        return self._model.model(input_ids, attention_mask)


class QualityClassifier(HubMixinClassifier):
    """Rate each document's quality High, Medium or Low (NVIDIA's quality classifier).

    Model: ``nvidia/quality-classifier-deberta`` (Apache-2.0), a DeBERTa-v3-base backbone
    with a linear head, reading up to 1,024 tokens. Adds ``pred_column`` (the label) and
    ``prob_column`` (the three probabilities, in label order); ``filter_by`` keeps only
    those labels and counts the others as ``"<name>.<label>"``.

    Parameters
    ----------
    model_path : str or path-like, optional
        Local copy of the model (``config.json``, ``model.safetensors``, tokenizer files).
        Default: its snapshot in the local Hugging Face cache (``cache_dir``); an error
        says how to download it when there is none.
    base_model_path : str or path-like, optional
        Directory with the backbone's ``config.json`` (``microsoft/deberta-v3-base``);
        default: the local Hugging Face cache.
    cache_dir : str or path-like, optional
        The Hugging Face cache to look in (default ``HF_HUB_CACHE``, else
        ``~/.cache/huggingface/hub``). Nothing is downloaded.
    filter_by : sequence of str, optional
        Labels to keep.
    text_field : str, default "text"
    pred_column : str, default "quality_pred"
    prob_column : str or None, default "quality_prob"
    max_chars : int or None, default 6000
        Characters of each document read (None or -1: all).
    max_length : int, default 1024
        Tokens of each document read.
    model_inference_batch_size : int, default 256
    max_tokens_per_batch, device, dtype, pretokenized, input_ids_column, name, resources
        See :class:`~curator_dask.stages.models.base.ModelStage`.

    Notes
    -----
    NeMo Curator's spellings work and warn: ``batch_size``, ``label_field``,
    ``score_field``, ``device_type``, ``autocast``; ``max_mem_gb``, ``sort_by_length``,
    ``keep_tokens``, ``use_existing_tokens`` are not needed and ignored.

    Examples
    --------
    >>> from curator_dask.stages.models import QualityClassifier
    >>> quality = QualityClassifier("models/quality-classifier-deberta",
    ...                             base_model_path="models/deberta-v3-base",
    ...                             filter_by=["High", "Medium"])  # doctest: +SKIP
    >>> kept = quality(ds)                                           # doctest: +SKIP
    """

    default_name = "quality_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 base_model_path: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 filter_by: Sequence[str] | None = None, text_field: str = "text",
                 pred_column: str = "quality_pred", prob_column: str | None = "quality_prob",
                 max_chars: int | None = 6000, max_length: int = 1024,
                 model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(**constructor_arguments(locals()))


class DomainClassifier(HubMixinClassifier):
    """Give each English document one of 26 domains (NVIDIA's domain classifier).

    Model: ``nvidia/domain-classifier`` (Apache-2.0), a DeBERTa-v3-base backbone with a
    linear head, reading up to 512 tokens. Adds ``pred_column`` (``domain_pred``) and,
    if set, ``prob_column``. Parameters as :class:`QualityClassifier`'s, with
    ``max_chars=2000`` and ``max_length=512``; the backbone is
    ``microsoft/deberta-v3-base``.
    """

    default_name = "domain_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 base_model_path: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 filter_by: Sequence[str] | None = None, text_field: str = "text",
                 pred_column: str = "domain_pred", prob_column: str | None = None,
                 max_chars: int | None = 2000, max_length: int = 512,
                 model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(**constructor_arguments(locals()))


class MultilingualDomainClassifier(HubMixinClassifier):
    """Give each document, in any of 52 languages, one of 26 domains.

    Model: ``nvidia/multilingual-domain-classifier`` (NVIDIA Open Model License), an
    mDeBERTa-v3-base backbone with a linear head, reading up to 512 tokens; the same
    labels as :class:`DomainClassifier`. Adds ``pred_column`` (``domain_pred``, NeMo
    Curator 0.x's name; 1.x writes ``multilingual_domain_pred``) and, if set,
    ``prob_column``. Parameters as :class:`QualityClassifier`'s, with
    ``max_chars=2000`` and ``max_length=512``; the backbone is
    ``microsoft/mdeberta-v3-base``.
    """

    default_name = "multilingual_domain_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 base_model_path: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 filter_by: Sequence[str] | None = None, text_field: str = "text",
                 pred_column: str = "domain_pred", prob_column: str | None = None,
                 max_chars: int | None = 2000, max_length: int = 512,
                 model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(**constructor_arguments(locals()))


class ContentTypeClassifier(HubMixinClassifier):
    """Give each document one of 11 content types (news, blogs, reviews, ...).

    Model: ``nvidia/content-type-classifier-deberta`` (NVIDIA Open Model License), a
    DeBERTa-v3-base backbone with a linear head, reading up to 1,024 tokens. Adds
    ``pred_column`` (``content_pred``) and, if set, ``prob_column``. Parameters as
    :class:`QualityClassifier`'s, with ``max_chars=5000`` (NeMo Curator 0.x's; 1.x reads
    6,000) and ``max_length=1024``.
    """

    default_name = "content_type_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 base_model_path: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 filter_by: Sequence[str] | None = None, text_field: str = "text",
                 pred_column: str = "content_pred", prob_column: str | None = None,
                 max_chars: int | None = 5000, max_length: int = 1024,
                 model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        super().__init__(**constructor_arguments(locals()))

