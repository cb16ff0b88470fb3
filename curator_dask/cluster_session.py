"""A Dask client started and stopped by name: the shape of NeMo Curator 1.x's ``RayClient``.

NeMo Curator 1.x scripts write ``client = RayClient(); client.start(); ...;
client.stop()``. :class:`ClusterSession` is that over :func:`~curator_dask.get_client`:
``start()`` starts a local Dask cluster (or connects to ``scheduler_address``) and makes
it the default client, so ``Pipeline.run()`` runs on it; ``stop()`` closes the client and
the cluster it started. It is also a context manager.

Examples
--------
>>> session = ClusterSession(n_workers=1, dashboard_address=None)
>>> session.client is None
True
"""

from __future__ import annotations

import logging

from curator_dask.cluster import get_client
from curator_dask.compat import nemo_keywords

__all__ = ["ClusterSession"]

logger = logging.getLogger(__name__)


class ClusterSession:
    """A Dask client and the cluster it starts, held between :meth:`start` and :meth:`stop`.

    Parameters
    ----------
    **options
        The keywords of :func:`~curator_dask.get_client` (``n_workers``,
        ``scheduler_address``, ``cluster_type``, ...). NeMo Curator's ``RayClient``
        keywords are accepted: ``num_cpus`` is ``n_workers``; the Ray ports and
        directories have no use here and are ignored with a warning.
    """

    @nemo_keywords()
    def __init__(self, **options):
        self.options = options
        self.client = None

    def start(self):
        """Start the cluster (or connect) and return its ``distributed.Client``; starting a
        started session returns its client."""
        if self.client is None:
            self.client = get_client(**self.options)
        return self.client

    def stop(self) -> None:
        """Close the client, and the cluster if the session started it."""
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "started" if self.client is not None else "stopped"
        return f"<ClusterSession {state} {self.options!r}>"
