"""NeMo Curator's classifier constructors, as its sources define them: the keywords a
NeMo Curator script may pass, and a value of each as such a script would write it.

Transcribed from NeMo Curator 0.x (``nemo_curator/classifiers/*.py``, NVIDIA/NeMo-Curator
at ecd5c579) and 1.x (``nemo_curator/stages/text/classifiers/*.py``, NVIDIA-NeMo/Curator
at 1e2e4275); written out here, not read from curator-dask, so that a keyword curator-dask
forgot is a failure.
"""

from __future__ import annotations

_LABEL_0X = ("filter_by", "batch_size", "text_field", "pred_column", "prob_column",
             "max_chars", "device_type", "autocast", "max_mem_gb")
_COMMON_1X = ("cache_dir", "text_field", "filter_by", "max_chars", "sort_by_length",
              "model_inference_batch_size", "autocast", "keep_tokens", "use_existing_tokens")
_LABEL_1X = (*_COMMON_1X, "label_field", "score_field")
_FINEWEB_0X = ("batch_size", "text_field", "pred_column", "int_column", "max_chars",
               "device_type", "autocast", "max_mem_gb")
_FINEWEB_1X = (*_COMMON_1X, "label_field", "float_score_field", "int_score_field")

#: NeMo Curator class -> ({0.x keywords}, {1.x keywords}).
NEMO_CLASSIFIER_KEYWORDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    **{name: (frozenset(_LABEL_0X), frozenset(_LABEL_1X)) for name in (
        "QualityClassifier", "DomainClassifier", "MultilingualDomainClassifier",
        "ContentTypeClassifier")},
    "FineWebEduClassifier": (frozenset(_FINEWEB_0X), frozenset(_FINEWEB_1X)),
    **{name: (frozenset((*_FINEWEB_0X, "quality_label_column")), frozenset(_FINEWEB_1X))
       for name in ("FineWebMixtralEduClassifier", "FineWebNemotronEduClassifier")},
    "PromptTaskComplexityClassifier": (
        frozenset(("batch_size", "text_field", "max_chars", "device_type", "autocast",
                   "max_mem_gb")),
        frozenset(_COMMON_1X)),
    "AegisClassifier": (
        frozenset(("aegis_variant", "token", "filter_by", "batch_size", "text_field",
                   "pred_column", "raw_pred_column", "keep_raw_pred", "max_chars",
                   "device_type", "autocast", "max_mem_gb")),
        frozenset((*_COMMON_1X, "aegis_variant", "hf_token", "label_field",
                   "raw_output_field", "keep_raw_output", "aegis_prompt_field",
                   "keep_aegis_prompt_field"))),
    "InstructionDataGuardClassifier": (
        frozenset(("token", "batch_size", "text_field", "pred_column", "prob_column",
                   "max_chars", "autocast", "device_type", "max_mem_gb")),
        frozenset((*_COMMON_1X, "hf_token", "label_field", "score_field"))),
}

#: Where NeMo Curator's classifiers are imported from, per version.
NEMO_CLASSIFIER_MODULES = ("nemo_curator.classifiers", "nemo_curator.stages.text.classifiers")

#: A value of each keyword, as a NeMo Curator script would write it (Python source).
NEMO_VALUES: dict[str, str] = {
    "filter_by": "['a', 'b']", "batch_size": "64", "model_inference_batch_size": "64",
    "text_field": "'content'", "pred_column": "'p'", "prob_column": "'pp'",
    "label_field": "'p'", "score_field": "'pp'", "float_score_field": "'f'",
    "int_score_field": "'i'", "int_column": "'i'", "quality_label_column": "'l'",
    "max_chars": "3000", "device_type": "'cuda'", "autocast": "False",
    "max_mem_gb": "16", "sort_by_length": "True", "keep_tokens": "False",
    "use_existing_tokens": "False", "cache_dir": "'/hf-cache'", "token": "'hf_x'",
    "hf_token": "'hf_x'", "aegis_variant":
        "'nvidia/Aegis-AI-Content-Safety-LlamaGuard-Permissive-1.0'",
    "raw_pred_column": "'raw'", "raw_output_field": "'raw'", "keep_raw_pred": "True",
    "keep_raw_output": "True", "aegis_prompt_field": "'prompt'",
    "keep_aegis_prompt_field": "True",
}

#: What NeMo Curator's classifiers write and read by default, under its own keywords
#: (0.x's, then 1.x's): the prediction columns, and the characters of each document
#: read (``-1`` and ``None``: all of it).
NEMO_DEFAULTS: dict[str, tuple[dict, dict]] = {
    "QualityClassifier": (
        {"pred_column": "quality_pred", "prob_column": "quality_prob", "max_chars": 6000},
        {"label_field": "quality_pred", "score_field": None, "max_chars": 6000}),
    "DomainClassifier": (
        {"pred_column": "domain_pred", "prob_column": None, "max_chars": 2000},
        {"label_field": "domain_pred", "score_field": None, "max_chars": 2000}),
    "MultilingualDomainClassifier": (
        {"pred_column": "domain_pred", "prob_column": None, "max_chars": 2000},
        {"label_field": "multilingual_domain_pred", "score_field": None, "max_chars": 2000}),
    "ContentTypeClassifier": (
        {"pred_column": "content_pred", "prob_column": None, "max_chars": 5000},
        {"label_field": "content_pred", "score_field": None, "max_chars": 6000}),
    "FineWebEduClassifier": (
        {"pred_column": "fineweb-edu-score", "int_column": "fineweb-edu-score-int",
         "quality_label_column": None, "max_chars": -1},
        {"float_score_field": "fineweb-edu-score-float",
         "int_score_field": "fineweb-edu-score-int", "label_field": "fineweb-edu-score-label",
         "max_chars": None}),
    **{f"FineWeb{who.capitalize()}EduClassifier": (
        {"pred_column": f"fineweb-{who}-edu-score", "int_column": f"fineweb-{who}-edu-score-int",
         "quality_label_column": f"fineweb-{who}-edu-score-label", "max_chars": -1},
        {"float_score_field": f"fineweb-{who}-edu-score-float",
         "int_score_field": f"fineweb-{who}-edu-score-int",
         "label_field": f"fineweb-{who}-edu-score-label", "max_chars": None})
       for who in ("mixtral", "nemotron")},
    "PromptTaskComplexityClassifier": ({"max_chars": 2000}, {"max_chars": None}),
    "AegisClassifier": (
        {"pred_column": "aegis_pred", "raw_pred_column": "_aegis_raw_pred",
         "max_chars": 6000},
        {"label_field": "aegis_pred", "raw_output_field": "_aegis_raw_pred",
         "max_chars": 6000}),
    "InstructionDataGuardClassifier": (
        {"pred_column": "is_poisoned", "prob_column": "instruction_data_guard_poisoning_score",
         "max_chars": 6000},
        {"label_field": "is_poisoned", "score_field": "instruction_data_guard_poisoning_score",
         "max_chars": None}),
}
