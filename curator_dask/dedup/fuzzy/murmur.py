"""MurmurHash3 (Austin Appleby's public-domain algorithm) in numba, as cuDF hashes shingles.

:mod:`curator_dask.dedup.fuzzy.minhash_kernel` hashes every character shingle of a
document with these functions, so they must agree bit for bit with libcudf's (cuco's)
MurmurHash3_x86_32 and the first word of MurmurHash3_x64_128.

Two ways to hash 32-bit:

* :func:`mmh3_x86_32` hashes one byte range: the general case, any length, any bytes.
* :func:`ascii_window_hashes32` hashes ``count`` windows of ``width`` bytes that start
  one byte apart, ``data[start + j : start + j + width]``: every shingle of a run of
  ASCII text, where a character is a byte. Its loops go block by block over all the
  windows of a chunk (the windows' running hashes in L1 cache), so LLVM turns each
  block step into SIMD arithmetic over 16 windows at once (AVX-512) instead of one window
  at a time: about 1.2 ns a 24-byte shingle against 20 ns for :func:`mmh3_x86_32` a
  window. The result is the same hash, value for value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from curator_dask.errors import InvalidArgumentError
from curator_dask.numba_cache import njit

__all__ = [
    "ascii_window_hashes32",
    "check_seed",
    "mmh3_x64_128",
    "mmh3_x86_32",
    "murmurhash3_32",
    "murmurhash3_x64_128",
]

_C1_32 = np.uint32(0xCC9E2D51)
_C2_32 = np.uint32(0x1B873593)
_C1_64 = np.uint64(0x87C37B91114253D5)
_C2_64 = np.uint64(0x4CF5AD432745937F)

#: Windows hashed block by block at a time: their running hashes (4 KiB) stay in L1.
_WINDOWS_PER_CHUNK = 1024


def check_seed(seed: Any, bits: int) -> int:
    """``seed`` as an int, checked to fit ``bits`` unsigned bits."""
    seed = int(seed)
    if not 0 <= seed < (1 << bits):
        raise InvalidArgumentError(f"seed must be in [0, 2**{bits}), got {seed}")
    return seed


@njit(inline="always")
def _rotl32(x, r):
    return np.uint32((x << np.uint32(r)) | (x >> np.uint32(32 - r)))


@njit(inline="always")
def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(inline="always")
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(inline="always")
def _scramble32(k1):
    k1 = np.uint32(k1 * _C1_32)
    k1 = _rotl32(k1, 15)
    return np.uint32(k1 * _C2_32)


@njit(inline="always")
def _mix_block32(h1, k1):
    h1 = _rotl32(np.uint32(h1 ^ _scramble32(k1)), 13)
    return np.uint32(h1 * np.uint32(5) + np.uint32(0xE6546B64))


@njit(inline="always")
def _tail32(data, p, rem):
    """The last ``rem`` (< 4) bytes from ``data[p]``, scrambled (0 when there are none)."""
    k1 = np.uint32(0)
    if rem >= 3:
        k1 ^= np.uint32(np.uint32(data[p + 2]) << np.uint32(16))
    if rem >= 2:
        k1 ^= np.uint32(np.uint32(data[p + 1]) << np.uint32(8))
    if rem >= 1:
        k1 ^= np.uint32(data[p])
        return _scramble32(k1)
    return k1


@njit(inline="always")
def _finish32(h1, length):
    # The reference xors in the length as a 32-bit value (cuco truncates a 64-bit size
    # the same way), then applies fmix32.
    h1 = np.uint32(h1 ^ np.uint32(length & 0xFFFFFFFF))
    h1 = np.uint32(h1 ^ (h1 >> np.uint32(16)))
    h1 = np.uint32(h1 * np.uint32(0x85EBCA6B))
    h1 = np.uint32(h1 ^ (h1 >> np.uint32(13)))
    h1 = np.uint32(h1 * np.uint32(0xC2B2AE35))
    return np.uint32(h1 ^ (h1 >> np.uint32(16)))


@njit(inline="always")
def _load_u32_le(data, p):
    # Byte-wise assembly keeps this independent of alignment and host endianness; LLVM
    # folds it into one 32-bit load (or, over consecutive p, vector loads).
    return np.uint32(np.uint32(data[p]) | (np.uint32(data[p + 1]) << np.uint32(8))
                     | (np.uint32(data[p + 2]) << np.uint32(16))
                     | (np.uint32(data[p + 3]) << np.uint32(24)))


@njit(nogil=True)
def mmh3_x86_32(data, start, length, seed):
    """MurmurHash3_x86_32 of ``data[start:start+length]`` (little-endian blocks)."""
    h1 = np.uint32(seed)
    nblocks = length // 4
    for blk in range(nblocks):
        h1 = _mix_block32(h1, _load_u32_le(data, start + blk * 4))
    h1 = np.uint32(h1 ^ _tail32(data, start + nblocks * 4, length & 3))
    return _finish32(h1, length)


@njit(nogil=True)
def ascii_window_hashes32(data, start, count, width, seed, out):
    """MurmurHash3_x86_32 of ``data[start + j : start + j + width]`` into ``out[j]`` for
    each ``j < count``: equal to :func:`mmh3_x86_32` of each window.

    The loops run block by block over a chunk of windows, so that the same step of
    every window is one vectorisable loop; the arrays are sliced first so that every
    index is a loop counter (non-negative, contiguous), which is what lets LLVM emit
    plain vector loads instead of gathers.
    """
    nblocks = width // 4
    rem = width & 3
    for lo in range(0, count, _WINDOWS_PER_CHUNK):
        hi = min(count, lo + _WINDOWS_PER_CHUNK)
        h = out[lo:hi]
        for j in range(hi - lo):
            h[j] = seed
        for blk in range(nblocks):
            src = data[start + lo + 4 * blk:start + hi + 4 * blk + 3]
            for j in range(hi - lo):
                h[j] = _mix_block32(h[j], _load_u32_le(src, j))
        src = data[start + lo + 4 * nblocks:start + hi + 4 * nblocks + rem]
        for j in range(hi - lo):
            h[j] = _finish32(np.uint32(h[j] ^ _tail32(src, j, rem)), width)


@njit(inline="always")
def _load_u64_le(data, p):
    v = np.uint64(0)
    for j in range(8):
        v |= np.uint64(data[p + j]) << np.uint64(8 * j)
    return v


@njit(nogil=True)
def mmh3_x64_128(data, start, length, seed):
    """MurmurHash3_x64_128 of ``data[start:start+length]``; returns ``(h1, h2)``.

    The seed is a full 64-bit value used for both lanes, as in cuco's
    implementation that libcudf wraps (the original reference only takes a
    32-bit seed; both agree for seeds below 2**32).
    """
    h1 = np.uint64(seed)
    h2 = np.uint64(seed)
    nblocks = length // 16
    for blk in range(nblocks):
        p = start + blk * 16
        k1 = _load_u64_le(data, p)
        k2 = _load_u64_le(data, p + 8)

        k1 *= _C1_64
        k1 = _rotl64(k1, 31)
        k1 *= _C2_64
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 += h2
        h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)

        k2 *= _C2_64
        k2 = _rotl64(k2, 33)
        k2 *= _C1_64
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 += h1
        h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)

    tail = start + nblocks * 16
    rem = length & 15
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    if rem > 8:
        for j in range(rem - 1, 7, -1):
            k2 ^= np.uint64(data[tail + j]) << np.uint64(8 * (j - 8))
        k2 *= _C2_64
        k2 = _rotl64(k2, 33)
        k2 *= _C1_64
        h2 ^= k2
    if rem > 0:
        for j in range(min(rem, 8) - 1, -1, -1):
            k1 ^= np.uint64(data[tail + j]) << np.uint64(8 * j)
        k1 *= _C1_64
        k1 = _rotl64(k1, 31)
        k1 *= _C2_64
        h1 ^= k1

    h1 ^= np.uint64(length)
    h2 ^= np.uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    return h1, h2


def _as_byte_array(data: bytes | bytearray | memoryview | str) -> np.ndarray:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return np.frombuffer(bytes(data), dtype=np.uint8)


def murmurhash3_32(data: bytes | bytearray | memoryview | str, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data`` as an unsigned int (``str`` is UTF-8 encoded).

    Parameters
    ----------
    data : bytes-like or str
        Input bytes.
    seed : int, default 0
        ``0 <= seed < 2**32``.

    Returns
    -------
    int
        The unsigned 32-bit hash; equals ``mmh3.hash(data, seed, signed=False)``.
    """
    buf = _as_byte_array(data)
    return int(mmh3_x86_32(buf, 0, buf.shape[0], np.uint32(check_seed(seed, 32))))


def murmurhash3_x64_128(data: bytes | bytearray | memoryview | str,
                        seed: int = 0) -> tuple[int, int]:
    """MurmurHash3_x64_128 of ``data`` as two unsigned 64-bit words ``(h1, h2)``.

    Parameters
    ----------
    data : bytes-like or str
        Input bytes (``str`` is UTF-8 encoded).
    seed : int, default 0
        ``0 <= seed < 2**64``; for seeds below ``2**32`` the result equals
        ``mmh3.hash64(data, seed, signed=False)``.

    Returns
    -------
    tuple of int
        ``(h1, h2)``; ``h1`` is the word cuDF's ``minhash64`` uses, and
        ``h1 | (h2 << 64)`` is ``mmh3.hash128(data, seed)``.
    """
    buf = _as_byte_array(data)
    h1, h2 = mmh3_x64_128(buf, 0, buf.shape[0], np.uint64(check_seed(seed, 64)))
    return int(h1), int(h2)
