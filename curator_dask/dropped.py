"""Counts of dropped documents, carried with each partition.

Nothing is lost silently: whatever removes documents (a reader skipping a bad line, a
filter) records how many and why on the partition it returns, in
``df.attrs["curator_dropped"]`` (reason -> count). The stage runtime carries the counts
from a stage's input to its output, so the partition that reaches a writer or
``DocumentDataset.dropped_counts()`` holds the counts of everything upstream of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["DROPPED_ATTR", "record_dropped", "get_dropped", "strip_dropped", "add_dropped",
           "sum_dropped"]

DROPPED_ATTR = "curator_dropped"


def get_dropped(df) -> dict[str, int]:
    """The drop counts recorded on a partition (empty if none)."""
    attrs = getattr(df, "attrs", None)
    if not attrs:
        return {}
    return dict(attrs.get(DROPPED_ATTR, {}))


def record_dropped(df, reason: str, count: int):
    """Add ``count`` drops for ``reason`` to the partition's counts; returns ``df``."""
    if count:
        counts = get_dropped(df)
        counts[reason] = counts.get(reason, 0) + int(count)
        _set(df, counts)
    return df


def strip_dropped(df):
    """A shallow copy of ``df`` without drop counts, and the counts it had.

    The stage runtime hands stages a partition without counts, so whatever a stage
    records is its own; it then adds the upstream counts back with :func:`add_dropped`.
    """
    before = get_dropped(df)
    if not before:
        return df, before
    bare = df.copy(deep=False)
    bare.attrs = {k: v for k, v in df.attrs.items() if k != DROPPED_ATTR}
    return bare, before


def add_dropped(df, counts: Mapping[str, int]):
    """Add ``counts`` to the partition's counts; returns ``df``."""
    if counts:
        merged = Counter(get_dropped(df))
        merged.update(counts)
        _set(df, dict(merged))
    return df


def sum_dropped(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum per-partition counts into one mapping, sorted by reason."""
    total: Counter = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted((k, v) for k, v in total.items() if v))


def _set(df, counts: dict[str, int]) -> None:
    try:
        df.attrs = {**df.attrs, DROPPED_ATTR: counts}
    except AttributeError:  # a backend without attrs: counts cannot travel
        pass
