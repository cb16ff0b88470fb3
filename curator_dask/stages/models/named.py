"""What the named classifiers share: their published layouts, NeMo Curator's ``-1``.

The named classifiers (:mod:`.deberta`, :mod:`.fineweb`, :mod:`.prompt_complexity`,
:mod:`.safety`) take NeMo Curator's constructor keywords, 0.x and 1.x alike, through
:func:`~curator_dask.compat.nemo_keywords`: a keyword that curator-dask spells
differently is accepted with a :class:`~curator_dask.compat.NeMoCuratorWarning` naming
ours, and one whose job curator-dask does by itself (``max_mem_gb``, ``sort_by_length``,
``keep_tokens``, ``use_existing_tokens``) is accepted and ignored with a warning saying
why. Those rules are the migration table's
(:data:`curator_dask.migrate.classifiers.CLASSIFIER_KEYWORDS`), which
``curator-dask migrate`` rewrites scripts with.
"""

from __future__ import annotations

import os

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
    "require_targets",
    "whole_document",
]


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
