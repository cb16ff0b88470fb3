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
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
import types
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

import dask
from dask.utils import parse_timedelta
from distributed import Client, LocalCluster, Nanny
from distributed.core import Status
from distributed.diagnostics.plugin import SchedulerPlugin
from tornado.ioloop import PeriodicCallback

from curator_dask._distributed import (
    correct_cluster_state,
    executing_seconds,
    fail_running_task,
    hand_cluster_to_client,
    last_heartbeat,
    name_new_workers,
    own_adaptive_target,
    scheduler_workers,
    set_adaptive_target,
)
from curator_dask._worker_setup import PRELOAD as WORKER_PRELOAD
from curator_dask.compat import nemo_keywords
from curator_dask.errors import WorkerLifetimeError
from curator_dask.bounds import (
    Duration,
    MemorySize,
    NonNegativeInt,
    PositiveInt,
    PositiveNumber,
)

__all__ = [
    "ADAPTIVE_OPTIONS",
    "CLUSTER_TYPES",
    "MIN_WORKER_LIFETIME",
    "AdaptiveDemand",
    "RunDemand",
    "StageDemand",
    "WorkerRecycler",
    "dashboard_link",
    "get_client",
    "worker_resources",
]

logger = logging.getLogger(__name__)

CLUSTER_TYPES = ("cpu", "gpu", "mixed")
#: A worker process of a local cluster restarts in about 3 s (measured here, idle machine);
#: a GPU worker takes longer. A minute without any worker means none is coming back.
NO_WORKERS_TIMEOUT = "1 minute"
#: Shortest ``worker_lifetime`` accepted. A worker process needs about 3 s to start here
#: (importing pandas, pyarrow and distributed, then registering), so below 2 s a worker
#: would spend longer starting than working, which is never what recycling is for; it is
#: also how ``worker_lifetime=1`` (meant as an hour, read as seconds) is caught.
MIN_WORKER_LIFETIME = 2.0
#: What ``get_client(adaptive=...)`` takes: distributed's ``Adaptive`` arguments.
ADAPTIVE_OPTIONS = ("minimum", "maximum", "interval", "wait_count", "target_duration")
#: Scheduler metadata: streaming runs' remaining work, by run token (see AdaptiveDemand).
DEMAND_KEY = "curator-dask-demand"
#: Scheduler metadata: set while an AdaptiveDemand plugin runs on the scheduler.
ADAPTIVE_KEY = "curator-dask-adaptive"
#: A run's demand older than this is ignored (its driver died without clearing it).
DEMAND_STALE_SECONDS = 60.0


