"""Stage balancing for the StreamingExecutor: measure each stage, size what it may hold.

The streaming executor moves input partitions from stage to stage. A stage *holds* a
partition from the moment its task is submitted until the next stage takes the output:
tasks running or waiting on a worker, plus finished outputs not yet taken. Each stage may
hold at most ``cap`` partitions; this module decides the caps, the way Cosmos Xenna
(NeMo Curator's streaming engine) does, with Dask's own pieces:

1. **Measure.** Each stage's busy seconds per *input* partition, over a sliding window of
   the partitions finished last (a task over a batch of ``k`` partitions counts ``1/k``
   per partition, so stages that drop most rows or batch partitions are planned per
   input partition, like every other).
2. **Find the bottleneck.** Stages whose tasks run on the same workers share them: a pool
   of workers gets through ``1 / sum(seconds / slots)`` partitions per second, where
   ``slots`` is how many of a stage's tasks the pool runs at once. The slowest pool sets
   the pipeline's rate ``r``; in it, the stage with the most seconds per slot is the
   bottleneck.
3. **Cap.** The bottleneck holds one task per slot running and, waiting behind them on
   its workers, at least one per slot (so it never waits for the client between tasks)
   and as many as it gets through while the stages before it deliver a fresh partition
   (``r`` times the sum of their times below, 50% more), so that a hiccup upstream does
   not leave it idle. Every other stage
   holds what rate ``r`` needs by Little's law: ``r`` times the time a partition spends
   in it, with 50% headroom, rounded up. That time is its busy seconds, plus, on workers
   it shares with the bottleneck, the wait for a slot (up to one bottleneck task per
   slot, ``seconds / slots`` of the bottleneck). It is not measured from submission to
   completion: that would count the stage's own queued tasks and feed back into its
   cap. The stages right before the bottleneck that run on its workers (a reader before
   a CPU-bound stage) *share* its cap: a partition read ahead and a bottleneck task
   waiting are both work queued on those workers, so together they hold what the
   bottleneck alone would, and memory is what the fixed window would use there. Faster
   stages before the bottleneck so run only far enough ahead to
   keep it fed, and the partitions in memory are bounded by the sum of the caps (the
   executor holds the total to it, also while a stage drains after its cap was lowered).

A user's ``max_in_flight`` bounds every cap and the total. :class:`StageTimeline` keeps
what :class:`~curator_dask.observe.run_result.StageMetrics` reports: the cap over time,
the partitions held, the queue in front of the stage and the slots it had.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from curator_dask.observe.run_result import TaskRecord

__all__ = [
    "Plan",
    "StageLoad",
    "StageMeter",
    "StageTimeline",
    "busy_fraction",
    "lend_slots",
    "lent_loads",
    "plan_caps",
    "slots_for",
]

#: Headroom over Little's law for stages other than the bottleneck.
HEADROOM = 0.5
#: Timeline samples kept per stage; beyond this every other sample is dropped.
MAX_SAMPLES = 10_000


@dataclass(frozen=True)
class StageLoad:
    """What planning needs to know about one stage.

    ``seconds`` is busy seconds per input partition (None: not measured yet), ``slots``
    how many of its tasks the cluster runs at once, ``workers`` the workers that can run
    it (stages with the same workers share their capacity).
    """

    name: str
    seconds: float | None
    slots: int
    workers: frozenset = frozenset()
    #: Seconds a task may wait for a slot behind other stages' tasks on workers it was
    #: lent (:func:`lend_slots`); counted in the time a partition spends in the stage.
    wait: float = 0.0


@dataclass(frozen=True)
class Plan:
    """Caps per stage (partitions), the bottleneck's index and the rate it allows.

    ``shared`` are the stages right before the bottleneck on its workers: what they and
    the bottleneck hold together stays within the bottleneck's cap.
    """

    caps: tuple[int, ...]
    bottleneck: int
    rate: float
    shared: tuple[int, ...] = ()


def plan_caps(loads: Sequence[StageLoad], *, unit: int = 1, limit: int | None = None,
              headroom: float = HEADROOM) -> Plan | None:
    """Caps that keep the bottleneck busy and everything else just far enough ahead.

    Parameters
    ----------
    loads : sequence of StageLoad
        The stages in pipeline order, reader first.
    unit : int, default 1
        Partitions that move together (the largest ``batch_size``): no cap is below it.
    limit : int, optional
        The user's ``max_in_flight``: no cap is above it.
    headroom : float, default 0.5
        Extra over ``rate * seconds`` for stages other than the bottleneck.

    Returns
    -------
    Plan or None
        None while some stage has not been measured or no stage can run.

    Examples
    --------
    Reader, a CPU stage and writer on two CPU workers; a stage four times slower than the
    CPU stage on one GPU worker:

    >>> cpu, gpu = frozenset({"c1", "c2"}), frozenset({"g"})
    >>> plan = plan_caps([StageLoad("read", 0.01, 2, cpu), StageLoad("clean", 0.1, 2, cpu),
    ...                   StageLoad("classify", 0.4, 1, gpu), StageLoad("write", 0.02, 2, cpu)])
    >>> plan.caps, plan.bottleneck, plan.rate
    ((1, 1, 2, 1), 2, 2.5)

    The other way round, the CPU stage is the bottleneck: two running and two waiting or
    being read (the reader, on the same workers, shares its cap).

    >>> plan = plan_caps([StageLoad("read", 0.01, 2, cpu), StageLoad("clean", 0.8, 2, cpu),
    ...                   StageLoad("classify", 0.2, 1, gpu), StageLoad("write", 0.02, 2, cpu)])
    >>> plan.caps, plan.shared
    ((2, 4, 1, 2), (0,))

    (The reader and writer wait up to 0.4 s for a CPU slot, so at 2.4 partitions/s each
    holds about 1 partition, 1.5 with headroom: 2.)
    """
    if not loads or any(load.seconds is None for load in loads):
        return None
    pools: dict[frozenset, list[int]] = {}
    for i, load in enumerate(loads):
        if load.slots > 0:
            pools.setdefault(load.workers, []).append(i)
    if not pools:
        return None

    def seconds_per_slot(i: int) -> float:
        return loads[i].seconds / loads[i].slots

    slowest = max(pools.values(), key=lambda members: sum(map(seconds_per_slot, members)))
    period = sum(map(seconds_per_slot, slowest))
    if period <= 0:
        return None
    rate = 1.0 / period
    bottleneck = max(slowest, key=seconds_per_slot)

    def held(i: int) -> float:
        """Seconds a partition spends in stage ``i``: busy, and waiting for a slot on
        workers it shares with the bottleneck (at most one bottleneck task per slot)."""
        if loads[i].workers & loads[bottleneck].workers:
            return loads[i].seconds + seconds_per_slot(bottleneck) + loads[i].wait
        return loads[i].seconds + loads[i].wait

    caps = []
    for i, load in enumerate(loads):
        if load.slots == 0:  # no worker can run it now: hold no more than one unit
            cap = 1
        elif i == bottleneck:
            refill = sum(held(j) for j in range(i) if loads[j].slots)
            cap = load.slots + max(load.slots,
                                   math.ceil(rate * refill * (1 + headroom) - 1e-9))
        else:
            cap = math.ceil(rate * held(i) * (1 + headroom) - 1e-9)
        cap = max(cap, unit, 1)
        if limit is not None:
            cap = min(cap, max(limit, unit))
        caps.append(cap)
    first = bottleneck
    while (first > 0 and loads[first - 1].slots
           and loads[first - 1].workers & loads[bottleneck].workers):
        first -= 1
    for i in range(first, bottleneck):
        caps[i] = min(caps[i], caps[bottleneck])
    return Plan(tuple(caps), bottleneck, round(rate, 9), tuple(range(first, bottleneck)))


#: Most a pool of workers may be planned busy after taking lent stages (lending starts).
LEND_UTILIZATION = 0.8
#: ... and while it keeps them (a lent stage comes back only above this).
KEEP_UTILIZATION = 0.9


def lend_slots(loads: Sequence[StageLoad], plan: Plan, movable: Iterable[int],
               threads: Mapping[str, int], lent: Mapping[int, frozenset] | None = None,
               ) -> tuple[dict[int, frozenset], list[StageLoad]]:
    """Stages that may run on another pool's spare slots, so the bottleneck gets its own.

    A stage that can run anywhere (``movable``: the executor's reads and writes) but
    shares the bottleneck's workers takes slots the bottleneck needs: at a 4:1 cost ratio
    of a CPU stage to a GPU stage, the reads and writes on the CPU workers are a tenth
    of their time while the GPU worker idles half of it. Such stages are lent to the
    pool (workers running other stages, none of the bottleneck's) that gives the highest
    rate when they move, as long as that pool stays at most :data:`LEND_UTILIZATION`
    busy (:data:`KEEP_UTILIZATION` for stages ``lent`` already) and the rate grows.

    Parameters
    ----------
    loads, plan
        The stages and the plan made with every stage on its own workers.
    movable : iterable of int
        Indices of the stages that may run on any worker.
    threads : mapping
        ``{worker: threads}``: a lent stage runs one task per thread of the pool.
    lent : mapping, optional
        The stages lent now (index to workers), kept while their pool has room.

    Returns
    -------
    (dict, list of StageLoad)
        ``{stage index: the workers it runs on}`` (empty when nothing is lent), and the
        loads to plan with.

    Examples
    --------
    Reads and writes of 0.05 s beside a 1 s CPU stage on two CPU workers, and a 0.25 s
    stage on a GPU worker: lent to the GPU worker, the CPU workers only run the CPU stage.

    >>> cpu, gpu = frozenset({"c1", "c2"}), frozenset({"g"})
    >>> loads = [StageLoad("read", 0.05, 2, cpu), StageLoad("clean", 1.0, 2, cpu),
    ...          StageLoad("classify", 0.25, 1, gpu), StageLoad("write", 0.05, 2, cpu)]
    >>> threads = {"c1": 1, "c2": 1, "g": 1}
    >>> lent, moved = lend_slots(loads, plan_caps(loads), [0, 3], threads)
    >>> lent == {0: gpu, 3: gpu}, plan_caps(moved).rate, plan_caps(loads).rate
    (True, 2.0, 1.818181818)

    At 1:4 the GPU stage is the bottleneck and nothing shares its worker: nothing moves.

    >>> loads = [StageLoad("read", 0.05, 2, cpu), StageLoad("clean", 0.25, 2, cpu),
    ...          StageLoad("classify", 1.0, 1, gpu), StageLoad("write", 0.05, 2, cpu)]
    >>> lend_slots(loads, plan_caps(loads), [0, 3], threads)[0]
    {}
    """
    lent = dict(lent or {})
    bottleneck = loads[plan.bottleneck].workers
    candidates = [i for i in movable
                  if loads[i].seconds is not None and loads[i].workers & bottleneck]
    pools: dict[frozenset, list[int]] = {}
    for i, load in enumerate(loads):
        if load.slots > 0 and load.workers and not load.workers & bottleneck:
            pools.setdefault(load.workers, []).append(i)
    # All candidates together, else each alone.
    options = [candidates] + ([[i] for i in candidates] if len(candidates) > 1 else [])
    best_rate, best = plan.rate * 1.02, ({}, list(loads))  # 2% faster at least
    for pool, members in pools.items():
        for moved in options:
            if not moved:
                continue
            trial = lent_loads(loads, {i: pool for i in moved}, threads)
            trial_plan = plan_caps(trial)
            if trial_plan is None:
                continue
            busy = trial_plan.rate * sum(trial[i].seconds / trial[i].slots
                                         for i in (*members, *moved))
            ceiling = (KEEP_UTILIZATION if all(lent.get(i) == pool for i in moved)
                       else LEND_UTILIZATION)
            if busy <= ceiling and trial_plan.rate > best_rate:
                best_rate, best = trial_plan.rate, ({i: pool for i in moved}, trial)
    return best


def lent_loads(loads: Sequence[StageLoad], lent: Mapping[int, frozenset],
               threads: Mapping[str, int]) -> list[StageLoad]:
    """``loads`` with the ``lent`` stages on their new workers: one slot per thread, and
    a wait for the longest task per slot of the stages already there."""
    out = list(loads)
    for i, pool in lent.items():
        others = [load.seconds / load.slots for j, load in enumerate(loads)
                  if j not in lent and load.workers == pool and load.slots and load.seconds]
        out[i] = StageLoad(loads[i].name, loads[i].seconds,
                           sum(threads.get(w, 0) for w in pool), pool,
                           wait=max(others, default=0.0))
    return out


def slots_for(wanted: Mapping[str, float],
              workers: Mapping[str, tuple[int, Mapping]]) -> dict[str, int]:
    """``{worker: tasks it runs at once}`` for a task asking for ``wanted`` resources.

    ``workers`` maps an address to ``(nthreads, advertised resources)``. A task holds one
    thread and its resources, so a worker runs ``min(threads, resource / wanted)`` of
    them at once.

    >>> slots_for({"GPU": 0.25}, {"g": (4, {"GPU": 1}), "c": (2, {"CPU": 2})})
    {'g': 4}
    >>> slots_for({"CPU": 1}, {"g": (4, {"GPU": 1}), "c": (2, {"CPU": 2})})
    {'c': 2}
    """
    out = {}
    for address, (nthreads, resources) in workers.items():
        n = nthreads
        for name, amount in wanted.items():
            if amount <= 0:
                continue
            n = min(n, math.floor(resources.get(name, 0) / amount + 1e-9))
        if n > 0:
            out[address] = n
    return out


class StageMeter:
    """Busy seconds per input partition over a sliding window of finished tasks.

    Keeps the tasks that stopped within ``window`` seconds of the latest one, and always
    the last ``min_samples``.
    """

    def __init__(self, window: float, min_samples: int = 3):
        self.window, self.min_samples = window, min_samples
        self._tasks: deque[tuple[float, float, float, int]] = deque()  # start, stop, s, parts
        self.latest = 0.0
        self.total_tasks = 0

    def add(self, record: TaskRecord) -> None:
        """Add one task's record (its ``start``, ``stop``, ``seconds``, ``partitions``)."""
        self._tasks.append((record.start, record.stop, record.seconds,
                            max(1, int(record.partitions))))
        self.latest = max(self.latest, record.stop)
        self.total_tasks += 1
        while (len(self._tasks) > self.min_samples
               and self._tasks[0][1] < self.latest - self.window):
            self._tasks.popleft()

    def seconds_per_partition(self) -> float | None:
        """Mean busy seconds per input partition in the window (None before any task)."""
        partitions = sum(t[3] for t in self._tasks)
        return sum(t[2] for t in self._tasks) / partitions if partitions else None

    def busy_ratio(self, slots: int) -> float | None:
        """Busy share of ``slots`` over the window ending at the latest task's stop."""
        if not self._tasks or slots <= 0:
            return None
        start = max(self.latest - self.window, min(t[0] for t in self._tasks))
        if self.latest <= start:
            return None
        busy = sum(max(0.0, t[1] - max(t[0], start)) for t in self._tasks)
        return min(1.0, busy / (slots * (self.latest - start)))


@dataclass
class StageTimeline:
    """One stage's cap, partitions held, queue and slots over a run (absolute times).

    ``in_flight`` is the number of partitions the stage holds when sampled. After a
    re-plan lowers a cap the stage admits nothing until it holds fewer, so a sample can
    be above a cap lowered since the previous sample, never above one that held for the
    whole interval.
    """

    name: str
    caps: list[tuple[float, int]] = field(default_factory=list)
    in_flight: list[tuple[float, int]] = field(default_factory=list)
    queued: list[tuple[float, int]] = field(default_factory=list)
    slots: list[tuple[float, int]] = field(default_factory=list)
    warmup_end: float | None = None

    def set_cap(self, now: float, cap: int) -> None:
        if not self.caps or self.caps[-1][1] != cap:
            self.caps.append((now, cap))

    def set_slots(self, now: float, slots: int) -> None:
        if not self.slots or self.slots[-1][1] != slots:
            self.slots.append((now, slots))

    def sample(self, now: float, in_flight: int, queued: int) -> None:
        self.in_flight.append((now, in_flight))
        self.queued.append((now, queued))
        if len(self.in_flight) > MAX_SAMPLES:
            self.in_flight = self.in_flight[::2]
            self.queued = self.queued[::2]

    def mean_queue_length(self, until: float | None = None) -> float | None:
        """Time-averaged queue in front of the stage after warm-up (None before)."""
        since = self.warmup_end
        if since is None:
            return None
        samples = [(t, q) for t, q in self.queued if t >= since and (until is None or t <= until)]
        if len(samples) < 2:
            return float(samples[0][1]) if samples else None
        area = sum(q * (t1 - t0) for (t0, q), (t1, _) in itertools.pairwise(samples))
        return area / (samples[-1][0] - samples[0][0])

    def capacity(self, since: float, until: float) -> float:
        """Slot-seconds the stage had between ``since`` and ``until``."""
        total = 0.0
        for i, (t, slots) in enumerate(self.slots):
            t_next = self.slots[i + 1][0] if i + 1 < len(self.slots) else math.inf
            lo, hi = max(t, since), min(t_next, until)
            if hi > lo:
                total += slots * (hi - lo)
        if self.slots and since < self.slots[0][0]:  # before the first sample: its value
            total += self.slots[0][1] * (min(self.slots[0][0], until) - since)
        return total


def busy_fraction(records: Iterable[Mapping], timeline: StageTimeline) -> float | None:
    """Share of the stage's slots busy with its tasks, from warm-up to its last task.

    Warm-up ends when the first partition has been through every stage (the first
    moment each stage's speed is known).

    >>> t = StageTimeline("s", slots=[(0.0, 1)], warmup_end=10.0)
    >>> busy_fraction([{"start": 9.0, "stop": 12.0}, {"start": 12.0, "stop": 19.0},
    ...                {"start": 19.5, "stop": 20.0}], t)
    0.95
    """
    since = timeline.warmup_end
    spans = [(r["start"], r["stop"]) for r in records]
    if since is None or not spans:
        return None
    until = max(stop for _, stop in spans)
    if until <= since:
        return None
    busy = sum(max(0.0, stop - max(start, since)) for start, stop in spans)
    capacity = timeline.capacity(since, until)
    return round(busy / capacity, 4) if capacity > 0 else None
