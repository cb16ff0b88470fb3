"""NVIDIA's prompt task and complexity classifier: a task type and complexity scores.

The model (``nvidia/prompt-task-and-complexity-classifier``) is a DeBERTa-v3 backbone,
mean-pooled, with one linear head per target, saved with ``PyTorchModelHubMixin``. Its
``config.json`` lists the heads (``target_sizes``), the task names (``task_type_map``) and,
per complexity target, the weights of its classes (``weights_map``) and a divisor
(``divisor_map``). Per document, as NeMo Curator computes them:

- ``task_type_1``, ``task_type_2``: the two likeliest task types (``"NA"`` for the second
  when its probability, rounded to 3 places, is under 0.1); ``task_type_prob``: the first
  one's probability, rounded to 3 places;
- each complexity target (``creativity_scope``, ``reasoning``, ``contextual_knowledge``,
  ``number_of_few_shots``, ``domain_knowledge``, ``no_label_reason``, ``constraint_ct``):
  the probability-weighted sum of its class weights over the divisor, rounded to 4
  places (``number_of_few_shots`` under 0.05 is 0);
- ``prompt_complexity_score``: 0.35 creativity + 0.25 reasoning + 0.15 constraints +
  0.15 domain knowledge + 0.05 contextual knowledge + 0.05 few shots, rounded to 5 places.
"""

from __future__ import annotations

import os

import numpy as np

from curator_dask.compat import nemo_keywords
from curator_dask.resources import Resources
from curator_dask.stages.models.backend import column_like
from curator_dask.stages.models.base import ModelStage
from curator_dask.stages.models.classifier import labelled
from curator_dask.stages.models.loading import ModelBuilder
from curator_dask.stages.models.model_dir import ModelDir
from curator_dask.stages.models.named import (
    inspect_hub_mixin_dir,
    require_targets,
    whole_document,
)

__all__ = ["COMPLEXITY_WEIGHTS", "OUTPUT_COLUMNS", "PromptTaskComplexityClassifier"]

#: The overall score's weight of each complexity target, as the model card defines it.
COMPLEXITY_WEIGHTS = (("creativity_scope", 0.35), ("reasoning", 0.25), ("constraint_ct", 0.15),
                      ("domain_knowledge", 0.15), ("contextual_knowledge", 0.05),
                      ("number_of_few_shots", 0.05))
TASK_TYPE = "task_type"
#: Below this (rounded) probability the second task type is "NA".
SECOND_TASK_FROM = 0.1
#: Below this a number_of_few_shots score is 0.
FEW_SHOTS_FROM = 0.05

OUTPUT_COLUMNS = ("prompt_complexity_score", "task_type_1", "task_type_2", "task_type_prob",
                  "creativity_scope", "reasoning", "contextual_knowledge",
                  "number_of_few_shots", "domain_knowledge", "no_label_reason",
                  "constraint_ct")


