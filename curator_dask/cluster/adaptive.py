"""Adaptive clusters: ``get_client(adaptive=...)`` and the :class:`AdaptiveDemand` plugin.

Autoscalers ask the scheduler how many workers it wants (``Scheduler.adaptive_target``),
and the scheduler sees only the partitions a streaming run has in flight, never the
backlog the executor holds back (restricted tasks are never queued at the scheduler). So
:class:`AdaptiveDemand`, a scheduler plugin, adds what streaming runs report they still
have to do (:class:`RunDemand`, published by :func:`publish_demand`), and keeps workers
that offer a GPU while a stage that needs one has work waiting.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import dask
from dask.utils import parse_timedelta
from distributed import Client
from distributed.diagnostics.plugin import SchedulerPlugin

from curator_dask._distributed import own_adaptive_target, set_adaptive_target
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["ADAPTIVE_KEY", "ADAPTIVE_OPTIONS", "DEMAND_KEY", "AdaptiveDemand", "RunDemand",
           "StageDemand", "publish_demand"]

logger = logging.getLogger(__name__)

#: What ``get_client(adaptive=...)`` takes: distributed's ``Adaptive`` arguments.
ADAPTIVE_OPTIONS = ("minimum", "maximum", "interval", "wait_count", "target_duration")
#: Scheduler metadata: streaming runs' remaining work, by run token (see AdaptiveDemand).
DEMAND_KEY = "curator-dask-demand"
#: Scheduler metadata: set while an AdaptiveDemand plugin runs on the scheduler.
ADAPTIVE_KEY = "curator-dask-adaptive"
#: A run's demand older than this is ignored (its driver died without clearing it).
DEMAND_STALE_SECONDS = 60.0


def adaptive_options(adaptive: Mapping | None, connect: bool) -> dict | None:
    if adaptive is None:
        return None
    if connect:
        raise InvalidArgumentError(
            "adaptive needs a cluster object that can start workers: pass cluster=... "
            "(a dask-jobqueue or Kubernetes cluster) or let get_client start a local one; "
            "connected by scheduler_address or scheduler_file, call adapt on the cluster "
            "where it was made")
    if not isinstance(adaptive, Mapping):
        raise ArgumentTypeError(f"adaptive must be a dict like {{'minimum': 1, 'maximum': 8}}, "
                        f"got {adaptive!r}")
    unknown = sorted(set(adaptive) - set(ADAPTIVE_OPTIONS))
    if unknown:
        raise InvalidArgumentError(f"adaptive got unknown option(s) {unknown}; it takes "
                         f"{', '.join(ADAPTIVE_OPTIONS)}")
    options = {"minimum": 1, **adaptive}
    if options.get("maximum") is not None and options["maximum"] < options["minimum"]:
        raise InvalidArgumentError(f"adaptive maximum ({options['maximum']}) is below its minimum "
                         f"({options['minimum']})")
    return options


def adapt_cluster(client: Client, cluster, options: dict, *, grows, keep) -> None:
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


def resources_adapt_starts(cluster) -> frozenset | None:
    """Resources of the workers that adapt starts on ``cluster``, when its spec says.

    A ``distributed`` spec gives them as ``resources``; a dask-jobqueue cluster as the
    ``--resources`` of its worker command (``worker_extra_args``, or its job script when
    they come from its configuration).

    Examples
    --------
    >>> class Jobs:  # what a dask-jobqueue cluster's spec looks like
    ...     new_spec = {"options": {"worker_extra_args": ["--resources", "CPU=4,GPU=1"]}}
    >>> sorted(resources_adapt_starts(Jobs()))
    ['CPU', 'GPU']
    >>> resources_adapt_starts(object()) is None
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
