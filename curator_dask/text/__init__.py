"""Whole-partition text primitives: what the filters, modifiers and other text stages are
made of, and what a custom filter can be written with.

Everything here takes a partition's text column and returns one value per document (or
per word, line, paragraph, each tagged with its document), computed with Arrow kernels,
numpy and the compiled loops in :mod:`curator_dask.text.kernels` — never a Python loop
over documents.

Definitions used throughout (they match Python's ``str`` methods exactly, which the
tests check against plain per-document references):

- **missing text** (None/NaN) is treated as the empty string;
- **characters** are Unicode code points (``len(text)``);
- **whitespace** is what ``str.isspace`` accepts (the word splitter uses a table built
  from it; Arrow's ``utf8_*_whitespace`` kernels use the same set);
- **words** are ``text.split()``: maximal runs of non-whitespace;
- **lines** are ``text.split("\\n")`` and **paragraphs** ``text.split("\\n\\n")``
  (NeMo Curator's definitions), unless a filter says otherwise.

Backends: these functions need pandas partitions (Arrow-backed strings). Stages convert
a cuDF text column to pandas in one place, :func:`to_pandas_text`, and convert the
result back with :func:`like_input`. Telling the backends apart is
:func:`curator_dask.backends.is_cudf`'s job.

Examples
--------
A score for a :class:`~curator_dask.stages.filters.DocumentFilter`: the share of a
document's words that are longer than ten characters.

>>> import pandas as pd
>>> text = pd.Series(["a tremendously long word", None, "short words only"], dtype="str")
>>> found = words(arrow_text(text))
>>> ratio(found.per_doc_sum(found.nchars > 10), found.per_doc_count(), empty=0.0).tolist()
[0.25, 0.0, 0.0]
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.backends import series_like, to_host
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError, NameNotFoundError
from curator_dask.text import kernels

__all__ = [
    "Segments",
    "WordSpans",
    "arrow_text",
    "buffers",
    "char_table",
    "count_chars",
    "count_classes",
    "count_words",
    "kernels",
    "lengths",
    "like_input",
    "nonblank_lines",
    "ratio",
    "re2_class",
    "register_chars",
    "split_runs",
    "split_segments",
    "splitlines",
    "string_array",
    "to_pandas_text",
    "word_spans",
    "words",
]

MAX_CODE_POINT = 0x110000


# -- backends ----------------------------------------------------------------------------

def to_pandas_text(text):
    """A pandas text Series for ``text``; a cuDF Series is copied to host memory.

    The one place where filters and modifiers that need pandas leave cuDF.
    """
    return to_host(text)


def like_input(values, original, dtype=None):
    """``values`` (array, list or pandas Series) as a Series on ``original``'s backend
    and index, with ``dtype`` (``"str"`` for text)."""
    return series_like(values, original, dtype)


def arrow_text(text) -> pa.LargeStringArray:
    """The text column as one Arrow ``large_string`` array, missing values as ``""``."""
    text = to_pandas_text(text)
    values = text.array
    if hasattr(values, "__arrow_array__") and pd.api.types.is_string_dtype(text.dtype):
        arr = values.__arrow_array__()
    else:
        try:
            arr = pa.array(text.to_numpy(dtype=object), type=pa.large_string(), from_pandas=True)
        except (pa.ArrowTypeError, pa.ArrowInvalid) as err:
            raise ArgumentTypeError(
                f"text column {text.name!r} must hold strings (dtype {text.dtype}); convert it "
                "with df[column].astype('str') first"
            ) from err
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = arr.fill_null("")
    return arr


def buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes, int64 offsets of length ``len(arr) + 1``) of a (large) string array."""
    bufs = arr.buffers()
    offset_type = np.int64 if arr.type == pa.large_string() else np.int32
    offsets = np.frombuffer(bufs[1], dtype=offset_type)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    return data, offsets.astype(np.int64, copy=False)


def lengths(arr: pa.Array) -> np.ndarray:
    """Characters per string, int64."""
    return pc.utf8_length(arr).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


# -- character classes ---------------------------------------------------------------------

@functools.cache
def _all_code_points() -> np.ndarray:
    return np.arange(MAX_CODE_POINT, dtype=np.uint32).view("<U1")


@functools.cache
def char_table(name: str) -> np.ndarray:
    """A bool lookup table over all code points for a named character class.

    Unicode classes come from Python's own ``str`` predicates (through numpy), so counts
    agree with ``str.isalpha`` and friends on this interpreter.
    """
    if name == "alpha":
        return np.strings.isalpha(_all_code_points())
    if name == "space":
        return np.strings.isspace(_all_code_points())
    if name in _NAMED_CHARS:
        table = np.zeros(MAX_CODE_POINT, np.bool_)
        for item in _NAMED_CHARS[name]:
            if isinstance(item, tuple):
                table[item[0]:item[1] + 1] = True
            else:
                for ch in item:
                    table[ord(ch)] = True
        return table
    raise NameNotFoundError(f"unknown character class {name!r}; register it in _NAMED_CHARS")


