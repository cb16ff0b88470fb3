"""Hugging Face tokenizers from local directories, and partitions encoded as token ids.

:class:`TokenizerSpec` says which tokenizer and how to use it (special tokens, BOS and
EOS); it is small and pickles to workers, where :meth:`TokenizerSpec.load` loads the
tokenizer once per process. :func:`encode` tokenizes a whole partition's texts in one
batched call of the Rust ``tokenizers`` library (its fast path, without character
offsets) and returns every document's ids in one flat array beside their lengths;
:class:`MegatronEncoder` is the tokenizing writers' encoder (:mod:`curator_dask.io.rollover`),
turning a partition into Megatron token files (:mod:`curator_dask.io.megatron`).

A tokenizer is a directory holding ``tokenizer.json`` (what ``save_pretrained`` of any
fast tokenizer writes), the path of such a file, or a directory ``transformers`` can load
a fast tokenizer from. Nothing is fetched from a model hub.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import threading
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from distributed import get_worker

from curator_dask.backends import to_host
from curator_dask.dropped import COUNTER_MARK
from curator_dask.errors import CuratorError, NameNotFoundError
from curator_dask.io.megatron import TokenFiles, token_dtype

__all__ = [
    "LoadedTokenizer",
    "MegatronEncoder",
    "TokenizerError",
    "TokenizerSpec",
    "encode",
    "token_lengths",
]

logger = logging.getLogger(__name__)

_TOKENIZER_FILE = "tokenizer.json"


class TokenizerError(CuratorError, ValueError):
    """A tokenizer that cannot be loaded or used as asked; names the path and the fix."""


@dataclass(frozen=True)
class TokenizerSpec:
    """A tokenizer (a local path) and how documents are encoded with it.

    Parameters
    ----------
    path : str
        A directory with ``tokenizer.json`` (``tokenizer.save_pretrained(path)``), the
        ``tokenizer.json`` itself, or a directory ``transformers`` loads a fast tokenizer
        from.
    bos, eos : bool or str, default False
        Put a begin- (end-) of-document token before (after) every document: ``True``
        for the tokenizer's own (``bos_token``/``eos_token`` of its
        ``tokenizer_config.json``), or the token's text (``"<|endoftext|>"``).
    add_special_tokens : bool, default False
        Apply the tokenizer's post-processor (a BERT tokenizer's ``[CLS] ... [SEP]``).
    """

    path: str
    bos: bool | str = False
    eos: bool | str = False
    add_special_tokens: bool = False
    #: sha256 of the tokenizer's files, read on the client: a resume with another
    #: tokenizer under the same path is refused.
    digest: str = field(default="", compare=False)

    def __post_init__(self):
        for name in ("bos", "eos"):
            value = getattr(self, name)
            if not isinstance(value, (bool, str)) or value == "":
                raise TokenizerError(f"{name} must be True, False or a token's text, got {value!r}")
        # Absolute here, on the client: workers may run in another directory.
        path = os.path.abspath(os.fspath(self.path))
        object.__setattr__(self, "path", path)
        if not os.path.exists(path):
            raise TokenizerError(f"tokenizer {path!r} does not exist: give a local directory "
                                 "saved with save_pretrained (models are never downloaded)")
        if not self.digest:
            object.__setattr__(self, "digest", _digest(path))

    def load(self) -> LoadedTokenizer:
        """The tokenizer, loaded once per process (and again if its files change)."""
        key = (self.path, self.digest, self.bos, self.eos, self.add_special_tokens)
        with _lock:
            loaded = _loaded.get(key)
            if loaded is None:
                loaded = _loaded[key] = LoadedTokenizer.from_spec(self)
        return loaded

    def fingerprint(self) -> dict:
        """What the encoding depends on, for resume checks: the tokenizer's content and
        the options (not its path)."""
        return {"tokenizer": self.digest, "bos": self.bos, "eos": self.eos,
                "add_special_tokens": self.add_special_tokens}


_loaded: dict[tuple, LoadedTokenizer] = {}
_lock = threading.Lock()


def _digest(path: str) -> str:
    files = ([path] if os.path.isfile(path) else
             sorted(os.path.join(path, n) for n in os.listdir(path)
                    if n.endswith((".json", ".txt", ".model")) and not n.startswith(".")))
    sha = hashlib.sha256()
    for name in files:
        sha.update(os.path.basename(name).encode())
        with open(name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()


@dataclass
class LoadedTokenizer:
    """A ``tokenizers.Tokenizer`` with the ids of its BOS/EOS tokens and its vocabulary size."""

    tokenizer: object
    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    add_special_tokens: bool

    @property
    def dtype(self) -> np.dtype:
        """The Megatron dtype of its ids (:func:`~curator_dask.io.megatron.token_dtype`)."""
        return token_dtype(self.vocab_size)

    @classmethod
    def from_spec(cls, spec: TokenizerSpec) -> LoadedTokenizer:
        _one_thread_per_task()
        tokenizer, config = _load(spec.path)
        bos = _special_id(tokenizer, config, spec.bos, "bos", spec.path)
        eos = _special_id(tokenizer, config, spec.eos, "eos", spec.path)
        return cls(tokenizer, tokenizer.get_vocab_size(with_added_tokens=True), bos, eos,
                   spec.add_special_tokens)


def _one_thread_per_task() -> None:
    """On a Dask worker, tokenize on the task's own thread: the worker's threads are the
    parallelism (one task per thread, as the stage's resources say), and the tokenizers
    library's own thread pool would run every batch on all cores on top of them (5 to 15%
    more CPU time for the same tokens, measured). ``TOKENIZERS_PARALLELISM``, when set,
    is left as it is."""
    try:
        get_worker()
    except ValueError:  # not on a worker
        return
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _load(path: str) -> tuple[object, dict]:
    """The ``tokenizers.Tokenizer`` at ``path`` and its ``tokenizer_config.json`` (with
    ``special_tokens_map.json`` under it)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerError("tokenizing needs the tokenizers package: pip install "
                             "'curator-dask[tokenize]'") from None
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    config: dict = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as handle:
                config.update(json.load(handle))
    file = path if os.path.isfile(path) else os.path.join(path, _TOKENIZER_FILE)
    if os.path.isfile(file):
        try:
            return Tokenizer.from_file(file), config
        except Exception as err:
            raise TokenizerError(f"{file}: not a tokenizers file ({err})") from None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TokenizerError(f"{path!r} has no {_TOKENIZER_FILE}; save the tokenizer with "
                             "save_pretrained() of a fast tokenizer, or install transformers "
                             "to convert it") from None
    try:
        fast = AutoTokenizer.from_pretrained(path, use_fast=True, local_files_only=True)
    except Exception as err:
        raise TokenizerError(f"cannot load a tokenizer from {path!r}: {err}") from None
    if not getattr(fast, "is_fast", False):
        raise TokenizerError(f"{path!r} holds a slow tokenizer; save a fast one "
                             f"({_TOKENIZER_FILE}) with save_pretrained()")
    config.setdefault("bos_token", fast.bos_token)
    config.setdefault("eos_token", fast.eos_token)
    return fast.backend_tokenizer, config


