"""A dedup's input kept parsed in the cluster's memory, from ``identify`` to ``remove``.

The path a NeMo Curator user writes reads the input twice::

    dups = dedup.identify(ds)      # parses every partition to hash (or sign) its texts
    dups.to_parquet(...)
    clean = dedup.remove(ds, DocumentDataset.read_parquet(...))   # parses them again
    clean.to_parquet(...)

Where the input fits comfortably in the workers' memory (:func:`fits_in_memory`: twice
its size on storage under :data:`IN_MEMORY_FRACTION` of their limits), ``identify``
persists the partitions it parses (their drop counts too:
:meth:`~curator_dask.DocumentDataset.persist`) and ``remove`` takes them instead of
reading the files again, so the input is parsed once, as the workflows parse it. Row
numbers (``_row``, by which exact dedup removes) name the same rows in both, since they
are the same partitions.

The hold belongs to the dedup object and to the dataset ``identify`` was given (its
:attr:`~curator_dask.DocumentDataset.token`): ``remove`` of another dataset, or of this
one after ``ds.df`` was changed in place, reads it as usual. ``remove`` takes the hold,
so the partitions live on only in the graph of its result and are freed with it; the
next ``identify`` replaces it. Persisted partitions are managed by distributed like
any other: past its spill threshold a worker writes them to its local disk.

``hold_input=None`` (the default) holds only where all of these hold: a ``distributed``
client runs the graphs (with dask's local schedulers a persist would compute at once,
inside ``identify``), the dataset was read from files (its size is known) and it fits.
``True`` always holds, ``False`` never (the pipeline stages pass ``False``: there the
executor decides what stays in memory).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from curator_dask.dataset import DocumentDataset
from curator_dask.errors import InvalidArgumentError
from curator_dask.io.planner import worker_memory
from curator_dask.observe import progress

__all__ = ["IN_MEMORY_FRACTION", "InputHold", "fits_in_memory"]

logger = logging.getLogger(__name__)

#: Inputs up to this share of the workers' memory (counted twice: a table and its
#: filtered copy) are kept in memory between a dedup's steps instead of being staged
#: on disk or read again.
IN_MEMORY_FRACTION = 0.25


def fits_in_memory(nbytes: int, fraction: float | None = None) -> bool:
    """Whether ``nbytes`` of input, held as Arrow (counted twice: a table and its
    filtered copy), stays under ``fraction`` (default :data:`IN_MEMORY_FRACTION`) of
    the workers' memory: as many times the smallest worker's limit as there are
    workers (the cluster the planner sees, :func:`~curator_dask.io.planner.worker_memory`),
    or this machine's available memory where no ``distributed`` client runs the graphs
    or no worker has a limit.

    Examples
    --------
    >>> fits_in_memory(0), fits_in_memory(10**18)
    (True, False)
    """
    fraction = IN_MEMORY_FRACTION if fraction is None else fraction
    client = progress.distributed_client()
    cluster = worker_memory(client) if client is not None else None
    if cluster is not None and cluster.limit:
        memory = cluster.workers * cluster.limit
    else:
        import psutil

        memory = psutil.virtual_memory().available
    return 2 * nbytes <= fraction * memory


class InputHold:
    """The partitions one ``identify`` parsed, kept for the ``remove`` that follows it.

    Parameters
    ----------
    policy : bool or None
        ``None``: hold where a cluster runs the graphs and the input, read from files,
        fits (see the module docstring); ``True``: always; ``False``: never.

    Examples
    --------
    Without a cluster nothing is held by default, and ``take`` gives the dataset back:

    >>> import pandas as pd
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b"]}))
    >>> hold = InputHold()
    >>> hold.hold(ds) is ds, hold.take(ds) is ds
    (True, True)

    Held, the persisted partitions stand in for the dataset they were made from, once:

    >>> hold = InputHold(True)
    >>> held = hold.hold(ds)
    >>> held is ds, hold.take(ds) is held, hold.take(ds) is ds
    (False, True, True)
    """

    def __init__(self, policy: bool | None = None):
        if policy not in (None, True, False):
            raise InvalidArgumentError(
                f"hold_input must be True, False or None (decide from the input's size), "
                f"got {policy!r}")
        self.policy = policy
        self._token: str | None = None
        self._held: DocumentDataset | None = None

    def hold(self, ds: DocumentDataset) -> DocumentDataset:
        """``ds`` persisted, and remembered for :meth:`take`, where the policy says so;
        else ``ds`` itself. Replaces whatever was held before."""
        self.release()
        if not self._should_hold(ds):
            return ds
        held = ds.persist()
        self._token, self._held = ds.token, held
        logger.info("keeping the input's %d partitions in the cluster's memory until "
                    "remove() (hold_input=False reads them again instead)", ds.npartitions)
        return held

    @contextlib.contextmanager
    def holding(self, ds: DocumentDataset) -> Iterator[DocumentDataset]:
        """:meth:`hold` for the body of an ``identify``: if the body fails, no
        ``remove`` follows, so the partitions are let go at once."""
        held = self.hold(ds)
        try:
            yield held
        except BaseException:
            self.release()
            raise

    def take(self, ds: DocumentDataset) -> DocumentDataset:
        """The held partitions if they were made from ``ds`` as it is now (released
        here: the caller's graph keeps them from now on), else ``ds``."""
        if self._held is None or ds.token != self._token:
            return ds
        held = self._held
        self.release()
        return held

    def release(self) -> None:
        """Let go of the held partitions (freed once no graph refers to them)."""
        self._token, self._held = None, None

    def _should_hold(self, ds: DocumentDataset) -> bool:
        if self.policy is not None:
            return self.policy
        # With dask's local schedulers a persist would compute at once, inside identify.
        if ds.plan is None or progress.distributed_client() is None:
            return False
        return fits_in_memory(sum(p.nbytes for p in ds.plan))

    def __getstate__(self) -> dict:
        # Persisted partitions belong to this process's client: a copy holds nothing.
        return {"policy": self.policy, "_token": None, "_held": None}

    def __repr__(self) -> str:
        return f"InputHold(policy={self.policy!r}, holding={self._held is not None})"
