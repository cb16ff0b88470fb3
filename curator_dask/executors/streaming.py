"""StreamingExecutor: every input partition flows through the stages as a chain of futures.

For each input partition the executor submits one task per stage (``client.submit``
with the stage's resources and a per-stage key prefix ``<stage>-<run token>-<partition>``)
and a write task; the parts are written as they complete. The scheduler never queues
restricted tasks (DESIGN.md), so the executor keeps its own windows: a partition moves to
the next stage only when that stage holds fewer partitions than its cap, and the reader
reads a new one only then. A stage *holds* a partition from the submission of its task
until the next stage takes the output.

With ``balance=True`` (the default) the caps follow the slowest stage
(:mod:`curator_dask.executors.balancing`): every ``balance_interval`` the executor
measures each stage's busy seconds per input partition and re-plans, so that the
bottleneck always has work waiting and faster stages before it run only far enough ahead
to keep it fed. Until every stage has been measured (warm-up), one window of
``max_in_flight`` partitions (default: one per worker) is shared by all stages; with
``balance=False`` that window (default: two per worker) stays for the whole run. Windows grow and shrink with the cluster: the
executor looks at the workers every second, so a worker that an adaptive cluster starts
gets work at once, and one it retires hands its data over (nothing is lost or written
twice: parts have deterministic names and are written atomically).

Until there is a plan, later stages get higher priority, so a worker finishes partitions
already in flight before it reads new ones; with a plan, the stages feeding the
bottleneck run before it, so that its inputs are never stuck behind its own queued tasks
on the workers it shares with them. Whole-dataset stages (dedup) are barriers: the partitions
before one are streamed into Parquet parts under the cache directory, the barrier runs on
the whole of them, and the stream goes on from its output.
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import dask.dataframe as dd
from dask.utils import parse_timedelta

from curator_dask.dataset import DocumentDataset
from curator_dask.executors import runtime
from curator_dask.executors.balancing import (
    StageLoad,
    StageMeter,
    StageTimeline,
    lend_slots,
    plan_caps,
    slots_for,
)
from curator_dask.executors.base import (
    Executor,
    Layout,
    ResourceUnavailableError,
    RunState,
    check_placement,
    materialize_barrier_output,
    raise_task_error,
    span_annotation,
)
from curator_dask.observe.progress import Progress, phase
from curator_dask.observe.prometheus import clear_stage_gauges, set_stage_gauges
from curator_dask.resources import Resources
from curator_dask.stages.base import ProcessingStage, WholeDatasetStage, _key_prefix
from curator_dask.io.writers import claim_files
from curator_dask.stages.fingerprint import digest
from curator_dask.stages.io_stages import ParquetWriter, PreparedOutput, plan_token

__all__ = ["StreamingExecutor"]

logger = logging.getLogger(__name__)

#: Seconds an executor waits for the first worker of an adaptive cluster with minimum 0.
ADAPTIVE_START_TIMEOUT = 300.0
#: Marks a barrier's output in the cache as complete: its fingerprint and drop counts.
BARRIER_DONE = ".complete"


@dataclass
class InternalStage:
    """A task kind the executor adds around barriers (spilling to and reading from cache)."""

    name: str
    resources: Resources = Resources(cpus=1)

    @property
    def stage_name(self) -> str:
        return self.name


@dataclass
class Source:
    """Input partitions: a dataset's plan and the callable that reads one spec."""

    dataset: DocumentDataset
    stage: object  # the ReaderStage or an InternalStage, for keys, spans and metrics

    @property
    def plan(self):
        return self.dataset.plan


@dataclass
class Sink:
    """Where a segment's parts go: a prepared output directory, written by ``stage``."""

    output: PreparedOutput
    stage: object