def _special_id(tokenizer, config: dict, wanted: bool | str, kind: str, path: str) -> int | None:
    if wanted is False:
        return None
    text = wanted
    if wanted is True:
        text = config.get(f"{kind}_token")
        if isinstance(text, dict):
            text = text.get("content")
        if not text:
            raise TokenizerError(f"{kind}=True but the tokenizer {path!r} names no {kind}_token "
                                 f"in tokenizer_config.json; give the token's text ({kind}="
                                 "'<|endoftext|>')")
    token_id = tokenizer.token_to_id(text)
    if token_id is None:
        raise TokenizerError(f"{kind}: the token {text!r} is not in the vocabulary of {path!r}")
    return int(token_id)


#: Characters of text per call of the tokenizer. A partition is tokenized in calls of
#: about this much: the objects one call returns (a string and offsets per token) are
#: freed before the next, which keeps memory to a few times the budget and was 15 to
#: 25% less CPU per token than one call for a whole 16 MiB partition (measured).
CHUNK_CHARS = 1 << 20


def encode(loaded: LoadedTokenizer, texts) -> tuple[np.ndarray, np.ndarray]:
    """Every text's token ids, one after the other, and the number of each text's ids.

    Batched calls of the tokenizer over about :data:`CHUNK_CHARS` characters of text
    each (a null text is an empty one); BOS and EOS are inserted into the flat array,
    not per document.

    Examples
    --------
    >>> from curator_dask.testing.tokenizer import save_bpe_tokenizer
    >>> import tempfile
    >>> spec = TokenizerSpec(save_bpe_tokenizer(tempfile.mkdtemp()), eos=True)
    >>> ids, lengths = encode(spec.load(), ["a cat", ""])
    >>> lengths.tolist(), int(ids[-1]) == spec.load().eos_id
    ([4, 1], True)
    """
    texts = _texts(texts)
    pieces, counts = [], []
    for start, stop in _chunks(texts):
        id_lists = [e.ids for e in _encodings(loaded, texts[start:stop])]
        counts.append(np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists)))
        pieces.append(np.fromiter(itertools.chain.from_iterable(id_lists), dtype=loaded.dtype,
                                  count=int(counts[-1].sum())))
    lengths = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=loaded.dtype)
    extra = (loaded.bos_id is not None) + (loaded.eos_id is not None)
    if not extra:
        return ids, lengths
    new_lengths = lengths + extra
    ends = np.cumsum(new_lengths)
    starts = ends - new_lengths
    out = np.empty(int(new_lengths.sum()), dtype=loaded.dtype)
    keep = np.ones(out.size, dtype=bool)
    if loaded.bos_id is not None:
        out[starts] = loaded.bos_id
        keep[starts] = False
    if loaded.eos_id is not None:
        out[ends - 1] = loaded.eos_id
        keep[ends - 1] = False
    out[keep] = ids
    return out, new_lengths