_NAMED_CHARS: dict[str, tuple] = {}


def register_chars(name: str, *items) -> str:
    """Register a character class from strings of characters and (first, last) ranges."""
    _NAMED_CHARS[name] = items
    char_table.cache_clear()
    class_bits.cache_clear()
    return name


@functools.cache
def re2_class(name: str, *, exclude: str = "") -> str:
    """The contents of an RE2 character class (``[...]``) matching the named class,
    for Arrow's regex kernels; e.g. ``re2_class("space")`` is Python's whitespace."""
    return "".join(f"\\x{{{c:x}}}" for c in np.flatnonzero(char_table(name))
                   if chr(c) not in exclude)


@functools.cache
def class_bits(names: tuple[str, ...]) -> np.ndarray:
    """A uint8 table over code points: bit ``k`` set where class ``names[k]`` holds."""
    if len(names) > 8:
        raise InvalidArgumentError("at most 8 character classes at once")
    bits = np.zeros(MAX_CODE_POINT, np.uint8)
    for k, name in enumerate(names):
        bits |= char_table(name).astype(np.uint8) << k
    return bits


def count_classes(arr: pa.Array, *names: str) -> np.ndarray:
    """Per string: how many characters fall in each named class, in one pass
    (int64 array of shape ``(len(arr), len(names))``)."""
    data, offsets = buffers(arr)
    return kernels.count_in_classes(data, offsets[:-1], offsets[1:], class_bits(names),
                                     len(names))


def count_chars(arr: pa.Array, table: np.ndarray) -> np.ndarray:
    """Per string: how many of its characters are in ``table`` (int64)."""
    data, offsets = buffers(arr)
    return kernels.count_in_class(data, offsets[:-1], offsets[1:], table)


# -- segments: words, lines, paragraphs with their document ---------------------------------

class Segments:
    """Pieces of every document of a partition, in order: the pieces of document ``d``
    are ``values[doc_offsets[d]:doc_offsets[d + 1]]``; ``parent[i]`` is the document of
    piece ``i``."""

    def __init__(self, values: pa.LargeStringArray, doc_offsets: np.ndarray,
                 nchars: np.ndarray | None = None):
        self.values = values
        self.doc_offsets = np.asarray(doc_offsets, dtype=np.int64)
        if nchars is not None:
            self.__dict__["nchars"] = nchars

    @property
    def n_docs(self) -> int:
        return len(self.doc_offsets) - 1

    @functools.cached_property
    def parent(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_docs, dtype=np.int64), np.diff(self.doc_offsets))

    def per_doc_count(self) -> np.ndarray:
        return np.diff(self.doc_offsets)

    def per_doc_sum(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        if values.dtype == np.bool_:
            values = values.view(np.uint8).astype(np.int64)
        return kernels.segment_sums(values, self.doc_offsets)

    def per_doc_max(self, values: np.ndarray, empty) -> np.ndarray:
        counts = self.per_doc_count()
        out = np.full(self.n_docs, empty, dtype=values.dtype)
        has = counts > 0
        if has.any():
            out[has] = np.maximum.reduceat(values, self.doc_offsets[:-1][has])
        return out

    @functools.cached_property
    def nchars(self) -> np.ndarray:
        return lengths(self.values)

    @functools.cached_property
    def ids(self) -> np.ndarray:
        """int64 ids, equal exactly when two pieces of one document are equal (numbered
        per document: pieces of different documents are never compared)."""
        data, offsets = buffers(self.values)
        return kernels.document_segment_ids(data, offsets[:-1], offsets[1:],
                                            self.doc_offsets)

    @functools.cached_property
    def prefix_hashes(self) -> np.ndarray:
        """Rolling hashes of :attr:`ids` for the n-gram kernels."""
        return kernels.prefix_hashes(self.ids)

    def first_in_doc(self) -> np.ndarray:
        """True for the first occurrence of each distinct value within its document."""
        ids = self.ids
        width = int(ids.max()) + 1 if len(ids) else 1
        return ~pd.Series(self.parent * width + ids).duplicated().to_numpy()

    def filter(self, keep: np.ndarray) -> Segments:
        keep = np.asarray(keep, dtype=bool)
        offsets = np.zeros(self.n_docs + 1, np.int64)
        np.cumsum(self.per_doc_sum(keep), out=offsets[1:])
        nchars = self.__dict__.get("nchars")
        return Segments(self.values.filter(pa.array(keep)), offsets,
                        None if nchars is None else nchars[keep])


def _from_lists(lists: pa.ListArray | pa.LargeListArray) -> Segments:
    values = lists.flatten()
    if values.type != pa.large_string():
        values = values.cast(pa.large_string())
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    return Segments(values, offsets - offsets[0])


def string_array(data: np.ndarray, offsets: np.ndarray) -> pa.LargeStringArray:
    """A ``large_string`` array over numpy bytes and int64 offsets (no copy)."""
    return pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets),
                                            pa.py_buffer(data))


