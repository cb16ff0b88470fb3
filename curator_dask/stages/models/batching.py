"""Length-sorted dynamic batching with out-of-memory backoff: crossfit's method, ours.

Transformer cost grows with the padded length of a batch, and a partition's documents
vary from a few tokens to the model's limit. Padding every batch to the limit, in input
order, spends most of the compute on padding. Instead, for one partition:

1. tokenize every document at once (a fast tokenizer batches in Rust), without padding;
2. order the documents by token count, longest first;
3. cut that order into batches of ``batch_size`` rows, or fewer where a token budget
   (``max_tokens_per_batch``, counted with padding) is reached;
4. pad each batch only to its own longest row (the first, as rows are sorted);
5. on out-of-memory, free the cache, halve the batch and retry, down to one row; the
   smaller size holds for the rest of the partition (later batches are no longer);
6. write each batch's results to its rows' input positions, so the output is in input
   order whatever the batching was.

Longest first means an out-of-memory error, if any, comes on the first batch, not after
most of the partition's work.

Nothing here imports torch: ``forward`` is any function from padded numpy arrays to a
numpy array of results.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from curator_dask.errors import InvalidArgumentError

__all__ = ["Tokens", "batch_bounds", "is_out_of_memory", "pad_batch", "run_batches", "tokenize"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tokens:
    """Unpadded token ids of a partition: row ``i`` is ``ids[offsets[i]:offsets[i + 1]]``."""

    ids: np.ndarray       # int64, all rows back to back
    offsets: np.ndarray   # int64, len(rows) + 1

    @classmethod
    def from_arrow(cls, arr: pa.Array) -> Tokens:
        """From an Arrow list array of token ids (missing rows count as empty)."""
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        offsets = arr.offsets.to_numpy().astype(np.int64)
        if arr.null_count:
            # A null list's offsets may span values; give it none.
            valid = arr.is_valid().to_numpy(zero_copy_only=False)
            lengths = np.where(valid, np.diff(offsets), 0)
            return cls(arr.flatten().to_numpy().astype(np.int64),
                       np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        values = arr.values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        return cls(values, offsets)

    def to_arrow(self) -> pa.Array:
        """As an Arrow ``list<int32>`` array."""
        return pa.ListArray.from_arrays(pa.array(self.offsets.astype(np.int32)),
                                        pa.array(self.ids.astype(np.int32)))

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1


def tokenize(tokenizer, texts: Sequence[str], max_length: int) -> Tokens:
    """Tokenize all ``texts`` in one call (truncated to ``max_length`` tokens, no padding)."""
    if not len(texts):
        return Tokens(np.empty(0, np.int64), np.zeros(1, np.int64))
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length, padding=False,
                        return_attention_mask=False, return_token_type_ids=False)
    # Arrow builds the flat ids and offsets from the nested lists in C++.
    return Tokens.from_arrow(pa.array(encoded["input_ids"], type=pa.list_(pa.int64())))


def batch_bounds(sorted_lengths: np.ndarray, start: int, batch_size: int,
                 max_tokens_per_batch: int | None) -> int:
    """End (exclusive) of the batch starting at ``start`` of lengths sorted longest first.

    Examples
    --------
    >>> lengths = np.array([10, 8, 8, 3, 2])
    >>> [batch_bounds(lengths, 0, 4, None), batch_bounds(lengths, 0, 4, 25),
    ...  batch_bounds(lengths, 3, 4, 25)]
    [4, 2, 5]
    >>> batch_bounds(lengths, 0, 4, 5)  # one row even over budget
    1
    """
    rows = batch_size
    if max_tokens_per_batch is not None:
        # Rows are sorted longest first, so the batch pads to its first row's length.
        rows = min(rows, max(1, max_tokens_per_batch // max(int(sorted_lengths[start]), 1)))
    return min(start + rows, len(sorted_lengths))


PADDING_SIDES = ("right", "left")


def pad_batch(tokens: Tokens, rows: np.ndarray, pad_id: int,
              padding_side: str = "right") -> tuple[np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask)`` of ``rows``, int64, padded to the batch's longest row.

    Encoders pad on the right; a causal language model that generates after the prompt
    needs the padding on the left (``padding_side="left"``).

    Examples
    --------
    >>> tokens = Tokens(np.array([5, 6, 7, 8, 9]), np.array([0, 3, 3, 5]))
    >>> ids, mask = pad_batch(tokens, np.array([2, 0]), pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[8, 9, 0], [5, 6, 7]], [[1, 1, 0], [1, 1, 1]])
    >>> pad_batch(tokens, np.array([2, 0]), pad_id=0, padding_side="left")[0].tolist()
    [[0, 8, 9], [5, 6, 7]]
    """
    if padding_side not in PADDING_SIDES:
        raise InvalidArgumentError(
            f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}")
    lengths = tokens.lengths[rows]
    width = max(int(lengths.max(initial=0)), 1)
    if padding_side == "left":
        mask = np.arange(width) >= (width - lengths)[:, None]
    else:
        mask = np.arange(width) < lengths[:, None]
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    # mask is True at (row, column) in row-major order, which is the order of each row's
    # ids laid back to back (on either side, a row's real tokens are contiguous): gather
    # them with one index array.
    starts = np.repeat(tokens.offsets[rows] - np.cumsum(lengths) + lengths, lengths)
    ids[mask] = tokens.ids[starts + np.arange(int(lengths.sum()))]
    return ids, mask.astype(np.int64)


