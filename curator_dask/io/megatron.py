"""Megatron-LM's indexed dataset: token files a trainer reads (``.bin`` + ``.idx``).

One dataset is a pair of files with one prefix, ``part-00042.bin`` and ``part-00042.idx``
(megatron-core's ``IndexedDataset("dir/part-00042")`` reads it):

- ``.bin``: every document's token ids, one after the other, in the dtype the ``.idx``
  names (no header);
- ``.idx``, little-endian: the 9 bytes ``MMIDIDX\\x00\\x00``; the version, ``1`` (uint64);
  the dtype's code (uint8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
  7 float32, 8 uint16); the number of sequences (uint64) and of document indices
  (uint64, one more than the documents); each sequence's length in tokens (int32); each
  sequence's byte offset in the ``.bin`` (int64); the document indices (int64: the
  sequence each document starts at, then the number of sequences).

A text document is one sequence, so the document indices are ``0, 1, ..., n``. The
dtype follows the vocabulary as Megatron-LM's own preprocessing chooses it: ``uint16``
below 65,500 tokens, else ``int32`` (:func:`token_dtype`).

:func:`merge_datasets` concatenates the datasets of a directory, in name order, into
shards of a chosen number or size, reading the token files in blocks (memory: one
block, and the index of one shard).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from curator_dask.dropped import COUNTER_MARK
from curator_dask.errors import CuratorError, InvalidArgumentError
from curator_dask.io import atomic
from curator_dask.io.output_state import part_name
from curator_dask.io.rollover import FileSize, RawBytes, cut_points

__all__ = [
    "DTYPE_CODES",
    "INDEX_HEADER",
    "MegatronFormatError",
    "MegatronIndex",
    "TokenFiles",
    "dataset_prefixes",
    "index_bytes",
    "merge_datasets",
    "read_documents",
    "read_index",
    "token_dtype",
]

logger = logging.getLogger(__name__)

INDEX_HEADER = b"MMIDIDX\x00\x00"
_VERSION = 1
#: Megatron-LM's dtype codes (megatron.core.datasets.indexed_dataset.DType).
DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3,
               np.dtype(np.int32): 4, np.dtype(np.int64): 5, np.dtype(np.float64): 6,
               np.dtype(np.float32): 7, np.dtype(np.uint16): 8}
_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
_FIXED = len(INDEX_HEADER) + 8 + 1 + 8 + 8  # header, version, dtype code, two counts
#: Bytes of ``.bin`` copied at a time by :func:`merge_datasets`.
COPY_BLOCK = 16 * 2**20


class MegatronFormatError(CuratorError, ValueError):
    """A file that is not a Megatron indexed dataset this module can read."""


def token_dtype(vocab_size: int) -> np.dtype:
    """The dtype of token ids for a vocabulary of ``vocab_size`` tokens, as Megatron-LM
    chooses it (``DType.optimal_dtype``): ``uint16`` below 65,500, else ``int32``.

    Examples
    --------
    >>> token_dtype(50257), token_dtype(128256)
    (dtype('uint16'), dtype('int32'))
    """
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


def index_bytes(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.idx`` of documents of ``lengths`` tokens of ``dtype``, one sequence each.

    Examples
    --------
    >>> data = index_bytes(np.array([3, 2]), np.dtype("uint16"))
    >>> data[:9], len(data) == 34 + 2 * 4 + 2 * 8 + 3 * 8  # header, lengths, pointers, docs
    (b'MMIDIDX\\x00\\x00', True)
    """
    dtype = np.dtype(dtype)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and lengths.max() > np.iinfo(np.int32).max:
        raise MegatronFormatError("a document of more than 2**31 - 1 tokens does not fit "
                                  "Megatron's int32 sequence lengths")
    pointers = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    documents = np.arange(lengths.size + 1, dtype=np.int64)
    head = (INDEX_HEADER + struct.pack("<Q", _VERSION) + struct.pack("<B", DTYPE_CODES[dtype])
            + struct.pack("<Q", lengths.size) + struct.pack("<Q", documents.size))
    return b"".join([head, lengths.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(),
                     documents.astype("<i8").tobytes()])


