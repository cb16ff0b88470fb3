"""Connect to a Dask cluster, or start a local one whose workers advertise resources."""

from __future__ import annotations

import logging

from distributed import Client, LocalCluster

__all__ = ["get_client", "dashboard_link"]

logger = logging.getLogger(__name__)


def get_client(
    *,
    scheduler_address: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | float | None = "auto",
    dashboard_address: str | None = "127.0.0.1:8787",
    **cluster_kwargs,
) -> Client:
    """A Dask client: to the cluster at ``scheduler_address``, or to a new LocalCluster.

    The local cluster runs worker processes bound to 127.0.0.1; each worker advertises
    ``{"CPU": threads_per_worker}`` so CPU stages' tasks can be restricted to it.
    Connecting to an existing cluster changes nothing on it.

    Parameters
    ----------
    scheduler_address : str, optional
        ``tcp://host:port`` of a running scheduler.
    n_workers : int, optional
        Worker processes (default: one per core).
    threads_per_worker : int, default 1
    memory_limit : str or float, default "auto"
    dashboard_address : str, default "127.0.0.1:8787"
        Where the dashboard listens; ``None`` turns it off. A port in use falls back to
        a free one.
    """
    if scheduler_address is not None:
        client = Client(scheduler_address)
    else:
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            processes=True,
            host="127.0.0.1",
            memory_limit=memory_limit,
            dashboard_address=dashboard_address,
            resources={"CPU": threads_per_worker},
            **cluster_kwargs,
        )
        client = Client(cluster)
    link = dashboard_link(client)
    if link:
        logger.info("Dask dashboard: %s", link)
    return client


def dashboard_link(client: Client) -> str | None:
    """The dashboard URL of the client's cluster, or None when it has none."""
    try:
        return client.dashboard_link
    except Exception:  # no dashboard (bokeh missing or dashboard_address=None)
        return None