def is_out_of_memory(err: BaseException) -> bool:
    """CUDA's out-of-memory error, or a RuntimeError that says "out of memory"."""
    import torch

    if isinstance(err, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(err, RuntimeError) and "out of memory" in str(err).lower()


def _free_memory() -> None:
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_batches(forward: Callable[[np.ndarray, np.ndarray], np.ndarray], tokens: Tokens, *,
                batch_size: int, pad_id: int, max_tokens_per_batch: int | None = None,
                label: str = "model", padding_side: str = "right") -> np.ndarray:
    """Run ``forward`` over ``tokens`` in length-sorted batches; results in input order.

    Parameters
    ----------
    forward : callable
        ``forward(input_ids, attention_mask) -> array`` with one result row per input row.
    tokens : Tokens
    batch_size : int
        Most rows in one batch (``model_inference_batch_size``).
    pad_id : int
    max_tokens_per_batch : int, optional
        Most tokens in one batch, padding included.
    label : str
        Names the stage in the out-of-memory warning.
    padding_side : {"right", "left"}
        See :func:`pad_batch`.

    Returns
    -------
    numpy array
        ``out[i]`` is the result for row ``i`` of ``tokens``.
    """
    n = len(tokens)
    lengths = tokens.lengths
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    out = None
    start, limit = 0, batch_size
    while start < n:
        end = batch_bounds(sorted_lengths, start, limit, max_tokens_per_batch)
        rows = order[start:end]
        ids, mask = pad_batch(tokens, rows, pad_id, padding_side)
        try:
            result = forward(ids, mask)
        except Exception as err:
            if not is_out_of_memory(err) or len(rows) == 1:
                raise
            # Leave the except block first: the traceback holds the failed batch's tensors.
            failed = True
        else:
            failed = False
        if failed:
            limit = max(1, len(rows) // 2)
            del ids, mask
            _free_memory()
            logger.warning("%s: out of memory on a batch of %d rows x %d tokens; retrying "
                           "with %d rows", label, len(rows), int(sorted_lengths[start]), limit)
            continue
        if out is None:
            out = np.empty((n, *result.shape[1:]), dtype=result.dtype)
        out[rows] = result
        start = end
    if out is None:
        return np.empty((0,), dtype=np.float32)
    return out
