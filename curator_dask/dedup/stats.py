"""What one run of a dedup stage found: :class:`DedupStats`, which every dedup barrier
(:mod:`curator_dask.dedup.stages`) keeps in ``last_run`` and the curation report
(:mod:`curator_dask.observe.report`) plots."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from curator_dask.backends import to_host
from curator_dask.task_names import delayed_task

__all__ = ["DedupStats", "group_sizes"]


def group_sizes(df, column: str) -> pd.Series:
    """How many rows of the Dask dataframe ``df`` carry each value of ``column``
    (computed, on the host), counted in tasks called ``<scope>/stats``.

    >>> import dask.dataframe as dd
    >>> frame = dd.from_pandas(pd.DataFrame({"group": [1, 1, 2, 1]}), npartitions=2)
    >>> group_sizes(frame, "group").to_dict()
    {1: 3, 2: 1}
    """
    counted = [delayed_task(_value_counts, "stats")(part, column) for part in df.to_delayed()]
    return delayed_task(_summed, "stats")(counted).compute()


def _value_counts(df, column: str) -> pd.Series:
    return to_host(df[column].value_counts())


def _summed(counts: list[pd.Series]) -> pd.Series:
    counts = [c for c in counts if len(c)]
    if not counts:
        return pd.Series([], dtype="int64")
    return pd.concat(counts).groupby(level=0, sort=True).sum()


@dataclass
class DedupStats:
    """What one run of a dedup stage found.

    Attributes
    ----------
    reason : str
        The drop reason removed documents are counted under.
    duplicate_documents : int
        Documents removed: every member of a group but the one kept.
    duplicate_groups : int
        Groups of two or more documents.
    cluster_sizes : dict of int to int
        Number of groups of each size (documents in the group, the kept one included).
    """

    reason: str
    duplicate_documents: int = 0
    duplicate_groups: int = 0
    cluster_sizes: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_group_sizes(cls, reason: str, sizes) -> DedupStats:
        """From a Series of group sizes (one value per group)."""
        counts = sizes.value_counts().sort_index()
        cluster_sizes = {int(size): int(n) for size, n in counts.items()}
        return cls(reason=reason,
                   duplicate_documents=sum((size - 1) * n for size, n in cluster_sizes.items()),
                   duplicate_groups=sum(cluster_sizes.values()), cluster_sizes=cluster_sizes)
