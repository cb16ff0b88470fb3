"""The ``TaskDecontamination`` stage: cut evaluation-set n-grams out of a corpus."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dask
import numpy as np

from curator_dask.backends import is_cudf
from curator_dask.dataset import DocumentDataset
from curator_dask.dropped import record_counter, record_dropped
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.stages.base import WholeDatasetStage
from curator_dask.stages.columns import require_columns
from curator_dask.stages.decontamination import _kernels
from curator_dask.stages.decontamination.index import TaskNgramIndex, build_index, words_of
from curator_dask.stages.decontamination.tasks import EvalTask, as_tasks, task_files
from curator_dask.text import arrow_text, string_array
from curator_dask.text import kernels as text_kernels

__all__ = [
    "DecontaminationStats",
    "TaskDecontamination",
    "count_partition",
    "decontaminate_partition",
]

logger = logging.getLogger(__name__)


@dataclass
class DecontaminationStats:
    """What one run of :class:`TaskDecontamination` did.

    Attributes
    ----------
    ngrams : int
        Task n-grams indexed.
    index_bytes : int
        Size of the index sent to each worker.
    too_frequent : dict of str to int
        Per task, n-grams found more than ``max_matches`` times in the corpus and
        therefore left in place (NeMo Curator's rule: they are too common to be leaks).
    """

    ngrams: int = 0
    index_bytes: int = 0
    too_frequent: dict[str, int] = field(default_factory=dict)


class TaskDecontamination(WholeDatasetStage):
    """Remove evaluation-set n-grams from a corpus, as NeMo Curator 0.x does (a barrier).

    Two passes over the corpus. The first counts how often each task n-gram occurs; an
    n-gram found more than ``max_matches`` times is considered too common to be a leak
    and is left alone. The second cuts every remaining match out of its document:
    ``remove_char_each_side`` characters are removed on each side of the match, widened
    to the nearest sentence end (``.``, ``!`` or ``?``); the pieces between matches
    become documents of their own (other columns copied) if longer than
    ``min_document_length`` characters. A document left with no piece, or cut into more
    than ``max_splits`` pieces, is dropped. Documents without a match are untouched.

    Words are normalised (lowercase, punctuation removed, whitespace-split; see
    :mod:`~curator_dask.stages.decontamination.index`). Task n-grams are built from
    every text of every task (each prompt, each answer) as NeMo Curator builds them: all
    ``max_ngram_size``-grams, or the whole text if it has at least ``min_ngram_size``
    but fewer than ``max_ngram_size`` words.

    The index is built once on the client and is one key in the Dask graph of each
    pass, so each worker receives it once, however many partitions it processes (about
    30 MB per million task n-grams; :attr:`last_run` says how large it was).

    Counts, per task: documents dropped, as the drop reasons
    ``"<name>.<task>.too_many_splits"`` and ``"<name>.<task>.no_piece_left"`` (the task of
    the document's first match); counters ``"<name>.<task>.documents"`` (documents
    holding the task's n-grams) and ``"<name>.<task>.ngrams"`` (matches); and
    ``"<name>.split_documents"`` / ``"<name>.pieces"`` for documents kept as pieces, so
    documents out = documents in - dropped - split documents + pieces. Pieces keep
    their document's other columns, its id included: run ``AddId`` afterwards where
    ids must stay unique.

    Parameters
    ----------
    tasks : EvalTask, path, mapping, or a list of these
        The evaluation sets (see :class:`~curator_dask.stages.decontamination.EvalTask`;
        in YAML, mappings with ``path``, ``fields`` and ``name``).
    text_field : str, default "text"
    max_ngram_size : int, default 13
    max_matches : int or None, default 10
        ``None`` removes every match without counting first (one pass).
    min_document_length : int, default 200
        Characters a piece needs to be kept.
    remove_char_each_side : int, default 200
    max_splits : int, default 10
    min_ngram_size : int, default 8
        Task texts with fewer words give no n-gram.
    name : str, default "task_decontamination"

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> evals = os.path.join(tempfile.mkdtemp(), "quiz.jsonl")
    >>> with open(evals, "w") as f:
    ...     _ = f.write('{"question": "Which river flows through the old town of '
    ...                 'Heidelberg in Germany?", "answer": "The Neckar"}\\n')
    >>> leak = "Which river flows through the old town of Heidelberg in Germany? Neckar."
    >>> filler = "Plain sentences about other things go here. " * 8
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"text": [filler + "Quiz: " + leak + " " + filler, "Nothing to see."]}))
    >>> stage = TaskDecontamination(
    ...     {"path": evals, "fields": ["question", "answer"]}, remove_char_each_side=20,
    ...     min_document_length=100)
    >>> out = stage(ds)
    >>> texts = out.df.compute()["text"].tolist()
    >>> [t.count("Plain") for t in texts], any("Heidelberg" in t for t in texts)
    ([7, 7, 0], False)
    >>> out.counters()  # doctest: +NORMALIZE_WHITESPACE
    {'task_decontamination.pieces': 2, 'task_decontamination.quiz.documents': 1,
     'task_decontamination.quiz.ngrams': 1, 'task_decontamination.split_documents': 1}
    """

    working_set = "decontamination"  # memory per input byte: see io/planner.py

    def __init__(self, tasks: EvalTask | str | os.PathLike | Mapping
                 | Sequence[EvalTask | str | os.PathLike | Mapping],
                 text_field: str = "text", max_ngram_size: int = 13,
                 max_matches: int | None = 10, min_document_length: int = 200,
                 remove_char_each_side: int = 200, max_splits: int = 10,
                 min_ngram_size: int = 8, name: str = "task_decontamination"):
        self.tasks: tuple[EvalTask, ...] = as_tasks(tasks)
        for task in self.tasks:  # a wrong path fails here, not after the stages before it
            task_files(task)
        for number, value in (("max_ngram_size", max_ngram_size),
                              ("min_document_length", min_document_length),
                              ("remove_char_each_side", remove_char_each_side),
                              ("max_splits", max_splits), ("min_ngram_size", min_ngram_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgumentError(
                    f"{number} must be a non-negative integer, got {value!r}")
        if max_matches is not None and (not isinstance(max_matches, int) or max_matches < 1):
            raise InvalidArgumentError(f"max_matches must be a positive integer or None, got "
                                       f"{max_matches!r}")
        self.text_field = text_field
        self.max_ngram_size = max_ngram_size
        self.max_matches = max_matches
        self.min_document_length = min_document_length
        self.remove_char_each_side = remove_char_each_side
        self.max_splits = max_splits
        self.min_ngram_size = min_ngram_size
        self.name = name
        self._index: TaskNgramIndex | None = None
        self.last_run: DecontaminationStats | None = None

    @property
    def index(self) -> TaskNgramIndex:
        """The task n-gram index, built from the task files on first use."""
        if self._index is None:
            self._index = build_index(self.tasks, self.max_ngram_size, self.min_ngram_size)
        return self._index

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """Count task n-grams over the corpus (unless ``max_matches`` is None), then cut
        the remaining matches out of every partition."""
        require_columns(f"stage {self.name!r}", ds.df.columns, [self.text_field],
                        fix="Pass text_field= to name the right one.")
        index = self.index
        stats = DecontaminationStats(ngrams=len(index), index_bytes=index.nbytes)
        if self.max_matches is not None and len(index):
            shipped = dask.delayed(index, pure=True)
            parts = [dask.delayed(count_partition)(part, shipped, self.text_field)
                     for part in ds.df.to_delayed()]
            counts = np.zeros(len(index), np.int64)
            for entries, found in dask.compute(*parts):
                np.add.at(counts, entries, found)
            common = counts > self.max_matches
            stats.too_frequent = {index.tasks[t]: int(n) for t, n in
                                  enumerate(np.bincount(index.task_of[common],
                                                        minlength=len(index.tasks))) if n}
            if common.any():
                logger.info("%s: %d task n-gram(s) occur more than %d times and are kept",
                            self.name, int(common.sum()), self.max_matches)
                index = index.with_enabled(~common)
        self.last_run = stats
        options = {"text_field": self.text_field, "margin": self.remove_char_each_side,
                   "min_length": self.min_document_length, "max_splits": self.max_splits,
                   "stage_name": self.name}
        return ds.map_partitions(decontaminate_partition, dask.delayed(index, pure=True),
                                 meta=ds.df._meta, **options)


def _pandas_text(df, text_field: str, stage: str):
    if is_cudf(df):
        raise ArgumentTypeError(f"stage {stage!r} works on pandas partitions; move the dataset to "
                                "pandas first with ds.to_backend('pandas')")
    return arrow_text(df[text_field])


def count_partition(df, index: TaskNgramIndex, text_field: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Occurrences of task n-grams in one partition: (entries, counts)."""
    words = words_of(_pandas_text(df, text_field, "task_decontamination"))
    _, _, _, entries = index.find(words)
    return np.unique(entries, return_counts=True)