@nemo_keywords()
def get_client(
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
    cluster and changes nothing on it (its workers must advertise ``CPU``/``GPU``
    resources themselves, e.g. ``dask worker ... --resources CPU=4``). With ``cluster``
    it connects to that cluster object (dask-jobqueue, Dask Kubernetes, any
    ``distributed`` cluster). Otherwise it starts a local cluster of worker processes
    bound to 127.0.0.1.

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
        raise ValueError(f"cluster_type must be one of {CLUSTER_TYPES}, got {cluster_type!r}")
    if scheduler_address is not None and scheduler_file is not None:
        raise ValueError("give scheduler_address or scheduler_file, not both")
    connect = scheduler_address is not None or scheduler_file is not None
    if cluster is not None and connect:
        raise ValueError("give cluster, or scheduler_address/scheduler_file, not both")
    adaptive = _adaptive_options(adaptive, connect)
    if connect:
        client = Client(scheduler_address, scheduler_file=scheduler_file)
        _log_dashboard(client)
        return client
    if cluster is not None:
        client = Client(cluster)
        if adaptive is not None:
            _adapt(client, cluster, adaptive, grows=_grows(cluster), keep=())
        _log_dashboard(client)
        return client

    recycler = _recycler(worker_lifetime, worker_lifetime_stagger, worker_lifetime_restart,
                         worker_lifetime_max_retiring)
    worker_kwargs = dict(cluster_kwargs)
    # Ctrl-C is the driver's to answer: its worker processes ignore it (_worker_setup).
    preload = worker_kwargs.get("preload") or []
    worker_kwargs["preload"] = [*([preload] if isinstance(preload, str) else preload),
                                WORKER_PRELOAD]
    for option in ("lifetime", "lifetime_stagger", "lifetime_restart"):
        if option in worker_kwargs:
            raise ValueError(
                f"{option}= would recycle each worker on its own clock, and workers that "
                f"reach it together empty the cluster; use worker_{option}= instead")
    config = {"distributed.scheduler.no-workers-timeout": no_workers_timeout}
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
        _adapt(client, cluster, adaptive, grows=grows, keep=keep)
    _log_dashboard(client)
    return client


def _adaptive_options(adaptive: Mapping | None, connect: bool) -> dict | None:
    if adaptive is None:
        return None
    if connect:
        raise ValueError(
            "adaptive needs a cluster object that can start workers: pass cluster=... "
            "(a dask-jobqueue or Kubernetes cluster) or let get_client start a local one; "
            "connected by scheduler_address or scheduler_file, call adapt on the cluster "
            "where it was made")
    if not isinstance(adaptive, Mapping):
        raise TypeError(f"adaptive must be a dict like {{'minimum': 1, 'maximum': 8}}, "
                        f"got {adaptive!r}")
    unknown = sorted(set(adaptive) - set(ADAPTIVE_OPTIONS))
    if unknown:
        raise ValueError(f"adaptive got unknown option(s) {unknown}; it takes "
                         f"{', '.join(ADAPTIVE_OPTIONS)}")
    options = {"minimum": 1, **adaptive}
    if options.get("maximum") is not None and options["maximum"] < options["minimum"]:
        raise ValueError(f"adaptive maximum ({options['maximum']}) is below its minimum "
                         f"({options['minimum']})")
    return options


def _adapt(client: Client, cluster, options: dict, *, grows, keep) -> None:
    """Install :class:`AdaptiveDemand` on the scheduler, then call ``cluster.adapt``."""
    try:
        client.register_plugin(AdaptiveDemand(grows=grows, keep=keep))
    except Exception as err:  # e.g. curator-dask not installed where the scheduler runs
        logger.warning(
            "could not install curator-dask's adaptive plugin on the scheduler (%s): "
            "adapt sees only the partitions in flight, not the backlog of streaming runs, "
            "and may retire GPU workers with work waiting; install curator-dask in the "
            "scheduler's environment to fix this", err)
    parameters = inspect.signature(cluster.adapt).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        dropped = sorted(set(options) - set(parameters))
        if dropped:
            # The Dask Kubernetes operator's adapt takes minimum and maximum only: its
            # controller polls the scheduler's adaptive target itself.
            logger.warning("%s.adapt takes no %s; ignoring them", type(cluster).__name__,
                           ", ".join(dropped))
        options = {k: v for k, v in options.items() if k in parameters}
    cluster.adapt(**options)
    logger.info("adaptive cluster: %s", ", ".join(f"{k}={v}" for k, v in options.items()))


def _grows(cluster) -> frozenset | None:
    """Resources of the workers that adapt starts on ``cluster``, when its spec says.

    A ``distributed`` spec gives them as ``resources``; a dask-jobqueue cluster as the
    ``--resources`` of its worker command (``worker_extra_args``, or its job script when
    they come from its configuration).

    Examples
    --------
    >>> class Jobs:  # what a dask-jobqueue cluster's spec looks like
    ...     new_spec = {"options": {"worker_extra_args": ["--resources", "CPU=4,GPU=1"]}}
    >>> sorted(_grows(Jobs()))
    ['CPU', 'GPU']
    >>> _grows(object()) is None
    True
    """
    spec = getattr(cluster, "new_spec", None)
    options = (spec or {}).get("options", {}) if isinstance(spec, dict) else {}
    resources = options.get("resources")
    if resources:
        return frozenset(resources)
    words = [str(w) for w in options.get("worker_extra_args") or ()]
    if not words and callable(getattr(cluster, "job_script", None)):
        try:
            words = cluster.job_script().split()
        except Exception:  # a cluster that cannot render its script says nothing here
            words = []
    return _resources_in_worker_args(words)


def _resources_in_worker_args(words: list[str]) -> frozenset | None:
    """Resource names from a ``dask worker`` command's ``--resources`` option.

    Examples
    --------
    >>> sorted(_resources_in_worker_args(["--nthreads", "4", "--resources", "CPU=4,GPU=1"]))
    ['CPU', 'GPU']
    >>> sorted(_resources_in_worker_args(["--resources='CPU=2", "GPU_MEMORY_GB=80'"]))
    ['CPU', 'GPU_MEMORY_GB']
    >>> _resources_in_worker_args(["--nthreads", "4"]) is None
    True
    """
    names = set()
    for i, word in enumerate(words):
        if word == "--resources" and i + 1 < len(words):
            values = words[i + 1:]
        elif word.startswith("--resources="):
            values = [word.split("=", 1)[1], *words[i + 1:]]
        else:
            continue
        # "CPU=4,GPU=1", or "CPU=4 GPU=1" quoted in a script: name=value items until the
        # next option.
        for value in values:
            if value.startswith("--"):
                break
            for item in value.strip("'\"").replace(",", " ").split():
                if "=" in item:
                    names.add(item.split("=", 1)[0])
        break
    return frozenset(names) or None


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


@dataclass
class StageDemand:
    """One stage of a streaming run, as the adaptive plugin weighs it: its resources,
    busy seconds per partition (None: not measured yet), partitions still to do and the
    slots the cluster has for it now."""

    name: str
    resources: dict
    seconds: float | None = None
    remaining: int = 0
    slots: int = 0


@dataclass
class RunDemand:
    """What a streaming run still has to do, published to the scheduler every second.

    The scheduler itself sees only the partitions in flight (restricted tasks are never
    queued), not the backlog the executor holds back: this is what :class:`AdaptiveDemand`
    adds to the number of workers it asks for.
    """

    pipeline: str
    updated: float
    stages: list[StageDemand] = field(default_factory=list)

    @classmethod
    def from_metadata(cls, value: Mapping) -> RunDemand:
        return cls(value.get("pipeline", ""), value.get("updated", 0.0),
                   [StageDemand(**stage) for stage in value.get("stages", [])])


def publish_demand(client, token: str, demand: RunDemand | None) -> None:
    """Store a run's demand in the scheduler's metadata under ``DEMAND_KEY``, by run token
    (None: the run is over); never fails the run."""
    try:
        client.set_metadata([DEMAND_KEY, token], asdict(demand) if demand is not None else None)
    except Exception:  # telemetry for autoscaling must never fail a run
        logger.debug("could not publish the run's demand to the scheduler", exc_info=True)


class AdaptiveDemand(SchedulerPlugin):
    """Scheduler plugin: the backlog of streaming runs counts, GPU workers stay while needed.

    A streaming run reports its remaining work to the scheduler's metadata every second
    (under ``DEMAND_KEY``): per stage, its resources, busy seconds per partition, the
    partitions still to do and its slots. This plugin

    - adds that work to :meth:`Scheduler.adaptive_target`, the number every autoscaler
      asks for (distributed's ``Adaptive``, dask-jobqueue, the Dask Kubernetes
      operator): enough workers to do the remaining work of the stages that new workers
      can run (``grows``) within ``target_duration``, but no faster than the stages they
      cannot run (a GPU stage on a mixed cluster) allow, and at most one slot per
      remaining partition;
    - keeps from retirement (``valid_workers_downscaling``) any worker that offers a
      resource other than CPU while a stage asking for it has partitions to do or while
      it has tasks, and workers offering a resource in ``keep`` always.

    Parameters
    ----------
    grows : frozenset of str, optional
        Resources the workers that adapt starts offer; None: any stage counts.
    keep : tuple of str
        Workers offering any of these are never retired (a mixed local cluster's GPU
        workers, which adapt could not start again).
    """

    name = "curator-dask-adaptive"

    def __init__(self, grows: frozenset | None = None, keep: tuple = ()):
        self.grows = frozenset(grows) if grows is not None else None
        self.keep = tuple(keep)
        self.scheduler = None

    def start(self, scheduler) -> None:
        self.scheduler = scheduler
        self._own_target = own_adaptive_target(scheduler)
        set_adaptive_target(scheduler, self.adaptive_target)
        scheduler.set_metadata(keys=[ADAPTIVE_KEY], value=True)

    async def close(self) -> None:
        if self.scheduler is not None and self.scheduler.adaptive_target == self.adaptive_target:
            set_adaptive_target(self.scheduler, self._own_target)

    def runs(self) -> list[RunDemand]:
        """Demands of streaming runs that reported in the last minute."""
        demand = self.scheduler.get_metadata(keys=[DEMAND_KEY], default=None) or {}
        now = time.time()
        return [RunDemand.from_metadata(d) for d in demand.values()
                if d and now - d.get("updated", 0) < DEMAND_STALE_SECONDS]

    def _grows_on(self, resources: Mapping) -> bool:
        return self.grows is None or all(name in self.grows for name in resources)

    def adaptive_target(self, target_duration=None) -> int:
        """The scheduler's own target, or more when streaming runs have work waiting."""
        own = self._own_target(target_duration=target_duration)
        runs = self.runs()
        if not runs:
            return own
        duration = parse_timedelta(target_duration if target_duration is not None else
                                   dask.config.get("distributed.adaptive.target-duration"))
        unknown = parse_timedelta(dask.config.get("distributed.scheduler.unknown-task-duration"))
        workers = list(self.scheduler.workers.values())
        growable = [ws for ws in workers if self.grows is None
                    or any(name in self.grows for name in ws.resources)]
        threads = (sum(ws.nthreads for ws in growable) / len(growable)) if growable else 1
        slots = 0
        for run in runs:
            work, floor, parallel = 0.0, 0.0, 0
            for stage in run.stages:
                remaining = stage.remaining
                if remaining <= 0:
                    continue
                seconds = unknown if stage.seconds is None else stage.seconds
                if self._grows_on(stage.resources or {}):
                    work += remaining * seconds
                    parallel = max(parallel, remaining)
                else:  # adding workers does not make this stage faster
                    floor = max(floor, remaining * seconds / max(stage.slots, 1))
            if work > 0:
                slots += min(math.ceil(work / max(duration, floor)), parallel)
        wanted = len(workers) - len(growable) + math.ceil(slots / max(threads, 1))
        return max(own, wanted)

    def valid_workers_downscaling(self, scheduler, workers: list) -> list:
        needed = set(self.keep)
        for run in self.runs():
            for stage in run.stages:
                if stage.remaining > 0:
                    needed.update(name for name in (stage.resources or {}) if name != "CPU")
        kept = []
        for ws in workers:
            special = set(ws.resources) - {"CPU"}
            if special & needed or (special and ws.processing):
                continue
            kept.append(ws)
        return kept


def _recycler(lifetime, stagger, restart, max_retiring) -> WorkerRecycler | None:
    """The recycler for ``get_client``'s lifetime options, checked; None without one.

    Examples
    --------
    >>> r = _recycler("10s", None, True, 1)
    >>> (r.lifetime, r.stagger, r.restart, r.max_retiring)
    (10.0, 1.0, True, 1)
    >>> _recycler(None, None, True, 1) is None
    True
    """
    if lifetime is None:
        return None
    seconds = (float(lifetime) if isinstance(lifetime, (int, float))
               else parse_timedelta(lifetime, default="seconds"))
    if not seconds >= MIN_WORKER_LIFETIME:
        raise ValueError(
            f"worker_lifetime={lifetime!r} is too short: a worker needs seconds to start, "
            f"so lifetimes under {MIN_WORKER_LIFETIME:g} s recycle workers faster than they "
            "can work. Give a duration like '1 hour' (a plain number counts seconds), "
            "several times as long as your longest task, or None to turn recycling off")
    stagger = seconds / 10 if stagger is None else parse_timedelta(stagger, default="seconds")
    if not 0 <= stagger < seconds:
        raise ValueError(f"worker_lifetime_stagger={stagger!r} must be at least 0 and "
                         f"shorter than worker_lifetime ({seconds:g} s)")
    bad_count = isinstance(max_retiring, bool) or not isinstance(max_retiring, (int, float))
    if bad_count or not (max_retiring >= 1 and float(max_retiring).is_integer()
                         or 0 < max_retiring < 1):
        raise ValueError(
            f"worker_lifetime_max_retiring={max_retiring!r} must be a whole number of "
            "workers (1, 2, ...) or a fraction of them between 0 and 1 (0.25)")
    return WorkerRecycler(seconds, stagger=stagger, restart=bool(restart),
                          max_retiring=int(max_retiring) if max_retiring >= 1 else max_retiring)


class WorkerRecycler(SchedulerPlugin):
    """Scheduler plugin: recycle workers after a lifetime, one at a time, never the last.

    distributed's own ``lifetime`` gives each worker a clock of its own: workers that reach
    it together all retire at once, none is left to take their data, and the cluster is
    empty until the nannies have restarted them. Here the scheduler decides instead. Every
    ``interval`` it looks for workers past their lifetime and recycles one when

    - fewer than ``max_retiring`` workers are recycling (retiring, or waiting for their
      replacement to come up), and
    - at least one other worker is running and not recycling.

    Recycling a worker: it stops taking tasks and its data moves to the other workers
    (``Scheduler.retire_workers``); the tasks it is running finish; then it closes through
    its own graceful path and its nanny starts a replacement (with ``restart``). The next
    worker is recycled only once that replacement is up (or after ``replacement_timeout``).
    When the data cannot move (the other workers are paused), the worker goes back to
    work and is tried again later. A recycled worker's tasks are rescheduled without
    counting as failures.

    A task that runs longer than the lifetime would keep its worker past it; such a task
    fails with :class:`~curator_dask.errors.WorkerLifetimeError`, which names it, its
    stage and the lifetime.

    Parameters
    ----------
    lifetime : float
        Seconds a worker lives, counted from when it joined.
    stagger : float, default 0
        The workers present when the plugin starts get first lifetimes spread evenly over
        ``[lifetime - stagger, lifetime]`` (in the order of their names).
    restart : bool, default True
        Recycled workers are restarted by their nanny; False: they are not, and the last
        running worker is kept.
    max_retiring : int or float, default 1
        Workers recycling at once: a count, or a fraction (below 1) of the workers.
    replacement_timeout : float, optional
        How long the next recycling waits for a replacement (default: the lifetime, at
        least a minute).
    """

    name = "curator-dask-recycler"

    def __init__(self, lifetime: float, *, stagger: float = 0.0, restart: bool = True,
                 max_retiring: int | float = 1, replacement_timeout: float | None = None):
        self.lifetime = float(lifetime)
        self.stagger = float(stagger)
        self.restart = bool(restart)
        self.max_retiring = max_retiring
        self.replacement_timeout = (max(60.0, self.lifetime) if replacement_timeout is None
                                    else float(replacement_timeout))
        self.interval = min(1.0, max(0.05, self.lifetime / 20))
        self.scheduler = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        self.due: dict[str, float] = {}  # worker address -> when its lifetime ends
        self.recycling: dict[str, asyncio.Task] = {}
        self.refused: set = set()  # keys failed for outliving the lifetime
        now = time.time()
        first = sorted(scheduler.workers.values(), key=lambda ws: str(ws.name))
        for i, ws in enumerate(first):
            spread = self.stagger * i / (len(first) - 1) if len(first) > 1 else 0.0
            self.due[ws.address] = now + self.lifetime - spread
        self._callback = PeriodicCallback(self.check, self.interval * 1000)
        self._callback.start()

    async def close(self) -> None:
        callback = getattr(self, "_callback", None)
        if callback is not None:
            callback.stop()
        for task in list(getattr(self, "recycling", {}).values()):
            task.cancel()

    def add_worker(self, scheduler, worker: str) -> None:
        self.due[worker] = time.time() + self.lifetime

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        self.due.pop(worker, None)

    def valid_workers_downscaling(self, scheduler, workers: list) -> list:
        """Downscaling (adapt) may not take the last running worker that is not recycling."""
        candidates = [ws for ws in workers if ws.address not in self.recycling]
        staying = [ws for ws in scheduler.running
                   if ws.address not in self.recycling and ws not in candidates]
        if staying:
            return candidates
        spare = [ws for ws in candidates if ws in scheduler.running]
        return [ws for ws in candidates if ws is not spare[0]] if spare else candidates

    # -- deciding ------------------------------------------------------------------------
    def allowed(self) -> int:
        """Workers that may be recycling at once now."""
        if self.max_retiring >= 1:
            return int(self.max_retiring)
        return max(1, math.floor(self.max_retiring * len(self.scheduler.workers)))

    def check(self) -> None:
        """Refuse tasks that outlive the lifetime; start recycling the workers due."""
        scheduler = self.scheduler
        if scheduler is None or scheduler.status != Status.running:
            return
        self.refuse_long_tasks()
        now = time.time()
        due = sorted((when, address) for address, when in self.due.items()
                     if when <= now and address not in self.recycling)
        for _, address in due:
            available = [ws for ws in scheduler.running if ws.address not in self.recycling]
            if len(self.recycling) >= self.allowed() or len(available) < 2:
                return
            ws = scheduler.workers.get(address)
            if ws is None or ws not in available:
                continue  # paused, or retiring for another reason: not now
            self.recycling[address] = asyncio.ensure_future(self.recycle(address))

    def refuse_long_tasks(self) -> None:
        """Fail every task that has run longer than the lifetime (as its worker reports)."""
        for ws in list(self.scheduler.workers.values()):
            for ts, seconds in executing_seconds(ws).items():
                if seconds <= self.lifetime or ts.key in self.refused:
                    continue
                error = WorkerLifetimeError(ts.key, seconds, self.lifetime, ws.address)
                if fail_running_task(self.scheduler, ts, ws, error,
                                     stimulus_id=f"worker-lifetime-exceeded-{time.time()}"):
                    self.refused.add(ts.key)
                    logger.error("%s", error)

    # -- recycling one worker ----------------------------------------------------------------
    async def recycle(self, address: str) -> None:
        scheduler = self.scheduler
        try:
            name = scheduler.workers[address].name
            logger.info("recycling worker %s (%r) after its lifetime of %.0f s", address,
                        name, self.lifetime)
            retired = await scheduler.retire_workers(
                workers=[address], close_workers=False, remove=False,
                stimulus_id=f"worker-lifetime-{time.time()}")
            if address not in retired:
                # Its data had nowhere to go (the other workers are paused); the
                # scheduler put it back to work. Try again a little later.
                if address in self.due:
                    self.due[address] = time.time() + min(self.lifetime / 4, 10.0)
                return
            await self._tasks_finished(address)
            logger.debug("worker %s has handed its data over and finished its tasks", address)
            if address in scheduler.workers:
                await scheduler.broadcast(
                    msg={"op": "run", "function": _dumps(_close_for_recycling),
                         "args": _dumps((self.restart,)), "wait": False},
                    workers=[address], on_error="ignore")
            deadline = time.monotonic() + self.replacement_timeout
            while address in scheduler.workers and time.monotonic() < deadline:
                await asyncio.sleep(self.interval)
            logger.debug("worker %s has left", address)
            if not self.restart:
                return
            while time.monotonic() < deadline:
                if any(ws.name == name and ws.status == Status.running
                       for ws in scheduler.workers.values()):
                    logger.debug("worker %r is back", name)
                    return
                await asyncio.sleep(self.interval)
            logger.warning("worker %r was recycled and has not come back within %.0f s; "
                           "recycling goes on without it", name, self.replacement_timeout)
        except asyncio.CancelledError:
            raise
        except Exception:  # recycling must never take the scheduler down
            logger.exception("recycling worker %s failed", address)
        finally:
            self.recycling.pop(address, None)

    async def _tasks_finished(self, address: str) -> None:
        """Wait until the worker runs no task but refused ones, as a fresh heartbeat says.

        A retiring worker starts no new task; the scheduler learns what it runs from its
        heartbeats, so one that arrived after the retirement is waited for.
        """
        since = time.time()
        while True:
            ws = self.scheduler.workers.get(address)
            if ws is None:
                return
            if (last_heartbeat(ws) > since
                    and not {ts.key for ts in executing_seconds(ws)} - self.refused):
                return
            await asyncio.sleep(self.interval)


def _dumps(value) -> bytes:
    from distributed.protocol.pickle import dumps

    return dumps(value)


async def _close_for_recycling(restart: bool, dask_worker=None) -> None:
    """Run on a worker: leave the cluster gracefully; its nanny restarts it (``restart``).

    The steps of ``Worker.close_gracefully`` (which distributed's ``lifetime`` takes), for
    a worker that is closing gracefully already (and on which that method would wait
    forever): it retires itself at the scheduler, handing over any data it made since,
    then closes without its nanny, which starts a fresh worker.
    """
    await dask_worker.scheduler.retire_workers(
        workers=[dask_worker.address], close_workers=False, remove=True,
        stimulus_id=f"worker-lifetime-{time.time()}")
    await dask_worker.close(nanny=not restart, reason="worker-lifetime-reached")


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
