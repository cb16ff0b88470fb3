"""Load models and tokenizers once per worker process, and share them between stages.

A model is the expensive part of a model stage: seconds to load, gigabytes of (GPU)
memory. Every stage that needs one asks this module's per-process cache, keyed by
``(kind, model directory, device, dtype, trust_remote_code)``: the first request loads
it with ``from_pretrained`` from the local directory, later ones (other partitions,
other stages on the same directory) get the same object. Each stage holds a reference
from ``setup()`` to ``teardown()``; when the last one is released the model is dropped
and the CUDA cache emptied.

Debugging loads: with the environment variable ``CURATOR_DASK_MODEL_LOAD_LOG`` set to a
directory, every real load writes a small JSON file there (process id, kind, path,
device), so one can count loads per worker process. Set it before the workers start, or
on running workers with ``client.run(os.environ.__setitem__, name, value)``.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from curator_dask.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    ResourceUnavailableError,
)
from curator_dask.io import atomic
from curator_dask.stages.models.model_dir import ModelDirectoryError

__all__ = [
    "LOAD_LOG_ENV",
    "LoadedModel",
    "ModelBuilder",
    "acquire_model",
    "acquire_tokenizer",
    "dtype_argument",
    "loaded",
    "release",
    "require_torch",
    "resolve_device",
    "resolve_dtype",
    "tokenizer_lock",
]

logger = logging.getLogger(__name__)

LOAD_LOG_ENV = "CURATOR_DASK_MODEL_LOAD_LOG"
DTYPES = ("auto", "float32", "bfloat16", "float16")
MODEL_KINDS = ("sequence-classification", "encoder")

_cache: dict[Hashable, list] = {}   # key -> [object, references]
_lock = threading.Lock()
#: Held while a cached tokenizer encodes: a fast tokenizer's truncation settings are
#: state on the shared object, and stages with different ``max_length`` may run in
#: threads of one worker. Encoding is parallel inside the tokenizer anyway.
tokenizer_lock = threading.Lock()


def require_torch():
    """Import torch and transformers, or say which extra installs them."""
    try:
        import torch
        import transformers
    except ImportError as err:
        raise MissingDependencyError(
            f"model stages need torch and transformers ({err}); install them with "
            "pip install 'curator-dask[models]'"
        ) from err
    return torch, transformers


@dataclass
class LoadedModel:
    """A model ready for inference: on its device, in eval mode."""

    model: Any
    device: Any                     # torch.device
    autocast_dtype: Any = None      # torch dtype to autocast to on CUDA, or None


def resolve_device(device: str) -> str:
    """``"auto"`` is ``"cuda"`` when this process sees a GPU, else ``"cpu"``."""
    torch, _ = require_torch()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ResourceUnavailableError(
            f"device={device!r} but this worker process sees no CUDA GPU; use device='auto' "
            "to run on CPU where there is none"
        )
    return device


def resolve_dtype(dtype: str, device: str, *, half_weights: bool = False) -> tuple[Any, Any]:
    """``(weights dtype, autocast dtype or None)`` for a dtype option on a device.

    ``"auto"``: float32 weights; on CUDA, autocast to bfloat16 (float16 on GPUs without
    bfloat16), or with ``half_weights`` (a model too large for float32 on a GPU, such as
    a 7B language model) the weights themselves in that half precision. Any other value
    loads the weights in that dtype, with no autocast.
    """
    torch, _ = require_torch()
    if dtype == "auto":
        if device.startswith("cuda"):
            half = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            return (half, None) if half_weights else (torch.float32, half)
        return torch.float32, None
    return getattr(torch, dtype), None


def _model_class(kind: str):
    _, transformers = require_torch()
    if kind == "sequence-classification":
        return transformers.AutoModelForSequenceClassification
    if kind == "encoder":
        return transformers.AutoModel
    raise InvalidArgumentError(f"unknown model kind {kind!r}; expected one of {MODEL_KINDS}")


def dtype_argument(weights_dtype) -> dict[str, Any]:
    """``from_pretrained``'s keyword for the weights' dtype (transformers 4.56 renamed
    ``torch_dtype`` to ``dtype``)."""
    _, transformers = require_torch()
    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": weights_dtype}


@dataclass(frozen=True)
class ModelBuilder:
    """How to build a model that is not one of ``transformers``' Auto classes.

    ``function(path, weights_dtype, **options)`` returns the module (on the CPU, in eval
    or train mode: the loader moves it and sets eval). Part of the cache key, so stages
    with the same builder and options on one directory share one load.

    Attributes
    ----------
    function : str
        ``"module:function"``: imported when the model is built, so the model's code (and
        torch) is imported only by the process that loads it.
    options : tuple of (name, value) pairs
        Keyword arguments (hashable), e.g. the directory of a backbone's config.
    half_weights : bool
        With ``dtype="auto"`` on CUDA, load the weights in half precision instead of
        float32 weights under autocast (for models too large for float32).
    """

    function: str
    options: tuple[tuple[str, Hashable], ...] = ()
    half_weights: bool = False

    def build(self, path: str, weights_dtype):
        module, name = self.function.split(":")
        return getattr(importlib.import_module(module), name)(path, weights_dtype,
                                                              **dict(self.options))


def _acquire(key: Hashable, load: Callable[[], Any]):
    with _lock:
        entry = _cache.get(key)
        if entry is None:
            entry = _cache[key] = [load(), 0]
        entry[1] += 1
        return entry[0]


def acquire_model(path: str, kind: str, device: str, dtype: str, *,
                  trust_remote_code: bool = False, safetensors: bool = True,
                  builder: ModelBuilder | None = None):
    """This process's model for ``path``, loading it on first use. Returns
    ``(key, LoadedModel)``; give the key to :func:`release` when done.

    ``kind`` names an Auto class (:data:`MODEL_KINDS`) or, with a ``builder``, describes
    the custom model for logs.
    """
    device = resolve_device(device)
    key = ("model", kind, path, device, dtype, trust_remote_code, builder)

    def load() -> LoadedModel:
        torch, _ = require_torch()
        weights_dtype, autocast_dtype = resolve_dtype(
            dtype, device, half_weights=builder is not None and builder.half_weights)
        started = time.perf_counter()
        try:
            if builder is not None:
                model = builder.build(path, weights_dtype)
            else:
                model = _model_class(kind).from_pretrained(
                    path, local_files_only=True, trust_remote_code=trust_remote_code,
                    use_safetensors=True if safetensors else None,
                    **dtype_argument(weights_dtype),
                )
        except ModelDirectoryError:
            raise
        except (OSError, ValueError, KeyError, RuntimeError) as err:
            raise ModelDirectoryError(
                f"could not load a {kind} model from {path!r}: {err}"
            ) from err
        model = model.to(device).eval()
        logger.info("loaded %s model %s on %s (%s) in %.1f s", kind, path, device,
                    weights_dtype, time.perf_counter() - started)
        _log_load(kind, path, device, dtype)
        return LoadedModel(model, torch.device(device), autocast_dtype)

    return key, _acquire(key, load)


def acquire_tokenizer(path: str, *, trust_remote_code: bool = False):
    """This process's tokenizer for ``path`` (a fast one), loading it on first use.
    Returns ``(key, tokenizer)``."""
    key = ("tokenizer", path, trust_remote_code)

    def load():
        _, transformers = require_torch()
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                path, local_files_only=True, trust_remote_code=trust_remote_code)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ModelDirectoryError(f"could not load the tokenizer from {path!r}: {err}") from err
        if not getattr(tokenizer, "is_fast", False):
            logger.warning("tokenizer of %s is not a fast (Rust) tokenizer: tokenizing will be "
                           "slow; save a tokenizer.json beside the model", path)
        _log_load("tokenizer", path, "cpu", None)
        return tokenizer

    return key, _acquire(key, load)


def release(key: Hashable) -> bool:
    """Drop one reference; the last one frees the object (and the CUDA cache).
    True if the object was freed."""
    with _lock:
        entry = _cache.get(key)
        if entry is None:
            return False
        entry[1] -= 1
        if entry[1] > 0:
            return False
        del _cache[key]
    logger.info("released %s %s", key[0], key[1] if key[0] == "tokenizer" else key[1:3])
    del entry
    gc.collect()
    if key[0] == "model" and str(key[3]).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
    return True


def loaded() -> dict[Hashable, int]:
    """What this process holds: cache key -> number of references (for debugging,
    e.g. ``client.run(loaded)``)."""
    with _lock:
        return {key: entry[1] for key, entry in _cache.items()}


def _log_load(kind: str, path: str, device: str, dtype: str | None) -> None:
    directory = os.environ.get(LOAD_LOG_ENV)
    if not directory:
        return
    local = LocalFileSystem()
    atomic.make_dirs(local, directory)
    record = {"pid": os.getpid(), "kind": kind, "path": path, "device": device, "dtype": dtype}
    name = f"{os.getpid()}-{kind}-{uuid.uuid4().hex[:8]}.json"
    atomic.write_json(local, os.path.join(directory, name), record)
