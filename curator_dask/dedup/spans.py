"""Documents cut into spans (lines, paragraphs, sentences), hashed and put back together.

What line and paragraph deduplication (:mod:`curator_dask.dedup.lines`) does to one
partition, vectorised over the whole partition:

1. **Cut** (a numba kernel over the partition's UTF-8 buffer): each document into
   *segments* that cover it exactly, each segment keeping the separator that ends it,
   so the segments of a document, joined, are the document byte for byte:

   ``"line"``
       up to and including each ``\\n``;
   ``"paragraph"``
       up to and including a run of whitespace that holds two or more ``\\n`` (a
       blank line);
   ``"sentence"``
       up to and including the whitespace after ``.``, ``!`` or ``?`` (and any
       closing quote or bracket after it), or after a ``\\n``.

   The segments are one Arrow string array over the same buffer (no text is copied).
2. **Normalise and hash**: lower-case each segment (by default; Arrow's Unicode
   kernel), then, in one numba pass, drop its leading and trailing whitespace, read each
   inner run of whitespace as one space (whitespace as Python's ``str.split`` sees it)
   and hash the result with 128-bit MurmurHash3: Python's
   ``" ".join(s.split()).lower()``, but for the few code points whose case Arrow and
   Python map differently. Segments shorter than ``min_chars`` after normalising (blank
   lines) are never counted or removed.
3. **Window**: a *span* is ``size`` consecutive counted segments of one document (C4
   counts three-sentence spans); its hash combines theirs in order.
4. **Put back**: a document is joined again from the segments not removed (Arrow's
   ``binary_join``), so what is not removed keeps its bytes and separators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.dedup.fuzzy.murmur import mmh3_x64_128
from curator_dask.numba_cache import njit

__all__ = ["UNITS", "Segments", "SpanUnit", "cut", "join_kept", "span_hashes"]

SpanUnit = Literal["line", "paragraph", "sentence"]
UNITS = get_args(SpanUnit)

_LINE, _PARAGRAPH, _SENTENCE = 0, 1, 2
_SEED = 0x5EED5EED
_MIX_1 = np.uint64(0x9E3779B97F4A7C15)
_MIX_2 = np.uint64(0xC2B2AE3D27D4EB4F)


@njit(inline="always")
def _is_space(b):
    return b == 32 or b == 9 or b == 10 or b == 13 or b == 11 or b == 12


@njit(inline="always")
def _closer_length(data, j, end):
    """Bytes of a closing quote or bracket at ``j`` (ASCII, U+2019 ” or »), else 0."""
    b = data[j]
    if b == 34 or b == 39 or b == 41 or b == 93:  # " ' ) ]
        return 1
    if b == 0xC2 and j + 1 < end and data[j + 1] == 0xBB:  # »
        return 2
    if b == 0xE2 and j + 2 < end and data[j + 1] == 0x80 and (data[j + 2] == 0x99
                                                             or data[j + 2] == 0x9D):
        return 3
    return 0


@njit(inline="always")
def _boundary(data, i, end, unit):
    """Where the segment that a separator starting at ``i`` ends, or -1 (no separator)."""
    b = data[i]
    if unit == _LINE:
        return i + 1 if b == 10 else -1
    if b == 10:
        j = i + 1
        newlines = 1
        while j < end and _is_space(data[j]):
            if data[j] == 10:
                newlines += 1
            j += 1
        if unit == _SENTENCE or newlines >= 2:
            return j
        return -1
    if unit == _SENTENCE and (b == 46 or b == 33 or b == 63):  # . ! ?
        j = i + 1
        while j < end and (data[j] == 46 or data[j] == 33 or data[j] == 63):
            j += 1
        while j < end:
            step = _closer_length(data, j, end)
            if step == 0:
                break
            j += step
        if j < end and not _is_space(data[j]):
            return -1  # "3.14", "e.g.x": not the end of a sentence
        while j < end and _is_space(data[j]):
            j += 1
        return j
    return -1


@njit(nogil=True, cache=True)
def _cut(data, offsets, unit, starts, docs, fill):
    """Segment starts and their documents (written when ``fill``); returns the count."""
    count = 0
    for d in range(offsets.shape[0] - 1):
        start = offsets[d]
        end = offsets[d + 1]
        if start == end:
            continue
        segment = start
        i = start
        while i < end:
            stop = _boundary(data, i, end, unit)
            if stop == -1:
                i += 1
                continue
            if stop < end:
                if fill:
                    starts[count] = segment
                    docs[count] = d
                count += 1
                segment = stop
            i = stop
        if fill:
            starts[count] = segment
            docs[count] = d
        count += 1
    return count


@njit(inline="always")
def _space_at(data, p, end):  # noqa: PLR0911
    """Bytes of the whitespace character at ``p`` (as Python's ``str.split`` sees it),
    else 0."""
    b = data[p]
    if b < 0x80:
        return 1 if (9 <= b <= 13) or (28 <= b <= 32) else 0
    if b == 0xC2 and p + 1 < end and (data[p + 1] == 0x85 or data[p + 1] == 0xA0):
        return 2
    if b == 0xE1 and p + 2 < end and data[p + 1] == 0x9A and data[p + 2] == 0x80:
        return 3  # U+1680
    if b == 0xE2 and p + 2 < end:
        c, d = data[p + 1], data[p + 2]
        if c == 0x80 and (d <= 0x8A or d == 0xA8 or d == 0xA9 or d == 0xAF):
            return 3  # U+2000-200A, U+2028, U+2029, U+202F
        if c == 0x81 and d == 0x9F:
            return 3  # U+205F
    if b == 0xE3 and p + 2 < end and data[p + 1] == 0x80 and data[p + 2] == 0x80:
        return 3  # U+3000
    return 0


@njit(nogil=True, cache=True)
def _hash_normalised(data, offsets, seed, out, chars, hashing):
    """Each string's length in characters, and (when ``hashing``) its hash, with its
    whitespace normalised: leading and trailing whitespace dropped, each inner run
    written as one space."""
    longest = 0
    for k in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[k + 1] - offsets[k])
    scratch = np.empty(longest, dtype=np.uint8)
    for k in range(offsets.shape[0] - 1):
        p = offsets[k]
        end = offsets[k + 1]
        n = 0
        count = 0
        pending = False
        while p < end:
            width = _space_at(data, p, end)
            if width:
                pending = n > 0
                p += width
                continue
            if pending:
                scratch[n] = 32
                n += 1
                count += 1
                pending = False
            b = data[p]
            scratch[n] = b
            n += 1
            if (b & 0xC0) != 0x80:
                count += 1
            p += 1
        chars[k] = count
        if hashing:
            h1, h2 = mmh3_x64_128(scratch, 0, n, seed)
            out[k, 0] = h1
            out[k, 1] = h2


def _buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(utf8 bytes, int64 offsets)`` of a large_string array, without copying."""
    _, offsets_buffer, data_buffer = array.buffers()
    n = len(array)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[array.offset:array.offset + n + 1]
    data = (np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None
            else np.empty(0, np.uint8))
    return data, offsets


def as_large_strings(texts) -> pa.LargeStringArray:
    """A text column (pandas, Arrow or cuDF) as one Arrow large_string array, nulls as ''."""
    if hasattr(texts, "to_arrow"):
        arrow = texts.to_arrow()
    else:
        arrow = pa.array(texts.array if hasattr(texts, "array") else texts)
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks()
    if not pa.types.is_large_string(arrow.type):
        arrow = arrow.cast(pa.large_string())
    if arrow.null_count:
        arrow = pc.fill_null(arrow, "")
    return arrow


@dataclass
class Segments:
    """The segments of a partition's documents.

    ``texts`` are the documents (large_string, nulls as ''), ``segments`` the segments
    in order over the same buffer, ``doc`` each segment's document (row position).
    """

    texts: pa.LargeStringArray
    segments: pa.LargeStringArray
    doc: np.ndarray


def cut(texts, unit: SpanUnit) -> Segments:
    """Cut each text into segments of ``unit`` (see the module docstring).

    Examples
    --------
    >>> import pandas as pd
    >>> s = cut(pd.Series(["a\\nb\\n", "", "c"]), "line")
    >>> s.segments.to_pylist(), s.doc.tolist()
    (['a\\n', 'b\\n', 'c'], [0, 0, 2])
    >>> cut(pd.Series(["One. Two! 3.14 is pi.\\nNext"]), "sentence").segments.to_pylist()
    ['One. ', 'Two! ', '3.14 is pi.\\n', 'Next']
    >>> cut(pd.Series(["p1 l1\\np1 l2\\n \\n\\np2"]), "paragraph").segments.to_pylist()
    ['p1 l1\\np1 l2\\n \\n\\n', 'p2']
    """
    code = UNITS.index(unit)
    arrow = as_large_strings(texts)
    data, offsets = _buffers(arrow)
    count = _cut(data, offsets, code, np.empty(0, np.int64), np.empty(0, np.int64), False)
    starts = np.empty(count + 1, dtype=np.int64)
    docs = np.empty(count, dtype=np.int64)
    _cut(data, offsets, code, starts, docs, True)
    starts[count] = offsets[-1] if len(offsets) else 0
    segments = pa.LargeStringArray.from_buffers(count, pa.py_buffer(starts), arrow.buffers()[2])
    return Segments(arrow, segments, docs)


def span_hashes(segments: pa.Array, *, lowercase: bool = True,
                hashing: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, chars)``: each segment's normalised 128-bit hash (``(n, 2)`` uint64) and
    its length in characters after normalising (``hashing=False``: the lengths alone,
    the hashes left unset).

    Examples
    --------
    >>> h, n = span_hashes(pa.array(["  Home  Page\\n", "home page", "x"], pa.large_string()))
    >>> bool((h[0] == h[1]).all()), bool((h[0] == h[2]).all()), n.tolist()
    (True, False, [9, 9, 1])
    """
    normal = as_large_strings(pc.utf8_lower(segments) if lowercase else segments)
    data, offsets = _buffers(normal)
    hashes = np.empty((len(normal) if hashing else 0, 2), dtype=np.uint64)
    chars = np.empty(len(normal), dtype=np.int64)
    _hash_normalised(data, offsets, np.uint64(_SEED), hashes, chars, hashing)
    return hashes, chars


def windows(doc: np.ndarray, hashes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Spans of ``size`` consecutive segments of one document: ``(first, hashes)``, the
    position of each span's first segment and its ``(n, 2)`` hash.

    ``doc`` and ``hashes`` are those of the counted segments only, in order. A document
    with fewer than ``size`` of them has no span.

    Examples
    --------
    >>> h = np.arange(10, dtype=np.uint64).reshape(5, 2)
    >>> windows(np.array([0, 0, 0, 1, 1]), h, 2)[0].tolist()
    [0, 1, 3]
    """
    if size == 1:
        return np.arange(len(doc), dtype=np.int64), hashes
    count = len(doc) - size + 1
    if count <= 0:
        return np.empty(0, np.int64), np.empty((0, 2), np.uint64)
    first = np.arange(count, dtype=np.int64)
    whole = doc[first] == doc[first + size - 1]
    first = first[whole]
    combined = np.zeros((len(first), 2), dtype=np.uint64)
    for step in range(size):  # order matters: multiply, then add the next segment's hash
        combined[:, 0] = combined[:, 0] * _MIX_1 + hashes[first + step, 0]
        combined[:, 1] = combined[:, 1] * _MIX_2 + hashes[first + step, 1]
    return first, combined


def join_kept(parts: Segments, kept: np.ndarray) -> pa.LargeStringArray:
    """The documents again, from their segments where ``kept`` is true.

    Examples
    --------
    >>> import pandas as pd
    >>> s = cut(pd.Series(["a\\nb\\nc", "d\\n"]), "line")
    >>> join_kept(s, np.array([True, False, True, False])).to_pylist()
    ['a\\nc', '']
    """
    n = len(parts.texts)
    doc = parts.doc[kept]
    counts = np.bincount(doc, minlength=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    lists = pa.LargeListArray.from_arrays(pa.array(offsets),
                                          parts.segments.filter(pa.array(kept)))
    return as_large_strings(pc.binary_join(lists, pa.scalar("", pa.large_string())))
