"""Counting what leaves a partition: dropped documents by reason, and counters.

Nothing is lost silently: whatever removes documents (a reader skipping a bad line, a
filter, a dedup removal) says how many and why with :func:`record_dropped`. The count
goes to the partition being worked on: each hop of a partition's path (reading it,
running a stage on it, a ``DocumentDataset`` step) opens a tally around the work
(:func:`counting`) and adds what was recorded to the partition's envelope
(:class:`~curator_dask.partition.Partition`), which carries it to the writer, the run's
result and ``DocumentDataset.dropped_counts()``. The frame itself carries nothing, so
the counts are the same on pandas and cuDF partitions.

The same tally holds **counters**: events that remove no document but that a user wants
counted beside the drops (entities redacted by type, documents split), recorded with
:func:`record_counter`; they reach ``RunResult.counters``, never ``RunResult.dropped``.
Where the two travel in one mapping (part stats, completion records), a counter's name
is marked with :data:`COUNTER_MARK`; :func:`split_counts` and :func:`join_counts` go
from one form to the other.

Outside a hop (a stage's ``process`` called by hand) there is no partition to count
into, and what is recorded is not kept; run the stage on a
:class:`~curator_dask.partition.Partition` (:meth:`~curator_dask.partition.Partition.apply`)
to see its counts.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"text": ["a", "", "b"]})
>>> with counting() as tally:
...     kept = record_dropped(df[df["text"] != ""], "empty", 1)
>>> len(kept), dict(tally.dropped)
(2, {'empty': 1})
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "COUNTER_MARK",
    "DISTRIBUTION_MARK",
    "Tally",
    "counting",
    "distribution_value",
    "join_counts",
    "record_counter",
    "record_distribution",
    "record_dropped",
    "split_counts",
    "sum_dropped",
]

logger = logging.getLogger(__name__)

#: Marks a counter's name in a mapping that holds drops and counters together, so it is
#: never read as a drop reason.
COUNTER_MARK = "#"
#: Separates a distribution counter's field from its value: ``"<owner>.<field>=<value>"``.
DISTRIBUTION_MARK = "="


@dataclass
class Tally:
    """What one hop recorded: drops by reason, counters by name."""

    dropped: Counter = field(default_factory=Counter)
    counters: Counter = field(default_factory=Counter)


_TALLY: contextvars.ContextVar[Tally | None] = contextvars.ContextVar(
    "curator_dask_tally", default=None)


@contextlib.contextmanager
def counting() -> Iterator[Tally]:
    """Within the block, :func:`record_dropped` and :func:`record_counter` count into
    the returned :class:`Tally` (a block inside another counts into its own)."""
    tally = Tally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def _tally_for(what: str) -> Tally | None:
    tally = _TALLY.get()
    if tally is None:
        logger.debug("%s recorded outside a partition's hop: not kept", what)
    return tally


def record_dropped(df, reason: str, count: int):
    """Count ``count`` documents dropped for ``reason`` on the partition being worked
    on; returns ``df`` (so a stage can ``return record_dropped(df[keep], ...)``)."""
    if count:
        tally = _tally_for(f"{count} drop(s) for {reason!r}")
        if tally is not None:
            tally.dropped[reason] += int(count)
    return df


def record_counter(df, name: str, count: int):
    """Add ``count`` to the counter ``name`` of the partition being worked on; returns
    ``df``.

    A counter counts something other than dropped documents (entities redacted, documents
    split); it reaches ``RunResult.counters``, never ``RunResult.dropped``.

    Examples
    --------
    >>> import pandas as pd
    >>> with counting() as tally:
    ...     _ = record_counter(pd.DataFrame({"text": ["a"]}), "pii.EMAIL_ADDRESS", 2)
    >>> dict(tally.counters), dict(tally.dropped)
    ({'pii.EMAIL_ADDRESS': 2}, {})
    """
    if count:
        tally = _tally_for(f"counter {name!r}")
        if tally is not None:
            tally.counters[name] += int(count)
    return df


def record_distribution(df, owner: str, field: str, values):
    """Count each distinct value in ``values`` as the counter ``<owner>.<field>=<value>``.

    How a classifier reports its label distribution: the counters travel like any other
    and the curation report draws one chart per ``(owner, field)``. Returns ``df``.

    Examples
    --------
    >>> import pandas as pd
    >>> with counting() as tally:
    ...     _ = record_distribution(pd.DataFrame({"text": ["a", "b", "c"]}), "quality",
    ...                             "quality_pred", ["High", "Low", "High"])
    >>> dict(tally.counters)
    {'quality.quality_pred=High': 2, 'quality.quality_pred=Low': 1}
    """
    uniques, counts = np.unique(np.asarray(values).astype(str), return_counts=True)
    for value, count in zip(uniques.tolist(), counts.tolist(), strict=True):
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


def split_counts(counts: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """``(drop counts, counters)`` of a joined mapping; counter names lose their mark.

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
    """Drops and counters in one mapping (the inverse of :func:`split_counts`).

    >>> join_counts({"word_count": 3}, {"pii.EMAIL_ADDRESS": 5})
    {'word_count': 3, '#pii.EMAIL_ADDRESS': 5}
    """
    return {**dropped, **{COUNTER_MARK + name: count for name, count in counters.items()}}


def sum_dropped(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum counts into one mapping, sorted by reason (counters too).

    >>> sum_dropped([{"b": 1, "a": 2}, {"b": 3}])
    {'a': 2, 'b': 4}
    """
    total: Counter = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted((k, v) for k, v in total.items() if v))
