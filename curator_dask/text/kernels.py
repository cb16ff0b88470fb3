"""Compiled loops over a whole partition's text, for what Arrow kernels cannot express.

Each function takes flat numpy arrays describing every document of a partition at once
(UTF-8 bytes plus offsets, or token ids plus per-document token offsets) and makes one
pass over them; none is called per document. They are compiled with numba on first use
into the user's kernel cache (:mod:`curator_dask.numba_cache`), so a machine pays the
compile once per version, not once per worker or run.

Conventions
-----------
``doc_offsets`` has one entry per document plus one: the tokens (or bytes) of document
``d`` are ``[doc_offsets[d], doc_offsets[d + 1])``. ``ids`` are int32/int64 token ids
that are equal exactly when the tokens' strings are equal (Arrow's
``dictionary_encode`` over the partition), so n-gram identity below is exact, not a
hash: hashes (``prefix`` from :func:`prefix_hashes`) only choose the slot, and slots
are confirmed by comparing ids.
"""

from __future__ import annotations

import numpy as np

from curator_dask.numba_cache import njit

__all__ = [
    "HASH_BASE",
    "count_in_class",
    "count_in_classes",
    "count_joined_spans",
    "count_joined_tokens",
    "count_words",
    "document_segment_ids",
    "gather_segments",
    "nemo_duplicate_ngram_chars",
    "ngram_counts",
    "prefix_hashes",
    "segment_sums",
    "skipping_duplicate_ngram_chars",
    "split_whitespace",
]

_EMPTY = np.int64(-1)


