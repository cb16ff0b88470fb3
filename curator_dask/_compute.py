"""How the lower layers compute Dask collections: ``dask.compute``, or the compute that
the code running them installed (the run's progress, which counts the tasks); either way,
a task whose worker died on every try leaves as an error that names why
(:func:`curator_dask.faults.faults_explained`: for memory, the limit, the partition size
and the setting that fixes it), not as distributed's bare ``KilledWorker``.

The dataset's writes compute through :func:`compute`. The progress of a run
(:func:`curator_dask.observe.progress.phase`) installs its counting compute with
:func:`computed_by` while a phase runs, so a write inside a dedup phase moves the run's
bar while the dataset layer knows nothing of progress, and never imports the layer that
watches it.

Examples
--------
>>> import dask
>>> seen = []
>>> def counting(*collections):
...     seen.append(len(collections))
...     return dask.compute(*collections)
>>> with computed_by(counting):
...     compute(dask.delayed(1) + 1)
(2,)
>>> seen, compute(dask.delayed(2))
([1], (2,))
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import dask

from curator_dask.faults import faults_explained

__all__ = ["compute", "computed_by"]

_COMPUTE: contextvars.ContextVar[Callable | None] = contextvars.ContextVar(
    "curator_dask_compute", default=None)


def compute(*collections, partition_bytes: int | None = None):
    """``dask.compute(*collections)``, through the compute installed by
    :func:`computed_by` where there is one. ``partition_bytes``: the size of the
    partitions computed, named if a worker dies for memory, unless a run's own guard is
    open around this call (a dedup method, a workflow, an executor): that run names it,
    with the phase it died in."""
    with faults_explained(partition_bytes, fallback=True):
        return (_COMPUTE.get() or dask.compute)(*collections)


@contextlib.contextmanager
def computed_by(function: Callable) -> Iterator[None]:
    """Within the block (and the threads' contexts copied from it), :func:`compute` calls
    ``function(*collections)``."""
    token = _COMPUTE.set(function)
    try:
        yield
    finally:
        _COMPUTE.reset(token)