@dataclass
class MegatronIndex:
    """What a ``.idx`` holds: the dtype, sequence lengths and pointers, document indices."""

    dtype: np.dtype
    lengths: np.ndarray
    pointers: np.ndarray
    document_indices: np.ndarray

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


def read_index(fs, path: str) -> MegatronIndex:
    """Read a ``.idx`` file; :class:`MegatronFormatError` names the file if it is not one."""
    with fs.open(path, "rb") as handle:
        data = handle.read()
    if len(data) < _FIXED or data[:len(INDEX_HEADER)] != INDEX_HEADER:
        raise MegatronFormatError(f"{path}: not a Megatron index (no MMIDIDX header)")
    version, code, sequences, documents = struct.unpack_from("<QBQQ", data, len(INDEX_HEADER))
    if version != _VERSION or code not in _DTYPES:
        raise MegatronFormatError(f"{path}: Megatron index version {version}, dtype code "
                                  f"{code}: only version 1 with a known dtype code is read")
    expected = _FIXED + sequences * 12 + documents * 8
    if len(data) < expected:
        raise MegatronFormatError(f"{path}: truncated ({len(data)} bytes, the header says "
                                  f"{expected})")
    lengths = np.frombuffer(data, "<i4", sequences, _FIXED)
    pointers = np.frombuffer(data, "<i8", sequences, _FIXED + 4 * sequences)
    document_indices = np.frombuffer(data, "<i8", documents, _FIXED + 12 * sequences)
    return MegatronIndex(_DTYPES[code], lengths, pointers, document_indices)


def read_documents(fs, prefix: str) -> Iterator[np.ndarray]:
    """Each document's token ids of the dataset ``prefix`` (``.bin``/``.idx``), in order."""
    index = read_index(fs, prefix + ".idx")
    with fs.open(prefix + ".bin", "rb") as handle:
        data = handle.read()
    tokens = np.frombuffer(data, index.dtype)
    ends = np.cumsum(index.lengths, dtype=np.int64)
    starts = ends - index.lengths
    for d in range(index.document_indices.size - 1):
        first, last = index.document_indices[d], index.document_indices[d + 1]
        if last > first:
            yield tokens[starts[first]:ends[last - 1]]
        else:
            yield tokens[:0]


class TokenFiles:
    """Documents as token ids: the content of one ``.bin``/``.idx`` pair, or of a part
    cut into several (:mod:`curator_dask.io.rollover`'s ``Encoded``).

    ``ids`` holds every document's tokens in order, ``lengths`` the tokens of each;
    ``counts`` are the counters the part carries (tokens written, by source).
    """

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, counter_prefix: str,
                 sources: np.ndarray | None = None, dropped: dict[str, int] | None = None):
        self.ids, self.lengths, self.prefix, self.sources = ids, lengths, counter_prefix, sources
        self.dropped = dict(dropped or {})
        self.offsets = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.offsets[1:])

    def __len__(self) -> int:
        return int(self.lengths.size)

    def sizes(self, unit: str) -> np.ndarray:
        if unit == "documents":
            return np.ones(len(self), dtype=np.int64)
        if unit == "tokens":
            return self.lengths.astype(np.int64)
        return self.lengths.astype(np.int64) * self.ids.dtype.itemsize  # the .bin's bytes

    def take(self, start: int, stop: int) -> TokenFiles:
        ids = self.ids[self.offsets[start]:self.offsets[stop]]
        sources = self.sources[start:stop] if self.sources is not None else None
        return TokenFiles(ids, self.lengths[start:stop], self.prefix, sources)

    def files(self) -> list[tuple[str, object]]:
        if not self.ids.size:  # Megatron cannot map an empty .bin: no documents, no files
            return []
        return [(".bin", RawBytes(self.ids)),
                (".idx", RawBytes(index_bytes(self.lengths, self.ids.dtype)))]

    def counts(self) -> dict[str, int]:
        """The tokens, as the counter ``<prefix>`` and, with sources, ``<prefix>.<source>``
        (marked as counters, see :mod:`curator_dask.dropped`), and the documents dropped."""
        counts = {**self.dropped, COUNTER_MARK + self.prefix: int(self.offsets[-1])}
        if self.sources is not None and len(self):
            names, codes = np.unique(self.sources, return_inverse=True)
            per_source = np.bincount(codes, weights=self.lengths, minlength=names.size)
            for name, tokens in zip(names.tolist(), per_source.tolist(), strict=True):
                counts[f"{COUNTER_MARK}{self.prefix}.{name}"] = int(tokens)
        return counts