def token_lengths(loaded: LoadedTokenizer, texts) -> np.ndarray:
    """The number of tokens of each text (as :func:`encode` counts them, BOS and EOS
    included), without gathering the ids."""
    texts = _texts(texts)
    extra = (loaded.bos_id is not None) + (loaded.eos_id is not None)
    counts = [np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
              for encodings in (_encodings(loaded, texts[start:stop])
                                for start, stop in _chunks(texts))]
    return (np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)) + extra


def _texts(texts) -> list[str]:
    return ["" if t is None or t is pd.NA else t for t in texts]


def _chunks(texts: list[str]) -> list[tuple[int, int]]:
    """``(start, stop)`` of consecutive texts of about :data:`CHUNK_CHARS` characters."""
    if not texts:
        return []
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    stops = np.searchsorted(ends, np.arange(CHUNK_CHARS, int(ends[-1]), CHUNK_CHARS),
                            side="right")
    bounds = np.unique(np.concatenate([[0], stops, [len(texts)]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


def _encodings(loaded: LoadedTokenizer, texts: list[str]) -> list:
    """One batched call of the tokenizer (its fast path: no character offsets)."""
    tokenizer = loaded.tokenizer
    batch = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    return batch(texts, add_special_tokens=loaded.add_special_tokens)


@dataclass(frozen=True)
class MegatronEncoder:
    """A partition as Megatron token files: the encoder of the tokenizing writer.

    ``stage`` names what its parts carry: the counter ``<stage>.tokens`` (and
    ``<stage>.tokens.<source>`` per value of ``source_field``), and the drop reason
    ``<stage>.no_tokens`` of documents the tokenizer makes no token of (an empty text
    without BOS or EOS: a sequence of nothing to train on, which Megatron's samplers do
    not expect). Without a stage, ``tokens`` and ``no_tokens``.
    """

    tokenizer: TokenizerSpec
    text_field: str = "text"
    source_field: str | None = None
    stage: str | None = None

    @property
    def counter(self) -> str:
        return f"{self.stage}.tokens" if self.stage else "tokens"

    @property
    def empty_reason(self) -> str:
        return f"{self.stage}.no_tokens" if self.stage else "no_tokens"

    def encode(self, df) -> TokenFiles:
        if self.text_field not in df.columns:
            raise NameNotFoundError(f"tokenizing: no column {self.text_field!r} in the partition "
                                    f"(columns: {list(df.columns)}); pass text_field=")
        frame = to_host(df)
        ids, lengths = encode(self.tokenizer.load(), frame[self.text_field].tolist())
        sources = None
        if self.source_field is not None:
            if self.source_field not in frame.columns:
                raise NameNotFoundError(
                    f"tokenizing: no column {self.source_field!r} to count tokens by source "
                    f"(columns: {list(frame.columns)})")
            sources = frame[self.source_field].astype(str).to_numpy(dtype=object)
        empty = lengths == 0
        if empty.any():  # their ids are none: only the lengths and sources lose rows
            lengths = lengths[~empty]
            sources = sources[~empty] if sources is not None else None
        return TokenFiles(ids, lengths, self.counter, sources,
                          dropped={self.empty_reason: int(empty.sum())} if empty.any() else {})

    def fingerprint(self) -> dict:
        return {**self.tokenizer.fingerprint(), "text_field": self.text_field}

    def summary(self, stats: list[dict]) -> dict:
        """What the manifest of a tokenized output records, from its parts' stats."""
        loaded = self.tokenizer.load()
        mark = COUNTER_MARK + self.counter
        by_source: dict[str, int] = {}
        for part in stats:
            for name, count in part["dropped"].items():
                if name.startswith(mark + "."):
                    source = name[len(mark) + 1:]
                    by_source[source] = by_source.get(source, 0) + count
        return {"format": "megatron", "tokenizer": self.tokenizer.path,
                "tokenizer_sha256": self.tokenizer.digest, "vocab_size": loaded.vocab_size,
                "dtype": loaded.dtype.name, "bos": self.tokenizer.bos, "eos": self.tokenizer.eos,
                "add_special_tokens": self.tokenizer.add_special_tokens,
                "documents": sum(part["rows"] for part in stats),
                "tokens": sum(part["dropped"].get(mark, 0) for part in stats),
                "tokens_by_source": dict(sorted(by_source.items())),
                "parts": len(stats)}
