"""How the lower layers compute Dask collections: ``dask.compute``, or the compute that
the code running them installed (the run's progress, which counts the tasks).

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

__all__ = ["compute", "computed_by"]

_COMPUTE: contextvars.ContextVar[Callable | None] = contextvars.ContextVar(
    "curator_dask_compute", default=None)


def compute(*collections):
    """``dask.compute(*collections)``, through the compute installed by
    :func:`computed_by` where there is one."""
    installed = _COMPUTE.get()
    if installed is None:
        return dask.compute(*collections)
    return installed(*collections)


@contextlib.contextmanager
def computed_by(function: Callable) -> Iterator[None]:
    """Within the block (and the threads' contexts copied from it), :func:`compute` calls
    ``function(*collections)``."""
    token = _COMPUTE.set(function)
    try:
        yield
    finally:
        _COMPUTE.reset(token)