class PromptTaskComplexityClassifier(ModelStage):
    """Classify each prompt's task type and score its complexity (NVIDIA's classifier).

    Model: ``nvidia/prompt-task-and-complexity-classifier`` (NVIDIA Open Model License),
    a DeBERTa-v3-base backbone with eight heads, reading up to 512 tokens. Adds the
    columns of :data:`OUTPUT_COLUMNS` (see the module's description of each). It keeps
    every document: filter on its scores with a filter stage of your own.

    Parameters
    ----------
    model_path : str or path-like, optional
        Local copy of the model. Default: its snapshot in the local Hugging Face cache
        (``cache_dir``); an error says how to download it when there is none.
    base_model_path : str or path-like, optional
        Directory with the backbone's ``config.json`` (``microsoft/DeBERTa-v3-base``);
        default: the local Hugging Face cache.
    cache_dir : str or path-like, optional
    text_field : str, default "text"
    max_chars : int or None, default 2000
    max_length : int, default 512
    model_inference_batch_size : int, default 256
    max_tokens_per_batch, device, dtype, pretokenized, input_ids_column, name, resources
        See :class:`~curator_dask.stages.models.base.ModelStage`.

    Examples
    --------
    >>> from curator_dask.stages.models import PromptTaskComplexityClassifier
    >>> prompts = PromptTaskComplexityClassifier(
    ...     "models/prompt-task-and-complexity-classifier",
    ...     base_model_path="models/deberta-v3-base")          # doctest: +SKIP
    >>> prompts(ds).df[["task_type_1", "prompt_complexity_score"]].head()  # doctest: +SKIP
    """

    model_kind = "hub-mixin multi-head classifier"
    default_name = "prompt_task_complexity_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 base_model_path: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None, text_field: str = "text",
                 max_chars: int | None = 2000, max_length: int = 512,
                 model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", pretokenized: bool = False,
                 input_ids_column: str = "input_ids", name: str | None = None,
                 resources: Resources | None = None):
        self.base_model_path = base_model_path
        self.cache_dir = cache_dir
        super().__init__(model_path, text_field=text_field,
                         model_inference_batch_size=model_inference_batch_size,
                         max_tokens_per_batch=max_tokens_per_batch,
                         max_chars=whole_document(max_chars), max_length=max_length,
                         device=device, dtype=dtype, pretokenized=pretokenized,
                         input_ids_column=input_ids_column, name=name,
                         resources=resources)
        config = self.model_dir.config
        self.targets = list(config["target_sizes"])
        scored = [column for column in OUTPUT_COLUMNS[4:]]
        require_targets(self.name, self.targets, [TASK_TYPE, *scored])
        require_targets(self.name, config["weights_map"], scored)
        require_targets(self.name, config["divisor_map"], scored)
        self.output_columns = {column: "float64" for column in OUTPUT_COLUMNS}
        self.output_columns.update(task_type_1="str", task_type_2="str")

    def inspect(self, model_path, pretokenized: bool) -> ModelDir:
        model_dir, self.base_config_dir, self._tokenizer_path = inspect_hub_mixin_dir(
            type(self).__name__, model_path, cache_dir=self.cache_dir,
            base_model_path=self.base_model_path,
            config_keys=("base_model", "target_sizes", "task_type_map", "weights_map",
                         "divisor_map"),
            tensor_prefixes=("backbone.", "head_0.fc."), need_tokenizer=not pretokenized)
        return model_dir

    def model_builder(self) -> ModelBuilder:
        return ModelBuilder("curator_dask.stages.models._heads:build_multi_head",
                            (("base_config", self.base_config_dir),))

    def forward_batch(self, input_ids, attention_mask):
        """Each head's class probabilities, side by side (softmax per head, float32)."""
        import torch

        logits = self._model.model(input_ids, attention_mask).float()
        sizes = [int(size) for size in self.model_dir.config["target_sizes"].values()]
        return torch.cat([part.softmax(dim=1) for part in logits.split(sizes, dim=1)], dim=1)

    def head_probabilities(self, probs: np.ndarray) -> dict[str, np.ndarray]:
        """The side-by-side probabilities split into one ``(documents, classes)`` array
        per target."""
        sizes = [int(size) for size in self.model_dir.config["target_sizes"].values()]
        parts = np.split(probs, np.cumsum(sizes)[:-1], axis=1)
        return dict(zip(self.targets, parts, strict=True))

    def attach(self, df, probs):
        config = self.model_dir.config
        if probs is None:
            width = sum(int(size) for size in config["target_sizes"].values())
            probs = np.empty((0, width), dtype=np.float32)
        heads = self.head_probabilities(probs)
        task_names = np.array([config["task_type_map"][str(i)]
                               for i in range(len(config["task_type_map"]))], dtype=object)
        task = heads[TASK_TYPE]
        order = np.argsort(-task, axis=1, kind="stable")[:, :2]
        top = np.take_along_axis(task, order, axis=1).astype(np.float64)
        second = np.where(np.round(top[:, 1], 3) < SECOND_TASK_FROM, "NA",
                          task_names[order[:, 1]]).astype(object)
        scores = {}
        for target in self.targets:
            if target == TASK_TYPE:
                continue
            weights = np.asarray(config["weights_map"][target], dtype=np.float64)
            score = np.round((heads[target] * weights).sum(axis=1)
                             / config["divisor_map"][target], 4)
            if target == "number_of_few_shots":
                score = np.where(score >= FEW_SHOTS_FROM, score, 0.0)
            scores[target] = score
        overall = np.zeros(len(probs))
        for target, weight in COMPLEXITY_WEIGHTS:  # in the model card's order of terms
            overall = overall + weight * scores[target]
        columns = {"prompt_complexity_score": np.round(overall, 5),
                   "task_type_1": task_names[order[:, 0]], "task_type_2": second,
                   "task_type_prob": np.round(top[:, 0], 3), **scores}
        df = df.assign(**{column: column_like(columns[column], df,
                                              "str" if column.startswith("task_type_")
                                              and column != "task_type_prob" else "values")
                          for column in OUTPUT_COLUMNS if column in columns})
        return labelled(df, self.name, "task_type_1", columns["task_type_1"])
