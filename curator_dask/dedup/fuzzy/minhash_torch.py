"""32-bit MinHash signatures with torch, on a CUDA GPU (or on a CPU), as the numba kernel's.

:func:`minhash32_torch` computes what
:func:`~curator_dask.dedup.fuzzy.minhash_kernel.minhash32` computes (the scheme of cuDF's
``str.minhash``: shingles of ``width`` characters hashed as their UTF-8 bytes with
MurmurHash3_x86_32, a hash of 0 counted as 1, ``(a * h + b) mod 2**32``, the minimum per
document, an empty document all 0), bit for bit, with whole-tensor operations instead of a
loop per document, so that it runs on a GPU where cuDF is not installed.

How
---
1. The partition's UTF-8 bytes and offsets go to the device once. A byte starts a
   character unless it is a continuation byte (``b & 0xC0 == 0x80``); the positions of
   those starts number the characters, and a document's shingle ``k`` spans its characters
   ``k`` to ``k + width`` (the whole document when it has no more than ``width``).
2. A little-endian 32-bit word is read at every byte position, so each 4-byte block of
   every shingle is one gather. MurmurHash3 runs block step by block step over all the
   shingles of a chunk at once; a shingle shorter than the step keeps its running hash
   (a mask), and its tail is its last word masked to ``length % 4`` bytes.
3. Each permutation's value is ``a[i] * h + b[i]`` in int32 arithmetic, which wraps
   modulo ``2**32`` like the unsigned arithmetic of the scheme. Adding ``2**31`` to ``b``
   flips the top bit, which maps unsigned order onto signed order, so a signed minimum is
   the unsigned minimum; the bit is flipped back at the end.
4. A document's shingles are taken in groups of :data:`GROUP` (the last group filled up
   with copies of the document's last shingle, which leave a minimum as it is), so the
   minimum over a group is a dense reduction of a ``(groups, GROUP, num_hashes)`` view.
   The groups' minima go into the signatures with ``scatter_reduce(..., "amin")``,
   which accumulates over chunks: ``GROUP`` times fewer atomic updates of the same
   addresses than one update per shingle, where a long document's thousands of
   shingles would all contend for its one row.

On CUDA, where Triton is installed, steps 2 to 4 but the scatter run as two Triton
kernels (:mod:`~curator_dask.dedup.fuzzy.minhash_triton`) that keep the intermediates in
registers; the signatures come back through page-locked memory.

Device memory
-------------
About 14 bytes per byte of text for the partition (the bytes, a word per byte, the
character starts) and, per shingle of a chunk, :func:`shingle_bytes`: with torch alone
``4 * num_hashes + 64`` bytes (the permuted values and the shingle's document, position,
length and hash), 1,104 at 260 hashes; with the Triton kernels 129. Shingles (about one
per byte of text) are processed in chunks, so the chunk's share stays under
``chunk_bytes`` whatever the partition's size; the signatures are ``4 * num_hashes``
bytes a document.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from curator_dask.dedup.fuzzy.minhash_kernel import check_params, string_buffers
from curator_dask.dedup.fuzzy.murmur import check_seed

try:  # Triton ships with torch's CUDA builds, not with its CPU builds.
    from curator_dask.dedup.fuzzy import minhash_triton
except ImportError:
    minhash_triton = None

__all__ = ["DEFAULT_CHUNK_BYTES", "GROUP", "minhash32_torch", "shingle_bytes"]

#: Device memory a chunk of shingles may use for its per-shingle tensors.
DEFAULT_CHUNK_BYTES = 256 << 20
#: Shingles of one document reduced together before their minima are scattered.
GROUP = 32

_SIGN = -(1 << 31)  # int32 with only the top bit set


def _i32(value: int) -> int:
    """An unsigned 32-bit constant as the int32 with the same bits."""
    return value - (1 << 32) if value >= 1 << 31 else value


_C1, _C2 = _i32(0xCC9E2D51), _i32(0x1B873593)
_M1, _M2 = _i32(0x85EBCA6B), _i32(0xC2B2AE35)
_ADD = _i32(0xE6546B64)


def shingle_bytes(num_hashes: int, fused: bool = False) -> int:
    """Device bytes one shingle of a chunk needs at ``num_hashes`` permutations: with the
    Triton kernels (``fused``) only the groups' minima are stored."""
    return (4 * num_hashes + GROUP - 1) // GROUP + 96 if fused else 4 * num_hashes + 64


