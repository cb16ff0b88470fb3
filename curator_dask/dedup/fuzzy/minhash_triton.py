"""Triton kernels for :mod:`~curator_dask.dedup.fuzzy.minhash_torch` on a CUDA GPU.

Written with torch's tensor operations alone, the MinHash kernel moves every
intermediate through GPU memory: about 30 passes over the shingles to hash them, and
``(shingles, num_hashes)`` values written and read again to take the minima, some 4 KB
of memory traffic a shingle at 260 hashes. These two kernels keep the intermediates in
registers:

* :func:`shingle_hashes`: MurmurHash3_x86_32 of each shingle's byte range (a hash of 0
  counted as 1), reading the shingle's 4-byte words once;
* :func:`group_minima`: for each group of ``group`` consecutive shingles and each
  permutation, ``min(a[i] * h + b[i])``, writing only the minima (``num_hashes / group``
  values a shingle).

Both compute in 32-bit integers that wrap, as the torch code does; they are the same
functions, value for value (checked on the CPU with Triton's interpreter,
``TRITON_INTERPRET=1``, and on a GPU against the numba kernel). Triton ships with
torch's CUDA builds; where it is missing, the torch code runs alone.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["group_minima", "shingle_hashes"]

_C1 = tl.constexpr(0xCC9E2D51)
_C2 = tl.constexpr(0x1B873593)
_M1 = tl.constexpr(0x85EBCA6B)
_M2 = tl.constexpr(0xC2B2AE35)
_ADD = tl.constexpr(0xE6546B64)

_HASH_BLOCK = 512
_BLOCK_GROUPS = 32
_BLOCK_PERMUTATIONS = 64


@triton.jit
def _rotl(x, r: tl.constexpr):
    return (x << r) | (x >> (32 - r))


@triton.jit
def _scramble(k):
    return _rotl(k * _C1, 15) * _C2


@triton.jit
def _hash_kernel(words_ptr, start_ptr, length_ptr, out_ptr, n, seed, most,
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = offs < n
    start = tl.load(start_ptr + offs, mask=live, other=0)
    length = tl.load(length_ptr + offs, mask=live, other=0).to(tl.int32)
    blocks = length >> 2
    # Unsigned 32-bit arithmetic: multiplications wrap and right shifts are logical.
    h = (tl.zeros([BLOCK], tl.int32) + seed).to(tl.uint32, bitcast=True)
    for step in range(most):
        active = step < blocks
        k = tl.load(words_ptr + start + 4 * step, mask=live & active, other=0)
        mixed = _rotl(h ^ _scramble(k.to(tl.uint32, bitcast=True)), 13) * 5 + _ADD
        h = tl.where(active, mixed, h)
    tail = tl.load(words_ptr + start + 4 * blocks, mask=live, other=0).to(tl.uint32,
                                                                          bitcast=True)
    keep = (tl.full([BLOCK], 1, tl.uint32) << (8 * (length & 3)).to(tl.uint32)) - 1
    h = h ^ _scramble(tail & keep) ^ length.to(tl.uint32, bitcast=True)
    h = h ^ (h >> 16)
    h = h * _M1
    h = h ^ (h >> 13)
    h = h * _M2
    h = h ^ (h >> 16)
    h = tl.where(h == 0, 1, h)   # 0 is cuDF's "no shingle" sentinel
    tl.store(out_ptr + offs, h.to(tl.int32, bitcast=True), mask=live)


@triton.jit
def _group_min_kernel(hash_ptr, a_ptr, b_ptr, out_ptr, n_groups, n_perm,
                      GROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_P: tl.constexpr):
    g = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    g_live = g < n_groups
    p_live = p < n_perm
    a = tl.load(a_ptr + p, mask=p_live, other=0)
    b = tl.load(b_ptr + p, mask=p_live, other=0)
    m = tl.full([BLOCK_G, BLOCK_P], 2147483647, tl.int32)
    for j in range(GROUP):
        h = tl.load(hash_ptr + g * GROUP + j, mask=g_live, other=0)
        m = tl.minimum(m, h[:, None] * a[None, :] + b[None, :])
    tl.store(out_ptr + g[:, None] * n_perm + p[None, :], m,
             mask=g_live[:, None] & p_live[None, :])


def shingle_hashes(words, start, length, seed: int, most: int):
    """MurmurHash3_x86_32 (as int32, 0 replaced by 1) of the byte ranges
    ``[start, start + length)``; ``words[p]`` is the little-endian int32 word at byte
    ``p``, and no range is more than ``4 * most + 3`` bytes long."""
    out = torch.empty(start.shape[0], dtype=torch.int32, device=start.device)
    n = start.shape[0]
    _hash_kernel[(triton.cdiv(n, _HASH_BLOCK),)](words, start, length, out, n, seed, most,
                                                 BLOCK=_HASH_BLOCK)
    return out


def group_minima(hashes, a, b, group: int):
    """``min over j of (hashes[g * group + j] * a[i] + b[i])`` in wrapping int32, for each
    group ``g`` and permutation ``i``: a ``(len(hashes) // group, len(a))`` int32 tensor."""
    n_groups, n_perm = hashes.shape[0] // group, a.shape[0]
    out = torch.empty((n_groups, n_perm), dtype=torch.int32, device=hashes.device)
    grid = (triton.cdiv(n_groups, _BLOCK_GROUPS), triton.cdiv(n_perm, _BLOCK_PERMUTATIONS))
    _group_min_kernel[grid](hashes, a, b, out, n_groups, n_perm, GROUP=group,
                            BLOCK_G=_BLOCK_GROUPS, BLOCK_P=_BLOCK_PERMUTATIONS)
    return out
