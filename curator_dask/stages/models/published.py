"""Published classifier models: where they come from, and finding them on local disk.

The named classifiers (:class:`~curator_dask.stages.models.QualityClassifier` and the
others) run models that their publishers ship on the Hugging Face hub. Nothing is
downloaded while curating: a model is a local directory, given as ``model_path`` or found
in the local Hugging Face cache (what ``hf download <model id>``, or an earlier NeMo
Curator run, left there), and checked when the stage is made, on the client, reading only
small files. A missing or incomplete directory is a
:class:`~curator_dask.stages.models.ModelDirectoryError` that names the directory, what is
missing, the layout expected and the model id to download.

Some published models are a head saved with ``PyTorchModelHubMixin`` whose
``config.json`` names its backbone by a hub id (``"base_model":
"microsoft/deberta-v3-base"``). The backbone's weights are in the model's own
``model.safetensors``; only the backbone's *architecture* is needed, from that model's
``config.json``: ``base_model_path`` names a local directory that holds it, or it is found
in the local Hugging Face cache under the id the config names.

Nothing here imports torch or transformers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from curator_dask.stages.models.model_dir import ModelDir, ModelDirectoryError, inspect_model_dir

__all__ = [
    "AEGIS_DEFENSIVE_ID",
    "LLAMA_GUARD_ID",
    "PUBLISHED",
    "PublishedModel",
    "check_layout",
    "download_hint",
    "find_cached_snapshot",
    "inspect_published_dir",
    "missing_keys",
    "missing_tensors",
    "resolve_base_model",
    "resolve_model_dir",
]


@dataclass(frozen=True)
class PublishedModel:
    """A model as its publisher ships it.

    Attributes
    ----------
    model_id : str
        Its id on the Hugging Face hub (what to download).
    licence : str
        As its model card states it.
    architecture : str
        What is inside, in a few words.
    layout : str
        The files a local copy holds, as the error messages and docs describe them.
    """

    model_id: str
    licence: str
    architecture: str
    layout: str


_HUB_MIXIN_LAYOUT = ("config.json (base_model, fc_dropout, id2label, label2id, as "
                     "PyTorchModelHubMixin saves them), model.safetensors (the backbone under "
                     "model.*, the head under fc.*) and the tokenizer files (spm.model or "
                     "tokenizer.json, tokenizer_config.json)")
_SEQUENCE_LAYOUT = ("config.json (a transformers sequence classifier with one regression "
                    "output), model.safetensors and the tokenizer files")

#: The models the named classifiers run, by class name.
PUBLISHED: dict[str, PublishedModel] = {
    "QualityClassifier": PublishedModel(
        "nvidia/quality-classifier-deberta", "Apache-2.0",
        "DeBERTa-v3-base backbone, linear head on the first token, 3 labels",
        _HUB_MIXIN_LAYOUT),
    "DomainClassifier": PublishedModel(
        "nvidia/domain-classifier", "Apache-2.0",
        "DeBERTa-v3-base backbone, linear head on the first token, 26 labels",
        _HUB_MIXIN_LAYOUT),
    "MultilingualDomainClassifier": PublishedModel(
        "nvidia/multilingual-domain-classifier", "NVIDIA Open Model License",
        "mDeBERTa-v3-base backbone, linear head on the first token, 26 labels",
        _HUB_MIXIN_LAYOUT),
    "ContentTypeClassifier": PublishedModel(
        "nvidia/content-type-classifier-deberta", "NVIDIA Open Model License",
        "DeBERTa-v3-base backbone, linear head on the first token, 11 labels",
        _HUB_MIXIN_LAYOUT),
    "FineWebEduClassifier": PublishedModel(
        "HuggingFaceFW/fineweb-edu-classifier", "Apache-2.0",
        "BERT (Snowflake arctic-embed-m) sequence regression, one score",
        _SEQUENCE_LAYOUT),
    "FineWebMixtralEduClassifier": PublishedModel(
        "nvidia/nemocurator-fineweb-mixtral-edu-classifier", "NVIDIA Open Model License",
        "BERT (Snowflake arctic-embed-m) sequence regression, one score",
        _SEQUENCE_LAYOUT),
    "FineWebNemotronEduClassifier": PublishedModel(
        "nvidia/nemocurator-fineweb-nemotron-4-edu-classifier", "NVIDIA Open Model License",
        "BERT (Snowflake arctic-embed-m) sequence regression, one score",
        _SEQUENCE_LAYOUT),
    "PromptTaskComplexityClassifier": PublishedModel(
        "nvidia/prompt-task-and-complexity-classifier", "NVIDIA Open Model License",
        "DeBERTa-v3-base backbone, mean pooling, 8 linear heads",
        "config.json (base_model, target_sizes, task_type_map, weights_map, divisor_map, as "
        "PyTorchModelHubMixin saves them), model.safetensors (the backbone under "
        "backbone.*, heads under head_0.fc.* ... head_7.fc.*) and the tokenizer files"),
    "AegisClassifier": PublishedModel(
        "nvidia/Aegis-AI-Content-Safety-LlamaGuard-Defensive-1.0", "Llama 2 Community License",
        "LoRA adapter (PEFT) on meta-llama/LlamaGuard-7b, generates the verdict",
        "adapter_config.json and adapter_model.safetensors (a PEFT LoRA adapter); the base "
        "model meta-llama/LlamaGuard-7b in its own directory (config.json, weights, tokenizer)"),
    "InstructionDataGuardClassifier": PublishedModel(
        "nvidia/instruction-data-guard", "NVIDIA Open Model License",
        "MLP on the last hidden state of Aegis (LlamaGuard-7b + the Defensive adapter)",
        "config.json (input_dim, dropout, as PyTorchModelHubMixin saves them) and "
        "model.safetensors (input_layer.*, hidden_layer_0.* ... hidden_layer_2.*); the Aegis "
        "adapter and the LlamaGuard-7b base model in their own directories"),
}

#: The published id of LlamaGuard-7b, the base model of both safety classifiers.
LLAMA_GUARD_ID = "meta-llama/LlamaGuard-7b"
AEGIS_DEFENSIVE_ID = "nvidia/Aegis-AI-Content-Safety-LlamaGuard-Defensive-1.0"


def download_hint(model_id: str, files: Iterable[str] = ()) -> str:
    """How to fetch ``model_id`` on a machine that reaches the hub.

    >>> download_hint("nvidia/domain-classifier")
    'hf download nvidia/domain-classifier --local-dir DIR'
    """
    listed = "".join(f" {name}" for name in files)
    return f"hf download {model_id}{listed} --local-dir DIR"


def find_cached_snapshot(model_id: str, cache_dir: str | os.PathLike | None = None) -> str | None:
    """The directory of ``model_id`` in the local Hugging Face cache, or None.

    Reads only the cache on this machine (``cache_dir``, else ``HF_HUB_CACHE`` or
    ``~/.cache/huggingface/hub``): the latest snapshot downloaded for the ``main``
    revision. Needs ``huggingface_hub`` (installed with transformers); without it, None.
    """
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return snapshot_download(model_id, cache_dir=cache_dir, local_files_only=True)
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def resolve_model_dir(owner: str, model_path: str | os.PathLike | None,
                      cache_dir: str | os.PathLike | None = None,
                      model_id: str | None = None) -> str:
    """The local directory of ``owner``'s published model.

    ``model_path`` when given; else the model's snapshot in the local Hugging Face cache;
    else a :class:`ModelDirectoryError` that names the model id, the layout and how to
    download it. ``model_id`` overrides the published id (another variant).
    """
    published = PUBLISHED[owner]
    model_id = model_id or published.model_id
    if model_path is not None:
        return os.fspath(model_path)
    found = find_cached_snapshot(model_id, cache_dir)
    if found is not None:
        return found
    where = os.fspath(cache_dir) if cache_dir is not None else "the default Hugging Face cache"
    raise ModelDirectoryError(
        f"{owner} needs the model {model_id} in a local directory: pass model_path= (a "
        f"directory with {published.layout}). It is not in {where} either. Nothing is "
        f"downloaded while curating: fetch it first with `{download_hint(model_id)}` on a "
        "machine that reaches the Hugging Face hub, and copy DIR to the same path on every "
        "worker."
    )


def check_layout(owner: str, model_dir: ModelDir, problems: list[str],
                 model_id: str | None = None) -> None:
    """Raise a :class:`ModelDirectoryError` listing ``problems`` (if any) with the layout
    ``owner`` expects and where to download it."""
    if not problems:
        return
    published = PUBLISHED[owner]
    model_id = model_id or published.model_id
    listing = ", ".join(sorted(os.listdir(model_dir.path))) or "nothing"
    raise ModelDirectoryError(
        f"{owner}: {model_dir.path!r} is not a local copy of {model_id}: "
        + "; ".join(problems)
        + f". Expected {published.layout}; it holds: {listing}. Download the model with "
        f"`{download_hint(model_id)}`."
    )


def missing_keys(config: dict, keys: Iterable[str]) -> list[str]:
    """Problems for each of ``keys`` that ``config`` lacks."""
    return [f"config.json has no {key!r}" for key in keys if key not in config]


def missing_tensors(model_dir: ModelDir, prefixes: Iterable[str]) -> list[str]:
    """Problems for each tensor-name prefix no tensor of the weights starts with.

    Pickled weights (``pytorch_model.bin``) cannot be read without loading them, so they
    are not checked here (loading checks them).
    """
    if not model_dir.tensors:
        return []
    return [f"model.safetensors has no {prefix}* tensor" for prefix in prefixes
            if not any(name.startswith(prefix) for name in model_dir.tensors)]


def resolve_base_model(owner: str, model_dir: ModelDir,
                       base_model_path: str | os.PathLike | None,
                       cache_dir: str | os.PathLike | None = None) -> str:
    """The directory holding the backbone's ``config.json`` for a hub-mixin model.

    ``base_model_path`` when given, else the snapshot of the config's ``base_model`` in
    the local Hugging Face cache. Only its ``config.json`` is read: the backbone's weights
    come from the model's own ``model.safetensors``.
    """
    base_id = model_dir.config.get("base_model")
    if base_model_path is not None:
        path = os.path.abspath(os.fspath(base_model_path))
    else:
        found = find_cached_snapshot(base_id, cache_dir) if isinstance(base_id, str) else None
        if found is None:
            raise ModelDirectoryError(
                f"{owner}: {model_dir.path}/config.json names its backbone by the hub id "
                f"base_model={base_id!r}, and nothing is downloaded while curating. Pass "
                f"base_model_path= a local directory that holds {base_id}'s config.json (its "
                f"weights are not needed: they are in {model_dir.path}/model.safetensors); "
                f"fetch it with `{download_hint(str(base_id), ['config.json'])}`."
            )
        path = found
    config_file = os.path.join(path, "config.json")
    try:
        with open(config_file, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as err:
        raise ModelDirectoryError(
            f"{owner}: base_model_path {path!r} must hold the backbone's config.json "
            f"({base_id}'s: `{download_hint(str(base_id), ['config.json'])}`); reading "
            f"{config_file} failed: {err}"
        ) from err
    if not isinstance(config, dict) or "model_type" not in config:
        raise ModelDirectoryError(
            f"{owner}: {config_file} has no model_type; it must be the backbone's own "
            f"config.json ({base_id}'s)"
        )
    return path


def inspect_published_dir(owner: str, path: str, *, need_model_type: bool,
                          need_tokenizer: bool = True) -> ModelDir:
    """:func:`inspect_model_dir` with the published model's layout in the error."""
    try:
        return inspect_model_dir(path, need_tokenizer=need_tokenizer,
                                 need_model_type=need_model_type)
    except ModelDirectoryError as err:
        published = PUBLISHED[owner]
        raise ModelDirectoryError(
            f"{owner}: {err} Expected a local copy of {published.model_id}: "
            f"{published.layout} (`{download_hint(published.model_id)}`)."
        ) from None
