"""StreamingExecutor: every input partition flows through the stages as a chain of futures.

For each input partition the executor submits one task per step of the segment (read,
each stage, write; see :mod:`curator_dask.executors.base`) with ``client.submit``, the
step's resources and its own key prefix, and the parts are written as they complete.
The scheduler never queues tasks restricted to resources (they go to the eligible
workers at once), so a fast reader would outrun a slow model and fill memory: the
executor bounds the flow itself. Follow one partition through :meth:`StreamingExecutor.run_segment`:

1. :class:`Window` admits it to the read step when the read step holds fewer partitions
   than its cap (a step *holds* a partition from the submission of its task until the
   next step takes the output), and submits the read.
2. When the read finishes, the partition waits in the read step's ready queue until the
   next step has room; then the window submits that step's task on the read's future.
   So on, step by step (a stage with ``batch_size = k`` takes ``k`` partitions at once).
3. The write's result (the part's stats and the records of every task of the chain)
   comes back to the client: the window frees the partition's place, the run counts the
   part, and the :class:`CapPlanner` measures each stage from the records.

The :class:`CapPlanner` decides the caps. With ``balance=True`` (the default) they follow
the slowest stage (:mod:`curator_dask.executors.balancing`): every ``balance_interval``
it measures each stage's busy seconds per input partition and re-plans, so that the
bottleneck always has work waiting and faster stages before it run only far enough
ahead to keep it fed. Until every stage has been measured (warm-up), one window of
``max_in_flight`` partitions (default: one per worker) is shared by all steps; with
``balance=False`` that window (default: two per worker) stays for the whole run. The
planner looks at the workers every second, so a worker an adaptive cluster starts gets
work at once and one it retires hands its data over (nothing is lost or written twice:
parts have deterministic names and are written atomically). It also sets priorities:
without a plan later steps first (a worker finishes partitions in flight before it
reads new ones), with one the steps feeding the bottleneck before it, so its inputs are
never stuck behind its own queued tasks on the workers it shares with them.

:class:`RunTelemetry` shows the run while it runs: each stage's cap, holdings, queue
and slots over time (the run's metrics), Prometheus gauges, and the backlog an adaptive
cluster grows for (:class:`~curator_dask.cluster.RunDemand`).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field

from dask.utils import parse_timedelta

from curator_dask._distributed import scheduler_workers
from curator_dask.bounds import PositiveInt
from curator_dask.cluster import RunDemand, StageDemand, publish_demand
from curator_dask.errors import InvalidArgumentError, ResourceUnavailableError
from curator_dask.executors.balancing import (
    StageLoad,
    StageMeter,
    StageTimeline,
    lend_slots,
    plan_caps,
    slots_for,
)
from curator_dask.executors.on_cluster import ClusterExecutor, raise_task_error
from curator_dask.executors.state import RunState
from curator_dask.executors.steps import Segment, Step
from curator_dask.faults import scheduler_lost
from curator_dask.observe.progress import chain_label
from curator_dask.observe.prometheus import clear_stage_gauges, set_stage_gauges
from curator_dask.observe.run_result import TaskRecord

__all__ = ["StreamingExecutor"]

logger = logging.getLogger(__name__)

#: Seconds an executor waits for the first worker of an adaptive cluster with minimum 0.
ADAPTIVE_START_TIMEOUT = 300.0
#: Seconds between timeline samples (and re-plans, when one is due).
SAMPLE_SECONDS = 0.25
#: Seconds between looks at the workers (demand published, gauges set).
REFRESH_SECONDS = 1.0


class StreamingExecutor(ClusterExecutor):
    """Run a pipeline partition by partition, writing each part as soon as it is ready.

    Parameters
    ----------
    max_in_flight : int, optional
        Input partitions allowed between the reader and the writer at once. Without
        balancing it is the window all stages share (default: twice the number of
        workers, following the cluster as it grows and shrinks); with balancing it stays
        the upper bound of every stage's cap and of their total (default: no bound
        beyond the caps and what the workers' memory holds, and one partition per worker
        during warm-up). Either way it bounds cluster memory: roughly that many
        partitions' worth of data, whatever the dataset's size. Without it, workers with
        a memory limit hold what it leaves room for: a task and up to one partition read
        ahead per thread (:func:`~curator_dask.io.planner.in_flight_per_worker`).
    resume : bool, default False
        Skip input partitions whose output part is complete from an earlier run (a
        completion marker is written after each part's atomic rename).
    balance : bool, default True
        Size each stage's cap from measured stage speeds so that the slowest stage always
        has work waiting and faster ones run only far enough ahead to keep it fed (see
        :mod:`curator_dask.executors.balancing`). ``False`` keeps one fixed window.
    balance_interval : float or str, default 10.0
        Seconds (or a Dask time string, ``"10s"``) between re-plans; the executor also
        re-plans when workers join or leave.
    lend : bool, default True
        With balancing, when the bottleneck shares its workers with the reads and writes
        (a CPU-bound stage) and other workers have spare slots (a GPU worker whose stage
        is faster), run the reads and writes there, so the bottleneck has its workers to
        itself (:func:`~curator_dask.executors.balancing.lend_slots`). ``False`` keeps
        every task on the workers its resources name.
    client : distributed.Client, optional
        Default: the current client (``get_client()`` makes one).
    cache_path, progress, force
        See :class:`~curator_dask.executors.base.Executor`.

    Notes
    -----
    A stage with ``batch_size = k > 1`` gets ``k`` consecutive partitions concatenated
    into one ``process()`` call; everything after it (the writer included) sees the
    batch as one partition, and the part is named after the batch's first input
    partition. Batches are formed from consecutive input partitions, so they are the
    same on every run and ``resume`` stays exact. A stage that needs the partition
    index gets the batch's first.

    The run's :class:`~curator_dask.observe.run_result.RunResult` gives, per stage, its
    busy fraction after warm-up, the mean queue in front of it and its cap over time;
    the same values are Prometheus gauges (:mod:`curator_dask.observe.prometheus`).
    """

    name = "streaming"

    def __init__(self, max_in_flight: PositiveInt | None = None, resume: bool = False, *,
                 balance: bool = True, balance_interval: float | str = 10.0,
                 lend: bool = True, client=None, cache_path: str | None = None,
                 progress: bool = True, force: bool = False):
        super().__init__(resume=resume, client=client, cache_path=cache_path,
                         progress=progress, force=force)
        if max_in_flight is not None and (not isinstance(max_in_flight, int) or max_in_flight < 1):
            raise InvalidArgumentError(
                f"max_in_flight must be a positive integer, got {max_in_flight!r}")
        interval = parse_timedelta(balance_interval, default="seconds")
        if interval is None or interval <= 0:
            raise InvalidArgumentError(
                f"balance_interval must be a positive number of seconds (or a "
                f"time string like '10s'), got {balance_interval!r}")
        self.max_in_flight = max_in_flight
        self.balance = bool(balance)
        self.lend = bool(lend)
        self.balance_interval = float(interval)

    def __repr__(self) -> str:
        return (f"StreamingExecutor(max_in_flight={self.max_in_flight}, resume={self.resume}, "
                f"balance={self.balance})")

    def workers(self, client, state: RunState) -> dict[str, dict]:
        """The workers' resources; on an adaptive cluster with none yet, wait for one."""
        from curator_dask.cluster import ADAPTIVE_KEY, worker_resources

        workers = worker_resources(client)
        if workers or not client.get_metadata([ADAPTIVE_KEY], default=False):
            return workers  # no workers and not adaptive: check_placement says what to do
        logger.info("no workers yet: asking the adaptive cluster for some (waiting up to %.0f s)",
                    ADAPTIVE_START_TIMEOUT)
        layout = state.layout
        publish_demand(client, state.token, RunDemand(layout.name, time.time(), [
            StageDemand(layout.name_of(s), s.resources.to_dask(), remaining=1)
            for s in layout.stages if s.resources is not None]))
        try:
            client.wait_for_workers(1, timeout=ADAPTIVE_START_TIMEOUT)
        except TimeoutError:
            raise ResourceUnavailableError(
                f"the adaptive cluster started no worker in {ADAPTIVE_START_TIMEOUT:.0f} s; "
                "check that it can start workers (cluster.scale(1)), or give adaptive a "
                "minimum of at least 1") from None
        return worker_resources(client)

    def cleanup(self, state: RunState) -> None:
        # Adaptive clusters stop counting the run's backlog, dashboards stop showing it
        # (nothing to tell a scheduler that is gone: the call would wait out a timeout).
        if not scheduler_lost(None, state.client):
            publish_demand(state.client, state.token, None)
        clear_stage_gauges(state.layout.name, list(state.timelines))

    def run_segment(self, state: RunState, segment: Segment) -> None:
        """Stream the segment's partitions through its steps within the planned caps."""
        client = state.client
        planner = CapPlanner(segment.steps, segment.unit, balance=self.balance,
                             lend=self.lend, max_in_flight=self.max_in_flight,
                             per_worker=segment.per_worker,
                             interval=self.balance_interval, label=state.layout.name)
        telemetry = RunTelemetry(client, state, segment.steps)
        progress = self.progress_bar(state, len(segment.indices), chain_label(
            state.layout.name, [step.name for step in segment.steps]))
        window = Window(client, state, segment, planner, progress)

        def look_at_workers(now: float) -> bool:
            try:
                info = scheduler_workers(client)
            except Exception:  # the scheduler is busy: keep the last view
                logger.debug("could not refresh the workers", exc_info=True)
                return False
            changed = planner.set_workers(
                {a: (int(w.get("nthreads", 1)), dict(w.get("resources") or {}))
                 for a, w in info.items()})
            telemetry.planned(now, planner)
            return changed

        def plan(now: float) -> None:
            planner.plan(now)
            telemetry.planned(now, planner)
            state.bottleneck = planner.bottleneck_name or state.bottleneck

        try:
            now = time.time()
            look_at_workers(now)
            telemetry.publish(now, window, planner)
            plan(now)
            window.pump()
            next_sample, next_refresh = now, now + REFRESH_SECONDS
            while window.busy:
                for future in window.wait(max(0.0, next_sample - time.time())):
                    if planner.measure(window.complete(future)):
                        telemetry.warm(time.time())
                now = time.time()
                if now >= next_sample:
                    changed = False
                    if now >= next_refresh:
                        changed = look_at_workers(now)
                        telemetry.publish(now, window, planner)
                        next_refresh = now + REFRESH_SECONDS
                    # Sample before caps change, so a sample never mixes two caps.
                    telemetry.sample(now, window)
                    if changed or planner.due(now):
                        plan(now)
                    next_sample = now + SAMPLE_SECONDS
                window.pump()
        except BaseException:
            window.cancel()
            window.forget()  # the error's traceback keeps the window
            raise
        now = time.time()
        telemetry.sample(now, window)
        telemetry.publish(now, window, planner)


# -- the window: admit, submit, complete -----------------------------------------------------

@dataclass
class _Unit:
    """Consecutive input partitions that move together (the largest batch_size)."""

    indices: list[int]
    step: int = -1
    items: list[tuple] = field(default_factory=list)  # (future, covered partitions)
    waiting: int = 0  # futures at its current step not finished yet


def placement(resources: dict | None, lent: frozenset | None = None) -> dict:
    """``client.submit`` keywords: restricted to ``resources``, or to the workers of the
    pool a step is lent (any worker if they all leave)."""
    if lent is None:
        return {"resources": resources}
    return {"workers": sorted(lent), "allow_other_workers": True}


class Window:
    """Units of partitions move step by step while each step is under its cap.

    ``count[k]`` is what step ``k`` holds (partitions submitted to it plus finished ones
    the next step has not taken), ``running[k]`` those submitted and not finished,
    ``done[k]`` those finished, ``ready[k]`` the units finished at ``k``.
    """

    def __init__(self, client, state: RunState, segment: Segment, planner: CapPlanner,
                 progress):
        from distributed import as_completed

        self.client, self.state, self.planner, self.progress = client, state, planner, progress
        self.steps = segment.steps
        indices, unit, n = segment.indices, segment.unit, len(segment.steps)
        self.units = [indices[i:i + unit] for i in range(0, len(indices), unit)]
        self.total, self.next_unit = len(indices), 0
        self.count, self.running, self.done = [0] * n, [0] * n, [0] * n
        self.ready: list[deque[_Unit]] = [deque() for _ in range(n)]
        self.pending: dict = {}  # future -> (unit, covered partitions)
        self.watcher = as_completed()

    @property
    def busy(self) -> bool:
        return self.next_unit < len(self.units) or any(self.count)

    def admits(self, k: int, size: int) -> bool:
        """Whether step ``k`` may take ``size`` more partitions under the planned caps."""
        caps, shared = self.planner.caps, self.planner.shared
        if not (self.count[k] == 0 or self.count[k] + size <= caps[k]):
            return False
        if shared and k == shared[0]:  # entering the bottleneck's shared cap
            held = sum(self.count[j] for j in range(shared[0], shared[1] + 1))
            return held == 0 or held + size <= caps[shared[1]]
        return True

    def pump(self) -> None:
        """Move finished units on, last step first, then read while caps allow."""
        for k in range(len(self.steps) - 1, 0, -1):
            queue = self.ready[k - 1]
            while queue and self.admits(k, len(queue[0].indices)):
                unit = queue.popleft()
                self.count[k - 1] -= len(unit.indices)
                self.submit(k, unit)
        limit = self.planner.limit
        while self.next_unit < len(self.units):
            indices = self.units[self.next_unit]
            held = sum(self.count)
            if not self.admits(0, len(indices)) or (
                    limit is not None and held and held + len(indices) > limit):
                break
            self.submit(0, _Unit(indices, items=[(None, (i,)) for i in indices]))
            self.next_unit += 1

    def submit(self, k: int, unit: _Unit) -> None:
        """Submit step ``k``'s tasks on the unit's futures from step ``k - 1``."""
        step = self.steps[k]
        keywords = {"priority": self.planner.priority(k),
                    **placement(step.resources, self.planner.lent.get(k))}
        with self.state.in_span(step.stage):
            items = [(self.client.submit(task.func, *task.args, key=task.key, **keywords),
                      task.covered) for task in step.tasks(unit.items)]
        # The previous step's futures are now held by the tasks that depend on them.
        unit.items, unit.step, unit.waiting = items, k, len(items)
        self.count[k] += len(unit.indices)
        self.running[k] += len(unit.indices)
        for future, covered in items:
            self.pending[future] = (unit, covered)
            self.watcher.add(future)

    def complete(self, future) -> list[TaskRecord]:
        """Account for a finished future; the records a last step's result brought."""
        unit, covered = self.pending.pop(future)
        if future.status != "finished":
            raise_task_error(self.client, future)  # the task's error, with its stage noted
        k, records = unit.step, []
        if k == len(self.steps) - 1:
            records = self.steps[k].finish(self.state, future.result())
            self.progress.update(len(covered), docs=records[-1].rows_out if records else 0)
        unit.waiting -= 1
        if unit.waiting:
            return records
        size = len(unit.indices)
        self.running[k] -= size
        self.done[k] += size
        if k == len(self.steps) - 1:
            self.count[k] -= size
            unit.items = []
        else:
            self.ready[k].append(unit)
        return records

    def queued(self, k: int) -> int:
        """Partitions waiting in front of step ``k``: finished upstream, or submitted to
        ``k`` beyond its slots (waiting on a worker)."""
        upstream = sum(len(u.indices) for u in self.ready[k - 1]) if k else 0
        return upstream + max(0, self.running[k] - self.planner.slots[k])

    def wait(self, timeout: float) -> list:
        """Futures finished now, waiting up to ``timeout`` seconds for the first."""
        watcher = self.watcher
        condition = getattr(watcher, "thread_condition", None)  # notified on each completion
        if not watcher.has_ready():
            if condition is None:
                time.sleep(min(timeout, 0.005))
            else:
                with condition:
                    if not watcher.has_ready():
                        condition.wait(timeout)
        return watcher.next_batch(block=False)

    def cancel(self) -> None:
        for future in list(self.pending):
            future.cancel()
        for queue in self.ready:
            for unit in queue:
                for future, _ in unit.items:
                    future.cancel()

    def forget(self) -> None:
        """Drop every future the window holds."""
        self.watcher.clear()
        self.pending.clear()
        for queue in self.ready:
            queue.clear()


# -- the cap planner: meters, caps, lending, priorities ----------------------------------------

class CapPlanner:
    """How many partitions each step may hold, where reads and writes run, which tasks
    a worker runs first: a plan from measured stage speeds (:func:`plan_caps`,
    :func:`lend_slots`), or one window for all steps until every stage is measured.

    ``steps`` are a segment's steps (their ``name``, ``resources``, ``capped`` and
    ``movable``); the planner knows the workers only as ``{address: (threads,
    resources)}`` (:meth:`set_workers`) and the stages only through task records
    (:meth:`measure`), so it can be exercised without a cluster.
    """

    def __init__(self, steps: list[Step], unit: int = 1, *, balance: bool = True,
                 lend: bool = True, max_in_flight: int | None = None,
                 per_worker: int | None = None, interval: float = 10.0,
                 label: str = "pipeline"):
        n = len(steps)
        self.steps, self.unit, self.label = steps, unit, label
        self.balance, self.lending = balance, lend
        self.user_limit, self.per_worker = max_in_flight, per_worker
        self.interval = interval
        self.workers: dict[str, tuple[int, dict]] = {}
        self.slots = [0] * n
        self.lent: dict[int, frozenset] = {}  # reads/writes running on another pool
        self.caps: list[float] = [math.inf] * n
        self.limit: float | None = None  # total held by all steps
        self.applied = False
        self.bottleneck: int | None = None  # step index of the planned bottleneck
        self.bottleneck_name: str | None = None
        self.shared: tuple[int, int] | None = None  # steps first..bottleneck sharing its cap
        self.meters = {s.name: StageMeter(3 * interval) for s in steps if s.capped}
        self.warm, self.plan_due, self.next_plan = False, True, math.inf

    @property
    def max_in_flight(self) -> int | None:
        """The bound on every cap and on the total: the user's ``max_in_flight``, else
        what the workers' memory holds (partitions per worker, planned from it, times
        the workers now), else none."""
        if self.user_limit is not None or self.per_worker is None:
            return self.user_limit
        return max(self.per_worker * max(1, len(self.workers)), self.unit)

    def set_workers(self, workers: dict[str, tuple[int, dict]]) -> bool:
        """The workers now; True when they changed (joined, left, other resources)."""
        changed = workers != self.workers
        self.workers = workers
        for k, pool in list(self.lent.items()):
            if not pool & set(workers):  # its pool left: back to its own workers, re-plan
                del self.lent[k]
                changed = True
        self.update_slots()
        return changed

    def placed(self, k: int, lent: bool = True) -> dict[str, int]:
        """``{worker: tasks it runs at once}`` for step ``k``: one per thread of the pool
        it is lent (with ``lent``), else where its resources allow."""
        step, workers = self.steps[k], self.workers
        pool = self.lent.get(k) if lent else None
        if step.resources is None:
            pool = frozenset(workers)
        if pool is not None:
            return {w: workers[w][0] for w in pool if w in workers}
        return slots_for(step.resources, workers)

    def update_slots(self) -> None:
        self.slots = [sum(self.placed(k).values()) for k in range(len(self.steps))]

    def measure(self, records: list[TaskRecord]) -> bool:
        """Add finished tasks to the meters; True when warm-up ends with them (every
        stage has finished a partition: its speed is known)."""
        for record in records:
            meter = self.meters.get(record.stage)
            if meter is not None:
                meter.add(record)
        if not self.warm and all(m.total_tasks for m in self.meters.values()):
            self.warm, self.plan_due = True, True
            return True
        return False

    def due(self, now: float) -> bool:
        return self.plan_due or now >= self.next_plan

    def plan(self, now: float) -> None:
        """Caps from the balance plan once warm, else one window for all steps."""
        self.plan_due = False
        caps, limit = None, None
        if self.balance and self.warm:
            capped = [k for k, s in enumerate(self.steps) if s.capped]
            loads = [self.own_load(k) for k in capped]
            plan = plan_caps(loads, unit=self.unit, limit=self.max_in_flight)
            if plan is not None and self.lending:
                loads, plan = self.lend(capped, loads, plan)
            self.next_plan = now + self.interval
            if plan is not None:
                caps = [math.inf] * len(self.steps)
                for k, cap in zip(capped, plan.caps, strict=True):
                    caps[k] = cap
                # The total stays within the caps' sum, also while a stage whose cap
                # was lowered drains: the others cannot fill up beside it meanwhile.
                limit = min(sum(plan.caps), self.max_in_flight or math.inf)
                slowest = loads[plan.bottleneck]
                if self.bottleneck_name != slowest.name:
                    logger.info(
                        "%s: bottleneck is stage %r (%.3g s per partition on %d slots); caps %s",
                        self.label,
                        slowest.name,
                        slowest.seconds,
                        slowest.slots,
                        {load.name: c for load, c in zip(loads, plan.caps, strict=True)},
                    )
                self.bottleneck_name = slowest.name
                self.bottleneck = capped[plan.bottleneck]
                self.shared = ((capped[plan.shared[0]], self.bottleneck) if plan.shared
                               else None)
            elif self.applied:
                return  # not plannable now (no stage can run): keep the caps
        if caps is None:
            # Warm-up of a balanced run only has to measure each stage: one partition
            # per worker. Without balancing the window also keeps workers busy: two.
            per_worker = 1 if self.balance else 2
            default = per_worker * max(1, len(self.workers))
            window = max(self.user_limit or min(default, self.max_in_flight or default),
                         self.unit)
            caps = [window if s.capped else math.inf for s in self.steps]
            limit = window
        self.caps, self.limit, self.applied = caps, limit, True

    def own_load(self, k: int) -> StageLoad:
        """Step ``k`` as measured, on the workers its resources allow (not lent)."""
        name, per_worker = self.steps[k].name, self.placed(k, lent=False)
        return StageLoad(name, self.meters[name].seconds_per_partition(),
                         sum(per_worker.values()), frozenset(per_worker))

    def lend(self, capped: list[int], loads: list[StageLoad], plan):
        """Lend the reads and writes that share the bottleneck's workers to a pool with
        spare slots (:func:`~curator_dask.executors.balancing.lend_slots`); the loads and
        plan to use."""
        movable = [i for i, k in enumerate(capped) if self.steps[k].movable]
        threads = {w: n for w, (n, _) in self.workers.items()}
        now_lent = {i: self.lent[k] for i, k in enumerate(capped) if k in self.lent}
        lent, moved = lend_slots(loads, plan, movable, threads, now_lent)
        new = {capped[i]: pool for i, pool in lent.items()}
        if new != self.lent:
            logger.info("%s: %s", self.label,
                        "; ".join(f"{self.steps[k].name} runs on {sorted(pool)}"
                                  for k, pool in new.items())
                        or "reads and writes back on their own workers")
        self.lent = new
        self.update_slots()
        if not lent:
            return loads, plan
        return moved, plan_caps(moved, unit=self.unit, limit=self.max_in_flight)

    def priority(self, k: int) -> int:
        """Dask priority of step ``k``'s tasks (higher runs first on a worker).

        Without a plan, later steps first: a worker finishes partitions in flight before
        it reads new ones. With one, the caps bound memory, and what matters is that the
        bottleneck's inputs are never stuck behind its own queued tasks on workers it
        shares: steps after it first (they free memory), then the steps feeding it, the
        bottleneck last. A worker then still always has work, and the bottleneck's next
        input is ready when it needs it.
        """
        n = len(self.steps)
        if self.bottleneck is None or k == self.bottleneck:
            return k
        return (2 * n if k > self.bottleneck else n) + k


# -- telemetry: timelines, gauges, demand --------------------------------------------------------

class RunTelemetry:
    """What a streaming run shows while it runs: each capped step's timeline (cap,
    partitions held, queue, slots; the run's flow metrics), its Prometheus gauges, and
    the run's :class:`~curator_dask.cluster.RunDemand` for adaptive clusters."""

    def __init__(self, client, state: RunState, steps: list[Step]):
        self.client, self.state = client, state
        self.capped = [(k, step) for k, step in enumerate(steps) if step.capped]
        self.timelines = {step.name: state.timelines.setdefault(step.name,
                                                                StageTimeline(step.name))
                          for _, step in self.capped}

    def planned(self, now: float, planner: CapPlanner) -> None:
        """Record the slots and caps the planner has now (only changes are kept)."""
        for k, step in self.capped:
            timeline = self.timelines[step.name]
            timeline.set_slots(now, planner.slots[k])
            if planner.applied:
                timeline.set_cap(now, int(planner.caps[k]))

    def warm(self, now: float) -> None:
        for timeline in self.timelines.values():
            timeline.warmup_end = now

    def sample(self, now: float, window: Window) -> None:
        for k, step in self.capped:
            self.timelines[step.name].sample(now, window.count[k], window.queued(k))

    def publish(self, now: float, window: Window, planner: CapPlanner) -> None:
        """The run's demand for the adaptive plugin, and the Prometheus gauges."""
        pipeline, stages = self.state.layout.name, []
        for k, step in self.capped:
            meter = planner.meters[step.name]
            stages.append(StageDemand(step.name, dict(step.resources),
                                      meter.seconds_per_partition(),
                                      window.total - window.done[k], planner.slots[k]))
            set_stage_gauges(pipeline, step.name, meter.busy_ratio(planner.slots[k]),
                             window.queued(k))
        publish_demand(self.client, self.state.token, RunDemand(pipeline, now, stages))
