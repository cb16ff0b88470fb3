"""Tokenize once for several model stages over the same text: a per-process token cache.

Several classifiers in a row over one text column (quality, domain and content type all
run DeBERTa-v3's tokenizer) would each tokenize every document. Instead every model stage
asks this cache first. An entry is keyed by what decides the token ids, and nothing else:

- the tokenizer's *content* (:func:`tokenizer_identity`: its vocabulary, normalizer,
  pre-tokenizer, special tokens and post-processor), so two model directories that ship
  the same tokenizer share, and two tokenizers that differ never do;
- how the text is prepared (a stage that wraps each document in a prompt names that);
- the token limit (``max_length``);
- a digest of the text itself after the ``max_chars`` cut.

So a hit gives exactly the ids the stage would have computed, and stages whose settings
differ (a classifier that reads 512 tokens beside one that reads 1,024) each tokenize:
no stage ever sees tokens made for another's settings.

Entries live in the worker process, least recently used first out, within
``CURATOR_DASK_TOKEN_CACHE_MB`` megabytes (default 256; 0 turns sharing off). Stages in a
row share when they run in one process: an interactive chain (Dask fuses it into one
task), the ``LocalExecutor``, and on a cluster whenever the scheduler runs a partition's
next stage where its data is (its default). :func:`tokenization_counts` reports, per
tokenizer directory, the documents this process tokenized and those it reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable

import numpy as np
import pyarrow as pa

from curator_dask.stages.models.batching import Tokens

__all__ = [
    "TOKEN_CACHE_ENV",
    "clear",
    "text_digest",
    "tokenization_counts",
    "tokenizer_identity",
    "tokens_for",
]

TOKEN_CACHE_ENV = "CURATOR_DASK_TOKEN_CACHE_MB"
DEFAULT_CACHE_MB = 256



class _Entries(OrderedDict):
    """The cached tokens, least recently used first, and the bytes they hold."""

    nbytes = 0


_entries: _Entries = _Entries()
_lock = threading.Lock()
_tokenized: Counter = Counter()
_reused: Counter = Counter()


def _budget() -> int:
    try:
        return int(float(os.environ.get(TOKEN_CACHE_ENV, DEFAULT_CACHE_MB)) * 2**20)
    except ValueError:
        return DEFAULT_CACHE_MB * 2**20


def _size(tokens: Tokens) -> int:
    return tokens.ids.nbytes + tokens.offsets.nbytes


def text_digest(arr: pa.Array) -> bytes:
    """A digest of a string array's values (no nulls): equal texts give equal digests.

    Reads the Arrow buffers directly, so no Python string is made.

    Examples
    --------
    >>> a = pa.array(["ab", "c"])
    >>> text_digest(a) == text_digest(pa.array(["x", "ab", "c"]).slice(1))
    True
    >>> text_digest(a) == text_digest(pa.array(["a", "bc"]))
    False
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    wide = pa.types.is_large_string(arr.type)
    _, offsets_buffer, data = arr.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if wide else np.int32)
    offsets = offsets[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    digest = hashlib.blake2b(digest_size=16)
    digest.update((offsets - offsets[0]).tobytes())
    if data is not None and len(arr):
        digest.update(memoryview(data)[int(offsets[0]):int(offsets[-1])])
    return digest.digest()


def tokenizer_identity(tokenizer, path: str) -> str:
    """What a tokenizer computes, as a short digest: equal for two copies of one tokenizer.

    A fast tokenizer is identified by its serialised pipeline without the truncation and
    padding settings (calls change those) plus the Python-side settings that change the
    ids; a slow one by its class and directory.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return f"{type(tokenizer).__name__}:{path}"
    spec = json.loads(backend.to_str())
    spec.pop("truncation", None)
    spec.pop("padding", None)
    spec["python"] = [type(tokenizer).__name__, getattr(tokenizer, "truncation_side", None)]
    text = json.dumps(spec, sort_keys=True).encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def tokens_for(key: Hashable, tokenize: Callable[[], Tokens], *, documents: int,
               tokenizer_path: str) -> Tokens:
    """The cached tokens for ``key``, or ``tokenize()``'s (cached for the next stage).

    ``documents`` and ``tokenizer_path`` feed :func:`tokenization_counts`.
    """
    sharing = _budget() > 0
    with _lock:
        hit = _entries.get(key) if sharing else None
        if hit is not None:
            _entries.move_to_end(key)
            _reused[tokenizer_path] += documents
            return hit
    tokens = tokenize()
    with _lock:
        _tokenized[tokenizer_path] += documents
        _store(key, tokens)
    return tokens


def _store(key: Hashable, tokens: Tokens) -> None:
    budget, size = _budget(), _size(tokens)
    if size > budget or key in _entries:
        return
    _entries[key] = tokens
    _entries.nbytes += size
    while _entries.nbytes > budget:
        _, evicted = _entries.popitem(last=False)
        _entries.nbytes -= _size(evicted)


def tokenization_counts() -> dict[str, dict[str, int]]:
    """Per tokenizer directory, documents this process tokenized and reused from the cache.

    For checking that sharing works, e.g. ``client.run(tokenization_counts)`` on a
    cluster: ``{"/models/quality": {"tokenized": 1000, "reused": 2000}}``.
    """
    with _lock:
        return {path: {"tokenized": _tokenized[path], "reused": _reused[path]}
                for path in sorted(set(_tokenized) | set(_reused))}


def clear() -> None:
    """Drop every cached entry (the counts stay)."""
    with _lock:
        _entries.clear()
        _entries.nbytes = 0
