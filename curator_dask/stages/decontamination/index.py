"""Normalised words of a whole partition, and the index of the task n-grams.

**Words** follow NeMo Curator's ``get_words``: the text lowercased, ASCII punctuation
(``string.punctuation``) removed, split into words; a word that was all punctuation
disappears. Two differences, both deliberate: words are split on any whitespace
(``str.split()``: newlines and tabs too; NeMo Curator splits on spaces only, so a
newline glues two words together), and each word keeps its character span in the
original text, so a cut falls exactly where the matched words are (NeMo Curator
measures positions in the text *after* punctuation is removed and applies them to the
original, which shifts cuts when punctuation precedes a match). Lowercasing is Arrow's
``utf8_lower`` (Unicode simple case mapping), on the task texts and the documents alike.

**The index** is built once, on the client, from the task texts: their vocabulary (an
Arrow string array), their words as vocabulary ids (int32), and per task n-gram its key,
where its words start, its length and its task. Documents are matched on workers by
looking their words up in the vocabulary (``pyarrow.compute.index_in``), then hashing
windows of ids with a rolling hash (:mod:`._kernels`); a key match is confirmed on the
ids, word for word, so the result is exact whatever the hash does.

Memory, per task n-gram: 8 bytes (key) + 8 (where its words start) + 1 (length) + 2 (task)
+ 1 (enabled flag) + 2 to 4 (directory) + 2 to 4 (bit set; both round to powers of two),
plus 4 bytes per task word (a text of ``n >= 13`` words has ``n - 12`` n-grams):
**about 30 MB per million n-grams**, vocabulary included for typical suites
(``benchmarks/decontamination.py`` measured 31.4 bytes per n-gram on 200,000).
"""

from __future__ import annotations

import hashlib
import logging
import string
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.decontamination import _kernels
from curator_dask.stages.decontamination.tasks import EvalTask, load_task_texts
from curator_dask.text import buffers, char_table, string_array
from curator_dask.text import kernels as text_kernels

__all__ = ["TaskNgramIndex", "Words", "build_index", "words_of"]

logger = logging.getLogger(__name__)

#: RE2 class of the characters removed from words (Python's ``string.punctuation``).
PUNCTUATION = "[" + "".join(f"\\x{ord(c):02x}" for c in string.punctuation) + "]"

_PUNCTUATION = np.zeros(128, np.bool_)
_PUNCTUATION[[ord(c) for c in string.punctuation]] = True

#: Every key bit is used by default; tests narrow it to force hash collisions.
ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass
class Words:
    """The normalised words of a partition's texts.

    ``values[k]`` is word ``k`` (normalised, never empty); it covers bytes
    ``[starts[k], ends[k])`` of the UTF-8 buffer ``data``; the words of text ``t`` are
    ``doc_offsets[t]:doc_offsets[t + 1]``; ``text_offsets`` are the texts' byte ranges.
    """

    values: pa.LargeStringArray
    starts: np.ndarray
    ends: np.ndarray
    doc_offsets: np.ndarray
    data: np.ndarray
    text_offsets: np.ndarray


