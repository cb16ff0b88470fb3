"""NeMo Curator's named classifiers in the migration table: where each lives, its keywords.

:mod:`.mapping` merges :data:`CLASSIFIER_NAMES` into its ``NAMES`` and
:data:`CLASSIFIER_KEYWORDS` into its ``KEYWORDS``: the codemod, the import errors and
the classifiers' own constructors (through :func:`curator_dask.compat.nemo_keywords`)
read them there.

Each NeMo Curator classifier has a class of the same name here that runs its publisher's
model from a local directory (``model_path``, or the local Hugging Face cache) and writes
NeMo Curator 0.x's columns by default. Where NeMo Curator 1.x's defaults differ (a column
name, ``max_chars``), the codemod passes 1.x's to a class imported from a 1.x module, so
a migrated script writes what it wrote before.

The keywords are NeMo Curator's, 0.x's (``batch_size``, ``device_type``, ``max_mem_gb``,
``token``) and 1.x's (``label_field``, ``score_field``, ``sort_by_length``,
``keep_tokens``, ``hf_token``); ``cache_dir`` and ``filter_by`` are parameters of the
classes where NeMo Curator has them.

Examples
--------
>>> CLASSIFIER_NAMES["QualityClassifier"].ours
'curator_dask.QualityClassifier'
>>> CLASSIFIER_NAMES["MultilingualDomainClassifier"].defaults_1x
(('pred_column', '"multilingual_domain_pred"'),)
"""

from __future__ import annotations

from curator_dask.migrate.rules import Counterpart, Ignored, Refused, Renamed, Rule

__all__ = ["CLASSIFIERS", "CLASSIFIER_KEYWORDS", "CLASSIFIER_NAMES", "MODEL_STAGE_KEYWORDS"]

_MODELS = "curator_dask.stages.models"
_DEBERTA_V3 = "microsoft/deberta-v3-base"
_LLAMA_GUARD = "meta-llama/LlamaGuard-7b"
_AEGIS_DEFENSIVE = "nvidia/Aegis-AI-Content-Safety-LlamaGuard-Defensive-1.0"
_SHARED_TOKENS = ("classifiers in a row over the same text and tokenizer share their tokens "
                  "by themselves")
_NO_DOWNLOAD = "nothing is downloaded while curating: models load from local directories"


def _dtype_of_autocast(autocast) -> str:
    """NeMo Curator's ``autocast=True`` is what ``dtype="auto"`` does on a GPU; ``False``
    keeps float32 throughout."""
    return "auto" if autocast else "float32"


#: NeMo Curator's keywords for what every model stage has (or does by itself).
MODEL_STAGE_KEYWORDS: dict[str, Rule] = {
    "batch_size": Renamed("model_inference_batch_size"),
    "device_type": Renamed("device"),
    "autocast": Renamed("dtype", _dtype_of_autocast),
    "max_mem_gb": Ignored("batches are cut by max_tokens_per_batch and halved on "
                          "out-of-memory"),
    "sort_by_length": Ignored("documents are always sorted by token length before batching"),
    "keep_tokens": Ignored(_SHARED_TOKENS),
    "use_existing_tokens": Ignored(_SHARED_TOKENS),
    "token": Ignored(_NO_DOWNLOAD),
    "hf_token": Ignored(_NO_DOWNLOAD),
}
_LABEL_COLUMNS: dict[str, Rule] = {"label_field": Renamed("pred_column"),
                                   "score_field": Renamed("prob_column")}
_FINEWEB_COLUMNS: dict[str, Rule] = {"float_score_field": Renamed("pred_column"),
                                     "int_score_field": Renamed("int_column"),
                                     "label_field": Renamed("quality_label_column")}
_AEGIS_PROMPT = Refused("the prompt is built from text_field by the stage and not kept")

_DEBERTA = ("QualityClassifier", "DomainClassifier", "MultilingualDomainClassifier",
            "ContentTypeClassifier")
_FINEWEB = ("FineWebEduClassifier", "FineWebMixtralEduClassifier",
            "FineWebNemotronEduClassifier")

CLASSIFIER_KEYWORDS: dict[str, dict[str, Rule]] = {
    f"{_MODELS}.classifier.ClassifierStage.__init__": {
        **MODEL_STAGE_KEYWORDS, **_LABEL_COLUMNS,
        "cache_dir": Refused("pass model_path= (a local save_pretrained directory)")},
    **{f"{_MODELS}.deberta.{name}.__init__": {**MODEL_STAGE_KEYWORDS, **_LABEL_COLUMNS}
       for name in _DEBERTA},
    **{f"{_MODELS}.fineweb.{name}.__init__": {**MODEL_STAGE_KEYWORDS, **_FINEWEB_COLUMNS}
       for name in _FINEWEB},
    f"{_MODELS}.prompt_complexity.PromptTaskComplexityClassifier.__init__": {
        **MODEL_STAGE_KEYWORDS,
        "filter_by": Refused("it keeps every document; filter on its score columns with a "
                             "stage of your own (e.g. ScoreFilter)")},
    f"{_MODELS}.safety.AegisClassifier.__init__": {
        **MODEL_STAGE_KEYWORDS, "label_field": Renamed("pred_column"),
        "raw_output_field": Renamed("raw_pred_column"),
        "keep_raw_output": Renamed("keep_raw_pred"),
        "aegis_prompt_field": _AEGIS_PROMPT, "keep_aegis_prompt_field": _AEGIS_PROMPT},
    f"{_MODELS}.safety.InstructionDataGuardClassifier.__init__": {
        **MODEL_STAGE_KEYWORDS, **_LABEL_COLUMNS},
}


