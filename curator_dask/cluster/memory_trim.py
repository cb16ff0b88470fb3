"""Memory a worker's allocator keeps, handed back to the system while the worker is paused.

distributed pauses a worker whose process passes ``distributed.worker.memory.pause``
(80% of its limit) and resumes it once the process is back below. After P2P shuffles,
glibc's allocator keeps much of what the shuffle freed in its arenas: on a 512 MiB worker
at 16x the fuzzy benchmark's worker held 48 MB of data and about 385 MB of such memory,
passed the threshold and stayed paused for good, with nothing to spill. ``malloc_trim(0)``
returns the free pages of every arena (42 MB there, and the worker went on).
:class:`TrimWhenPaused`, a worker plugin that :func:`~curator_dask.cluster.get_client`
registers with :class:`~curator_dask.cluster.ShuffleBuffers`, calls it once a second
while the worker is paused, on glibc systems (elsewhere it does nothing).
"""

from __future__ import annotations

import logging

from distributed import WorkerPlugin
from tornado.ioloop import PeriodicCallback

from curator_dask._distributed import worker_paused
from curator_dask.cluster.allocator import libc_function

__all__ = ["TrimWhenPaused"]

logger = logging.getLogger(__name__)


class TrimWhenPaused(WorkerPlugin):
    """While a worker is paused for memory, hand its allocator's free pages back to the
    system once every ``interval`` seconds (see the module); ``trims`` counts the calls.

    >>> from distributed import Client
    >>> from curator_dask.cluster import TrimWhenPaused
    >>> client = Client(processes=False, n_workers=1, dashboard_address=None)
    >>> _ = client.register_plugin(TrimWhenPaused())
    >>> client.close()
    """

    name = "curator-dask-trim-when-paused"
    idempotent = True

    def __init__(self, interval: float = 1.0):
        self.interval = interval
        self.trims = 0

    def setup(self, worker) -> None:
        trim = libc_function("malloc_trim")  # glibc; None elsewhere
        if trim is None:
            return

        def check() -> None:
            if worker_paused(worker):
                trim(0)
                self.trims += 1
                logger.debug("worker %s paused: malloc_trim(0)", worker.address)

        callback = PeriodicCallback(check, self.interval * 1000)
        worker.periodic_callbacks[self.name] = callback
        callback.start()

    def teardown(self, worker) -> None:
        callback = worker.periodic_callbacks.pop(self.name, None)
        if callback is not None:
            callback.stop()
