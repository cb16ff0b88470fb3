"""CPU MinHash kernel that reproduces cuDF's ``str.minhash`` / ``str.minhash64``.

Fuzzy deduplication runs on mixed fleets: some workers have a GPU and call
cuDF, others only have CPUs.  Signatures from the two must be *bit-identical*
or LSH buckets computed on different workers will never agree.  This module is
a from-scratch numba implementation of the scheme used by libcudf's
``nvtext::minhash`` and ``nvtext::minhash64`` (``cpp/src/text/minhash.cu`` and
``cpp/include/nvtext/minhash.hpp`` in rapidsai/cudf), checked against the
expected values published in ``cpp/tests/text/minhash_tests.cpp`` and
``python/cudf/cudf/tests/text/test_text_methods.py``.

The scheme
----------
For each document (a UTF-8 string) and a character width ``w``:

1. **Shingles.**  A shingle is ``w`` consecutive *characters* (Unicode code
   points, not bytes); its UTF-8 bytes are what gets hashed.  There is one
   shingle starting at each character position ``k`` with at least ``w``
   characters remaining, i.e. ``n_chars - w + 1`` shingles.  A string with
   ``1 <= n_chars <= w`` yields exactly one shingle: the whole string.
2. **Hash.**  Each shingle is hashed once with the given ``seed``:
   MurmurHash3_x86_32 for the 32-bit variant, and the *first* 64-bit word
   (``h1``) of MurmurHash3_x64_128 for the 64-bit variant.  A hash value of
   0 is replaced by 1, because libcudf uses 0 internally as a "no shingle
   here" sentinel and clamps real hashes with ``max(hv, 1)``.
3. **Permute.**  For each permutation ``i``::

       32-bit: v_i = (a[i] * h + b[i])  mod 2**32
       64-bit: v_i = ((a[i] * h + b[i]) mod 2**64) mod (2**61 - 1)

   libcudf writes both as ``((hv * a + b) % mersenne_prime) & hash_max`` with
   ``mersenne_prime = 2**61 - 1``, but evaluates ``hv * a + b`` in the hash's
   own unsigned type first.  For 32-bit values that wrap-around result is
   always below the prime, so the modulo is a no-op; for 64-bit values it is
   not, which is why 64-bit signatures are always ``< 2**61 - 1``.
4. **Min.**  ``signature[i] = min_k v_i(shingle_k)``.

Edge cases, as libcudf implements them:

* Empty string (0 bytes): every signature entry is **0** (the kernel
  initialises the row with 0 instead of the type's max when the row has no
  bytes).
* Null rows: libcudf returns a null list.  This kernel has no null output
  representation, so it raises :class:`ValueError` reporting how many null
  rows there are; drop or fill them first.
* ``width < 2`` is rejected (libcudf throws ``std::invalid_argument``).
* Input must be valid UTF-8 (Arrow string arrays guarantee this).  Shingle
  boundaries are found by skipping continuation bytes (``b & 0xC0 == 0x80``).

Parameters ``a``/``b`` compatible with NVIDIA NeMo Curator's ``MinHash``
class come from :func:`generate_permutations`.

Performance notes
-----------------
Each shingle of a document is hashed once into a scratch array (4 or 8 bytes
a shingle, sized to the longest document), then each permutation takes the
minimum over those hashes in a plain loop, which LLVM vectorises (32-bit
multiply-add-min, or 64-bit multiply-add plus a branch-free Mersenne
reduction) with the running minimum in a register.  The 32-bit hashes of
shingles made of ASCII characters (a byte each, so ``width`` bytes starting
one byte apart) are computed 16 shingles at a time with SIMD
(:func:`~curator_dask.dedup.fuzzy.murmur.ascii_window_hashes32`): hashing
one shingle at a time was two thirds of the kernel's time, and the kernel
went from about 40 to 150 MB/s of CPU on the benchmark corpus of real text
(a quarter of its documents hold some non-ASCII character: their ASCII
stretches still go the fast way).  All kernels release the GIL, so a
threaded Dask worker can run several partitions concurrently.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from curator_dask.dedup.fuzzy.murmur import (
    ascii_window_hashes32,
    check_seed,
    mmh3_x64_128,
    mmh3_x86_32,
)
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.io.arrow_types import string_offsets
from curator_dask.numba_cache import njit

__all__ = [
    "check_params",
    "generate_permutations",
    "minhash32",
    "minhash64",
    "next_char",
    "shingle_hashes32",
    "shingle_hashes64",
    "string_buffers",
]

# Typed constants: numba turns mixed uint64/int64 arithmetic into float64, so
# every literal that touches a uint64 value must itself be uint64.
_U32_MAX = np.uint32(0xFFFFFFFF)
_U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
_MERSENNE_61 = np.uint64((1 << 61) - 1)
_SHIFT_61 = np.uint64(61)

_NEMO_PRIME_32 = (1 << 31) - 1
_NEMO_PRIME_64 = (1 << 61) - 1


# --------------------------------------------------------------------------
# MinHash kernels
# --------------------------------------------------------------------------


@njit(inline="always")
def next_char(data, pos, end):
    """Byte index of the character after the one starting at ``pos``."""
    pos += 1
    while pos < end and (data[pos] & 0xC0) == 0x80:
        pos += 1
    return pos


@njit(nogil=True)
def _first_shingle_end(data, start, end, width):
    """Byte index after the first shingle of ``data[start:end]``: ``width`` characters
    on, or ``end`` when the string is shorter (its one shingle is the whole string,
    libcudf's "first position is always hashed" rule). Not inlined: inlined into the
    MinHash kernel it made the kernel 40% slower."""
    hi = start
    k = 0
    while k < width and hi < end:
        hi = next_char(data, hi, end)
        k += 1
    return hi


@njit(nogil=True)
def _all_ascii(data, start, end):
    # An OR over the bytes (vectorised) rather than a branch a byte.
    seen = np.uint8(0)
    for p in range(start, end):
        seen |= data[p]
    return seen < 0x80


@njit(nogil=True)
def shingle_hashes32(data, start, end, width, seed, out):
    """MurmurHash3_x86_32 of each ``width``-character shingle of ``data[start:end]``
    into ``out``, in order; returns how many (0 for an empty string).

    A shingle of ``width`` ASCII characters is ``width`` bytes, and the shingles of a
    run of them start one byte apart: those go to :func:`ascii_window_hashes32`
    (vectorised across shingles), a run at a time; a shingle that holds a multi-byte
    character is hashed on its own. A document all ASCII is one run, found without
    walking its characters.
    """
    if end == start:
        return 0
    if _all_ascii(data, start, end) and end - start > width:
        count = end - start - width + 1
        ascii_window_hashes32(data, start, count, width, seed, out)
        return count
    lo = start
    hi = _first_shingle_end(data, start, end, width)  # [lo, hi) spans the shingle
    n = 0
    run_start = start
    run = 0  # ASCII shingles from run_start, not yet hashed
    while True:
        if hi - lo == width:  # width characters in width bytes: all ASCII
            if run == 0:
                run_start = lo
            run += 1
        else:
            if run:
                ascii_window_hashes32(data, run_start, run, width, seed, out[n:])
                n += run
                run = 0
            out[n] = mmh3_x86_32(data, lo, hi - lo, seed)
            n += 1
        if hi >= end:
            break
        lo = next_char(data, lo, end)
        hi = next_char(data, hi, end)
    if run:
        ascii_window_hashes32(data, run_start, run, width, seed, out[n:])
        n += run
    return n


@njit(nogil=True)
def shingle_hashes64(data, start, end, width, seed, out):
    """:func:`shingle_hashes32` with the first 64-bit word of MurmurHash3_x64_128."""
    if end == start:
        return 0
    lo = start
    hi = _first_shingle_end(data, start, end, width)
    n = 0
    while True:
        out[n], _ = mmh3_x64_128(data, lo, hi - lo, seed)
        n += 1
        if hi >= end:
            return n
        lo = next_char(data, lo, end)
        hi = next_char(data, hi, end)


@njit(nogil=True)
def _clamp_zero(hashes, n):
    """libcudf reserves 0 as its skip sentinel: a hash of 0 counts as 1."""
    for j in range(n):
        if hashes[j] == 0:
            hashes[j] = 1


@njit(nogil=True)
def _longest(offsets):
    most = 1
    for d in range(offsets.shape[0] - 1):
        most = max(most, offsets[d + 1] - offsets[d])
    return most


@njit(nogil=True)
def _minhash32_kernel(data, offsets, a, b, seed, width, out):
    n_docs = offsets.shape[0] - 1
    n_perm = a.shape[0]
    hashes = np.empty(_longest(offsets), np.uint32)  # a document has at most a shingle a byte
    for d in range(n_docs):
        s = offsets[d]
        e = offsets[d + 1]
        row = out[d]
        if e == s:
            # libcudf initialises empty rows with 0, not with the max value.
            for i in range(n_perm):
                row[i] = 0
            continue
        n = shingle_hashes32(data, s, e, width, seed, hashes)
        _clamp_zero(hashes, n)
        # Permutation by permutation over the document's hashes (in L1): the minimum
        # stays in a register, where shingle by shingle over the permutations loaded
        # and stored the whole row each time (2.4x slower on the benchmark corpus).
        for i in range(n_perm):
            ai = a[i]
            bi = b[i]
            m = _U32_MAX
            for j in range(n):
                v = np.uint32(ai * hashes[j] + bi)
                m = min(m, v)
            row[i] = m


@njit(nogil=True)
def _minhash64_kernel(data, offsets, a, b, seed, width, out):
    n_docs = offsets.shape[0] - 1
    n_perm = a.shape[0]
    hashes = np.empty(_longest(offsets), np.uint64)
    for d in range(n_docs):
        s = offsets[d]
        e = offsets[d + 1]
        row = out[d]
        if e == s:
            for i in range(n_perm):
                row[i] = np.uint64(0)
            continue
        n = shingle_hashes64(data, s, e, width, seed, hashes)
        _clamp_zero(hashes, n)
        for i in range(n_perm):  # as in the 32-bit kernel: the minimum in a register
            ai = a[i]
            bi = b[i]
            m = _U64_MAX
            for j in range(n):
                v = ai * hashes[j] + bi
                # x mod (2**61 - 1) without a division: since 2**61 == 1
                # (mod p), x == (x >> 61) + (x & p), and that sum is at most
                # p + 7, so one conditional subtraction finishes it.  This
                # keeps the loop vectorisable.
                r = (v >> _SHIFT_61) + (v & _MERSENNE_61)
                r = r - _MERSENNE_61 if r >= _MERSENNE_61 else r
                m = min(m, r)
            row[i] = m


# --------------------------------------------------------------------------
# Python-facing helpers
# --------------------------------------------------------------------------


def string_buffers(texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """Zero-copy ``(utf8_bytes, int64_offsets)`` views of a string column.

    Raises
    ------
    TypeError
        If ``texts`` is not a string-like column.
    ValueError
        If it contains nulls.
    """
    if isinstance(texts, pa.ChunkedArray):
        arr = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    elif isinstance(texts, pa.Array):
        arr = texts
    else:
        # pandas Series (Arrow-backed or object), lists and numpy object arrays
        # all go through pa.array, which is zero-copy for Arrow-backed series.
        try:
            arr = pa.array(texts)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ArgumentTypeError(
                f"cannot interpret {type(texts).__name__} as a string column") from exc
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()

    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_null(arr.type):
        if len(arr):
            raise InvalidArgumentError(
                f"minhash input has {arr.null_count} null rows (of {len(arr)}); "
                "drop or fill nulls before computing signatures"
            )
        arr = pa.array([], pa.string())
    if pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.large_string())
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise ArgumentTypeError(f"minhash expects a string column, got Arrow type {arr.type}")

    if arr.null_count:
        raise InvalidArgumentError(
            f"minhash input has {arr.null_count} null rows (of {len(arr)}); "
            "drop or fill nulls before computing signatures"
        )

    data_buf, offsets = string_offsets(arr)
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    )
    # int32 -> int64 costs one small copy and avoids a second compiled specialisation.
    return data, offsets.astype(np.int64, copy=False)


def _param_array(name: str, p: Any, dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    arr = np.asarray(p)
    if arr.dtype.kind in "fO" and not isinstance(p, np.ndarray):
        # numpy infers float64 for a list mixing ints >= 2**63 with small
        # ones, which would silently lose bits; go through Python ints.
        vals = list(p)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
            raise ArgumentTypeError(f"parameter {name} must contain integers")
        if any(not 0 <= int(v) <= info.max for v in vals):
            raise InvalidArgumentError(
                f"parameter {name} has values outside the uint{info.bits} range")
        return np.array([int(v) for v in vals], dtype=dtype)
    if arr.ndim != 1:
        raise InvalidArgumentError(
            f"parameter {name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != dtype and arr.size:
        if arr.dtype.kind not in "iu":
            raise ArgumentTypeError(f"parameter {name} must be integers, got dtype {arr.dtype}")
        if int(arr.min()) < 0 or int(arr.max()) > int(info.max):
            raise InvalidArgumentError(
                f"parameter {name} has values outside the uint{info.bits} range")
    return np.ascontiguousarray(arr, dtype=dtype)


def check_params(a: Any, b: Any, dtype: type, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Permutation parameters ``a``, ``b`` as contiguous arrays of ``dtype``, checked to be
    non-empty, of one length and in range, and ``width`` checked to be 2 or more."""
    out = [_param_array("a", a, dtype), _param_array("b", b, dtype)]
    pa_, pb = out
    if pa_.size == 0:
        raise InvalidArgumentError("parameters a and b cannot be empty")
    if pa_.shape != pb.shape:
        raise InvalidArgumentError(
            f"parameters a and b must have the same length, got {pa_.size} and {pb.size}")
    if int(width) < 2:
        raise InvalidArgumentError(f"char_ngrams (width) must be 2 or greater, got {width}")
    return pa_, pb


def minhash32(texts: Any, a: Any, b: Any, seed: int, char_ngrams: int) -> np.ndarray:
    """32-bit MinHash signatures, bit-identical to cuDF ``Series.str.minhash``.

    Parameters
    ----------
    texts : pyarrow.Array, pyarrow.ChunkedArray, pandas.Series or sequence of str
        Documents.  ``string``, ``large_string``, ``string_view`` and
        dictionary-encoded strings are accepted; must not contain nulls.
    a, b : array_like of uint32
        Permutation parameters, one pair per signature entry (see
        :func:`generate_permutations`).
    seed : int
        MurmurHash3_x86_32 seed, ``0 <= seed < 2**32``.
    char_ngrams : int
        Shingle width in characters (code points), ``>= 2``.

    Returns
    -------
    numpy.ndarray
        ``uint32`` array of shape ``(len(texts), len(a))``.  Row ``j`` entry
        ``i`` is ``min over shingles of (a[i] * h + b[i]) mod 2**32`` where
        ``h = max(murmurhash3_32(shingle_utf8, seed), 1)``.  Strings with at
        most ``char_ngrams`` characters are hashed whole; empty strings give
        an all-zero row.

    Raises
    ------
    ValueError
        On null rows, empty or mismatched ``a``/``b``, ``char_ngrams < 2``, or
        out-of-range parameters.
    TypeError
        If ``texts`` is not a string column.

    Examples
    --------
    >>> minhash32(["this is my", "favorite book"], [1, 2, 3], [4, 5, 6], 0, 5)
    array([[1305480171,  462824409,   74608232],
           [  32665388,   65330773,   97996158]], dtype=uint32)
    """
    pa_, pb = check_params(a, b, np.uint32, char_ngrams)
    seed = check_seed(seed, 32)
    data, offsets = string_buffers(texts)
    out = np.empty((offsets.shape[0] - 1, pa_.shape[0]), dtype=np.uint32)
    _minhash32_kernel(data, offsets, pa_, pb, np.uint32(seed), np.int64(char_ngrams), out)
    return out


def minhash64(texts: Any, a: Any, b: Any, seed: int, char_ngrams: int) -> np.ndarray:
    """64-bit MinHash signatures, bit-identical to cuDF ``Series.str.minhash64``.

    Parameters
    ----------
    texts : pyarrow.Array, pyarrow.ChunkedArray, pandas.Series or sequence of str
        Documents; must not contain nulls.
    a, b : array_like of uint64
        Permutation parameters (see :func:`generate_permutations` with
        ``use_64_bit_hash=True``).
    seed : int
        MurmurHash3_x64_128 seed, ``0 <= seed < 2**64`` (used for both
        internal lanes, as libcudf/cuco do).
    char_ngrams : int
        Shingle width in characters (code points), ``>= 2``.

    Returns
    -------
    numpy.ndarray
        ``uint64`` array of shape ``(len(texts), len(a))``.  Entry ``i`` is
        ``min over shingles of ((a[i] * h + b[i]) mod 2**64) mod (2**61 - 1)``
        where ``h = max(h1, 1)`` and ``h1`` is the first 64-bit word of
        MurmurHash3_x64_128 of the shingle.  Every value is therefore below
        ``2**61 - 1``.  Empty strings give an all-zero row.

    Raises
    ------
    ValueError
        On null rows, empty or mismatched ``a``/``b``, ``char_ngrams < 2``, or
        out-of-range parameters.
    TypeError
        If ``texts`` is not a string column.
    """
    pa_, pb = check_params(a, b, np.uint64, char_ngrams)
    seed = check_seed(seed, 64)
    data, offsets = string_buffers(texts)
    out = np.empty((offsets.shape[0] - 1, pa_.shape[0]), dtype=np.uint64)
    _minhash64_kernel(data, offsets, pa_, pb, np.uint64(seed), np.int64(char_ngrams), out)
    return out


def generate_permutations(
    seed: int, num_hashes: int, use_64_bit_hash: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Permutation parameters ``(a, b)`` compatible with NeMo Curator's ``MinHash``.

    Reproduces ``MinHash.generate_hash_permutation_seeds`` /
    ``GPUMinHash.generate_seeds`` from NVIDIA NeMo Curator: a legacy
    ``numpy.random.RandomState(seed)`` draws, for each permutation in turn,
    ``a ~ randint(1, p)`` then ``b ~ randint(0, p)`` with ``p = 2**31 - 1``
    (uint32) or ``p = 2**61 - 1`` (uint64).  The interleaved draw order
    matters, so the calls are made one pair at a time exactly as NeMo does.

    Parameters
    ----------
    seed : int
        Seed for ``numpy.random.RandomState``.
    num_hashes : int
        Number of permutations (signature length).
    use_64_bit_hash : bool, default False
        Draw uint64 parameters for :func:`minhash64` instead of uint32 ones.

    Returns
    -------
    a, b : numpy.ndarray
        Two arrays of length ``num_hashes``, dtype uint32 or uint64.

    Notes
    -----
    NeMo Curator passes ``seed=a[0]`` (not the user's seed) to cuDF as the
    MurmurHash seed.  To reproduce its signatures exactly, call
    ``minhash32(texts, a, b, seed=int(a[0]), char_ngrams=...)``.
    """
    if num_hashes < 0:
        raise InvalidArgumentError(f"num_hashes must be non-negative, got {num_hashes}")
    if use_64_bit_hash:
        dtype, prime = np.uint64, np.uint64(_NEMO_PRIME_64)
    else:
        dtype, prime = np.uint32, np.uint32(_NEMO_PRIME_32)
    gen = np.random.RandomState(seed)
    a = np.empty(num_hashes, dtype=dtype)
    b = np.empty(num_hashes, dtype=dtype)
    for i in range(num_hashes):
        a[i] = gen.randint(1, prime, dtype=dtype)
        b[i] = gen.randint(0, prime, dtype=dtype)
    return a, b
