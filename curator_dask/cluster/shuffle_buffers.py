"""P2P shuffle buffers sized from each worker's memory limit.

distributed gives every worker the same P2P shuffle buffers, from its config, whatever
the worker's memory: up to 1 GiB of shards waiting to be sent
(``distributed.p2p.comm.buffer``) and 100 MiB waiting to be written to disk
(``distributed.p2p.storage.buffer``). A 512 MiB worker that fills them while a task
splits a partition is restarted for memory. :class:`ShuffleBuffers`, a worker plugin
that :func:`~curator_dask.cluster.get_client` registers on every cluster it starts or
connects to, lowers both on each worker to
:func:`~curator_dask.io.planner.shuffle_buffer_bytes` of its own limit: on the workers
there now, on those that join later and on restarted ones (the scheduler hands its
worker plugins to every worker that registers). A worker without a memory limit, or
whose buffers are already smaller, keeps its own.
"""

from __future__ import annotations

import logging

from distributed import WorkerPlugin

from curator_dask._distributed import bound_shuffle_buffers, worker_memory_limit
from curator_dask.io.planner import shuffle_buffer_bytes

__all__ = ["ShuffleBuffers"]

logger = logging.getLogger(__name__)


class ShuffleBuffers(WorkerPlugin):
    """Bound each worker's P2P shuffle buffers by its memory limit (see the module).

    ``get_client`` registers it; on a ``Client`` made otherwise, register it yourself:

    >>> from distributed import Client
    >>> from curator_dask.cluster import ShuffleBuffers
    >>> client = Client(processes=False, n_workers=1, memory_limit="512MiB",
    ...                 dashboard_address=None)
    >>> _ = client.register_plugin(ShuffleBuffers())
    >>> client.close()
    """

    name = "curator-dask-shuffle-buffers"
    #: Registering it again (a second ``get_client`` on one cluster) changes nothing.
    idempotent = True

    def setup(self, worker) -> None:
        limit = shuffle_buffer_bytes(worker_memory_limit(worker))
        if limit is None:
            return
        bounded = bound_shuffle_buffers(worker, limit)
        logger.debug("P2P shuffle buffers of %s: %s bytes", worker.address, bounded)