# -- merging ---------------------------------------------------------------------------------

def dataset_prefixes(fs, path: str) -> list[str]:
    """The prefixes of the Megatron datasets (``x.bin`` beside ``x.idx``) directly in
    ``path``, in name order (the order a writer's parts hold the documents in)."""
    names = {posixpath.basename(p) for p in fs.ls(path, detail=False)}
    prefixes = sorted(n[:-4] for n in names
                      if n.endswith(".idx") and not n.startswith((".", "_"))
                      and n[:-4] + ".bin" in names)
    return [posixpath.join(path, prefix) for prefix in prefixes]


def merge_datasets(fs, prefixes: Sequence[str], output: str, *, num_shards: int | None = None,
                   target_file_size: int | str | FileSize | None = None,
                   output_fs=None) -> list[dict]:
    """Concatenate Megatron datasets, in order, into shards ``part-00000.bin/.idx``, ...
    in the directory ``output`` (prepared by the caller).

    Give ``num_shards`` (shards balanced by tokens: a document goes to the shard its
    first token falls in) or ``target_file_size`` (shards filled in order up to a size in
    tokens, documents or ``.bin`` bytes). Every document stays whole and in order, and
    every shard is written under a temporary name and renamed when complete. A shard no
    document falls in is not written (Megatron cannot read an empty ``.bin``): fewer
    documents than ``num_shards``, or one longer than a shard, give fewer shards.
    ``output_fs`` is the filesystem of ``output`` when it is not ``fs``.

    Returns one dict per shard: ``files``, ``documents``, ``tokens``, ``bytes``.
    """
    if (num_shards is None) == (target_file_size is None):
        raise InvalidArgumentError("merge into num_shards shards or shards of a target_file_size: "
                                   "give one of them")
    if num_shards is not None and (not isinstance(num_shards, int) or num_shards < 1):
        raise InvalidArgumentError(f"num_shards must be a positive integer, got {num_shards!r}")
    target = FileSize.parse(target_file_size)
    headers = [_index_header(fs, p + ".idx") for p in prefixes]
    dtypes = {h[0] for h in headers}
    if len(dtypes) > 1:
        raise MegatronFormatError(f"the datasets have different token dtypes "
                                  f"({sorted(map(str, dtypes))}): they were written with "
                                  "different tokenizers")
    dtype = dtypes.pop() if dtypes else np.dtype(np.uint16)
    total_tokens = sum(fs.size(p + ".bin") // dtype.itemsize for p in prefixes)
    filled = 0  # tokens before the current part
    open_shard, fill = -1, 0  # target_file_size: the shard being filled, and its size
    with _ShardSink(fs, output_fs or fs, output, dtype) as shards:
        for prefix in prefixes:
            index = read_index(fs, prefix + ".idx")
            lengths = index.lengths.astype(np.int64)
            if num_shards is not None:
                starts = filled + np.concatenate([[0], np.cumsum(lengths)[:-1]])
                shard_of = np.minimum(starts * num_shards // max(total_tokens, 1),
                                      num_shards - 1)
            else:
                sizes = {"tokens": lengths, "documents": np.ones_like(lengths),
                         "bytes": lengths * dtype.itemsize}[target.unit]
                shard_of, open_shard, fill = _greedy_shards(sizes, target.limit, open_shard,
                                                            fill)
            shards.add(prefix, lengths, shard_of)
            filled += int(lengths.sum())
    return shards.done


def _index_header(fs, path: str) -> tuple[np.dtype, int]:
    with fs.open(path, "rb") as handle:
        data = handle.read(_FIXED)
    if len(data) < _FIXED or data[:len(INDEX_HEADER)] != INDEX_HEADER:
        raise MegatronFormatError(f"{path}: not a Megatron index (no MMIDIDX header)")
    _, code, sequences, _ = struct.unpack_from("<QBQQ", data, len(INDEX_HEADER))
    if code not in _DTYPES:
        raise MegatronFormatError(f"{path}: unknown dtype code {code}")
    return _DTYPES[code], sequences


def _greedy_shards(sizes: np.ndarray, limit: int, shard: int, fill: int
                   ) -> tuple[np.ndarray, int, int]:
    """Shard numbers of documents of ``sizes`` filling shards of at most ``limit`` in
    order, where shard ``shard`` is open and holds ``fill`` (``shard`` -1: none is open);
    and the open shard and its fill after them."""
    if not sizes.size:
        return np.zeros(0, dtype=np.int64), shard, fill
    opened = shard >= 0
    # The open shard's fill as a first row, so the cut goes on filling it.
    rows = np.concatenate([[fill], sizes]) if opened else sizes
    starts = cut_points(rows, limit)
    piece = np.searchsorted(starts, np.arange(rows.size), side="right") - 1
    first = shard if opened else 0
    shard_of = first + (piece[1:] if opened else piece)
    return shard_of.astype(np.int64), first + int(piece[-1]), int(rows[piece == piece[-1]].sum())


class _ShardSink:
    """Shards written in order: token bytes copied in blocks, the index at the end.

    Each shard's ``.bin`` is written through :func:`~curator_dask.io.atomic.atomic_open`
    and renamed into place when the next shard starts (or the sink closes), then its
    ``.idx``; an error leaves no shard half-written under its final name.
    """

    def __init__(self, fs, output_fs, output: str, dtype: np.dtype):
        self.fs, self.out_fs, self.output, self.dtype = fs, output_fs, output, dtype
        self.current = -1  # the shard being written (as the caller numbers them)
        self.handle = None
        self.writing = contextlib.ExitStack()  # the atomic write of the open shard's .bin
        self.lengths: list[np.ndarray] = []
        self.done: list[dict] = []

    def __enter__(self) -> _ShardSink:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if error is None:
            self._finish()
        else:  # the open shard's temporary file is removed, the error goes on
            self.writing.__exit__(kind, error, traceback)

    def add(self, prefix: str, lengths: np.ndarray, shard_of: np.ndarray) -> None:
        if not lengths.size:
            return
        offsets = np.concatenate([[0], np.cumsum(lengths)]) * self.dtype.itemsize
        bounds = np.flatnonzero(np.diff(shard_of)) + 1
        with self.fs.open(prefix + ".bin", "rb") as source:
            for start, stop in zip([0, *bounds.tolist()], [*bounds.tolist(), lengths.size],
                                   strict=True):
                self._switch(int(shard_of[start]))
                self.lengths.append(lengths[start:stop])
                source.seek(int(offsets[start]))
                left = int(offsets[stop] - offsets[start])
                while left:
                    block = source.read(min(COPY_BLOCK, left))
                    if not block:
                        raise MegatronFormatError(f"{prefix}.bin is shorter than its index says")
                    self.handle.write(block)
                    left -= len(block)

    def _switch(self, shard: int) -> None:
        """Write into ``shard`` from here on; shards are named in order of writing, so a
        shard no document fell in leaves no gap."""
        if shard != self.current:
            self._finish()
            self.current = shard
            self.handle = self.writing.enter_context(
                atomic.atomic_open(self.out_fs, self._prefix() + ".bin"))
            self.lengths = []

    def _prefix(self) -> str:
        return posixpath.join(self.output, part_name(len(self.done), ""))

    def _finish(self) -> None:
        if self.handle is None:
            return
        self.writing.close()  # the .bin renamed into place
        self.handle = None
        prefix = self._prefix()
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        atomic.write_bytes(self.out_fs, prefix + ".idx", index_bytes(lengths, self.dtype))
        tokens = int(lengths.sum())
        self.done.append({"files": [prefix + ".bin", prefix + ".idx"],
                          "documents": int(lengths.size), "tokens": tokens,
                          "bytes": tokens * self.dtype.itemsize})
