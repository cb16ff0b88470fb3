"""What every model stage shares: checking the model directory, loading, batching, lifecycle.

:class:`ModelStage` is the base of :class:`~curator_dask.stages.models.ClassifierStage`
and :class:`~curator_dask.stages.models.EmbeddingStage`. Per partition it

1. gets token ids: tokenizes the text column (cut to ``max_chars`` characters, then to
   ``max_length`` tokens), or reads the ids a :class:`TokenizerStage` made
   (``pretokenized=True``);
2. runs the model over length-sorted, dynamically padded batches
   (:func:`~curator_dask.stages.models.batching.run_batches`) under
   ``torch.inference_mode`` and, on CUDA with ``dtype="auto"``, autocast to bfloat16;
3. hands the results, in input order, to the subclass's :meth:`ModelStage.attach`.

Subclasses choose the model class (``model_kind``), what one batch computes
(:meth:`ModelStage.forward_batch`) and the columns they add.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Hashable
from typing import Any

import numpy as np

from curator_dask.backends import is_cudf
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.resources import Resources
from curator_dask.stages.base import ProcessingStage
from curator_dask.stages.models import loading, token_cache
from curator_dask.stages.models.backend import (
    TOKEN_IDS_DTYPE,
    VECTOR_DTYPE,
    column_like,
    cudf_meta,
    host_text_array,
    token_array,
)
from curator_dask.stages.models.batching import Tokens, run_batches, tokenize
from curator_dask.stages.models.model_dir import ModelDir, inspect_model_dir

__all__ = ["CPU_TOKENS_PER_BATCH", "DEFAULT_MAX_LENGTH", "ModelStage", "TokenizerStage"]

logger = logging.getLogger(__name__)

#: Token limit used when neither the tokenizer nor the config states one.
DEFAULT_MAX_LENGTH = 512
#: Tokens per batch (padding included) on a CPU when ``max_tokens_per_batch`` is not
#: given. A CPU's matrix products reach full speed at a few hundred rows of tokens, and
#: larger batches only add memory traffic: with MiniLM at 512 tokens, batches of 2,048
#: tokens ran 1.9x faster than batches of 256 documents (docs/benchmarks.md).
CPU_TOKENS_PER_BATCH = 2048
# Tokenizers without a limit report a huge sentinel (int(1e30)).
_NO_LIMIT = 1_000_000


def _positive_int(name: str, value, optional: bool = False):
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgumentError(
            f"{name} must be a positive integer{' or None' if optional else ''}, "
            f"got {value!r}")
    return value


def _check_device(device: str) -> str:
    if not isinstance(device, str) or not (device in ("auto", "cpu")
                                           or device.startswith("cuda")):
        raise InvalidArgumentError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return device


def _check_dtype(dtype: str) -> str:
    if dtype not in loading.DTYPES:
        raise InvalidArgumentError(f"dtype must be one of {loading.DTYPES}, got {dtype!r}")
    return dtype


def _default_name(model_dir: ModelDir, suffix: str) -> str:
    base = model_dir.path.rstrip("/").rsplit("/", 1)[-1]
    return f"{base}_{suffix}"


class _TokenizingMixin:
    """Tokenizer handling shared by model stages and :class:`TokenizerStage`.

    Tokens go through the per-process :mod:`token cache <.token_cache>`, so stages in a
    row over the same text, tokenizer and settings tokenize once.
    """

    model_dir: ModelDir
    text_field: str
    max_chars: int | None
    max_length: int | None
    trust_remote_code: bool
    #: Names how :meth:`prepare_texts` changes the text before tokenizing (part of the
    #: token cache key); None when it does not.
    text_preparation: str | None = None
    _tokenizer: Any = None
    _tokenizer_key: Hashable | None = None
    _tokenizer_identity: str | None = None

    @property
    def tokenizer_path(self) -> str:
        """The directory the tokenizer loads from: the model's own, unless a subclass
        says otherwise."""
        return self.__dict__.get("_tokenizer_path") or self.model_dir.path

    def _acquire_tokenizer(self) -> None:
        if self._tokenizer is None:
            self._tokenizer_key, self._tokenizer = loading.acquire_tokenizer(
                self.tokenizer_path, trust_remote_code=self.trust_remote_code)
            self._tokenizer_identity = token_cache.tokenizer_identity(self._tokenizer,
                                                                      self.tokenizer_path)

    def _release_tokenizer(self) -> None:
        if self._tokenizer_key is not None:
            loading.release(self._tokenizer_key)
            if not any(key[0] == "tokenizer" for key in loading.loaded()):
                token_cache.clear()  # no stage here can use the cached tokens any more
        self._tokenizer = self._tokenizer_key = self._tokenizer_identity = None

    def _default_max_length(self) -> int:
        limits = []
        tokenizer_limit = getattr(self._tokenizer, "model_max_length", None)
        if isinstance(tokenizer_limit, int) and tokenizer_limit < _NO_LIMIT:
            limits.append(tokenizer_limit)
        positions = self.model_dir.config.get("max_position_embeddings")
        if isinstance(positions, int) and positions > 0:
            limits.append(positions)
        return min(limits) if limits else DEFAULT_MAX_LENGTH

    def token_limit(self) -> int:
        """Most tokens per document: ``max_length``, else the model's own limit."""
        return self.max_length or self._default_max_length()

    def prepare_texts(self, texts: list[str]) -> list[str]:
        """The texts as the model reads them (after the ``max_chars`` cut); a subclass
        that changes them (a prompt around each) sets :attr:`text_preparation`."""
        return texts

    def tokenize_column(self, text) -> Tokens:
        """Token ids of a text column (any backend), cut to ``max_chars`` then
        :meth:`token_limit` tokens; from the token cache when an earlier stage in this
        process tokenized the same text the same way."""
        self._acquire_tokenizer()
        arr = host_text_array(text, self.max_chars)
        limit = self.token_limit()
        key = (self._tokenizer_identity, self.text_preparation, limit,
               token_cache.text_digest(arr))

        def compute() -> Tokens:
            texts = self.prepare_texts(arr.to_pylist())
            with loading.tokenizer_lock:
                return tokenize(self._tokenizer, texts, limit)

        return token_cache.tokens_for(key, compute, documents=len(arr),
                                      tokenizer_path=self.tokenizer_path)


