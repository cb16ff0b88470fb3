"""``get_client()``: connect to a Dask cluster, or start a local one whose workers
advertise resources (CPU, GPU or mixed), with recycling and adaptive scaling turned on
by its options (:mod:`curator_dask.cluster.recycling`, :mod:`curator_dask.cluster.adaptive`).
"""

from __future__ import annotations

import logging
import types
import warnings
from collections.abc import Mapping
from typing import Literal

import dask
from distributed import Client, LocalCluster, Nanny

from curator_dask._distributed import (
    correct_cluster_state,
    hand_cluster_to_client,
    name_new_workers,
    scheduler_workers,
)
from curator_dask._worker_setup import PRELOAD as WORKER_PRELOAD
from curator_dask.bounds import (
    Duration,
    MemorySize,
    NonNegativeInt,
    PositiveInt,
    PositiveNumber,
)
from curator_dask.cluster.adaptive import adapt_cluster, adaptive_options, resources_adapt_starts
from curator_dask.cluster.allocator import WorkerAllocator
from curator_dask.cluster.memory_trim import TrimWhenPaused
from curator_dask.cluster.recycling import recycler_for
from curator_dask.cluster.shuffle_buffers import ShuffleBuffers
from curator_dask.compat import nemo_keywords
from curator_dask.errors import InvalidArgumentError, MissingDependencyError

__all__ = ["CLUSTER_TYPES", "NO_WORKERS_TIMEOUT", "add_cpu_workers",
           "dashboard_link", "get_client", "worker_resources"]

logger = logging.getLogger(__name__)

CLUSTER_TYPES = ("cpu", "gpu", "mixed")
#: A worker process of a local cluster restarts in about 3 s (measured here, idle machine);
#: a GPU worker takes longer. A minute without any worker means none is coming back.
NO_WORKERS_TIMEOUT = "1 minute"