@njit(nogil=True)
def count_in_class(data, starts, ends, table):
    """Per segment ``[starts[k], ends[k])`` of UTF-8 ``data``: how many code points ``c``
    have ``table[c]`` true."""
    out = np.zeros(starts.shape[0], np.int64)
    limit = table.shape[0]
    for k in range(starts.shape[0]):
        i = starts[k]
        end = ends[k]
        count = 0
        while i < end:
            b = np.int64(data[i])
            if b < 0x80:
                cp = b
                i += 1
            elif b < 0xE0:
                cp = ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F) if i + 1 < end else 0xFFFD
                i += 2
            elif b < 0xF0:
                if i + 2 < end:
                    cp = (((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6)
                          | (np.int64(data[i + 2]) & 0x3F))
                else:
                    cp = 0xFFFD
                i += 3
            else:
                if i + 3 < end:
                    cp = (((b & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
                          | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F))
                else:
                    cp = 0xFFFD
                i += 4
            if cp < limit and table[cp]:
                count += 1
        out[k] = count
    return out


# One return per UTF-8 sequence length (and each malformed case), inlined by numba.
@njit(nogil=True, inline="always")
def _decode(data, i, end):  # noqa: PLR0911
    """(code point, byte length) of the UTF-8 character at ``data[i]``."""
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        if i + 1 < end:
            return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
        return 0xFFFD, 2
    if b < 0xF0:
        if i + 2 < end:
            return (((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6)
                    | (np.int64(data[i + 2]) & 0x3F)), 3
        return 0xFFFD, 3
    if i + 3 < end:
        return (((b & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
                | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)), 4
    return 0xFFFD, 4


@njit(nogil=True)
def count_words(data, offsets, ascii_space, space):
    """Words (``str.split()``) per document: one pass, ASCII bytes looked up in a
    128-entry table, other characters decoded. ``space`` is a bool table over code
    points, ``ascii_space`` its first 128 entries."""
    n_docs = offsets.shape[0] - 1
    out = np.zeros(n_docs, np.int64)
    for d in range(n_docs):
        i = offsets[d]
        end = offsets[d + 1]
        count = 0
        in_word = False
        while i < end:
            b = data[i]
            if b < 0x80:  # ASCII: most bytes of most text
                is_space = ascii_space[b]
                i += 1
            else:
                cp, size = _decode(data, i, end)
                is_space = space[cp]
                i += size
            if is_space:
                in_word = False
            elif not in_word:
                in_word = True
                count += 1
        out[d] = count
    return out


@njit(nogil=True)
def _fill_words(data, offsets, ascii_space, space, starts, ends, nchars):
    k = 0
    for d in range(offsets.shape[0] - 1):
        i = offsets[d]
        end = offsets[d + 1]
        in_word = False
        chars = 0
        while i < end:
            b = data[i]
            if b < 0x80:
                is_space = ascii_space[b]
                size = 1
            else:
                cp, size = _decode(data, i, end)
                is_space = space[cp]
            if is_space:
                if in_word:
                    ends[k] = i
                    nchars[k] = chars
                    k += 1
                    in_word = False
            elif in_word:
                chars += 1
            else:
                starts[k] = i
                in_word = True
                chars = 1
            i += size
        if in_word:
            ends[k] = end
            nchars[k] = chars
            k += 1
    return k


@njit(nogil=True)
def split_whitespace(data, offsets, space):
    """``str.split()`` of every document: (token byte starts, ends, character counts,
    tokens per document). ``space`` is a bool table over code points."""
    ascii_space = space[:128].copy()
    counts = count_words(data, offsets, ascii_space, space)
    total = counts.sum()
    starts = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    nchars = np.empty(total, np.int64)
    _fill_words(data, offsets, ascii_space, space, starts, ends, nchars)
    return starts, ends, nchars, counts


@njit(nogil=True, inline="always")
def _bytes_hash(data, a, b):
    h = np.uint64(0xCBF29CE484222325)  # FNV-1a, then a splitmix64 finalizer
    for i in range(a, b):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    return h


@njit(nogil=True)
def document_segment_ids(data, starts, ends, doc_offsets):
    """int64 ids of the byte strings ``data[starts[k]:ends[k]]``, equal exactly when the
    bytes are equal *within a document* (segments ``[doc_offsets[d], doc_offsets[d + 1])``),
    numbered from 0 in each document in order of first appearance.

    What the n-gram kernels need (they compare words of one document only), without
    building a string. The hash table holds one document's words and is reset for the
    next, so it stays in the cache: a table of a whole partition's distinct words
    (hundreds of thousands on diverse text) cost a cache miss per word, and ran 2.4x
    slower on the benchmark corpus (``benchmarks/diverse_corpus.py``), as fast on the
    replicated sample. A hit is confirmed against the string's first occurrence, a few
    hundred bytes away in the same document.
    """
    n = starts.shape[0]
    ids = np.empty(n, np.int64)
    n_docs = doc_offsets.shape[0] - 1
    most = 0
    for d in range(n_docs):
        most = max(most, doc_offsets[d + 1] - doc_offsets[d])
    table = np.full(_table_size(most), -1, np.int64)  # slot -> segment of first occurrence
    hashes = np.empty(max(n, 1), np.uint64)
    for d in range(n_docs):
        lo = doc_offsets[d]
        hi = doc_offsets[d + 1]
        if hi == lo:
            continue
        mask = _table_size(hi - lo) - 1
        table[:mask + 1] = -1
        distinct = 0
        for k in range(lo, hi):
            a = starts[k]
            b = ends[k]
            h = _bytes_hash(data, a, b)
            hashes[k] = h
            s = np.int64(h & np.uint64(mask))
            while True:
                held = table[s]
                if held < 0:
                    table[s] = k
                    ids[k] = distinct
                    distinct += 1
                    break
                if hashes[held] == h and ends[held] - starts[held] == b - a:
                    c = starts[held]
                    same = True
                    for j in range(b - a):
                        if data[c + j] != data[a + j]:
                            same = False
                            break
                    if same:
                        ids[k] = ids[held]
                        break
                s = (s + 1) & mask
    return ids


@njit(nogil=True)
def gather_segments(data, starts, ends):
    """Concatenate ``data[starts[k]:ends[k]]``: (bytes, int64 offsets) of a string array."""
    out_offsets = np.empty(starts.shape[0] + 1, np.int64)
    out_offsets[0] = 0
    for k in range(starts.shape[0]):
        out_offsets[k + 1] = out_offsets[k] + ends[k] - starts[k]
    out = np.empty(out_offsets[-1], np.uint8)
    j = 0
    for k in range(starts.shape[0]):
        for i in range(starts[k], ends[k]):
            out[j] = data[i]
            j += 1
    return out, out_offsets


@njit(nogil=True)
def count_in_classes(data, starts, ends, bits, n_classes):
    """Per segment and class ``c``: how many code points ``cp`` have bit ``c`` of
    ``bits[cp]`` set (an int64 array of shape (segments, n_classes))."""
    out = np.zeros((starts.shape[0], n_classes), np.int64)
    for k in range(starts.shape[0]):
        i = starts[k]
        end = ends[k]
        while i < end:
            b = data[i]
            if b < 0x80:
                flags = bits[b]
                i += 1
            else:
                cp, size = _decode(data, i, end)
                flags = bits[cp] if cp < bits.shape[0] else 0
                i += size
            if flags:
                for c in range(n_classes):
                    if flags & (1 << c):
                        out[k, c] += 1
    return out


@njit(nogil=True)
def segment_sums(values, doc_offsets):
    """Sum of ``values`` over each document's contiguous range."""
    n_docs = doc_offsets.shape[0] - 1
    out = np.zeros(n_docs, values.dtype)
    for d in range(n_docs):
        total = out[d]
        for k in range(doc_offsets[d], doc_offsets[d + 1]):
            total += values[k]
        out[d] = total
    return out


#: The multiplier of the rolling n-gram hash (:func:`prefix_hashes`); the
#: decontamination index hashes n-grams the same way.
HASH_BASE = np.uint64(0x100000001B3)


@njit(nogil=True)
def prefix_hashes(ids):
    """Polynomial prefix hashes ``P[i+1] = P[i] * B + ids[i] + 1`` (mod 2**64), so the
    hash of ``ids[p:p+n]`` is ``P[p+n] - P[p] * B**n``, O(1) per n-gram."""
    out = np.empty(ids.shape[0] + 1, np.uint64)
    out[0] = np.uint64(0)
    for i in range(ids.shape[0]):
        out[i + 1] = out[i] * HASH_BASE + np.uint64(ids[i]) + np.uint64(1)
    return out


# -- n-gram hash table (one document at a time, reused across documents) -------------------

@njit(nogil=True, inline="always")
def _ngram_hash(prefix, start, n, base_n):
    h = prefix[start + n] - prefix[start] * base_n
    # finalizer (splitmix64) so the low bits used for the slot are well mixed
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@njit(nogil=True)
def _power(n):
    p = np.uint64(1)
    for _ in range(n):
        p *= HASH_BASE
    return p


@njit(nogil=True, inline="always")
def _same_ngram(ids, a, b, n):
    for k in range(n):  # noqa: SIM110 (numba compiles a loop, not a generator)
        if ids[a + k] != ids[b + k]:
            return False
    return True


@njit(nogil=True, inline="always")
def _slot(table, mask, ids, prefix, start, n, base_n):
    """The slot holding the n-gram at ``start``, or the empty slot where it belongs."""
    s = np.int64(_ngram_hash(prefix, start, n, base_n) & np.uint64(mask))
    while True:
        held = table[s]
        if held == _EMPTY or _same_ngram(ids, held, start, n):
            return s
        s = (s + 1) & mask


@njit(nogil=True)
def _table_size(positions):
    size = 16
    while size < 2 * positions:
        size *= 2
    return size


@njit(nogil=True)
def ngram_counts(ids, prefix, doc_offsets, n):
    """Word n-gram statistics of every document.

    Returns
    -------
    first : bool array, one per token
        True where the n-gram starting at this token occurs here for the first time in
        its document (False where no n-gram starts: the last ``n - 1`` tokens).
    top_start : int64 array, one per document
        Token index of the first occurrence of the most frequent n-gram; ties go to the
        n-gram that occurs first (as ``collections.Counter.most_common``). -1 when the
        document has fewer than ``n`` tokens.
    top_count : int64 array, one per document
        Occurrences (overlapping) of that n-gram.
    """
    n_docs = doc_offsets.shape[0] - 1
    first = np.zeros(ids.shape[0], np.bool_)
    top_start = np.full(n_docs, -1, np.int64)
    top_count = np.zeros(n_docs, np.int64)
    max_positions = 0
    for d in range(n_docs):
        max_positions = max(max_positions, doc_offsets[d + 1] - doc_offsets[d] - n + 1)
    table = np.full(_table_size(max_positions), _EMPTY, np.int64)
    base_n = _power(n)
    counts = np.zeros(table.shape[0], np.int64)
    for d in range(n_docs):
        lo = doc_offsets[d]
        positions = doc_offsets[d + 1] - lo - n + 1
        if positions <= 0:
            continue
        size = _table_size(positions)
        mask = size - 1
        table[:size] = _EMPTY
        counts[:size] = 0
        best_start = np.int64(-1)
        best_count = np.int64(0)
        for p in range(lo, lo + positions):
            s = _slot(table, mask, ids, prefix, p, n, base_n)
            if table[s] == _EMPTY:
                table[s] = p
                first[p] = True
            counts[s] += 1
            c = counts[s]
            held = table[s]
            if c > best_count or (c == best_count and held < best_start):
                best_count = c
                best_start = held
        top_start[d] = best_start
        top_count[d] = best_count
    return first, top_start, top_count


@njit(nogil=True)
def nemo_duplicate_ngram_chars(first, token_chars, doc_offsets, n):
    """Characters in repeated n-grams, counted as NeMo Curator's
    ``RepeatingDuplicateNGramsFilter`` does: each repeat occurrence adds the characters
    of its words not already counted by the previous repeat, plus the spaces between
    them."""
    n_docs = doc_offsets.shape[0] - 1
    out = np.zeros(n_docs, np.int64)
    for d in range(n_docs):
        lo = doc_offsets[d]
        positions = doc_offsets[d + 1] - lo - n + 1
        total = 0
        overlapping = 0
        for p in range(lo, lo + positions):
            if not first[p]:
                for k in range(overlapping, n):
                    total += token_chars[p + k]
                total += min(n - overlapping, n - 1)
                overlapping = n
            overlapping = max(overlapping - 1, 0)
        out[d] = total
    return out


@njit(nogil=True)
def skipping_duplicate_ngram_chars(ids, prefix, token_chars, doc_offsets, n):
    """Characters (word characters, no spaces) in repeated n-grams as the Gopher rule is
    implemented by datatrove's ``find_all_duplicate``: scan left to right; an n-gram seen
    before adds its characters and the scan jumps past it (the n-grams it jumps over are
    not remembered), otherwise it is remembered and the scan moves one word."""
    n_docs = doc_offsets.shape[0] - 1
    out = np.zeros(n_docs, np.int64)
    max_positions = 0
    for d in range(n_docs):
        max_positions = max(max_positions, doc_offsets[d + 1] - doc_offsets[d] - n + 1)
    table = np.full(_table_size(max_positions), _EMPTY, np.int64)
    base_n = _power(n)
    for d in range(n_docs):
        lo = doc_offsets[d]
        positions = doc_offsets[d + 1] - lo - n + 1
        if positions <= 0:
            continue
        size = _table_size(positions)
        mask = size - 1
        table[:size] = _EMPTY
        total = 0
        p = lo
        while p < lo + positions:
            s = _slot(table, mask, ids, prefix, p, n, base_n)
            if table[s] != _EMPTY:
                for k in range(n):
                    total += token_chars[p + k]
                p += n
            else:
                table[s] = p
                p += 1
        out[d] = total
    return out


# A compiled loop: splitting it would cost a call per document.
@njit(nogil=True)
def count_joined_spans(text_data, text_offsets, starts, ends, top_start, n):  # noqa: PLR0912
    """:func:`count_joined_tokens` with the tokens given as byte spans of the text
    (``starts``/``ends`` from :func:`split_whitespace`) instead of their own strings."""
    n_docs = text_offsets.shape[0] - 1
    out = np.zeros(n_docs, np.int64)
    for d in range(n_docs):
        t0 = top_start[d]
        if t0 < 0:
            continue
        pattern_len = n - 1
        for k in range(n):
            pattern_len += ends[t0 + k] - starts[t0 + k]
        first_byte = text_data[starts[t0]]
        i = text_offsets[d]
        end = text_offsets[d + 1]
        count = 0
        while i + pattern_len <= end:
            if text_data[i] != first_byte:
                i += 1
                continue
            j = i
            ok = True
            for k in range(n):
                if k > 0:
                    if text_data[j] != 0x20:
                        ok = False
                        break
                    j += 1
                for q in range(starts[t0 + k], ends[t0 + k]):
                    if text_data[j] != text_data[q]:
                        ok = False
                        break
                    j += 1
                if not ok:
                    break
            if ok:
                count += 1
                i += pattern_len
            else:
                i += 1
        out[d] = count
    return out


# A compiled loop: splitting it would cost a call per document.
@njit(nogil=True)
def count_joined_tokens(text_data, text_offsets, token_data, token_offsets, top_start,  # noqa: PLR0912
                        n):
    """Per document: non-overlapping occurrences, left to right, of the string
    ``" ".join(tokens[top_start[d] : top_start[d] + n])`` in the document's text (as
    ``str.count``), or 0 where ``top_start[d] < 0``. Byte-wise matching equals
    code-point matching for valid UTF-8."""
    n_docs = text_offsets.shape[0] - 1
    out = np.zeros(n_docs, np.int64)
    for d in range(n_docs):
        t0 = top_start[d]
        if t0 < 0:
            continue
        pattern_len = n - 1
        for k in range(n):
            pattern_len += token_offsets[t0 + k + 1] - token_offsets[t0 + k]
        first_byte = token_data[token_offsets[t0]]
        i = text_offsets[d]
        end = text_offsets[d + 1]
        count = 0
        while i + pattern_len <= end:
            if text_data[i] != first_byte:
                i += 1
                continue
            j = i
            ok = True
            for k in range(n):
                if k > 0:
                    if text_data[j] != 0x20:
                        ok = False
                        break
                    j += 1
                a = token_offsets[t0 + k]
                b = token_offsets[t0 + k + 1]
                for q in range(a, b):
                    if text_data[j] != token_data[q]:
                        ok = False
                        break
                    j += 1
                if not ok:
                    break
            if ok:
                count += 1
                i += pattern_len
            else:
                i += 1
        out[d] = count
    return out