# int32 arithmetic below wraps modulo 2**32, which is the uint32 arithmetic of MurmurHash3;
# a right shift of an int32 copies the sign bit, so logical shifts mask it off.

def _shr(x, s: int):
    return (x >> s) & ((1 << (32 - s)) - 1)


def _rotl(x, r: int):
    return (x << r) | _shr(x, 32 - r)


def _scramble(k):
    return _rotl(k * _C1, 15) * _C2


def _fmix(h):
    h = h ^ _shr(h, 16)
    h = h * _M1
    h = h ^ _shr(h, 13)
    h = h * _M2
    return h ^ _shr(h, 16)


def _words(data):
    """The little-endian int32 word at every byte position of ``data`` (uint8, padded)."""
    d = data.to(torch.int32)
    return d[:-3] | (d[1:-2] << 8) | (d[2:-1] << 16) | (d[3:] << 24)


def _murmur32(words, start, length, seed: int):
    """MurmurHash3_x86_32 of the byte ranges ``[start, start + length)``, as int32."""
    blocks = length >> 2
    h = torch.full_like(length, _i32(seed), dtype=torch.int32)
    most = int(blocks.max()) if blocks.numel() else 0
    for step in range(most):
        k = words[start + 4 * step]
        mixed = _rotl(h ^ _scramble(k), 13) * 5 + _ADD
        h = torch.where(step < blocks, mixed, h)
    tail_mask = (torch.ones_like(h) << (8 * (length & 3)).to(torch.int32)) - 1
    h = h ^ _scramble(words[start + 4 * blocks] & tail_mask)   # scramble(0) == 0
    return _fmix(h ^ length.to(torch.int32))


def _shingles(data, offsets, width: int):
    """Per document: its first slot and the slot after its last, its shingle count (each
    document's slots are its shingles rounded up to a multiple of :data:`GROUP`), the
    character starts (with the end of the text appended) and each document's first
    character."""
    starts = torch.nonzero((data & 0xC0) != 0x80).squeeze(1)
    char_at = torch.cat([starts, offsets[-1:]])
    first_char = torch.searchsorted(starts, offsets)
    chars = first_char[1:] - first_char[:-1]
    count = torch.where(chars > 0, torch.clamp(chars - width + 1, min=1), 0)
    slots = (count + GROUP - 1) // GROUP * GROUP
    slot_end = torch.cumsum(slots, 0)
    return slot_end - slots, slot_end, count, char_at, first_char