def words_of(arr: pa.Array) -> Words:
    """The normalised words of every string of ``arr`` (nulls as empty strings).

    Examples
    --------
    >>> w = words_of(pa.array(["Don't panic!", "  ...  "]))
    >>> w.values.to_pylist(), w.doc_offsets.tolist()
    (['dont', 'panic'], [0, 2, 2])
    """
    if arr.null_count:
        arr = arr.fill_null("")
    data, offsets = buffers(arr)
    starts, ends, _, counts = text_kernels.split_whitespace(data, offsets, char_table("space"))
    # ASCII words are lowercased and stripped in one compiled pass; the few with other
    # characters go through Arrow's Unicode lowercasing.
    normal, normal_offsets, other = _kernels.normalise_ascii(data, starts, ends, _PUNCTUATION)
    if other.any():
        rows = np.flatnonzero(other)
        raw = string_array(*text_kernels.gather_segments(data, starts[rows], ends[rows]))
        fixed = pc.replace_substring_regex(pc.utf8_lower(raw), PUNCTUATION, "")
        normal, normal_offsets = _kernels.splice(normal, normal_offsets, rows,
                                                 *buffers(fixed.cast(pa.large_string())))
    values = string_array(normal, normal_offsets)
    keep = np.diff(normal_offsets) > 0  # words that were all punctuation are gone
    if not keep.all():
        values = values.filter(pa.array(keep))
        starts, ends = starts[keep], ends[keep]
        counts = text_kernels.segment_sums(keep.view(np.uint8).astype(np.int64),
                                            np.r_[0, np.cumsum(counts)])
    doc_offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=doc_offsets[1:])
    return Words(values, starts, ends, doc_offsets, data, offsets)