def batch_groups(items: list[tuple], batch_size: int) -> list[list[tuple]]:
    """Group ``(future, indices)`` items so each group covers ``batch_size`` partitions.

    Examples
    --------
    >>> [[i for _, i in g] for g in batch_groups([(None, (0,)), (None, (1,)), (None, (2,))], 2)]
    [[(0,), (1,)], [(2,)]]
    """
    groups: list[list[tuple]] = []
    current: list[tuple] = []
    covered = 0
    for item in items:
        current.append(item)
        covered += len(item[1])
        if covered >= batch_size:
            groups.append(current)
            current, covered = [], 0
    if current:
        groups.append(current)
    return groups


class StreamingExecutor(Executor):
    """Run a pipeline partition by partition, writing each part as soon as it is ready.

    Parameters
    ----------
    max_in_flight : int, optional
        Input partitions allowed between the reader and the writer at once. Without
        balancing it is the window all stages share (default: twice the number of
        workers, following the cluster as it grows and shrinks); with balancing it stays
        the upper bound of every stage's cap and of their total (default: no bound
        beyond the caps, and one partition per worker during warm-up). Either way it bounds cluster memory: roughly that many
        partitions' worth of data, whatever the dataset's size.
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
    cache_path, progress
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

    def __init__(self, max_in_flight: int | None = None, resume: bool = False, *,
                 balance: bool = True, balance_interval: float | str = 10.0,
                 lend: bool = True, client=None, cache_path: str | None = None,
                 progress: bool = True):
        super().__init__(resume=resume, cache_path=cache_path, progress=progress)
        if max_in_flight is not None and (not isinstance(max_in_flight, int) or max_in_flight < 1):
            raise ValueError(f"max_in_flight must be a positive integer, got {max_in_flight!r}")
        interval = parse_timedelta(balance_interval, default="seconds")
        if interval is None or interval <= 0:
            raise ValueError(f"balance_interval must be a positive number of seconds (or a "
                             f"time string like '10s'), got {balance_interval!r}")
        self.max_in_flight = max_in_flight
        self.balance = bool(balance)
        self.lend = bool(lend)
        self.balance_interval = float(interval)
        self.client = client

    def __repr__(self) -> str:
        return (f"StreamingExecutor(max_in_flight={self.max_in_flight}, resume={self.resume}, "
                f"balance={self.balance})")

    def _client(self):
        if self.client is not None:
            return self.client
        from distributed import default_client

        try:
            return default_client()
        except ValueError:
            raise ValueError(
                "StreamingExecutor needs a Dask client: create one with "
                "curator_dask.get_client(), pass client=..., or debug in-process with "
                "LocalExecutor()"
            ) from None

    # -- the run -----------------------------------------------------------------------
    def run(self, layout: Layout, report: str | None = None):
        self._check_resume(layout)
        client = self._client()
        state = RunState(layout)

        def cleanup():
            # The run is over, failed or not: adaptive clusters stop counting its backlog
            # and dashboards stop showing its stages.
            publish_demand(client, state.token, None)
            clear_stage_gauges(layout.name, list(state.timelines))

        try:
            workers = self._workers_or_wait(client, state)
            state.setup(client, workers)
        except BaseException:
            cleanup()  # the wait may have asked an adaptive cluster for a worker
            raise
        return self._run_on_cluster(client, state, layout, report,
                                    lambda: self._run(client, state, layout), cleanup=cleanup)

    def _workers_or_wait(self, client, state: RunState) -> dict[str, dict]:
        """The workers' resources; on an adaptive cluster with none yet, wait for one."""
        from curator_dask.cluster import ADAPTIVE_KEY, worker_resources

        workers = worker_resources(client)
        if workers or not client.get_metadata([ADAPTIVE_KEY], default=False):
            return workers  # no workers and not adaptive: check_placement says what to do
        logger.info("no workers yet: asking the adaptive cluster for some (waiting up to %.0f s)",
                    ADAPTIVE_START_TIMEOUT)
        publish_demand(client, state.token, {
            "updated": time.time(), "pipeline": state.layout.name,
            "stages": [{"name": state.layout.name_of(s), "resources": s.resources.to_dask(),
                        "seconds": None, "remaining": 1, "slots": 0}
                       for s in state.layout.stages if hasattr(s, "resources")]})
        try:
            client.wait_for_workers(1, timeout=ADAPTIVE_START_TIMEOUT)
        except TimeoutError:
            raise ResourceUnavailableError(
                f"the adaptive cluster started no worker in {ADAPTIVE_START_TIMEOUT:.0f} s; "
                "check that it can start workers (cluster.scale(1)), or give adaptive a "
                "minimum of at least 1") from None
        return worker_resources(client)

    def _run(self, client, state: RunState, layout: Layout):
        ds = layout.reader.dataset()
        source = Source(ds, layout.reader)
        cache = self._cache_root(layout) if layout.barriers else None
        output = self._open_output(state, ds, cache)
        dataset = None
        for k, stages in enumerate(layout.segments):
            last = k == len(layout.barriers)
            if last:
                sink = None
                if output is not None:
                    sink = Sink(replace(output, source=plan_token(source.dataset)),
                                layout.writer)
                futures = self._stream(client, state, source, stages, sink,
                                       count_input=(k == 0))
                if sink is None:
                    dataset = self._collect(client, state, futures, source, stages)
            else:
                barrier = layout.barriers[k]
                barrier_cache = posixpath.join(cache, f"{k}-{_key_prefix(layout.name_of(barrier))}")
                source = self._through_barrier(client, state, layout, source, stages, barrier,
                                               barrier_cache, count_input=(k == 0))
        state.fill_barrier_rows()
        return dataset

    # -- one segment ---------------------------------------------------------------------
    def _stream(self, client, state: RunState, source: Source, stages: Sequence[ProcessingStage],
                sink: Sink | None, count_input: bool):
        """Stream every partition of ``source`` through ``stages`` into ``sink``.

        Without a sink, returns the final ``(frame, records)`` futures in partition order.
        """
        plan = source.plan
        indices = list(range(len(plan)))
        if sink is not None and self.resume:
            done = sink.output.completed()
            skipped = {s["partition"]: s for s in done.values()}
            indices = [i for i in indices if i not in done]
            if count_input:
                state.skipped += len(plan) - len(indices)
            state.skipped_stats.extend(skipped.values())
            if done:
                logger.info("resume: %d of %d partitions already written, skipping them",
                            len(plan) - len(indices), len(plan))
        if count_input:
            state.partitions += len(plan)
        steps = [state.name(source.stage), *(state.name(s) for s in stages),
                 *([state.name(sink.stage)] if sink is not None else [])]
        progress = state.progress
        progress.stage(f"{state.layout.name}: {' -> '.join(steps)}", len(indices))
        stream = _Stream(self, client, state, source, stages, sink, indices, progress)
        stream.run()
        if sink is None:
            return [stream.results[i] for i in sorted(stream.results)]
        return None

    def _submit_read(self, client, state: RunState, source: Source, index: int,
                     priority: int = 0, workers: frozenset | None = None):
        """Submit the read of partition ``index``; with ``workers``, on those (lent)."""
        stage = source.stage
        with state.in_span(stage):
            return client.submit(
                runtime.read_task, source.dataset.partition_reader, source.plan[index],
                state.name(stage), key=state.key(stage, index), priority=priority,
                **placement(state.resources[id(stage)], workers),
            )

    def _collect(self, client, state: RunState, futures: list, source: Source,
                 stages: Sequence[ProcessingStage]) -> DocumentDataset:
        """A dataset over the final partitions, held in cluster memory."""
        meta = source.dataset.df._meta
        for stage in stages:
            meta = stage.meta(meta)
        frames = [client.submit(runtime.frame_of, f, key=f"frame-{state.token}-{i}")
                  for i, f in enumerate(futures)]
        return DocumentDataset(dd.from_delayed(frames, meta=meta, verify_meta=False),
                               sources=state.layout.reader.dataset().sources)

    # -- barriers --------------------------------------------------------------------------
    def _register(self, state: RunState, internal: InternalStage) -> InternalStage:
        state.prefixes[id(internal)] = _key_prefix(internal.name)
        state.spans[id(internal)] = span_annotation(state.layout.name, internal.name)
        state.resources.update(check_placement([internal], {id(internal): internal.name},
                                               state.workers))
        return internal

    def _through_barrier(self, client, state: RunState, layout: Layout, source: Source,
                         stages, barrier: WholeDatasetStage, cache: str,
                         count_input: bool) -> Source:
        name = layout.name_of(barrier)
        spill = self._register(state, InternalStage(f"{name}_input"))
        writer = ParquetWriter(posixpath.join(cache, "input"), mode="overwrite")
        # The spill is the executor's own: written by another pipeline, it starts over.
        token = plan_token(source.dataset)
        output = writer.prepare(token, resume=self.resume, inputs=state.inputs,
                                pipeline=layout.fingerprint(upto=barrier),
                                restart_on_mismatch=True)
        output = replace(output, source=token)
        # The spilled parts are this run's intermediate data, not its output.
        saved = (list(state.write_stats), list(state.skipped_stats), state.first_output)
        self._stream(client, state, source, stages, Sink(output, spill), count_input)
        spilled = state.write_stats[len(saved[0]):] + state.skipped_stats[len(saved[1]):]
        spilled_rows = sum(s["rows"] for s in spilled)
        state.barrier_dropped.extend(s["dropped"] for s in spilled)
        state.write_stats, state.skipped_stats, state.first_output = saved

        start = time.time()
        out_dir = posixpath.join(cache, "output")
        done_marker = posixpath.join(out_dir, BARRIER_DONE)
        fs = output.fs
        # The barrier's output may be reused only by the pipeline (up to and including
        # the barrier) that computed it, from the same input.
        fingerprint = digest({"input": state.input_token,
                              "pipeline": [*layout.fingerprint(upto=barrier),
                                           layout.entry(barrier)]})
        saved = _read_json(fs, done_marker) if self.resume else None
        if saved is not None and saved.get("fingerprint") == fingerprint:
            logger.info("resume: barrier %r output already complete, reusing it", name)
            out = DocumentDataset.read_parquet(out_dir, files_per_partition=1)
            removed = saved.get("dropped", {})
        else:
            if saved is not None:
                logger.info("barrier %r: the output in %s was computed by another pipeline or "
                            "from other input: computing it again", name, out_dir)
            if fs.exists(done_marker):
                fs.rm(done_marker)  # the executor's own; stale from here on
            ds_in = DocumentDataset.read_parquet(output.spec.path, files_per_partition=1)
            with state.in_span(barrier, building=True), phase(f"{layout.name}: {name}"):
                out = barrier.run(ds_in, posixpath.join(cache, "work"))
                with phase("write"):
                    out, removed = materialize_barrier_output(out, out_dir)
                if fs.exists(out_dir):
                    # The marker keeps the barrier's drop counts for a resumed run.
                    claim_files(fs, out_dir, [BARRIER_DONE])
                    fs.pipe_file(done_marker, json.dumps(
                        {"fingerprint": fingerprint, "dropped": removed}).encode())
        state.barrier_dropped.append(removed)
        stop = time.time()
        reread = self._register(state, InternalStage(f"{name}_output"))
        # rows_out is known once the next segment has read the barrier's output.
        state.records.append({
            "stage": name, "partitions": len(out.plan), "rows_in": spilled_rows,
            "rows_out": 0, "bytes": 0, "seconds": stop - start, "start": start, "stop": stop,
            "worker": "client", "rows_out_from": reread.name,
        })
        return Source(out, reread)