# One branch per way of getting a client (connect, wrap a cluster, start one) and per
# option of the cluster started, in the order a reader checks them.
@nemo_keywords()
def get_client(  # noqa: PLR0912
    *,
    cluster_type: Literal["cpu", "gpu", "mixed"] = "cpu",
    scheduler_address: str | None = None,
    scheduler_file: str | None = None,
    n_workers: NonNegativeInt | None = None,
    threads_per_worker: PositiveInt = 1,
    memory_limit: MemorySize | None = "auto",
    n_gpu_workers: NonNegativeInt | None = None,
    worker_lifetime: Duration | None = None,
    worker_lifetime_stagger: Duration | None = None,
    worker_lifetime_restart: bool = True,
    worker_lifetime_max_retiring: PositiveNumber = 1,
    dashboard_address: str | None = "127.0.0.1:8787",
    protocol: str | None = None,
    rmm_pool_size: str | int | None = None,
    enable_cudf_spill: bool = False,
    no_workers_timeout: Duration | None = NO_WORKERS_TIMEOUT,
    cluster=None,
    adaptive: Mapping | None = None,
    **cluster_kwargs,
) -> Client:
    """A Dask client: to an existing cluster, or to a new local one.

    With ``scheduler_address`` or ``scheduler_file`` the client connects to a running
    cluster and changes nothing on it but the three worker plugins below (its workers must
    advertise ``CPU``/``GPU`` resources themselves, e.g. ``dask worker ... --resources
    CPU=4``). With ``cluster`` it connects to that cluster object (dask-jobqueue, Dask
    Kubernetes, any ``distributed`` cluster). Otherwise it starts a local cluster of
    worker processes bound to 127.0.0.1. On every path, on the workers there now and on
    those that join later, each worker's P2P shuffle buffers are sized from its memory
    limit (:class:`ShuffleBuffers`), a worker paused for memory trims its allocator
    (:class:`TrimWhenPaused`), and each worker keeps freed memory for reuse, off
    transparent huge pages (:class:`WorkerAllocator`).

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
        Recycle each worker after this long (``"1 hour"``, or seconds): it stops taking
        tasks, hands its data to the other workers, finishes the tasks it is running and
        is restarted by its nanny. Use it for stages that leak memory. Workers are
        recycled one at a time (see ``worker_lifetime_max_retiring``) by
        :class:`WorkerRecycler`: never the last running worker, and the next one only
        once the replacement of the previous one is up, so the cluster never empties.
        At least ``MIN_WORKER_LIFETIME`` (2 s). A task that runs longer than the
        lifetime fails with :class:`~curator_dask.errors.WorkerLifetimeError`.
    worker_lifetime_stagger : str or float, optional
        The first lifetimes of the workers started here are spread evenly over
        ``[worker_lifetime - stagger, worker_lifetime]`` so that their recycling does not
        bunch up (default: a tenth of the lifetime); replacements live the full lifetime.
    worker_lifetime_restart : bool, default True
        Start a fresh worker when one reaches its lifetime. ``False``: recycled workers
        are not replaced, and the last running worker is kept.
    worker_lifetime_max_retiring : int or float, default 1
        How many workers may be recycling at once (retiring, or waiting for their
        replacement): a count, or a fraction of the workers below 1 (``0.25``: a quarter,
        at least one). Never all of them: one running worker always stays.
    dashboard_address : str, default "127.0.0.1:8787"
        Where the dashboard listens; ``None`` turns it off. A port in use falls back to
        a free one.
    protocol : str, optional
        ``"tcp"`` (default) or ``"ucx"`` (GPU clusters with UCX installed).
    rmm_pool_size : str or int, optional
        GPU workers: size of the RAPIDS memory pool allocated at start (``"60GB"``).
    enable_cudf_spill : bool, default False
        GPU workers: let cuDF spill device memory to host when it runs short.
    no_workers_timeout : str or float, default "1 minute"
        On a cluster started here: a task whose resources no worker offers for this long
        fails with ``NoValidWorkerError`` instead of waiting forever (a lost GPU worker),
        and with no worker at all for this long, a run fails with
        :class:`~curator_dask.errors.NoWorkersError` naming the workers that left.
        Keep it above the time a worker takes to restart. ``None`` waits forever.
    cluster : distributed cluster object, optional
        A cluster you made (``SLURMCluster(...)``, ``KubeCluster(...)``): the client
        connects to it and does not close it. Its workers must advertise resources
        themselves (dask-jobqueue: ``worker_extra_args=["--resources", "CPU=4"]``).
    adaptive : dict, optional
        Grow and shrink the cluster with the work: ``{"minimum": 1, "maximum": 16,
        "interval": "2s"}``, also ``"wait_count"`` (checks a worker must be idle before it
        is retired) and ``"target_duration"`` (how long the remaining work should take;
        more workers are asked for when it would take longer). ``minimum`` defaults to
        1 and counts every worker, GPU workers included. Calls the cluster's ``adapt``
        and installs :class:`AdaptiveDemand` on the scheduler, so that the backlog of
        streaming runs counts and GPU workers are kept while a GPU stage has work
        waiting. Workers that adapt starts advertise the same resources as the first
        ones (on a ``"mixed"`` cluster adapt starts CPU workers and keeps the GPU
        workers, one per GPU). Not with ``scheduler_address``/``scheduler_file``: a
        client cannot start workers there.
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
        raise InvalidArgumentError(
            f"cluster_type must be one of {CLUSTER_TYPES}, got {cluster_type!r}")
    if scheduler_address is not None and scheduler_file is not None:
        raise InvalidArgumentError("give scheduler_address or scheduler_file, not both")
    connect = scheduler_address is not None or scheduler_file is not None
    if cluster is not None and connect:
        raise InvalidArgumentError("give cluster, or scheduler_address/scheduler_file, not both")
    adaptive = adaptive_options(adaptive, connect)
    if connect:
        client = Client(scheduler_address, scheduler_file=scheduler_file)
        return _ready(client)
    if cluster is not None:
        client = Client(cluster)
        if adaptive is not None:
            adapt_cluster(client, cluster, adaptive, grows=resources_adapt_starts(cluster), keep=())
        return _ready(client)

    recycler = recycler_for(worker_lifetime, worker_lifetime_stagger, worker_lifetime_restart,
                         worker_lifetime_max_retiring)
    worker_kwargs = dict(cluster_kwargs)
    # Ctrl-C is the driver's to answer: its worker processes ignore it (_worker_setup).
    preload = worker_kwargs.get("preload") or []
    worker_kwargs["preload"] = [*([preload] if isinstance(preload, str) else preload),
                                WORKER_PRELOAD]
    for option in ("lifetime", "lifetime_stagger", "lifetime_restart"):
        if option in worker_kwargs:
            raise InvalidArgumentError(
                f"{option}= would recycle each worker on its own clock, and workers that "
                f"reach it together empty the cluster; use worker_{option}= instead")
    config = {"distributed.scheduler.no-workers-timeout": no_workers_timeout}
    _quiet_routine_notes()
    with dask.config.set(config), warnings.catch_warnings():
        # The dashboard moves to a free port when 8787 is taken (another cluster, a
        # notebook): the link is logged, so distributed's warning about it is noise.
        warnings.filterwarnings("ignore", message="Port .* is already in use",
                                category=UserWarning)
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
                if adaptive is not None:
                    _grow_with_cpu_workers(cluster, threads_per_worker, memory_limit,
                                           worker_kwargs)
    client = Client(cluster)
    # The client owns the cluster started here, as Client() owns the LocalCluster it makes.
    hand_cluster_to_client(client)
    if recycler is not None:
        # The scheduler of a local cluster runs in this process, beside the recycler.
        client.register_plugin(recycler)
    if adaptive is not None:
        if cluster_type == "gpu":
            grows, keep = frozenset({"GPU", "GPU_MEMORY_GB"}), ()
        else:  # cpu, and mixed: adapt starts CPU workers; the GPU ones could not come back
            grows = frozenset({"CPU"})
            keep = ("GPU", "GPU_MEMORY_GB") if cluster_type == "mixed" else ()
        adapt_cluster(client, cluster, adaptive, grows=grows, keep=keep)
    return _ready(client)

def _grow_with_cpu_workers(cluster, threads_per_worker, memory_limit, worker_kwargs) -> None:
    """Make ``cluster.scale``/``adapt`` start CPU workers on a mixed cluster.

    dask-cuda's cluster starts one worker per visible GPU and cannot start more; the CPU
    workers of a mixed cluster are what adapt can grow.
    """
    from distributed import SpecCluster

    cluster.new_spec = {"cls": Nanny, "options": _cpu_worker_options(
        threads_per_worker, memory_limit, dict(worker_kwargs))}
    name_new_workers(cluster, lambda number: f"cpu-adaptive-{number}")
    cluster.new_worker_spec = types.MethodType(SpecCluster.new_worker_spec, cluster)


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
        raise MissingDependencyError(
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
    options = _cpu_worker_options(threads_per_worker, memory_limit, worker_kwargs)
    names = []
    for i in range(n_workers):
        name = f"cpu-{i}"
        while name in cluster.worker_spec:
            name += "+"
        cluster.worker_spec[name] = {"cls": Nanny, "options": dict(options)}
        names.append(name)
    correct_cluster_state(cluster)
    return names


def _cpu_worker_options(threads_per_worker, memory_limit, worker_kwargs: dict) -> dict:
    resources = worker_kwargs.pop("resources", None) or {"CPU": threads_per_worker}
    options = dict(worker_kwargs)
    options.update(nthreads=threads_per_worker, memory_limit=memory_limit,
                   resources=resources, host="127.0.0.1")
    return options


def _ready(client: Client) -> Client:
    """The client, once each worker's P2P shuffle buffers fit its memory, a paused
    worker trims its allocator and each worker reuses the memory it freed (now and on
    the workers that join later), and the dashboard link is logged."""
    client.register_plugin(ShuffleBuffers())
    client.register_plugin(TrimWhenPaused())
    client.register_plugin(WorkerAllocator())
    _log_dashboard(client)
    return client


def _log_dashboard(client: Client) -> None:
    link = dashboard_link(client)
    if link:
        logger.info("Dask dashboard: %s", link)


def dashboard_link(client: Client) -> str | None:
    """The dashboard URL of the client's cluster, or None when it has none."""
    # A local cluster started with dashboard_address=None still runs its HTTP server (for
    # /metrics) and reports it as a "dashboard" service, but serves no dashboard pages.
    spec = getattr(getattr(client, "cluster", None), "scheduler_spec", None) or {}
    if spec.get("options", {}).get("dashboard") is False:
        return None
    try:
        return client.dashboard_link
    except Exception:  # no dashboard (bokeh missing)
        return None


def worker_resources(client: Client) -> dict[str, Mapping[str, float]]:
    """``{worker address: advertised resources}`` of the workers connected now."""
    workers = scheduler_workers(client)
    return {addr: dict(info.get("resources") or {}) for addr, info in workers.items()}


#: distributed's loggers that report routine events at WARNING: the scheduler of a local
#: cluster runs in this process and notes the start and end of every P2P shuffle.
_ROUTINE_LOGGERS = ("distributed.shuffle._scheduler_plugin",)


def _quiet_routine_notes() -> None:
    """A local cluster's run that goes well logs nothing at WARNING: routine notes are
    turned down to errors, unless the user set their level."""
    for name in _ROUTINE_LOGGERS:
        routine = logging.getLogger(name)
        if routine.level == logging.NOTSET:
            routine.setLevel(logging.ERROR)