def _named(name: str, hub_model: str, *, backbone: str | None = None, note: str = "",
           more_models: tuple[tuple[str, str], ...] = (),
           defaults: tuple[tuple[str, str], ...] = (),
           defaults_1x: tuple[tuple[str, str], ...] = ()) -> Counterpart:
    if backbone is not None:
        more_models = (("base_model_path", backbone), *more_models)
    reads = hub_model + "".join(f" and {hub}" for _, hub in more_models)
    return Counterpart(
        f"curator_dask.{name}", model_keyword="model_path", hub_model=hub_model,
        more_models=more_models, finds_cached=True, defaults=defaults,
        defaults_1x=defaults_1x,
        note=f"runs {reads} from local directories (curator-dask migrate --model "
             "NAME=DIR) or the local Hugging Face cache; NeMo Curator's columns"
             + (f"; {note}" if note else ""))


CLASSIFIER_NAMES: dict[str, Counterpart] = {
    "QualityClassifier": _named(
        "QualityClassifier", "nvidia/quality-classifier-deberta", backbone=_DEBERTA_V3,
        defaults_1x=(("prob_column", "None"),),
        note="1.x writes probabilities only with score_field="),
    "DomainClassifier": _named("DomainClassifier", "nvidia/domain-classifier",
                               backbone=_DEBERTA_V3),
    "MultilingualDomainClassifier": _named(
        "MultilingualDomainClassifier", "nvidia/multilingual-domain-classifier",
        backbone="microsoft/mdeberta-v3-base",
        defaults_1x=(("pred_column", '"multilingual_domain_pred"'),),
        note="0.x writes domain_pred, 1.x multilingual_domain_pred"),
    "ContentTypeClassifier": _named(
        "ContentTypeClassifier", "nvidia/content-type-classifier-deberta",
        backbone=_DEBERTA_V3, defaults_1x=(("max_chars", "6000"),),
        note="0.x reads 5000 characters, 1.x 6000"),
    "FineWebEduClassifier": _named(
        "FineWebEduClassifier", "HuggingFaceFW/fineweb-edu-classifier",
        defaults_1x=(("pred_column", '"fineweb-edu-score-float"'),
                     ("quality_label_column", '"fineweb-edu-score-label"')),
        note="1.x names the score fineweb-edu-score-float and adds a label column"),
    "FineWebMixtralEduClassifier": _named(
        "FineWebMixtralEduClassifier", "nvidia/nemocurator-fineweb-mixtral-edu-classifier",
        defaults_1x=(("pred_column", '"fineweb-mixtral-edu-score-float"'),),
        note="1.x names the score fineweb-mixtral-edu-score-float"),
    "FineWebNemotronEduClassifier": _named(
        "FineWebNemotronEduClassifier",
        "nvidia/nemocurator-fineweb-nemotron-4-edu-classifier",
        defaults_1x=(("pred_column", '"fineweb-nemotron-edu-score-float"'),),
        note="1.x names the score fineweb-nemotron-edu-score-float"),
    "PromptTaskComplexityClassifier": _named(
        "PromptTaskComplexityClassifier", "nvidia/prompt-task-and-complexity-classifier",
        backbone="microsoft/DeBERTa-v3-base", defaults_1x=(("max_chars", "None"),),
        note="0.x reads 2000 characters, 1.x all"),
    "AegisClassifier": _named(
        "AegisClassifier", _AEGIS_DEFENSIVE, more_models=(("base_model_path", _LLAMA_GUARD),),
        note="--model AegisClassifier=DIR is the adapter of the aegis_variant used"),
    "InstructionDataGuardClassifier": _named(
        "InstructionDataGuardClassifier", "nvidia/instruction-data-guard",
        more_models=(("adapter_path", _AEGIS_DEFENSIVE), ("base_model_path", _LLAMA_GUARD)),
        defaults=(("max_chars", "6000"),), note="0.x reads 6000 characters, 1.x all"),
}

#: The classifiers' names, as NeMo Curator's classifier modules export them.
CLASSIFIERS = tuple(CLASSIFIER_NAMES)
