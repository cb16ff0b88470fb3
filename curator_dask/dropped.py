"""Counts of dropped documents, carried with each partition.

Nothing is lost silently: whatever removes documents (a reader skipping a bad line, a
filter) records how many and why on the partition it returns, in
``df.attrs["curator_dropped"]`` (reason -> count). The stage runtime carries the counts
from a stage's input to its output, so the partition that reaches a writer or
``DocumentDataset.dropped_counts()`` holds the counts of everything upstream of it.

The same mapping carries **counters**: events that remove no document but that a user
wants counted beside the drops (entities redacted by type, documents split). A counter is
recorded with :func:`record_counter` and travels with the drop counts through every
carrier (stages, batches, writers, barriers) under its name marked with
:data:`COUNTER_MARK`; :func:`get_dropped` and :func:`get_counters` read the two kinds
apart, and :func:`split_counts` separates a summed mapping at the end of a run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["DROPPED_ATTR", "COUNTER_MARK", "DISTRIBUTION_MARK", "record_dropped",
           "record_counter", "record_distribution", "distribution_value", "get_dropped",
           "get_counters", "get_counts", "strip_dropped", "add_dropped", "sum_dropped",
           "split_counts", "join_counts"]

DROPPED_ATTR = "curator_dropped"

#: Marks a counter's name in the carried mapping, so it is never read as a drop reason.
COUNTER_MARK = "#"


def get_counts(df) -> dict[str, int]:
    """Everything a partition carries: drop counts and marked counters (empty if none).

    For code that carries counts on (writers, barriers); :func:`get_dropped` and
    :func:`get_counters` read the two kinds apart.
    """
    attrs = getattr(df, "attrs", None)
    if not attrs:
        return {}
    return dict(attrs.get(DROPPED_ATTR, {}))


def get_dropped(df) -> dict[str, int]:
    """The drop counts recorded on a partition (empty if none)."""
    return split_counts(get_counts(df))[0]


def get_counters(df) -> dict[str, int]:
    """The counters recorded on a partition, by name (empty if none)."""
    return split_counts(get_counts(df))[1]


def split_counts(counts: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """``(drop counts, counters)`` of a carried mapping; counter names lose their mark.

    Examples
    --------
    >>> split_counts({"word_count": 3, "#pii.EMAIL_ADDRESS": 5})
    ({'word_count': 3}, {'pii.EMAIL_ADDRESS': 5})
    """
    dropped, counters = {}, {}
    for key, count in counts.items():
        if key.startswith(COUNTER_MARK):
            counters[key[len(COUNTER_MARK):]] = count
        else:
            dropped[key] = count
    return dropped, counters


def join_counts(dropped: Mapping[str, int], counters: Mapping[str, int]) -> dict[str, int]:
    """The carried mapping of drop counts and counters (the inverse of :func:`split_counts`)."""
    return {**dropped, **{COUNTER_MARK + name: count for name, count in counters.items()}}


def record_dropped(df, reason: str, count: int):
    """Add ``count`` drops for ``reason`` to the partition's counts; returns ``df``."""
    if count:
        counts = get_counts(df)
        counts[reason] = counts.get(reason, 0) + int(count)
        _set(df, counts)
    return df


def record_counter(df, name: str, count: int):
    """Add ``count`` to the counter ``name`` on the partition; returns ``df``.

    A counter counts something other than dropped documents (entities redacted, documents
    split); it reaches ``RunResult.counters``, never ``RunResult.dropped``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = record_counter(pd.DataFrame({"text": ["a"]}), "pii.EMAIL_ADDRESS", 2)
    >>> get_counters(df), get_dropped(df)
    ({'pii.EMAIL_ADDRESS': 2}, {})
    """
    return record_dropped(df, COUNTER_MARK + name, count)


#: Separates a distribution counter's field from its value: ``"<owner>.<field>=<value>"``.
DISTRIBUTION_MARK = "="


def record_distribution(df, owner: str, field: str, values):
    """Count each distinct value in ``values`` as the counter ``<owner>.<field>=<value>``.

    How a classifier reports its label distribution: the counters travel like any other
    and the curation report draws one chart per ``(owner, field)``. Returns ``df``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = record_distribution(pd.DataFrame({"text": ["a", "b", "c"]}), "quality",
    ...                          "quality_pred", ["High", "Low", "High"])
    >>> get_counters(df)
    {'quality.quality_pred=High': 2, 'quality.quality_pred=Low': 1}
    """
    uniques, counts = np.unique(np.asarray(values).astype(str), return_counts=True)
    for value, count in zip(uniques.tolist(), counts.tolist()):
        record_counter(df, f"{owner}.{field}{DISTRIBUTION_MARK}{value}", count)
    return df


def distribution_value(name: str, owner: str) -> tuple[str, str] | None:
    """``(field, value)`` of a counter recorded by :func:`record_distribution` for
    ``owner``, or None for any other counter.

    >>> distribution_value("quality.quality_pred=High", "quality")
    ('quality_pred', 'High')
    >>> distribution_value("pii.EMAIL_ADDRESS", "pii") is None
    True
    """
    prefix = owner + "."
    if not name.startswith(prefix) or DISTRIBUTION_MARK not in name[len(prefix):]:
        return None
    field, value = name[len(prefix):].split(DISTRIBUTION_MARK, 1)
    return field, value


def strip_dropped(df):
    """A shallow copy of ``df`` without drop counts, and the counts it had.

    The stage runtime hands stages a partition without counts, so whatever a stage
    records is its own; it then adds the upstream counts back with :func:`add_dropped`.
    """
    before = get_counts(df)
    if not before:
        return df, before
    bare = df.copy(deep=False)
    bare.attrs = {k: v for k, v in df.attrs.items() if k != DROPPED_ATTR}
    return bare, before


def add_dropped(df, counts: Mapping[str, int]):
    """Add ``counts`` to the partition's counts; returns ``df``."""
    if counts:
        merged = Counter(get_counts(df))
        merged.update(counts)
        _set(df, dict(merged))
    return df


def sum_dropped(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum per-partition counts into one mapping, sorted by reason (counters too)."""
    total: Counter = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted((k, v) for k, v in total.items() if v))


def _set(df, counts: dict[str, int]) -> None:
    try:
        df.attrs = {**df.attrs, DROPPED_ATTR: counts}
    except AttributeError:  # a backend without attrs: counts cannot travel
        pass
