"""Line, paragraph and sentence-span deduplication: boilerplate out, documents kept.

Web pages repeat lines and paragraphs (menus, cookie banners, footers) across pages that
are otherwise distinct. :class:`LineDedup` counts every normalised span across the whole
dataset and removes those seen more than ``max_occurrences`` times from the documents
that hold them, keeping the first occurrence (or none). C4 removes repeated
three-sentence spans this way, Dolma repeated paragraphs, datatrove repeated sentence
spans.

How it scales
-------------
1. Where each partition lies, its documents are cut into segments and spans and each
   span is hashed (:mod:`curator_dask.dedup.spans`); only ``(hash, row, position)`` of
   each span, 32 bytes, leaves the task.
2. Those are shuffled on the hash (dask's P2P shuffle on a cluster, spilled through
   disk; plain tasks when it is a few partitions), so every occurrence of a span meets in
   one partition, where they are counted and ordered: no worker holds more than its share
   of the distinct spans.
3. The spans to remove (``(row, position)``) are sent back to the partitions that hold
   them (one shuffle of that list alone), and each partition cuts its documents again
   and joins them without those spans.

The first occurrence is the one in the lowest row (the partition, then the position in
it: the order of the input), then the earliest in its document. A document left with
nothing counted (every span removed, or only blank lines left) is dropped and counted
under ``"<stage name>.emptied"``; the spans removed are counted under the counter
``"<stage name>.removed_<unit>s"`` (segments: lines, paragraphs or sentences).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal, get_args

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.backends import rows_where, to_host
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.ids import ROW_FIELD, first_row, partition_of_rows, row_numbers
from curator_dask.dedup.removal import default_shuffle_method, raise_mismatch, route_to_partitions
from curator_dask.dedup.spans import UNITS, SpanUnit, cut, join_kept, span_hashes, windows
from curator_dask.dropped import record_counter, record_dropped
from curator_dask.errors import CuratorError
from curator_dask.stages.base import WholeDatasetStage
from curator_dask.stages.columns import require_columns
from curator_dask.task_names import task_name

__all__ = ["KEEP", "LineDedup", "LineDedupParameterError", "SpanDedupStats"]

logger = logging.getLogger(__name__)

Keep = Literal["first", "none"]
KEEP = get_args(Keep)

_HIGH, _LOW, _POSITION, _COUNT = "_span_high", "_span_low", "_span_position", "_occurrences"
_PARTITION = "_partition"
#: Segments a span covers when ``span`` is not given: C4's three sentences, else one.
DEFAULT_SPAN = {"line": 1, "paragraph": 1, "sentence": 3}


class LineDedupParameterError(CuratorError, ValueError):
    """A :class:`LineDedup` parameter out of its range or choices."""


@dataclass
class SpanDedupStats:
    """What one run of :class:`LineDedup` found.

    Attributes
    ----------
    reason : str
        The drop reason of documents emptied by the removal.
    spans : int
        Spans counted over the dataset.
    repeated_spans : int
        Distinct spans seen more than ``max_occurrences`` times.
    removed_spans : int
        Occurrences removed (a span of ``span`` segments each).
    cluster_sizes : dict of int to int
        Number of repeated spans seen each number of times (what the curation report
        plots beside the dedup stages' group sizes).
    """

    reason: str
    spans: int = 0
    repeated_spans: int = 0
    removed_spans: int = 0
    cluster_sizes: dict[int, int] = field(default_factory=dict)


# -- partition functions ----------------------------------------------------------------------

def _counted(texts, unit: str, lowercase: bool, min_chars: int, hashing: bool = True):
    """The segments of a partition, the positions of those long enough to count, and
    (when ``hashing``) their hashes."""
    parts = cut(texts, unit)
    hashes, chars = span_hashes(parts.segments, lowercase=lowercase, hashing=hashing)
    counted = np.flatnonzero(chars >= min_chars)
    return parts, counted, hashes[counted] if hashing else None


def _span_keys(df, text_field: str, unit: str, size: int, lowercase: bool, min_chars: int,
               partition_info=None) -> pd.DataFrame:
    """``(hash, row, position)`` of every span of one partition."""
    number = partition_info["number"] if partition_info is not None else 0
    rows = row_numbers(len(df), number)
    parts, counted, hashes = _counted(to_host(df[text_field]), unit, lowercase, min_chars)
    first, span = windows(parts.doc[counted], hashes, size)
    return pd.DataFrame({_HIGH: span[:, 0], _LOW: span[:, 1],
                         ROW_FIELD: rows[parts.doc[counted[first]]] if len(first)
                         else np.empty(0, np.int64),
                         _POSITION: first})


def _to_remove(df: pd.DataFrame, max_occurrences: int, keep: str) -> pd.DataFrame:
    """The occurrences to remove in one shuffled partition (every occurrence of a span is
    here), with how often their span occurs."""
    df = df.sort_values([_HIGH, _LOW, ROW_FIELD, _POSITION], ignore_index=True)
    same = df.groupby([_HIGH, _LOW], sort=False)[ROW_FIELD]
    occurrences = same.transform("size").to_numpy()
    rank = same.cumcount().to_numpy()
    drop = occurrences > max_occurrences
    if keep == "first":
        drop &= rank > 0
    out = df.loc[drop, [ROW_FIELD, _POSITION]].reset_index(drop=True)
    return out.assign(**{_COUNT: occurrences[drop]})


def _repeated_sizes(df: pd.DataFrame, max_occurrences: int) -> pd.DataFrame:
    """How many distinct spans of one shuffled partition occur each number of times
    (over ``max_occurrences``), and how many spans the partition holds."""
    sizes = df.groupby([_HIGH, _LOW], sort=False).size()
    sizes = sizes[sizes > max_occurrences].value_counts()
    out = pd.DataFrame({_COUNT: sizes.index.to_numpy(dtype=np.int64),
                        "spans": sizes.to_numpy(dtype=np.int64)})
    return pd.concat([out, pd.DataFrame({_COUNT: [0], "spans": [len(df)]})],
                     ignore_index=True)


def _with_partition(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(**{_PARTITION: partition_of_rows(df[ROW_FIELD].to_numpy())})


class _Apply:
    """Takes the listed spans out of one partition's documents."""

    def __init__(self, stage: LineDedup):
        self.text_field, self.unit, self.size = stage.text_field, stage.unit, stage.size
        self.lowercase, self.min_chars = stage.lowercase, stage.min_chars
        self.reason, self.counter = stage.reason, stage.counter

    def __call__(self, df, routed, partition_info=None):
        if len(routed) == 0:
            return df
        number = partition_info["number"] if partition_info is not None else 0
        routed = to_host(routed)
        texts = df[self.text_field]
        parts, counted, _ = _counted(to_host(texts), self.unit, self.lowercase, self.min_chars,
                                     hashing=False)
        first = routed[_POSITION].to_numpy()
        docs = routed[ROW_FIELD].to_numpy() - first_row(number)
        if (first.max() + self.size > len(counted)
                or not np.array_equal(parts.doc[counted[first]], docs)):
            raise_mismatch(f"the spans listed for partition {number} are not where its "
                           "documents have them")
        removed = np.zeros(len(parts.doc), dtype=bool)
        for step in range(self.size):
            removed[counted[first + step]] = True
        n = len(df)
        lost = np.bincount(parts.doc[removed], minlength=n)
        still = np.zeros(len(parts.doc), dtype=bool)
        still[counted] = True
        left = np.bincount(parts.doc[still & ~removed], minlength=n)
        changed = lost > 0
        out = df.assign(**{self.text_field: _replaced(texts, join_kept(parts, ~removed),
                                                      changed)})
        record_counter(out, self.counter, int(removed.sum()))
        emptied = changed & (left == 0)
        if emptied.any():
            out = record_dropped(rows_where(out, ~emptied), self.reason, int(emptied.sum()))
        return out


def _replaced(texts, joined: pa.Array, changed: np.ndarray):
    """``texts`` with the ``changed`` rows taken from ``joined``, the others (nulls
    included) as they were, of the same dtype and on the same backend."""
    host = to_host(texts)
    original = pa.array(host.array) if isinstance(host.dtype, pd.StringDtype) or hasattr(
        host.array, "__arrow_array__") else pa.array(host.to_numpy(), type=pa.large_string())
    if isinstance(original, pa.ChunkedArray):
        original = original.combine_chunks()
    merged = pc.if_else(pa.array(changed), joined, original.cast(pa.large_string()))
    values = pd.Series(pd.arrays.ArrowStringArray(merged), index=host.index,
                       name=host.name).astype(host.dtype)
    if type(texts).__module__.startswith("cudf"):
        import cudf

        return cudf.Series.from_pandas(values)
    return values


# -- the stage --------------------------------------------------------------------------------

class LineDedup(WholeDatasetStage):
    """Remove lines, paragraphs or sentence spans repeated across the dataset (a barrier).

    Parameters
    ----------
    unit : {"line", "paragraph", "sentence"}, default "line"
        What a segment is (see :mod:`curator_dask.dedup.spans`): up to a newline, up to
        a blank line, or up to a sentence end.
    span : int, optional
        Consecutive segments counted as one span: default 3 for sentences (C4), 1 for
        lines and paragraphs. A document with fewer counted segments has no span.
    max_occurrences : int, default 1
        A span seen more than this many times across the dataset is removed.
    keep : {"first", "none"}, default "first"
        Keep its first occurrence (in input order), or remove every occurrence.
    lowercase : bool, default True
        Compare spans case-insensitively (whitespace is always normalised: trimmed, and
        runs of it read as one space).
    min_chars : int, default 1
        Segments shorter than this (after normalising) are never counted or removed:
        blank lines, and with a higher value short lines such as "}" or "Home".
    text_field : str, default "text"
    hash_partitions : int, optional
        Partitions of the span shuffle; the dataset's count by default.
    name : str, default "line_dedup"

    Examples
    --------
    >>> from curator_dask import DocumentDataset
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": [
    ...     "Menu\\nFirst story.\\nCookies!", "Menu\\nSecond story.\\nCookies!", "Menu\\n"]}),
    ...     npartitions=2)
    >>> stage = LineDedup()
    >>> out = stage(ds)
    >>> out.df.compute()["text"].tolist()
    ['Menu\\nFirst story.\\nCookies!', 'Second story.\\n']
    >>> out.dropped_counts(), out.counters()
    ({'line_dedup.emptied': 1}, {'line_dedup.removed_lines': 3})
    >>> stage.last_run.cluster_sizes
    {2: 1, 3: 1}
    """

    def __init__(self, unit: SpanUnit = "line", span: int | None = None,
                 max_occurrences: int = 1, keep: Keep = "first", lowercase: bool = True,
                 min_chars: int = 1, text_field: str = "text", hash_partitions: int | None = None,
                 name: str = "line_dedup"):
        if unit not in UNITS:
            raise LineDedupParameterError(f"unit must be one of {UNITS}, got {unit!r}")
        if keep not in KEEP:
            raise LineDedupParameterError(f"keep must be one of {KEEP}, got {keep!r}")
        for what, value, least in (("span", span, 1), ("max_occurrences", max_occurrences, 1),
                                   ("min_chars", min_chars, 1),
                                   ("hash_partitions", hash_partitions, 1)):
            if value is None and what in ("span", "hash_partitions"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise LineDedupParameterError(
                    f"{what} must be an integer of {least} or more, got {value!r}")
        self.unit = unit
        self.span = span
        self.max_occurrences = max_occurrences
        self.keep = keep
        self.lowercase = lowercase
        self.min_chars = min_chars
        self.text_field = text_field
        self.hash_partitions = hash_partitions
        self.name = name
        self.last_run: SpanDedupStats | None = None

    @property
    def size(self) -> int:
        """Segments in a span."""
        return self.span or DEFAULT_SPAN[self.unit]

    @property
    def reason(self) -> str:
        """The drop reason of a document the removal leaves empty."""
        return f"{self.name}.emptied"

    @property
    def counter(self) -> str:
        """The counter of segments removed."""
        return f"{self.name}.removed_{self.unit}s"

    @property
    def input_columns(self) -> list[str]:
        return [self.text_field]

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """Count every span, then remove the repeated ones (lazy, but for the count and
        the list of spans to remove, which are computed)."""
        require_columns(self.name, ds.df.columns, [self.text_field],
                        fix="Pass text_field= naming the text column.")
        meta = _span_keys(pd.DataFrame({self.text_field: pd.Series([], dtype=str)}),
                          self.text_field, self.unit, self.size, self.lowercase, self.min_chars)
        keys = ds.df.map_partitions(_span_keys, self.text_field, self.unit, self.size,
                                    self.lowercase, self.min_chars, meta=meta,
                                    align_dataframes=False, enforce_metadata=False,
                                    token=task_name("hash", scope=self.name))
        buckets = self.hash_partitions or ds.npartitions
        shuffled = keys.shuffle(on=_HIGH, ignore_index=True, npartitions=buckets,
                                shuffle_method=default_shuffle_method(keys.npartitions * buckets))
        counting = task_name("count", scope=self.name)
        listed = shuffled.map_partitions(_to_remove, self.max_occurrences, self.keep,
                                         meta=_to_remove(meta, 1, "first"), token=counting)
        sizes = shuffled.map_partitions(_repeated_sizes, self.max_occurrences,
                                        meta=_repeated_sizes(meta, 1), token=counting)
        listed, sizes = dask.persist(listed, sizes)
        self.last_run = self._stats(sizes.compute(), len(listed))
        logger.info("%s: %d spans, %d repeated more than %d times, %d occurrences to remove",
                    self.name, self.last_run.spans, self.last_run.repeated_spans,
                    self.max_occurrences, self.last_run.removed_spans)
        removing = task_name("remove", scope=self.name)
        tagged = listed.map_partitions(_with_partition,
                                       meta=_with_partition(listed._meta), token=removing)
        routed = route_to_partitions(tagged, _PARTITION, ds.npartitions)
        return ds.map_partitions(_Apply(self), routed, meta=ds.df._meta, token=removing)

    def _stats(self, sizes: pd.DataFrame, removed: int) -> SpanDedupStats:
        repeated = sizes[sizes[_COUNT] > 0].groupby(_COUNT)["spans"].sum()
        return SpanDedupStats(reason=self.reason,
                              spans=int(sizes.loc[sizes[_COUNT] == 0, "spans"].sum()),
                              repeated_spans=int(repeated.sum()), removed_spans=removed,
                              cluster_sizes={int(k): int(v) for k, v in repeated.items()})

    def __repr__(self) -> str:
        return (f"<LineDedup {self.name!r} (whole dataset, unit={self.unit!r}, "
                f"span={self.size}, max_occurrences={self.max_occurrences}, "
                f"keep={self.keep!r})>")
