"""What a Dask task key says about where it comes from.

>>> stage_of_key(("near_dups/lsh-8c1e4d0f5b", 3)), stage_of_key("getitem-8c1e4d0f5b")
('near_dups', 'getitem')
"""

from __future__ import annotations

import dask.utils

__all__ = ["stage_of_key"]


def stage_of_key(key) -> str:
    """The stage (or workflow) a task key belongs to: the first word of its prefix
    (``<stage>/<phase>-<hash>``, as :mod:`curator_dask.task_names` names tasks)."""
    return dask.utils.key_split(key).split("/", 1)[0]
