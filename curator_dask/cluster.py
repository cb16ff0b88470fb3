"""Connect to a Dask cluster, or start a local one whose workers advertise resources.

Every worker curator-dask starts advertises what it offers, so that executors can
restrict each stage's tasks (see :mod:`curator_dask.resources`):

- CPU workers: ``{"CPU": threads_per_worker}``
- GPU workers (dask-cuda, one per GPU): ``{"GPU": 1, "GPU_MEMORY_GB": <device memory>}``

A ``"mixed"`` cluster runs both kinds under one scheduler, so CPU stages (tokenising,
heuristic filters) and GPU stages (classifiers) of one pipeline overlap.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import dask
from dask.utils import parse_timedelta
from distributed import Client, LocalCluster, Nanny

__all__ = ["get_client", "dashboard_link", "worker_resources", "CLUSTER_TYPES"]

logger = logging.getLogger(__name__)

CLUSTER_TYPES = ("cpu", "gpu", "mixed")
NO_WORKERS_TIMEOUT = "5 minutes"
RECYCLING_ALLOWED_FAILURES = 20


def get_client(
    *,
    cluster_type: str = "cpu",
    scheduler_address: str | None = None,
    scheduler_file: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | float | None = "auto",
    n_gpu_workers: int | None = None,
    worker_lifetime: str | float | None = None,
    worker_lifetime_stagger: str | float | None = None,
    worker_lifetime_restart: bool = True,
    dashboard_address: str | None = "127.0.0.1:8787",
    protocol: str | None = None,
    rmm_pool_size: str | int | None = None,
    enable_cudf_spill: bool = False,
    no_workers_timeout: str | float | None = NO_WORKERS_TIMEOUT,
    **cluster_kwargs,
) -> Client:
    """A Dask client: to an existing cluster, or to a new local one.

    With ``scheduler_address`` or ``scheduler_file`` the client connects to a running
    cluster and changes nothing on it (its workers must advertise ``CPU``/``GPU``
    resources themselves, e.g. ``dask worker ... --resources CPU=4``). Otherwise it
    starts a local cluster of worker processes bound to 127.0.0.1.

    Parameters
    ----------
    cluster_type : {"cpu", "gpu", "mixed"}, default "cpu"
        ``"cpu"``: a LocalCluster whose workers advertise ``CPU=threads_per_worker``.
        ``"gpu"``: a dask-cuda LocalCUDACluster, one worker per GPU, advertising
        ``GPU=1`` and ``GPU_MEMORY_GB``. ``"mixed"``: both under one scheduler
        (``n_gpu_workers`` GPU workers plus ``n_workers`` CPU workers). GPU clusters
        need ``pip install 'curator-dask[gpu]'`` on a machine with NVIDIA GPUs.
    scheduler_address : str, optional
        ``tcp://host:port`` of a running scheduler.
    scheduler_file : str, optional
        A scheduler file written by ``dask scheduler --scheduler-file``.
    n_workers : int, optional
        CPU worker processes (default: one per core for ``"cpu"``, one for ``"mixed"``).
    threads_per_worker : int, default 1
        Threads of each worker; a CPU worker advertises as many ``CPU`` slots.
    memory_limit : str or float, default "auto"
        Host memory limit of each worker.
    n_gpu_workers : int, optional
        GPU workers (default: every visible GPU).
    worker_lifetime : str or float, optional
        Recycle each worker after this long (``"1 hour"``): it finishes its running
        tasks, hands its data to other workers and is restarted by its nanny. Use it for
        stages that leak memory. Lifetimes are staggered by ``worker_lifetime_stagger``
        (default: a tenth of the lifetime) so workers do not all leave at once.
    worker_lifetime_restart : bool, default True
        Start a fresh worker when one reaches its lifetime.
    dashboard_address : str, default "127.0.0.1:8787"
        Where the dashboard listens; ``None`` turns it off. A port in use falls back to
        a free one.
    protocol : str, optional
        ``"tcp"`` (default) or ``"ucx"`` (GPU clusters with UCX installed).
    rmm_pool_size : str or int, optional
        GPU workers: size of the RAPIDS memory pool allocated at start (``"60GB"``).
    enable_cudf_spill : bool, default False
        GPU workers: let cuDF spill device memory to host when it runs short.
    no_workers_timeout : str or float, default "5 minutes"
        On a cluster started here: a task whose resources no worker offers for this long
        fails with ``NoValidWorkerError`` instead of waiting forever (a lost GPU worker).
        ``None`` waits forever.
    **cluster_kwargs
        Passed to the cluster class (LocalCluster or LocalCUDACluster), e.g.
        ``silence_logs``, ``local_directory``.

    Returns
    -------
    distributed.Client
        Its cluster closes with it when the cluster was started here. The dashboard link
        is logged at INFO.
    """
    if cluster_type not in CLUSTER_TYPES:
        raise ValueError(f"cluster_type must be one of {CLUSTER_TYPES}, got {cluster_type!r}")
    if scheduler_address is not None and scheduler_file is not None:
        raise ValueError("give scheduler_address or scheduler_file, not both")
    if scheduler_address is not None or scheduler_file is not None:
        client = Client(scheduler_address, scheduler_file=scheduler_file)
        _log_dashboard(client)
        return client

    worker_kwargs = dict(cluster_kwargs)
    worker_kwargs.update(_lifetime_kwargs(worker_lifetime, worker_lifetime_stagger,
                                          worker_lifetime_restart))
    config = {"distributed.scheduler.no-workers-timeout": no_workers_timeout}
    if worker_lifetime is not None:
        # A worker that reaches its lifetime while its data cannot be moved (no other
        # worker is up to take it) is removed as if it had died, and every task assigned
        # to it counts one failure. Restricted tasks are assigned to workers eagerly
        # (never queued), so with recycling a task can be caught several times through no
        # fault of its own; allow more than distributed's default 3 before KilledWorker.
        config["distributed.scheduler.allowed-failures"] = max(
            RECYCLING_ALLOWED_FAILURES, dask.config.get("distributed.scheduler.allowed-failures"))
    with dask.config.set(config):
        if cluster_type == "cpu":
            cluster = _cpu_cluster(n_workers, threads_per_worker, memory_limit,
                                   dashboard_address, protocol, worker_kwargs)
        else:
            cluster = _gpu_cluster(n_gpu_workers, threads_per_worker, memory_limit,
                                   dashboard_address, protocol, rmm_pool_size,
                                   enable_cudf_spill, worker_kwargs)
            if cluster_type == "mixed":
                add_cpu_workers(cluster, 1 if n_workers is None else n_workers,
                                threads_per_worker=threads_per_worker,
                                memory_limit=memory_limit, **worker_kwargs)
    client = Client(cluster)
    # The client owns the cluster started here: distributed closes a client's cluster on
    # client.close() exactly when the client was created without an address
    # (``_start_arg is None``), as ``Client()`` does with the LocalCluster it makes.
    client._start_arg = None
    _log_dashboard(client)
    return client


def _lifetime_kwargs(lifetime, stagger, restart) -> dict:
    if lifetime is None:
        return {}
    seconds = parse_timedelta(lifetime)
    if stagger is None:
        stagger = seconds / 10
    return {"lifetime": seconds, "lifetime_stagger": parse_timedelta(stagger),
            "lifetime_restart": restart}


def _cpu_cluster(n_workers, threads_per_worker, memory_limit, dashboard_address, protocol,
                 worker_kwargs) -> LocalCluster:
    resources = worker_kwargs.pop("resources", None) or {"CPU": threads_per_worker}
    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        processes=True,
        host="127.0.0.1",
        memory_limit=memory_limit,
        dashboard_address=dashboard_address,
        protocol=protocol,
        resources=resources,
        **worker_kwargs,
    )


def _import_dask_cuda():
    try:
        import dask_cuda
    except ImportError as err:
        raise ImportError(
            "cluster_type='gpu' and 'mixed' need dask-cuda on a machine with NVIDIA GPUs: "
            "pip install 'curator-dask[gpu]' (or use cluster_type='cpu')"
        ) from err
    return dask_cuda


def _gpu_memory_gb(dask_cuda) -> float:
    """The smallest device memory among visible GPUs, in GB (workers share one spec)."""
    from dask_cuda.utils import get_device_total_memory, get_n_gpus

    sizes = [get_device_total_memory(i) for i in range(get_n_gpus())]
    return round(min(sizes) / 1e9, 1) if sizes else 0.0


def _gpu_cluster(n_gpu_workers, threads_per_worker, memory_limit, dashboard_address, protocol,
                 rmm_pool_size, enable_cudf_spill, worker_kwargs):
    dask_cuda = _import_dask_cuda()
    resources = {"GPU": 1, "GPU_MEMORY_GB": _gpu_memory_gb(dask_cuda)}
    kwargs = dict(worker_kwargs)
    kwargs.pop("resources", None)
    if n_gpu_workers is not None:
        kwargs["CUDA_VISIBLE_DEVICES"] = list(range(n_gpu_workers))
    if rmm_pool_size is not None:
        kwargs["rmm_pool_size"] = rmm_pool_size
    if enable_cudf_spill:
        kwargs["enable_cudf_spill"] = True
    if protocol is not None:
        kwargs["protocol"] = protocol
    return dask_cuda.LocalCUDACluster(
        threads_per_worker=threads_per_worker, memory_limit=memory_limit,
        dashboard_address=dashboard_address, host="127.0.0.1", resources=resources, **kwargs,
    )


def add_cpu_workers(cluster, n_workers: int, *, threads_per_worker: int = 1,
                    memory_limit: str | float | None = "auto", **worker_kwargs) -> list[str]:
    """Add ``n_workers`` CPU worker processes (advertising ``CPU``) to a local cluster.

    This is how a ``"mixed"`` cluster is built: a GPU cluster, then CPU nannies under the
    same scheduler. Returns the names of the new workers in ``cluster.worker_spec``.
    """
    resources = worker_kwargs.pop("resources", None) or {"CPU": threads_per_worker}
    options = dict(worker_kwargs)
    options.update(nthreads=threads_per_worker, memory_limit=memory_limit,
                   resources=resources, host="127.0.0.1")
    names = []
    for i in range(n_workers):
        name = f"cpu-{i}"
        while name in cluster.worker_spec:
            name += "+"
        cluster.worker_spec[name] = {"cls": Nanny, "options": dict(options)}
        names.append(name)
    cluster.sync(cluster._correct_state)
    return names


def _log_dashboard(client: Client) -> None:
    link = dashboard_link(client)
    if link:
        logger.info("Dask dashboard: %s", link)


def dashboard_link(client: Client) -> str | None:
    """The dashboard URL of the client's cluster, or None when it has none."""
    try:
        return client.dashboard_link
    except Exception:  # no dashboard (bokeh missing or dashboard_address=None)
        return None


def worker_resources(client: Client) -> dict[str, Mapping[str, float]]:
    """``{worker address: advertised resources}`` of the workers connected now."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {addr: dict(info.get("resources") or {}) for addr, info in workers.items()}
