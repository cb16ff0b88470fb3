"""Connect to a Dask cluster, or start a local one whose workers advertise resources.

Every worker curator-dask starts advertises what it offers, so that executors can
restrict each stage's tasks (see :mod:`curator_dask.resources`):

- CPU workers: ``{"CPU": threads_per_worker}``
- GPU workers (dask-cuda, one per GPU): ``{"GPU": 1, "GPU_MEMORY_GB": <device memory>}``

A ``"mixed"`` cluster runs both kinds under one scheduler, so CPU stages (tokenising,
heuristic filters) and GPU stages (classifiers) of one pipeline overlap.

``adaptive={...}`` grows and shrinks the cluster with the work (``cluster.adapt``), also
for a dask-jobqueue or Dask Kubernetes cluster passed as ``cluster=``. Autoscalers ask
the scheduler how many workers it wants (``Scheduler.adaptive_target``), and the
scheduler sees only the partitions a streaming run has in flight, never the backlog the
executor holds back (restricted tasks are never queued at the scheduler). So
:class:`AdaptiveDemand`, a scheduler plugin, adds what streaming runs report they still
have to do, and keeps workers that offer a GPU while a stage that needs one has work
waiting.

``worker_lifetime=...`` recycles workers with :class:`WorkerRecycler`, a scheduler plugin
that retires them one at a time: never the last running worker, and the next only once
the previous one's replacement is up (distributed's own ``lifetime`` retires each worker
on its own random clock, and two that meet at once take the cluster down).

On every cluster it starts or connects to, ``get_client`` registers three worker
plugins: :class:`ShuffleBuffers`, which sizes each worker's P2P shuffle buffers from its
memory limit instead of distributed's fixed defaults, :class:`TrimWhenPaused`, which
hands the allocator's free pages back to the system while a worker is paused for
memory, and :class:`WorkerAllocator`, which has each worker reuse the memory it freed
and keeps it off transparent huge pages, whose zeroing cost more system time than the
work's own.
"""

from curator_dask.cluster.adaptive import (
    ADAPTIVE_KEY,
    ADAPTIVE_OPTIONS,
    DEMAND_KEY,
    AdaptiveDemand,
    RunDemand,
    StageDemand,
    publish_demand,
)
from curator_dask.cluster.allocator import WorkerAllocator
from curator_dask.cluster.client import (
    CLUSTER_TYPES,
    NO_WORKERS_TIMEOUT,
    add_cpu_workers,
    dashboard_link,
    get_client,
    worker_resources,
)
from curator_dask.cluster.memory_trim import TrimWhenPaused
from curator_dask.cluster.recycling import MIN_WORKER_LIFETIME, WorkerRecycler
from curator_dask.cluster.shuffle_buffers import ShuffleBuffers

__all__ = [
    "ADAPTIVE_KEY",
    "ADAPTIVE_OPTIONS",
    "CLUSTER_TYPES",
    "DEMAND_KEY",
    "MIN_WORKER_LIFETIME",
    "NO_WORKERS_TIMEOUT",
    "AdaptiveDemand",
    "RunDemand",
    "ShuffleBuffers",
    "StageDemand",
    "TrimWhenPaused",
    "WorkerAllocator",
    "WorkerRecycler",
    "add_cpu_workers",
    "dashboard_link",
    "get_client",
    "publish_demand",
    "worker_resources",
]