def _read_json(fs, path: str) -> dict | None:
    """A small JSON file written by the executor, or None (absent, or an older format)."""
    if not fs.exists(path):
        return None
    try:
        value = json.loads(fs.cat_file(path) or b"null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def placement(resources: dict | None, lent: frozenset | None = None) -> dict:
    """``client.submit`` keywords: restricted to ``resources``, or to the workers of the
    pool a step is lent (any worker if they all leave)."""
    if lent is None:
        return {"resources": resources}
    return {"workers": sorted(lent), "allow_other_workers": True}


def publish_demand(client, token: str, demand: dict | None) -> None:
    """Tell the scheduler what this run still has to do (None: nothing, it is over).

    Stored in the scheduler's metadata under ``curator_dask.cluster.DEMAND_KEY``, where
    the adaptive plugin that ``get_client(adaptive=...)`` installs reads it: the
    scheduler itself sees only the partitions in flight (restricted tasks are never
    queued), not the backlog the executor holds back.
    """
    from curator_dask.cluster import DEMAND_KEY

    try:
        client.set_metadata([DEMAND_KEY, token], demand)
    except Exception:  # telemetry for autoscaling must never fail a run
        logger.debug("could not publish the run's demand to the scheduler", exc_info=True)


@dataclass
class _Step:
    """One task kind of a streamed segment: the read, a stage, the write (or records)."""

    kind: str  # "read", "stage", "write" or "records" (no writer: fetch records only)
    name: str
    stage: object
    resources: dict | None
    batch_size: int = 1

    @property
    def capped(self) -> bool:
        return self.kind != "records"


@dataclass
class _Unit:
    """Consecutive input partitions that move together (the largest batch_size)."""

    indices: list[int]
    step: int = -1
    items: list[tuple] = field(default_factory=list)  # (future, covered partitions)
    waiting: int = 0  # futures at its current step not finished yet


class _Stream:
    """One segment in flight: units move step by step while each step is under its cap.

    ``count[k]`` is what step ``k`` holds (partitions submitted to it plus finished ones
    the next step has not taken), ``ready[k]`` the units finished at ``k``.
    """

    SAMPLE_SECONDS = 0.25  # timeline samples
    REFRESH_SECONDS = 1.0  # looks at the workers, demand published, gauges set

    def __init__(self, executor: StreamingExecutor, client, state: RunState, source: Source,
                 stages: Sequence[ProcessingStage], sink: Sink | None, indices: list[int],
                 progress: Progress):
        self.executor, self.client, self.state = executor, client, state
        self.source, self.sink, self.progress = source, sink, progress
        resources = state.resources
        self.steps = [_Step("read", state.name(source.stage), source.stage,
                            resources[id(source.stage)])]
        self.steps += [_Step("stage", state.name(s), s, resources[id(s)], s.batch_size)
                       for s in stages]
        if sink is not None:
            self.steps.append(_Step("write", state.name(sink.stage), sink.stage,
                                    resources[id(sink.stage)]))
        else:
            self.steps.append(_Step("records", "records", None, None))
        n = len(self.steps)
        self.unit = max([1, *(s.batch_size for s in stages)])
        self.units = [indices[i:i + self.unit] for i in range(0, len(indices), self.unit)]
        self.total = len(indices)
        self.next_unit = 0
        self.count, self.running, self.done = [0] * n, [0] * n, [0] * n
        self.ready: list[deque[_Unit]] = [deque() for _ in range(n)]
        self.pending: dict = {}  # future -> (unit, covered partitions)
        self.results: dict[int, object] = {}  # no sink: final futures by first partition
        self.caps: list[float] = [math.inf] * n
        self.limit: float | None = None
        self.caps_applied = False
        self.bottleneck: int | None = None  # step index of the planned bottleneck
        self.shared: tuple[int, int] | None = None  # steps first..bottleneck sharing its cap
        self.slots, self.eligible = [0] * n, [frozenset()] * n
        self.lent: dict[int, frozenset] = {}  # reads/writes running on another pool
        self.workers: dict[str, tuple[int, dict]] = {}
        window = 3 * executor.balance_interval
        self.meters = {s.name: StageMeter(window) for s in self.steps if s.capped}
        self.timelines = {s.name: state.timelines.setdefault(s.name, StageTimeline(s.name))
                          for s in self.steps if s.capped}
        self.warm, self.plan_due, self.next_plan = False, True, math.inf
        from distributed import as_completed

        self.watcher = as_completed()

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        now = time.time()
        self.refresh_workers(now)
        self.publish(now)
        self.apply_caps(now)
        self.pump()
        next_sample, next_refresh = now, now + self.REFRESH_SECONDS
        try:
            while self.next_unit < len(self.units) or any(self.count):
                for future in self.wait(max(0.0, next_sample - time.time())):
                    self.complete(future)
                now = time.time()
                if now >= next_sample:
                    changed = False
                    if now >= next_refresh:
                        changed = self.refresh_workers(now)
                        self.publish(now)
                        next_refresh = now + self.REFRESH_SECONDS
                    # Sample before caps change, so a sample never mixes two caps.
                    self.sample(now)
                    if changed or self.plan_due or now >= self.next_plan:
                        self.apply_caps(now)
                    next_sample = now + self.SAMPLE_SECONDS
                self.pump()
        except BaseException:
            self.cancel()
            self.forget()
            raise
        now = time.time()
        self.sample(now)
        self.publish(now)

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
        """Drop every future this stream holds: the error's traceback keeps the stream."""
        self.watcher.clear()
        self.pending.clear()
        self.results.clear()
        for queue in self.ready:
            queue.clear()

    # -- moving units ------------------------------------------------------------------------
    def admits(self, k: int, size: int) -> bool:
        if not (self.count[k] == 0 or self.count[k] + size <= self.caps[k]):
            return False
        if self.shared and k == self.shared[0]:  # entering the bottleneck's shared cap
            held = sum(self.count[j] for j in range(self.shared[0], self.shared[1] + 1))
            return held == 0 or held + size <= self.caps[self.shared[1]]
        return True

    def pump(self) -> None:
        """Move finished units on, last step first, then read while caps allow."""
        for k in range(len(self.steps) - 1, 0, -1):
            queue = self.ready[k - 1]
            while queue and self.admits(k, len(queue[0].indices)):
                unit = queue.popleft()
                self.count[k - 1] -= len(unit.indices)
                self.submit(k, unit)
        while self.next_unit < len(self.units):
            size = len(self.units[self.next_unit])
            held = sum(self.count)
            if not self.admits(0, size) or (
                    self.limit is not None and held and held + size > self.limit):
                break
            self.submit(0, _Unit(self.units[self.next_unit]))
            self.next_unit += 1

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

    def submit(self, k: int, unit: _Unit) -> None:
        step, client, state = self.steps[k], self.client, self.state
        items = []
        if step.kind == "read":
            items = [(self.executor._submit_read(client, state, self.source, i,
                                                 self.priority(k), self.lent.get(k)), (i,))
                     for i in unit.indices]
        elif step.kind == "stage":
            for group in batch_groups(unit.items, step.batch_size):
                covered = tuple(i for _, idx in group for i in idx)
                with state.in_span(step.stage):
                    future = client.submit(
                        runtime.stage_task, step.stage, step.name, covered,
                        *(f for f, _ in group), key=state.key(step.stage, covered[0]),
                        resources=step.resources, priority=self.priority(k),
                    )
                items.append((future, covered))
        elif step.kind == "write":
            for previous, covered in unit.items:
                with state.in_span(step.stage):
                    future = client.submit(
                        runtime.write_task, self.sink.output, step.name, covered, previous,
                        key=state.key(step.stage, covered[0]), priority=self.priority(k),
                        **placement(step.resources, self.lent.get(k)),
                    )
                items.append((future, covered))
        else:
            for previous, covered in unit.items:
                self.results[covered[0]] = previous
                items.append((client.submit(runtime.records_of, previous,
                                            key=f"records-{state.token}-{covered[0]}",
                                            priority=self.priority(k)), covered))
        # The previous step's futures are now held by the tasks that depend on them.
        unit.items, unit.step, unit.waiting = items, k, len(items)
        size = len(unit.indices)
        self.count[k] += size
        self.running[k] += size
        for future, covered in items:
            self.pending[future] = (unit, covered)
            self.watcher.add(future)

    def complete(self, future) -> None:
        unit, covered = self.pending.pop(future)
        if future.status != "finished":
            raise_task_error(self.client, future)  # the task's error, with its stage noted
        k = unit.step
        kind = self.steps[k].kind
        if kind in ("write", "records"):
            value = future.result()
            records = list(value.get("records", [])) if kind == "write" else value
            if kind == "write":
                self.state.output_done(value)
            else:
                self.state.records.extend(value)
            self.measure(records)
            self.progress.update(len(covered), docs=records[-1]["rows_out"] if records else 0)
        unit.waiting -= 1
        if unit.waiting:
            return
        size = len(unit.indices)
        self.running[k] -= size
        self.done[k] += size
        if k == len(self.steps) - 1:
            self.count[k] -= size
            unit.items = []
        else:
            self.ready[k].append(unit)

    # -- measuring and planning ----------------------------------------------------------------
    def measure(self, records: list[dict]) -> None:
        for record in records:
            meter = self.meters.get(record["stage"])
            if meter is not None:
                meter.add(record)
        if not self.warm and all(m.total_tasks for m in self.meters.values()):
            # Every stage has finished a partition: its speed is known, warm-up is over.
            self.warm, self.plan_due = True, True
            now = time.time()
            for timeline in self.timelines.values():
                timeline.warmup_end = now

    def refresh_workers(self, now: float) -> bool:
        """Look at the workers; True when they changed (joined, left, other resources)."""
        try:
            info = self.client.scheduler_info(n_workers=-1)["workers"]
        except Exception:  # the scheduler is busy: keep the last view
            logger.debug("could not refresh the workers", exc_info=True)
            return False
        workers = {address: (int(w.get("nthreads", 1)), dict(w.get("resources") or {}))
                   for address, w in info.items()}
        changed = workers != self.workers
        self.workers = workers
        for k, pool in list(self.lent.items()):
            if not pool & set(workers):  # its pool left: back to its own workers, re-plan
                del self.lent[k]
                changed = True
        self.update_slots(now)
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

    def update_slots(self, now: float) -> None:
        """Every step's slots and eligible workers, as the steps now run."""
        for k, step in enumerate(self.steps):
            per_worker = self.placed(k)
            self.slots[k], self.eligible[k] = sum(per_worker.values()), frozenset(per_worker)
            if step.capped:
                self.timelines[step.name].set_slots(now, self.slots[k])

    def apply_caps(self, now: float) -> None:
        """Caps from the balance plan once warm, else one window for all steps."""
        executor = self.executor
        self.plan_due = False
        caps, limit = None, None
        if executor.balance and self.warm:
            capped = [k for k, s in enumerate(self.steps) if s.capped]
            loads = [self.own_load(k) for k in capped]
            plan = plan_caps(loads, unit=self.unit, limit=executor.max_in_flight)
            if plan is not None and executor.lend:
                loads, plan = self.lend(capped, loads, plan, now)
            self.next_plan = now + executor.balance_interval
            if plan is not None:
                caps = [math.inf] * len(self.steps)
                for k, cap in zip(capped, plan.caps):
                    caps[k] = cap
                # The total stays within the caps' sum, also while a stage whose cap
                # was lowered drains: the others cannot fill up beside it meanwhile.
                limit = min(sum(plan.caps), executor.max_in_flight or math.inf)
                if self.state.bottleneck != loads[plan.bottleneck].name:
                    logger.info("%s: bottleneck is stage %r (%.3g s per partition on %d "
                                "slots); caps %s", self.state.layout.name,
                                loads[plan.bottleneck].name, loads[plan.bottleneck].seconds,
                                loads[plan.bottleneck].slots,
                                {load.name: c for load, c in zip(loads, plan.caps)})
                self.state.bottleneck = loads[plan.bottleneck].name
                self.bottleneck = capped[plan.bottleneck]
                self.shared = ((capped[plan.shared[0]], self.bottleneck) if plan.shared
                               else None)
            elif self.caps_applied:
                return  # not plannable now (no stage can run): keep the caps
        if caps is None:
            # Warm-up of a balanced run only has to measure each stage: one partition
            # per worker. Without balancing the window also keeps workers busy: two.
            per_worker = 1 if executor.balance else 2
            window = max(executor.max_in_flight or per_worker * max(1, len(self.workers)),
                         self.unit)
            caps = [window if s.capped else math.inf for s in self.steps]
            limit = window
        self.caps, self.limit, self.caps_applied = caps, limit, True
        for k, step in enumerate(self.steps):
            if step.capped:
                self.timelines[step.name].set_cap(now, int(self.caps[k]))

    def own_load(self, k: int) -> StageLoad:
        """Step ``k`` as measured, on the workers its resources allow (not lent)."""
        name, per_worker = self.steps[k].name, self.placed(k, lent=False)
        return StageLoad(name, self.meters[name].seconds_per_partition(),
                         sum(per_worker.values()), frozenset(per_worker))

    def lend(self, capped: list[int], loads: list[StageLoad], plan, now: float):
        """Lend the reads and writes that share the bottleneck's workers to a pool with
        spare slots (:func:`~curator_dask.executors.balancing.lend_slots`); the loads and
        plan to use."""
        movable = [i for i, k in enumerate(capped) if self.steps[k].kind in ("read", "write")]
        threads = {w: n for w, (n, _) in self.workers.items()}
        now_lent = {i: self.lent[k] for i, k in enumerate(capped) if k in self.lent}
        lent, moved = lend_slots(loads, plan, movable, threads, now_lent)
        new = {capped[i]: pool for i, pool in lent.items()}
        if new != self.lent:
            logger.info("%s: %s", self.state.layout.name,
                        "; ".join(f"{self.steps[k].name} runs on {sorted(pool)}"
                                  for k, pool in new.items())
                        or "reads and writes back on their own workers")
        self.lent = new
        self.update_slots(now)
        if not lent:
            return loads, plan
        return moved, plan_caps(moved, unit=self.unit, limit=self.executor.max_in_flight)

    def queued(self, k: int) -> int:
        """Partitions waiting in front of step ``k``: finished upstream, or submitted to
        ``k`` beyond its slots (waiting on a worker)."""
        upstream = sum(len(u.indices) for u in self.ready[k - 1]) if k else 0
        return upstream + max(0, self.running[k] - self.slots[k])

    def sample(self, now: float) -> None:
        for k, step in enumerate(self.steps):
            if step.capped:
                self.timelines[step.name].sample(now, self.count[k], self.queued(k))

    def publish(self, now: float) -> None:
        """Demand for the adaptive plugin, and the Prometheus gauges."""
        stages = []
        for k, step in enumerate(self.steps):
            if not step.capped:
                continue
            meter = self.meters[step.name]
            stages.append({"name": step.name, "resources": dict(step.resources),
                           "seconds": meter.seconds_per_partition(),
                           "remaining": self.total - self.done[k], "slots": self.slots[k]})
            set_stage_gauges(self.state.layout.name, step.name,
                             meter.busy_ratio(self.slots[k]), self.queued(k))
        publish_demand(self.client, self.state.token, {
            "updated": now, "pipeline": self.state.layout.name, "stages": stages})