def words(arr: pa.Array) -> Segments:
    """``text.split()`` for every document: whitespace-separated words, none empty."""
    spans = word_spans(arr)
    token_data, token_offsets = kernels.gather_segments(spans.data, spans.starts, spans.ends)
    return Segments(string_array(token_data, token_offsets), spans.doc_offsets, spans.nchars)


def count_words(arr: pa.Array) -> np.ndarray:
    """``len(text.split())`` for every document (int64), in one pass over the bytes."""
    data, offsets = buffers(arr)
    space = char_table("space")
    return kernels.count_words(data, offsets, _ascii(space), space)


@functools.cache
def _ascii_space() -> np.ndarray:
    return char_table("space")[:128].copy()


def _ascii(space: np.ndarray) -> np.ndarray:
    return _ascii_space() if space is char_table("space") else space[:128].copy()


class WordSpans:
    """The words of every document as byte spans of the text itself (no word strings
    are built): what the n-gram filters need, at a fraction of :func:`words`' cost."""

    def __init__(self, arr: pa.Array):
        self.data, offsets = buffers(arr)
        self.text_offsets = offsets
        self.starts, self.ends, self.nchars, counts = kernels.split_whitespace(
            self.data, offsets, char_table("space"))
        self.doc_offsets = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=self.doc_offsets[1:])

    @functools.cached_property
    def ids(self) -> np.ndarray:
        """int64 ids, equal exactly when two words of one document are equal (numbered
        per document, which is all the n-gram kernels compare)."""
        return kernels.document_segment_ids(self.data, self.starts, self.ends,
                                            self.doc_offsets)

    @functools.cached_property
    def prefix_hashes(self) -> np.ndarray:
        return kernels.prefix_hashes(self.ids)


def word_spans(arr: pa.Array) -> WordSpans:
    """``text.split()`` for every document, as :class:`WordSpans`."""
    return WordSpans(arr)


def split_segments(arr: pa.Array, separator: str, *, regex: bool = False) -> Segments:
    """``text.split(separator)`` (or ``re.split``) for every document; empty pieces kept."""
    lists = pc.split_pattern_regex(arr, separator) if regex else pc.split_pattern(arr, separator)
    return _from_lists(lists)


def nonblank_lines(arr: pa.Array) -> Segments:
    """NeMo Curator's "sentences": ``[l for l in text.split("\\n") if l.strip()]``."""
    lines = split_segments(arr, "\n")
    return lines.filter(lengths(pc.utf8_trim_whitespace(lines.values)) > 0)


#: What ``str.splitlines`` splits on.
LINE_BREAKS = "\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"


_RARE_LINE_BREAKS = register_chars("rare_line_breaks", "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def splitlines(arr: pa.Array) -> Segments:
    """``text.splitlines()`` for every document."""
    if count_chars(arr, char_table(_RARE_LINE_BREAKS)).any():
        lines = split_segments(arr, LINE_BREAKS, regex=True)
    else:  # only "\n": a literal split is several times faster than the regex
        lines = split_segments(arr, "\n")
    # str.splitlines() has no piece after a final line break, and none at all for "".
    last = lines.doc_offsets[1:] - 1
    drop = np.zeros(len(lines.values), dtype=bool)
    drop[last[lines.nchars[last] == 0]] = True
    return lines.filter(~drop) if drop.any() else lines


def split_runs(arr: pa.Array, char: str) -> Segments:
    """``re.split(char + "+", text)`` for every document: split on runs of ``char``."""
    pieces = split_segments(arr, char)
    offsets = pieces.doc_offsets
    # The pieces between consecutive separators are empty; a run's inner ones go, the
    # first and last piece of each document stay (as re.split keeps them).
    inner = np.ones(len(pieces.values), dtype=bool)
    inner[offsets[:-1]] = False
    inner[offsets[1:] - 1] = False
    drop = inner & (pieces.nchars == 0)
    return pieces.filter(~drop) if drop.any() else pieces


def ratio(numerator, denominator, *, empty: float) -> np.ndarray:
    """``numerator / denominator`` as float64, with ``empty`` where the denominator is 0."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    out = np.full(numerator.shape, empty, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out