def minhash32_torch(texts: Any, a: Any, b: Any, seed: int, char_ngrams: int,
                    device: str | torch.device = "cuda",
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                    fused: bool | None = None) -> np.ndarray:
    """32-bit MinHash signatures computed with torch on ``device``.

    Bit-identical to :func:`~curator_dask.dedup.fuzzy.minhash_kernel.minhash32` (and so
    to cuDF's ``Series.str.minhash``), on CUDA or on torch's CPU.

    Parameters
    ----------
    texts, a, b, seed, char_ngrams
        As for :func:`~curator_dask.dedup.fuzzy.minhash_kernel.minhash32`.
    device : str or torch.device, default "cuda"
        Where to compute.
    chunk_bytes : int, default 256 MiB
        Device memory for the shingles processed at once, at :func:`shingle_bytes`
        bytes a shingle (``4 * len(a) + 64``, or ``len(a) / 8 + 96`` fused); the text
        itself needs about 14 bytes a byte besides.
    fused : bool, optional
        Hash and take the minima with the Triton kernels of
        :mod:`~curator_dask.dedup.fuzzy.minhash_triton`. Default: on a CUDA device
        where Triton is installed.

    Returns
    -------
    numpy.ndarray
        ``uint32``, shape ``(len(texts), len(a))``, on the host.

    Examples
    --------
    >>> minhash32_torch(["this is my", "favorite book"], [1, 2, 3], [4, 5, 6], 0, 5,
    ...                 device="cpu")
    array([[1305480171,  462824409,   74608232],
           [  32665388,   65330773,   97996158]], dtype=uint32)
    """
    pa_, pb = check_params(a, b, np.uint32, char_ngrams)
    seed = check_seed(seed, 32)
    data_np, offsets_np = string_buffers(texts)
    n_docs, n_perm = offsets_np.shape[0] - 1, pa_.shape[0]
    if n_docs == 0:
        return np.empty((0, n_perm), np.uint32)
    device = torch.device(device)
    if fused is None:
        fused = device.type == "cuda" and minhash_triton is not None
    lo, hi = int(offsets_np[0]), int(offsets_np[-1])
    # Zero padding lets every gather of a word read 4 bytes, at any shingle's tail.
    data = torch.zeros(hi - lo + 4 * char_ngrams + 8, dtype=torch.uint8)
    data[:hi - lo] = torch.from_numpy(data_np[lo:hi])
    data = data.to(device)
    offsets = torch.from_numpy(offsets_np - lo).to(device)
    first_slot, slot_end, count, char_at, first_char = _shingles(data[:hi - lo], offsets,
                                                                 char_ngrams)
    words = _words(data)
    del data
    total = int(slot_end[-1])
    a_t = torch.from_numpy(pa_.view(np.int32)).to(device)
    b_t = torch.from_numpy((pb ^ np.uint32(1 << 31)).view(np.int32)).to(device)
    # Signed order of (value + 2**31) is unsigned order of value: start at unsigned max.
    out = torch.full((n_docs, n_perm), (1 << 31) - 1, dtype=torch.int32, device=device)
    step = max(1, int(chunk_bytes) // (shingle_bytes(n_perm, fused) * GROUP)) * GROUP
    for s0 in range(0, total, step):
        slot = torch.arange(s0, min(total, s0 + step), device=device)
        doc = torch.searchsorted(slot_end, slot, right=True)
        # A slot past the document's last shingle repeats that shingle.
        shingle = torch.minimum(slot - first_slot[doc], count[doc] - 1)
        first = first_char[doc] + shingle
        last = torch.minimum(first + char_ngrams, first_char[doc + 1])
        start = char_at[first]
        length = char_at[last] - start
        if fused:
            hashes = minhash_triton.shingle_hashes(words, start, length, _i32(seed),
                                                   int(length.max()) >> 2)
            minima = minhash_triton.group_minima(hashes, a_t, b_t, GROUP)
        else:
            hashes = _murmur32(words, start, length, seed)
            hashes = torch.where(hashes == 0, 1, hashes)
            values = torch.addcmul(b_t, hashes[:, None], a_t)  # wraps modulo 2**32
            minima = values.view(-1, GROUP, n_perm).amin(1)
            del values
        out.scatter_reduce_(0, doc[::GROUP, None].expand(-1, n_perm), minima, "amin")
    out ^= _SIGN
    out[count == 0] = 0  # an empty document's signature is all 0, as cuDF's
    return _to_host(out).numpy().view(np.uint32)


def _to_host(tensor):
    """``tensor`` copied to the host: from a GPU through page-locked memory (torch keeps
    freed blocks for reuse), which took a 64 MB batch of real text from 0.7 to 1.3 GB/s
    on an H100, where copying the signatures to pageable memory was half the GPU's time."""
    if tensor.device.type != "cuda":
        return tensor.cpu()
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor)
    return host
