"""What the named classifiers share: NeMo Curator's keywords, names, published layouts.

The named classifiers (:mod:`.deberta`, :mod:`.fineweb`, :mod:`.prompt_complexity`,
:mod:`.safety`) take NeMo Curator's constructor keywords, 0.x and 1.x alike: a keyword
that curator-dask spells differently is accepted with a ``DeprecationWarning`` naming
ours (:func:`nemo_classifier_keywords`), and one whose job curator-dask does by itself
(``max_mem_gb``, ``sort_by_length``, ``keep_tokens``, ``use_existing_tokens``) is
accepted and ignored with a warning saying why.
"""

from __future__ import annotations

import os

from curator_dask.compat import nemo_keywords
from curator_dask.stages.models.classifier import ClassifierOptionError
from curator_dask.stages.models.model_dir import TOKENIZER_FILES, ModelDir, ModelDirectoryError
from curator_dask.stages.models.published import (
    PUBLISHED,
    check_layout,
    inspect_published_dir,
    missing_keys,
    missing_tensors,
    resolve_base_model,
    resolve_model_dir,
)

__all__ = [
    "constructor_arguments",
    "inspect_hub_mixin_dir",
    "nemo_classifier_keywords",
    "require_targets",
    "whole_document",
]

#: NeMo Curator's names for options every named classifier has.
_COMMON_RENAMES = {
    "batch_size": "model_inference_batch_size",
    "device_type": "device",
    # autocast=True is what dtype="auto" does on a GPU; False keeps float32 throughout.
    "autocast": ("dtype", lambda on: "auto" if on else "float32"),
}

#: NeMo Curator's options for work curator-dask does by itself, with why.
_COMMON_UNNEEDED = {
    "max_mem_gb": "batches are cut by max_tokens_per_batch and halved on out-of-memory",
    "sort_by_length": "documents are always sorted by token length before batching",
    "keep_tokens": "classifiers in a row over the same text and tokenizer share their "
                   "tokens by themselves",
    "use_existing_tokens": "classifiers in a row over the same text and tokenizer share "
                           "their tokens by themselves",
    "token": "nothing is downloaded while curating: models load from local directories",
    "hf_token": "nothing is downloaded while curating: models load from local directories",
}


def nemo_classifier_keywords(renamed: dict | None = None, unsupported: dict | None = None):
    """:func:`~curator_dask.compat.nemo_keywords` with the options every named classifier
    shares, plus the class's own ``renamed`` (NeMo name -> ours) and ``unsupported``."""
    return nemo_keywords(renamed_keywords={**_COMMON_RENAMES, **(renamed or {})},
                         unsupported=unsupported, unneeded=_COMMON_UNNEEDED)


def whole_document(max_chars: int | None) -> int | None:
    """``max_chars`` with NeMo Curator 0.x's ``-1`` ("the whole document") as None.

    >>> whole_document(-1), whole_document(2000)
    (None, 2000)
    """
    return None if max_chars == -1 else max_chars


def inspect_hub_mixin_dir(owner: str, model_path, *, cache_dir, base_model_path,
                          config_keys: tuple[str, ...], tensor_prefixes: tuple[str, ...],
                          need_tokenizer: bool) -> tuple[ModelDir, str, str]:
    """Check a hub-mixin model (a head on a backbone named by ``base_model``).

    Returns ``(model dir, backbone config directory, tokenizer directory)``: the
    tokenizer is the model's own, or the backbone directory's when the model has none.
    """
    path = resolve_model_dir(owner, model_path, cache_dir)
    model_dir = inspect_published_dir(owner, path, need_model_type=False,
                                      need_tokenizer=False)
    problems = missing_keys(model_dir.config, config_keys)
    problems += missing_tensors(model_dir, tensor_prefixes)
    check_layout(owner, model_dir, problems)
    base_dir = resolve_base_model(owner, model_dir, base_model_path, cache_dir)
    tokenizer_dir = model_dir.path
    if not model_dir.has_tokenizer and need_tokenizer:
        if not any(os.path.isfile(os.path.join(base_dir, f)) for f in TOKENIZER_FILES):
            raise ModelDirectoryError(
                f"{owner}: neither {model_dir.path} nor the backbone directory {base_dir} "
                f"holds tokenizer files (one of {', '.join(TOKENIZER_FILES)}); a local copy "
                f"of {PUBLISHED[owner].model_id} ships them")
        tokenizer_dir = base_dir
    return model_dir, base_dir, tokenizer_dir


def require_targets(owner: str, names, wanted) -> None:
    """Raise unless every name in ``wanted`` is among ``names`` (a config's targets)."""
    missing = [name for name in wanted if name not in names]
    if missing:
        raise ClassifierOptionError(
            f"{owner}: the model's config.json lacks the target(s) {missing}; it has "
            f"{list(names)}")


def constructor_arguments(local_names: dict) -> dict:
    """A named classifier's arguments from its constructor's ``locals()``, to hand to its
    base class (which takes the same parameters with the family's defaults)."""
    return {key: value for key, value in local_names.items()
            if key not in ("self", "__class__")}