class ModelStage(_TokenizingMixin, ProcessingStage):
    """Base class of stages that run a Hugging Face model over a partition's documents.

    Parameters
    ----------
    model_path : str or path-like
        Local directory written by ``save_pretrained`` (``config.json``, weights,
        tokenizer files). It must exist at the same path on every worker. Checked when
        the stage is made.
    text_field : str, default "text"
    model_inference_batch_size : int, default 256
        Most documents per forward pass.
    max_tokens_per_batch : int, optional
        Most tokens (padding included) per forward pass; batches of long documents get
        fewer rows. Use it to bound GPU memory on mixed-length corpora. Default: no
        budget on a GPU; :data:`CPU_TOKENS_PER_BATCH` (2,048) on a CPU, where big
        batches are slower, not faster.
    max_chars : int or None, default 6000
        Documents are cut to this many characters before tokenizing.
    max_length : int, optional
        Most tokens per document; default the model's limit (tokenizer's
        ``model_max_length``, at most ``max_position_embeddings``).
    device : {"auto", "cpu", "cuda", "cuda:N"}, default "auto"
        ``"auto"``: the worker's GPU when it has one, else its CPU.
    dtype : {"auto", "float32", "bfloat16", "float16"}, default "auto"
        ``"auto"``: float32 weights, autocast to bfloat16 (float16 where unsupported) on
        CUDA, plain float32 on CPU. Other values load the weights in that dtype.
    pretokenized : bool, default False
        Read token ids from ``input_ids_column`` (made by a :class:`TokenizerStage`)
        instead of tokenizing; that column is removed from the output.
    input_ids_column : str, default "input_ids"
    trust_remote_code : bool, default False
        Passed to ``from_pretrained``; only for model code you trust.
    name : str, optional
    resources : Resources, optional
        Default one GPU. With ``cpu_fallback`` the executors run the stage on a CPU
        worker when no worker has a GPU (and say so in the log).
    """

    working_set = "embeddings"  # memory per input byte: see io/planner.py

    model_kind: str = "encoder"
    output_suffix: str = "model"
    #: The stage's name when none is given (a named classifier's, ``quality_classifier``);
    #: None names it after its model directory.
    default_name: str | None = None
    #: Where a batch is padded: "left" for a causal language model that generates.
    padding_side: str = "right"
    resources: Resources = Resources(gpus=1)
    #: Executors may run this stage on CPU workers when the cluster has no GPU worker.
    cpu_fallback: bool = True
    #: Where and in what batches the model runs does not change what a resume may reuse.
    fingerprint_ignores = ("device", "model_inference_batch_size", "max_tokens_per_batch")
    _model: loading.LoadedModel | None = None
    _model_key: Hashable | None = None

    def __init__(self, model_path: str | os.PathLike, *, text_field: str = "text",
                 model_inference_batch_size: int = 256,
                 max_tokens_per_batch: int | None = None, max_chars: int | None = 6000,
                 max_length: int | None = None, device: str = "auto", dtype: str = "auto",
                 pretokenized: bool = False, input_ids_column: str = "input_ids",
                 trust_remote_code: bool = False, name: str | None = None,
                 resources: Resources | None = None):
        self.model_dir = self.inspect(model_path, pretokenized)
        self.model_path = self.model_dir.path
        self.text_field = text_field
        self.model_inference_batch_size = _positive_int("model_inference_batch_size",
                                                        model_inference_batch_size)
        self.max_tokens_per_batch = _positive_int("max_tokens_per_batch",
                                                  max_tokens_per_batch, optional=True)
        self.max_chars = _positive_int("max_chars", max_chars, optional=True)
        self.max_length = _positive_int("max_length", max_length, optional=True)
        self.device = _check_device(device)
        self.dtype = _check_dtype(dtype)
        self.pretokenized = bool(pretokenized)
        self.input_ids_column = input_ids_column
        self.trust_remote_code = bool(trust_remote_code)
        self.name = name or self.default_name or _default_name(self.model_dir,
                                                               self.output_suffix)
        if resources is not None:
            if not isinstance(resources, Resources):
                raise ArgumentTypeError(
                    f"resources must be a Resources, got {type(resources).__name__}")
            self.resources = resources
        self.removed_columns = (input_ids_column,) if pretokenized else ()
        self._model = None
        self._model_key = None

    def inspect(self, model_path, pretokenized: bool) -> ModelDir:
        """Check the model directory when the stage is made (override for a layout other
        than ``save_pretrained``'s)."""
        return inspect_model_dir(model_path, need_tokenizer=not pretokenized)

    def model_builder(self) -> loading.ModelBuilder | None:
        """How to build a model that is not a ``transformers`` Auto class (None: it is)."""
        return None

    # -- pickling: the model never travels; setup() gets this process's copy ------------
    def __getstate__(self):
        state = self.__dict__.copy()
        for attr in ("_model", "_model_key", "_tokenizer", "_tokenizer_key",
                     "_tokenizer_identity"):
            state.pop(attr, None)
        return state

    # -- lifecycle ---------------------------------------------------------------------
    def setup(self) -> None:
        """Get this process's model (and tokenizer), loading them on first use."""
        if self._model is not None:
            return
        if not self.pretokenized:
            self._acquire_tokenizer()
        self._model_key, self._model = loading.acquire_model(
            self.model_path, self.model_kind, self.device, self.dtype,
            trust_remote_code=self.trust_remote_code, safetensors=self.model_dir.safetensors,
            builder=self.model_builder())
        if self._model.device.type == "cpu" and self.resources.requires_gpu:
            logger.info("stage %r: no GPU in this worker process; running %s on CPU",
                        self.name, self.model_path)

    def teardown(self) -> None:
        """Release this stage's references; the last user of a model frees it."""
        if self._model_key is not None:
            loading.release(self._model_key)
        self._model = self._model_key = None
        self._release_tokenizer()

    # -- schema ------------------------------------------------------------------------
    @property
    def input_columns(self) -> list[str]:
        return [self.input_ids_column if self.pretokenized else self.text_field]

    def missing_columns_fix(self, columns) -> str:
        if self.pretokenized:
            return "Pass input_ids_column= to name the right one or put a TokenizerStage before it."
        return super().missing_columns_fix(columns)

    def meta(self, input_meta):
        if is_cudf(input_meta):
            self.check_input_columns(input_meta.columns)
            kinds = {c: "vectors" if dtype == VECTOR_DTYPE else dtype
                     for c, dtype in self.output_columns.items()}
            return cudf_meta(input_meta, self.removed_columns, kinds)
        return super().meta(input_meta)

    # -- the work ----------------------------------------------------------------------
    @property
    def pad_token_id(self) -> int:
        """Padding id: the tokenizer's, else the config's, else 0 (padding is masked)."""
        pad = getattr(self._tokenizer, "pad_token_id", None)
        if pad is None:
            pad = self.model_dir.config.get("pad_token_id")
        return int(pad) if isinstance(pad, int) else 0

    def tokens_of(self, df) -> Tokens:
        """The partition's token ids: read from ``input_ids_column`` or tokenized."""
        if self.pretokenized:
            return Tokens.from_arrow(token_array(df[self.input_ids_column]))
        return self.tokenize_column(df[self.text_field])

    def forward_batch(self, input_ids, attention_mask):
        """One padded batch (torch tensors on the model's device) through the model.

        Returns a tensor with one row per input row. The override point for subclasses
        (and for tests that simulate a device's memory limit).
        """
        raise NotImplementedError

    def infer(self, tokens: Tokens) -> np.ndarray:
        """:meth:`forward_batch` over all of ``tokens``; rows in input order (floats as
        float32, integers such as generated token ids as they are)."""
        self.setup()
        torch, _ = loading.require_torch()
        loaded = self._model
        autocast = (torch.autocast(device_type=loaded.device.type, dtype=loaded.autocast_dtype)
                    if loaded.autocast_dtype is not None else contextlib.nullcontext())

        def forward(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            input_ids = torch.from_numpy(ids).to(loaded.device, non_blocking=True)
            attention_mask = torch.from_numpy(mask).to(loaded.device, non_blocking=True)
            with autocast:
                result = self.forward_batch(input_ids, attention_mask)
            if result.is_floating_point():
                result = result.float()
            return result.cpu().numpy()

        with torch.inference_mode():
            return run_batches(forward, tokens, batch_size=self.model_inference_batch_size,
                               pad_id=self.pad_token_id,
                               max_tokens_per_batch=self.tokens_per_batch(loaded.device.type),
                               label=self.name, padding_side=self.padding_side)

    def tokens_per_batch(self, device_type: str) -> int | None:
        """The token budget of one forward pass on ``device_type`` ("cpu", "cuda").

        Examples
        --------
        >>> stage = ModelStage.__new__(ModelStage)
        >>> stage.max_tokens_per_batch = None
        >>> stage.tokens_per_batch("cpu"), stage.tokens_per_batch("cuda")
        (2048, None)
        >>> stage.max_tokens_per_batch = 8192
        >>> stage.tokens_per_batch("cpu")
        8192
        """
        if self.max_tokens_per_batch is not None:
            return self.max_tokens_per_batch
        return CPU_TOKENS_PER_BATCH if device_type == "cpu" else None

    def attach(self, df, results: np.ndarray):
        """Add the results (one row per document, input order) to the partition."""
        raise NotImplementedError

    def process(self, df):
        tokens = self.tokens_of(df)
        results = self.infer(tokens) if len(tokens) else None
        if self.pretokenized:
            df = df.drop(columns=[self.input_ids_column])
        return self.attach(df, results)


class TokenizerStage(_TokenizingMixin, ProcessingStage):
    """Tokenize the text column into a token-id column, on a CPU worker.

    Put it before a model stage made with ``pretokenized=True`` on the same model
    directory, so that tokenizing (CPU) and inference (GPU) run on different workers and
    overlap in the streaming executor. The model stage removes the column.

    Parameters
    ----------
    model_path : str or path-like
        Model directory with tokenizer files (weights are not needed).
    text_field : str, default "text"
    input_ids_column : str, default "input_ids"
        Output column: one ``list<int32>`` of token ids per document, unpadded, with
        the tokenizer's special tokens.
    max_chars : int or None, default 6000
    max_length : int, optional
        Most tokens per document; default the model's limit.
    trust_remote_code : bool, default False
    name : str, optional
    resources : Resources, optional
        Default one CPU.

    Examples
    --------
    >>> from curator_dask.stages.models import ClassifierStage, TokenizerStage
    >>> tokenize = TokenizerStage("models/quality")                  # doctest: +SKIP
    >>> classify = ClassifierStage("models/quality", pretokenized=True)  # doctest: +SKIP
    >>> out = classify(tokenize(ds))                                 # doctest: +SKIP
    """

    resources: Resources = Resources(cpus=1)

    def __init__(self, model_path: str | os.PathLike, *, text_field: str = "text",
                 input_ids_column: str = "input_ids", max_chars: int | None = 6000,
                 max_length: int | None = None, trust_remote_code: bool = False,
                 name: str | None = None, resources: Resources | None = None):
        self.model_dir = inspect_model_dir(model_path, need_weights=False)
        self.model_path = self.model_dir.path
        self.text_field = text_field
        self.input_ids_column = input_ids_column
        self.max_chars = _positive_int("max_chars", max_chars, optional=True)
        self.max_length = _positive_int("max_length", max_length, optional=True)
        self.trust_remote_code = bool(trust_remote_code)
        self.name = name or _default_name(self.model_dir, "tokenizer")
        if resources is not None:
            if not isinstance(resources, Resources):
                raise ArgumentTypeError(
                    f"resources must be a Resources, got {type(resources).__name__}")
            self.resources = resources
        self.output_columns = {input_ids_column: TOKEN_IDS_DTYPE}

    def __getstate__(self):
        state = self.__dict__.copy()
        for attr in ("_tokenizer", "_tokenizer_key", "_tokenizer_identity"):
            state.pop(attr, None)
        return state

    def setup(self) -> None:
        self._acquire_tokenizer()

    def teardown(self) -> None:
        self._release_tokenizer()

    @property
    def input_columns(self) -> list[str]:
        return [self.text_field]

    def meta(self, input_meta):
        if is_cudf(input_meta):
            self.check_input_columns(input_meta.columns)
            return cudf_meta(input_meta, (), {self.input_ids_column: "token_ids"})
        return super().meta(input_meta)

    def process(self, df):
        text = df[self.text_field]
        tokens = self.tokenize_column(text)
        return df.assign(**{self.input_ids_column: column_like(tokens.to_arrow(), text,
                                                               "token_ids")})