def decontaminate_partition(df, index: TaskNgramIndex, *, text_field: str, margin: int,
                            min_length: int, max_splits: int, stage_name: str):
    """Cut the task n-grams out of one partition (see :class:`TaskDecontamination`).

    Executors hand a barrier partitions without drop counts; counts a partition carries
    (interactive use) are kept and this stage's added to them.
    """
    name = stage_name
    arr = _pandas_text(df, text_field, name)
    words = words_of(arr)
    match_doc, match_pos, match_len, match_entry = index.find(words)
    if not len(match_doc):
        return df
    docs, first = np.unique(match_doc, return_index=True)
    match_start = words.starts[match_pos]
    match_end = words.ends[match_pos + match_len - 1]
    pieces, piece_start, piece_end = _kernels.cut(
        words.data, words.text_offsets, docs, match_doc, match_start, match_end, margin,
        min_length, max_splits)

    # Counts per task: documents holding a task's n-grams and matches, by task.
    task = index.task_of[match_entry].astype(np.int64)
    per_doc_task = np.unique(match_doc * len(index.tasks) + task)
    doc_counts = np.bincount(per_doc_task % len(index.tasks), minlength=len(index.tasks))
    match_counts = np.bincount(task, minlength=len(index.tasks))
    first_task = task[first]
    too_many = pieces > max_splits
    nothing_left = pieces == 0
    kept = ~(too_many | nothing_left)

    rows = np.ones(len(df), np.int64)
    rows[docs] = np.where(kept, pieces, 0)
    out = df.iloc[np.repeat(np.arange(len(df)), rows)]
    piece_doc = np.repeat(np.arange(len(docs)), pieces)
    keep_piece = kept[piece_doc]
    if keep_piece.any():
        texts = string_array(*text_kernels.gather_segments(
            words.data, piece_start[keep_piece], piece_end[keep_piece])).to_pylist()
        # Output rows of the kept pieces: each contaminated document's rows start where
        # its first piece goes.
        starts = np.cumsum(rows) - rows
        positions = starts[docs[piece_doc[keep_piece]]] + _rank_within(piece_doc[keep_piece])
        column = out[text_field].copy()
        column.iloc[positions] = texts
        out = out.assign(**{text_field: column}).reset_index(drop=True)
    for t, task_name in enumerate(index.tasks):
        record_counter(out, f"{name}.{task_name}.documents", int(doc_counts[t]))
        record_counter(out, f"{name}.{task_name}.ngrams", int(match_counts[t]))
        record_dropped(out, f"{name}.{task_name}.too_many_splits",
                       int((too_many & (first_task == t)).sum()))
        record_dropped(out, f"{name}.{task_name}.no_piece_left",
                       int((nothing_left & (first_task == t)).sum()))
    record_counter(out, f"{name}.split_documents", int(kept.sum()))
    record_counter(out, f"{name}.pieces", int(pieces[kept].sum()))
    return out


def _rank_within(groups: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal values of a sorted array."""
    if not len(groups):
        return groups
    run_start = np.r_[0, np.flatnonzero(np.diff(groups)) + 1]
    return np.arange(len(groups)) - np.repeat(run_start, np.diff(np.r_[run_start, len(groups)]))
