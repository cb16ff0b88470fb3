"""Compiled loops of task decontamination, over whole partitions (numba, cached on disk).

Words are ids into the task vocabulary (``-1`` for a word no task contains). An n-gram's
key is a polynomial rolling hash of its ids (:func:`~curator_dask.text.kernels.
prefix_hashes`, O(1) per window from prefix hashes), mixed with its length; keys only
find candidates: a candidate matches when its ids equal the task n-gram's ids, word for
word, so a hash collision can cost a comparison but never a false match.

The index is a sorted array of keys with a *directory*: ``directory[b]`` is the first key
whose top ``bits`` bits are ``b``, so a lookup reads one short run of keys (about four)
instead of binary-searching the whole array.
"""

from __future__ import annotations

import numpy as np

from curator_dask.numba_cache import njit
from curator_dask.text.kernels import HASH_BASE

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(nogil=True, inline="always")
def _mix(h):
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@njit(nogil=True, inline="always")
def _key(prefix, start, n, base_n, mask):
    raw = prefix[start + n] - prefix[start] * base_n
    return _mix(raw + np.uint64(n) * _GOLDEN) & mask


@njit(nogil=True)
def normalise_ascii(data, starts, ends, punctuation):
    """Words ``data[starts[k]:ends[k]]`` with ASCII letters lowercased and the bytes in
    ``punctuation`` (a 128-entry table) removed, in one pass: (bytes, int64 offsets, and
    which words hold non-ASCII characters: those are copied as they are, for the caller
    to lowercase)."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, np.int64)
    other = np.zeros(n, np.bool_)
    total = 0
    for k in range(n):
        total += ends[k] - starts[k]
    out = np.empty(total, np.uint8)
    j = 0
    offsets[0] = 0
    for k in range(n):
        for i in range(starts[k], ends[k]):
            b = data[i]
            if b < 0x80:
                if punctuation[b]:
                    continue
                if 65 <= b <= 90:
                    b += 32
            else:
                other[k] = True
            out[j] = b
            j += 1
        offsets[k + 1] = j
    return out[:j], offsets, other


@njit(nogil=True)
def splice(data, offsets, rows, new_data, new_offsets):
    """The strings ``data``/``offsets`` with string ``rows[k]`` replaced by string ``k`` of
    ``new_data``/``new_offsets`` (``rows`` sorted): (bytes, offsets)."""
    n = offsets.shape[0] - 1
    out_offsets = np.empty(n + 1, np.int64)
    size = offsets[n] - offsets[0]
    for k in range(rows.shape[0]):
        r = rows[k]
        size += (new_offsets[k + 1] - new_offsets[k]) - (offsets[r + 1] - offsets[r])
    out = np.empty(size, np.uint8)
    j = 0
    k = 0
    out_offsets[0] = 0
    for i in range(n):
        if k < rows.shape[0] and rows[k] == i:
            a, b, source = new_offsets[k], new_offsets[k + 1], new_data
            k += 1
        else:
            a, b, source = offsets[i], offsets[i + 1], data
        for x in range(a, b):
            out[j] = source[x]
            j += 1
        out_offsets[i + 1] = j
    return out, out_offsets


@njit(nogil=True)
def powers(max_n):
    """``HASH_BASE ** n`` for ``n`` in ``0..max_n`` (mod 2**64)."""
    out = np.empty(max_n + 1, np.uint64)
    out[0] = np.uint64(1)
    for n in range(1, max_n + 1):
        out[n] = out[n - 1] * HASH_BASE
    return out


@njit(nogil=True)
def task_ngrams(prefix, text_offsets, min_n, max_n, mask):
    """The n-grams of each task text, as NeMo Curator builds them: none for a text of
    fewer than ``min_n`` words, the whole text for one of fewer than ``max_n``, and every
    ``max_n``-gram otherwise. Returns (keys, token starts, lengths, text of each)."""
    n_texts = text_offsets.shape[0] - 1
    total = 0
    for t in range(n_texts):
        n = text_offsets[t + 1] - text_offsets[t]
        if n >= max_n:
            total += n - max_n + 1
        elif n >= min_n:
            total += 1
    keys = np.empty(total, np.uint64)
    starts = np.empty(total, np.int64)
    lens = np.empty(total, np.uint8)
    texts = np.empty(total, np.int64)
    pw = powers(max_n)
    k = 0
    for t in range(n_texts):
        lo = text_offsets[t]
        n = text_offsets[t + 1] - lo
        if n >= max_n:
            for p in range(lo, lo + n - max_n + 1):
                keys[k] = _key(prefix, p, max_n, pw[max_n], mask)
                starts[k] = p
                lens[k] = max_n
                texts[k] = t
                k += 1
        elif n >= min_n:
            keys[k] = _key(prefix, lo, n, pw[n], mask)
            starts[k] = lo
            lens[k] = n
            texts[k] = t
            k += 1
    return keys, starts, lens, texts


@njit(nogil=True, inline="always")
def _same(a_ids, a, b_ids, b, n):
    for i in range(n):  # noqa: SIM110 (numba compiles a loop, not a generator)
        if a_ids[a + i] != b_ids[b + i]:
            return False
    return True


@njit(nogil=True)
def first_of_equal(keys, starts, lens, tokens):
    """For n-grams sorted by key (stably): True for the first of each set of identical
    n-grams (same words), False for its repeats."""
    keep = np.ones(keys.shape[0], np.bool_)
    i = 0
    while i < keys.shape[0]:
        j = i + 1
        while j < keys.shape[0] and keys[j] == keys[i]:
            j += 1
        for a in range(i + 1, j):
            for b in range(i, a):
                if keep[b] and lens[a] == lens[b] and _same(tokens, starts[a], tokens,
                                                             starts[b], lens[a]):
                    keep[a] = False
                    break
        i = j
    return keep


@njit(nogil=True)
def directory(keys, bits):
    """``out[b]``: index of the first key whose top ``bits`` bits are at least ``b``."""
    size = 1 << bits
    out = np.empty(size + 1, np.int64)
    k = 0
    for b in range(size):
        while k < keys.shape[0] and bits and np.int64(keys[k] >> np.uint64(64 - bits)) < b:
            k += 1
        out[b] = k
    out[size] = keys.shape[0]
    return out


@njit(nogil=True)
def key_filter(keys, filter_bits):
    """A bit set over the top ``filter_bits`` bits of the keys: a window whose bit is
    clear is no task n-gram, known from one read of a small array (most windows)."""
    bitset = np.zeros(max(1, (1 << filter_bits) // 64), np.uint64)
    shift = np.uint64(64 - filter_bits)
    for k in range(keys.shape[0]):
        slot = keys[k] >> shift
        bitset[slot >> np.uint64(6)] |= np.uint64(1) << (slot & np.uint64(63))
    return bitset


@njit(nogil=True)
def find_matches(ids, doc_offsets, sizes, keys, starts, lens, tokens, dir_, bits, mask,
                 enabled, bitset, filter_bits):
    """Every position of every document where a task n-gram starts (the longest enabled
    one there, ``sizes`` being the n-gram lengths in decreasing order).

    Returns (document, first token, length, index entry) of each match, in document and
    position order.
    """
    n_tokens = ids.shape[0]
    prefix = np.empty(n_tokens + 1, np.uint64)
    unknown = np.zeros(n_tokens + 1, np.int64)  # words no task has, before each token
    prefix[0] = np.uint64(0)
    for i in range(n_tokens):
        prefix[i + 1] = prefix[i] * HASH_BASE + np.uint64(ids[i] + 1)
        unknown[i + 1] = unknown[i] + (ids[i] < 0)
    pw = powers(sizes[0])
    shift = np.uint64(64 - bits) if bits else np.uint64(63)
    filter_shift = np.uint64(64 - filter_bits)
    found = np.empty((64, 4), np.int64)
    count = 0
    for d in range(doc_offsets.shape[0] - 1):
        lo, hi = doc_offsets[d], doc_offsets[d + 1]
        for p in range(lo, hi):
            if ids[p] < 0:
                continue
            for s in range(sizes.shape[0]):
                n = sizes[s]
                if p + n > hi or unknown[p + n] != unknown[p]:
                    continue
                key = _key(prefix, p, n, pw[n], mask)
                slot = key >> filter_shift
                if not (bitset[slot >> np.uint64(6)] >> (slot & np.uint64(63))) & np.uint64(1):
                    continue
                b = np.int64(key >> shift) if bits else np.int64(0)
                e = _entry(key, n, p, ids, keys, starts, lens, tokens, enabled, dir_[b],
                           dir_[b + 1])
                if e >= 0:
                    if count == found.shape[0]:
                        bigger = np.empty((2 * count, 4), np.int64)
                        bigger[:count] = found
                        found = bigger
                    found[count, 0] = d
                    found[count, 1] = p
                    found[count, 2] = n
                    found[count, 3] = e
                    count += 1
                    break
    return found[:count, 0].copy(), found[:count, 1].copy(), found[:count, 2].copy(), \
        found[:count, 3].copy()


@njit(nogil=True)
def _entry(key, n, p, ids, keys, starts, lens, tokens, enabled, first, last):
    """The enabled index entry equal to the ``n`` words at ``p``, or -1."""
    for e in range(first, last):
        if keys[e] == key and lens[e] == n and enabled[e] and _same(ids, p, tokens,
                                                                     starts[e], n):
            return e
    return -1


@njit(nogil=True)
def _grow(a, cap):
    out = np.empty(cap, a.dtype)
    out[:a.shape[0]] = a
    return out


@njit(nogil=True, inline="always")
def _chars(data, a, b):
    """Characters (code points) in the UTF-8 bytes ``data[a:b]``."""
    n = 0
    for i in range(a, b):
        n += (data[i] & 0xC0) != 0x80
    return n


@njit(nogil=True, inline="always")
def _back(data, pos, chars, floor):
    """The byte ``chars`` characters before ``pos`` (not below ``floor``), and how many
    characters that was short of ``chars``."""
    while chars > 0 and pos > floor:
        pos -= 1
        while pos > floor and (data[pos] & 0xC0) == 0x80:
            pos -= 1
        chars -= 1
    return pos, chars


@njit(nogil=True, inline="always")
def _forward(data, pos, chars, ceiling):
    while chars > 0 and pos < ceiling:
        pos += 1
        while pos < ceiling and (data[pos] & 0xC0) == 0x80:
            pos += 1
        chars -= 1
    return pos, chars


@njit(nogil=True, inline="always")
def _is_stop(b):
    return b == 46 or b == 33 or b == 63  # noqa: PLR1714 (. ! ?, compared without a set)


@njit(nogil=True)
def cut(data, text_offsets, docs, match_doc, match_start, match_end, margin, min_length,
        max_splits):
    """NeMo Curator's splitting of each contaminated document, on UTF-8 bytes.

    For the documents ``docs`` (sorted), with their matches as byte ranges (sorted by
    document then start): take the first match in what is left of the document; the
    piece before it ends at the last ``.``, ``!`` or ``?`` at least ``margin`` characters
    before the match, and is kept if longer than ``min_length`` characters; what is left
    starts after the first ``.``, ``!`` or ``?`` at least ``margin`` characters after the
    match, and is searched again if longer than ``min_length`` characters (else dropped);
    what is left with no match in it is kept whole. A document cut into more than
    ``max_splits`` pieces is dropped, so the cutting stops there.

    Returns pieces per document and each piece's byte range.
    """
    n_docs = docs.shape[0]
    pieces = np.zeros(n_docs, np.int64)
    cap = 2 * n_docs + 16
    p_start = np.empty(cap, np.int64)
    p_end = np.empty(cap, np.int64)
    count = 0
    m = 0
    for k in range(n_docs):
        d = docs[k]
        lo, hi = text_offsets[d], text_offsets[d + 1]
        while m < match_doc.shape[0] and match_doc[m] < d:
            m += 1
        c = lo
        while True:
            while m < match_doc.shape[0] and match_doc[m] == d and match_start[m] < c:
                m += 1
            if count + 2 > cap:
                cap *= 2
                p_start = _grow(p_start, cap)
                p_end = _grow(p_end, cap)
            if m >= match_doc.shape[0] or match_doc[m] != d:
                p_start[count] = c
                p_end[count] = hi
                count += 1
                pieces[k] += 1
                break
            # Before the match: back `margin` characters, then back to a sentence end.
            pos, short = _back(data, match_start[m], margin, c)
            if short == 0 and pos > c:
                while pos > c and not _is_stop(data[pos]):
                    pos -= 1
                if pos > c and _chars(data, c, pos + 1) > min_length:
                    p_start[count] = c
                    p_end[count] = pos + 1
                    count += 1
                    pieces[k] += 1
            # After it: on `margin` characters, then on to a sentence end.
            pos, short = _forward(data, match_end[m], margin, hi)
            while pos < hi and not _is_stop(data[pos]):
                pos += 1
            if pieces[k] > max_splits or pos + 1 >= hi or _chars(data, pos + 1, hi) <= min_length:
                break
            c = pos + 1
    return pieces, p_start[:count], p_end[:count]