@dataclass(frozen=True)
class TaskNgramIndex:
    """The n-grams of the evaluation tasks, ready to match (see the module docstring).

    Attributes
    ----------
    tasks : tuple of str
        Task names; ``task_of[e]`` indexes it.
    vocabulary : pyarrow.LargeStringArray
        Distinct normalised task words; a word's id is its position.
    tokens : int32 array
        The task texts' words as ids, text after text.
    keys, starts, lengths, task_of
        One entry per distinct task n-gram, sorted by key.
    directory : int64 array
        Where each run of keys sharing their top ``bits`` bits starts.
    sizes : int64 array
        The n-gram lengths present, longest first.
    mask : numpy.uint64
        Key bits used (all of them, except in tests that force collisions).
    enabled : bool array
        Entries matched (``TaskDecontamination`` disables n-grams found too often).
    fingerprint : str
        A digest of the entries, for Dask's tokenising.
    """

    tasks: tuple[str, ...]
    vocabulary: pa.LargeStringArray
    tokens: np.ndarray
    keys: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    task_of: np.ndarray
    directory: np.ndarray
    bits: int
    sizes: np.ndarray
    mask: np.uint64
    enabled: np.ndarray
    fingerprint: str
    max_ngram_size: int
    key_filter: np.ndarray
    filter_bits: int

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        """Bytes held (what every worker receives)."""
        arrays = (self.tokens, self.keys, self.starts, self.lengths, self.task_of,
                  self.directory, self.enabled, self.key_filter)
        return sum(a.nbytes for a in arrays) + self.vocabulary.nbytes

    def __sizeof__(self) -> int:
        # What distributed counts for the index where it lies as a task's input: its
        # arrays, not the few bytes of the object around them.
        return object.__sizeof__(self) + self.nbytes

    def with_enabled(self, enabled: np.ndarray) -> TaskNgramIndex:
        """The same index matching only the entries where ``enabled`` is true."""
        enabled = np.asarray(enabled, dtype=bool)
        digest = hashlib.sha1(self.fingerprint.encode() + np.packbits(enabled).tobytes())
        return replace(self, enabled=enabled, fingerprint=digest.hexdigest())

    def __dask_tokenize__(self):
        return ("TaskNgramIndex", self.fingerprint)

    def ngram_text(self, entry: int) -> str:
        """The words of an entry, space-separated (for logs and tests)."""
        ids = self.tokens[self.starts[entry]:self.starts[entry] + self.lengths[entry]]
        return " ".join(self.vocabulary.take(pa.array(ids)).to_pylist())

    def ids(self, words: pa.Array) -> np.ndarray:
        """Vocabulary ids of normalised words (int32, -1 for words no task has)."""
        found = pc.index_in(words, value_set=self.vocabulary)
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)

    def find(self, words: Words) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The matches in a partition's words: (text, first word, length, entry), in text
        and position order; at each position the longest enabled n-gram."""
        ids = self.ids(words.values)
        return _kernels.find_matches(ids, words.doc_offsets, self.sizes, self.keys, self.starts,
                                     self.lengths, self.tokens, self.directory, self.bits,
                                     self.mask, self.enabled, self.key_filter,
                                     self.filter_bits)


def build_index(tasks: Sequence[EvalTask], max_ngram_size: int = 13, min_ngram_size: int = 8,
                *, mask: np.uint64 = ALL_BITS) -> TaskNgramIndex:
    """Read the tasks' files and index their n-grams (NeMo Curator's rule: every
    ``max_ngram_size``-gram of each text, or the whole text when it has at least
    ``min_ngram_size`` words but fewer than ``max_ngram_size``).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "qa.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("What is the capital city of France, and why is it Paris?\\n")
    >>> index = build_index([EvalTask(path)], max_ngram_size=5, min_ngram_size=3)
    >>> len(index), index.tasks, sorted(index.ngram_text(e) for e in range(len(index)))[:2]
    (8, ('qa',), ['and why is it paris', 'capital city of france and'])
    """
    if not 1 <= min_ngram_size <= max_ngram_size <= 255:
        raise InvalidArgumentError(f"need 1 <= min_ngram_size <= max_ngram_size <= 255, got "
                                   f"{min_ngram_size} and {max_ngram_size}")
    texts, text_task = [], []
    for t, task in enumerate(tasks):
        found = load_task_texts(task)
        if not found:
            logger.warning("task %r has no text in %s", task.name, task.path)
        texts += found
        text_task += [t] * len(found)
    words = words_of(pa.array(texts, pa.large_string()))
    vocabulary = pc.unique(words.values)
    tokens = pc.index_in(words.values, value_set=vocabulary).to_numpy(
        zero_copy_only=False).astype(np.int32)
    prefix = text_kernels.prefix_hashes(tokens.astype(np.int64))
    keys, starts, lens, text_of = _kernels.task_ngrams(prefix, words.doc_offsets, min_ngram_size,
                                                       max_ngram_size, np.uint64(mask))
    order = np.argsort(keys, kind="stable")  # stable: the first task keeps a shared n-gram
    keys, starts, lens, text_of = keys[order], starts[order], lens[order], text_of[order]
    first = _kernels.first_of_equal(keys, starts, lens, tokens)
    keys, starts, lens, text_of = keys[first], starts[first], lens[first], text_of[first]
    task_of = np.asarray(text_task, np.int16)[text_of] if len(text_of) else np.zeros(0, np.int16)
    bits = max(0, int(np.ceil(np.log2(max(len(keys), 1)))) - 2)
    # About 16 filter bits per n-gram: a window that is no task n-gram passes the filter
    # with probability about 1/16 (fewer when keys repeat their top bits).
    filter_bits = min(40, max(6, int(np.ceil(np.log2(max(len(keys), 1) * 16)))))
    sizes = np.unique(lens).astype(np.int64)[::-1].copy()
    fingerprint = hashlib.sha1(keys.tobytes() + tokens.tobytes() + starts.tobytes()
                               + "\x00".join(t.name for t in tasks).encode()).hexdigest()
    index = TaskNgramIndex(
        tasks=tuple(t.name for t in tasks), vocabulary=vocabulary, tokens=tokens, keys=keys,
        starts=starts, lengths=lens, task_of=task_of, directory=_kernels.directory(keys, bits),
        bits=bits, sizes=sizes if len(sizes) else np.array([max_ngram_size], np.int64),
        mask=np.uint64(mask), enabled=np.ones(len(keys), bool), fingerprint=fingerprint,
        max_ngram_size=max_ngram_size, key_filter=_kernels.key_filter(keys, filter_bits),
        filter_bits=filter_bits)
    logger.info("task n-gram index: %d n-grams of %d task(s), %d distinct words, %.1f MB",
                len(index), len(tasks), len(vocabulary), index.nbytes / 1e6)
    return index
