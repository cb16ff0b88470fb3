"""The executor skeleton: what the local, batch and streaming executors share.

An executor cuts a pipeline into a :class:`Layout` (a reader, segments of partition
stages separated by whole-dataset stages, a writer) and runs it (:meth:`Executor.run`):

1. **Segments.** Every input partition goes through its segment's chain of steps:
   :class:`ReadStep` reads it, one :class:`ProcessStep` per stage runs the stage
   (``batch_size`` consecutive partitions concatenated), and :class:`WriteStep` writes
   the part (or, without a writer, :class:`CollectStep` keeps the partition). The steps
   say what each task is; an executor only decides how a partition's chain is submitted
   and awaited (:meth:`Executor.run_segment`): here in this process (local), one stage
   at a time over all partitions (batch), or a bounded window of partitions flowing
   through all stages at once (streaming).
2. **Resume.** With ``resume=True``, partitions whose part is complete (its marker is
   written after the part's atomic rename) are skipped, after the output's manifest
   proved to hold this run's fingerprint (input identity and pipeline, see
   :meth:`~curator_dask.stages.io_stages.WriterStage.prepare`). Every path the run
   writes is checked and leased first by its :class:`~curator_dask.io.guard.OutputGuard`.
3. **Barriers.** A whole-dataset stage needs all of its input: the segment before it
   writes its parts as Parquet under the cache directory (``<cache>/<k>-<stage>/input``),
   the stage runs on them, its output is kept in ``output`` with a completion record of
   the input and the pipeline up to the stage, and the next segment reads from there. A
   resumed run skips input parts already written and reuses an output whose record
   matches (:func:`~curator_dask.io.output_state.reusable`).
4. **Report and teardown.** Task records (:class:`~curator_dask.observe.run_result.TaskRecord`)
   ride with the data to the writer; the run's :class:`~curator_dask.observe.run_result.RunResult`
   sums them per stage. Whatever happens, every stage is torn down where it was set up,
   and a failed run releases its futures before the error reaches the caller.

On a cluster (:class:`ClusterExecutor`), three facts about Dask shape the submission:

- Only resources given at submission restrict tasks (with query planning, annotations
  made while building a dataframe are dropped), so every task is submitted, or
  persisted, with its stage's resources, the reads and writes included.
- A task whose resources no worker offers waits forever: placement is checked against
  the workers' advertised resources before anything is submitted (:func:`check_placement`).
- Spans group tasks by key prefix, and the scheduler keeps the placement of keys it has
  seen: each stage gets its own prefix (:func:`~curator_dask.stages.base.key_prefix`)
  and each run a fresh token, ``<stage>-<token>-<first input partition>``.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import dask
from distributed.scheduler import NoWorkerError

from curator_dask.cluster import worker_resources
from curator_dask.dataset import DocumentDataset
from curator_dask.errors import CuratorError, NoWorkersError, ResourceUnavailableError
from curator_dask.executors import runtime
from curator_dask.executors.balancing import StageTimeline, busy_fraction
from curator_dask.faults import faults_explained, lost_workers, scheduler_lost
from curator_dask.io import atomic
from curator_dask.io.guard import OutputGuard, run_guard
from curator_dask.io.output_state import mark_complete, reusable
from curator_dask.io.planner import in_flight_per_worker, largest_working_set, worker_memory
from curator_dask.observe.progress import Progress, phase
from curator_dask.observe.run_result import RunResult, StageMetrics, TaskRecord, stage_metrics
from curator_dask.resources import Resources
from curator_dask.stages.base import (
    ProcessingStage,
    Stage,
    WholeDatasetStage,
    key_prefix,
    teardown_stage,
    unique_name,
)
from curator_dask.stages.fingerprint import pipeline_changes
from curator_dask.stages.io_stages import (
    ParquetWriter,
    PreparedOutput,
    ReaderStage,
    WriterStage,
    input_identity,
    plan_token,
)

__all__ = ["ClusterExecutor", "Executor", "Layout", "check_placement"]

logger = logging.getLogger(__name__)


# -- the pipeline, cut for execution -------------------------------------------------------

@dataclass
class Layout:
    """A pipeline cut for execution: reader, segments of partition stages, barriers, writer.

    ``segments[i]`` runs before ``barriers[i]``; the last segment has no barrier after it.
    """

    name: str
    reader: ReaderStage
    segments: list[list[ProcessingStage]]
    barriers: list[WholeDatasetStage]
    writer: WriterStage | None
    names: dict[int, str] = field(default_factory=dict)  # id(stage) -> unique display name

    @classmethod
    def of(cls, name: str, stages: Sequence[Stage]) -> Layout:
        if not stages or not isinstance(stages[0], ReaderStage):
            raise ValueError(
                f"pipeline {name!r} must start with a reader stage (JsonlReader or "
                "ParquetReader); add one with add_stage() first"
            )
        writer = stages[-1] if isinstance(stages[-1], WriterStage) else None
        middle = stages[1:-1] if writer is not None else stages[1:]
        segments: list[list[ProcessingStage]] = [[]]
        barriers: list[WholeDatasetStage] = []
        for stage in middle:
            if isinstance(stage, WholeDatasetStage):
                barriers.append(stage)
                segments.append([])
            else:
                segments[-1].append(stage)
        layout = cls(name, stages[0], segments, barriers, writer)
        for stage in stages:
            layout.names[id(stage)] = unique_name(stage.name, layout.names.values())
        return layout

    def name_of(self, stage: Stage) -> str:
        """The stage's unique name in the pipeline; a stage the executor adds (an
        :class:`InternalStage`) goes by its own."""
        return self.names.get(id(stage), stage.name)

    def entry(self, stage: Stage) -> dict:
        """``{"name", "kind", "fingerprint"}`` of one stage, as a resume manifest keeps it."""
        return {"name": self.name_of(stage), "kind": stage.kind,
                "fingerprint": stage.fingerprint()}

    def fingerprint(self, upto: Stage | None = None) -> list[dict]:
        """What the pipeline computes: every stage's :meth:`entry`, in order.

        The same under every executor (names, resources and batch sizes are not part of
        a stage's fingerprint). With ``upto`` (a stage of the layout), only the stages
        before it: what a barrier's input depends on.
        """
        stages = self.stages
        if upto is not None:
            stages = stages[:next(i for i, s in enumerate(stages) if s is upto)]
        return [self.entry(stage) for stage in stages]

    @property
    def stages(self) -> list[Stage]:
        out: list[Stage] = [self.reader]
        for i, segment in enumerate(self.segments):
            out.extend(segment)
            if i < len(self.barriers):
                out.append(self.barriers[i])
        if self.writer is not None:
            out.append(self.writer)
        return out

    @property
    def processing_stages(self) -> list[ProcessingStage]:
        return [s for segment in self.segments for s in segment]

    def order(self, resources: dict[int, dict] | None = None) -> list[tuple[str, str, str]]:
        """(name, kind, resources) of every stage, for metrics."""
        out = []
        for stage in self.stages:
            res = (resources or {}).get(id(stage))
            if res == {}:  # check_placement: workers without resources, any will do
                shown = "unrestricted"
            else:
                shown = (", ".join(f"{k}={v:g}" for k, v in res.items()) if res
                         else str(stage.resources or ""))
            out.append((self.name_of(stage), stage.kind, shown))
        return out


class InternalStage(Stage):
    """A step the executor adds around a barrier: writing its input to the cache
    (kind ``"write"``) or reading its output back (kind ``"read"``), on one CPU."""

    def __init__(self, name: str, kind: str):
        self.name, self.kind = name, kind


# -- one segment: the chain of steps each partition goes through ----------------------------

@dataclass
class Source:
    """Input partitions of a segment: a planned dataset and the stage that reads them
    (the pipeline's reader, or the :class:`InternalStage` reading a barrier's output)."""

    dataset: object  # DocumentDataset with a plan and a partition_reader
    stage: Stage

    @property
    def plan(self):
        return self.dataset.plan


@dataclass
class Sink:
    """Where a segment's parts go: the pipeline's output (``final``), or a barrier's input
    in the cache, whose parts' stats (written or found complete) the barrier counts."""

    output: PreparedOutput
    stage: Stage
    final: bool = True
    stats: list[dict] = field(default_factory=list)

    def written(self, state: RunState, stats: dict) -> None:
        if self.final:
            state.output_done(stats)
        else:
            self.stats.append(stats)

    def found_complete(self, state: RunState, stats: list[dict]) -> None:
        (state.skipped_stats if self.final else self.stats).extend(stats)


@dataclass(frozen=True)
class Task:
    """One task of a step: ``func(*args)``, under ``key``, covering input partitions
    ``covered`` (more than one after a stage with ``batch_size > 1``)."""

    func: Callable
    args: tuple
    key: str
    covered: tuple[int, ...]


class Step:
    """One link of a segment's chain. :meth:`tasks` turns what the previous step made,
    ``(value, covered partitions)`` pairs, into this step's tasks; :meth:`finish`
    handles the result of a last step's task."""

    #: The streaming executor bounds the partitions a capped step holds.
    capped = True
    #: May run on any worker: the executor's own reads and writes (see lending).
    movable = False

    def __init__(self, state: RunState, stage: Stage | None, batch_size: int = 1):
        self.stage, self.batch_size = stage, batch_size
        self.name = state.layout.name_of(stage) if stage is not None else "records"
        self.resources = state.resources.get(id(stage)) if stage is not None else None
        self.prefix = (f"{state.prefixes[id(stage)]}-{state.token}" if stage is not None
                       else f"records-{state.token}")

    def tasks(self, items: list[tuple]) -> list[Task]:
        raise NotImplementedError

    def finish(self, state: RunState, value) -> list[TaskRecord]:
        """Account for a finished task's result; the records it brought back."""
        return []


class ReadStep(Step):
    """Read one planned partition; its items are ``(None, (index,))``."""

    movable = True

    def __init__(self, state: RunState, source: Source):
        super().__init__(state, source.stage)
        self.source = source

    def tasks(self, items):
        reader, plan = self.source.dataset.partition_reader, self.source.plan
        return [Task(runtime.read_task, (reader, plan[i], self.name), f"{self.prefix}-{i}", (i,))
                for _, (i,) in items]


class ProcessStep(Step):
    """Run a stage, ``batch_size`` consecutive partitions concatenated into one call."""

    def tasks(self, items):
        out = []
        for group in batch_groups(items, self.batch_size):
            covered = tuple(i for _, indices in group for i in indices)
            out.append(Task(runtime.stage_task,
                            (self.stage, self.name, covered, *(value for value, _ in group)),
                            f"{self.prefix}-{covered[0]}", covered))
        return out


class WriteStep(Step):
    """Write one part, named after the first input partition it holds."""

    movable = True

    def __init__(self, state: RunState, sink: Sink):
        super().__init__(state, sink.stage)
        self.sink = sink

    def tasks(self, items):
        return [Task(runtime.write_task, (self.sink.output, self.name, covered, value),
                     f"{self.prefix}-{covered[0]}", covered) for value, covered in items]

    def finish(self, state, stats):
        records = stats.pop("records")
        state.records.extend(records)
        self.sink.written(state, stats)
        return records


class CollectStep(Step):
    """Without a writer: keep each final partition where it is, and fetch its records."""

    capped = False

    def __init__(self, state: RunState):
        super().__init__(state, None)
        self.results: dict[int, object] = {}  # by first input partition

    def tasks(self, items):
        for value, covered in items:
            self.results[covered[0]] = value
        return [Task(runtime.records_of, (value,), f"{self.prefix}-{covered[0]}", covered)
                for value, covered in items]

    def finish(self, state, records):
        state.records.extend(records)
        return records


@dataclass
class Segment:
    """What :meth:`Executor.run_segment` runs: the input partitions left to do, the chain
    of steps, and the schema of what comes out."""

    indices: list[int]
    steps: list[Step]
    meta: object
    #: Partitions one worker may hold at once, planned from its memory
    #: (:func:`~curator_dask.io.planner.in_flight_per_worker`); None: no limit known.
    per_worker: int | None = None

    @property
    def unit(self) -> int:
        """Partitions that move together: the largest ``batch_size`` in the chain."""
        return max(step.batch_size for step in self.steps)


def batch_groups(items: list[tuple], batch_size: int) -> list[list[tuple]]:
    """Group ``(value, indices)`` items so each group covers ``batch_size`` partitions.

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


# -- the run --------------------------------------------------------------------------------

@dataclass
class RunState:
    """Bookkeeping of one run: keys, resources, spans, timings, records and results."""

    layout: Layout
    client: object = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    resources: dict[int, dict] = field(default_factory=dict)
    spans: dict[int, dict] = field(default_factory=dict)
    prefixes: dict[int, str] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    started_wall: float = field(default_factory=time.time)
    #: Workers lost mid-run, as :func:`curator_dask.faults.lost_workers` finds them.
    lost_workers: list[dict] = field(default_factory=list)
    first_output: float | None = None
    records: list[TaskRecord] = field(default_factory=list)
    write_stats: list[dict] = field(default_factory=list)
    skipped_stats: list[dict] = field(default_factory=list)
    partitions: int = 0
    skipped: int = 0
    #: Drop counts of partitions that went into a whole-dataset stage (which does not
    #: carry partition attributes through).
    barrier_dropped: list[dict] = field(default_factory=list)
    #: A barrier's rows out are the rows the step reading its output back read.
    barrier_rows: dict[str, str] = field(default_factory=dict)
    #: Streaming: each stage's cap, partitions held, queue and slots over the run.
    timelines: dict[str, StageTimeline] = field(default_factory=dict)
    #: Streaming with balancing: the stage the last plan found slowest.
    bottleneck: str | None = None
    #: Where the run reads from, and what (the plan, every file's identity).
    inputs: list = field(default_factory=list)
    input_identity: dict = field(default_factory=dict)
    #: The paths the run writes, checked and leased; the barriers' cache directory.
    guard: OutputGuard | None = None
    cache: str | None = None
    #: On a cluster, the workers' advertised resources when the run started.
    workers: dict[str, dict] = field(default_factory=dict)
    #: The run's one progress bar (or log lines), moved on from stage to stage.
    progress: Progress = field(default_factory=lambda: Progress(enabled=False))

    def __post_init__(self) -> None:
        for stage in self.layout.stages:
            self.register(stage)

    def register(self, stage: Stage) -> Stage:
        """Give a stage (of the layout, or an :class:`InternalStage`) its key prefix, its
        resources and, on a cluster (:meth:`place`), its span."""
        name = self.layout.name_of(stage)
        self.prefixes[id(stage)] = key_prefix(name)
        if stage.resources is not None:
            self.resources[id(stage)] = (
                check_placement([stage], {id(stage): name}, self.workers)[id(stage)]
                if self.workers else stage.resources.to_dask())
        if self.client is not None:
            self.spans[id(stage)] = span_annotation(self.layout.name, name)
        return stage

    def place(self, workers: dict[str, dict]) -> None:
        """On a cluster (:attr:`client` set): check every stage's resources against the
        workers (see :func:`check_placement`) and give each stage a span."""
        layout = self.layout
        for stage in layout.processing_stages:
            # Fix each stage's identity before it is pickled, so every task's copy maps to
            # the same worker-side instance (set up once per process, torn down by id).
            stage.stage_id  # noqa: B018
        placed = [s for s in layout.stages if s.resources is not None]
        self.workers = workers
        self.resources.update(check_placement(placed, layout.names, workers))
        for stage in layout.stages:
            self.spans[id(stage)] = span_annotation(layout.name, layout.name_of(stage))

    @contextlib.contextmanager
    def in_span(self, stage: Stage | None, building: bool = False):
        """Tag what is submitted inside with the stage's span (on a cluster).

        ``building=True`` around code that also builds dataframes (a whole-dataset
        stage): dask warns that annotations are ignored while building, which is
        expected; the span still applies to what that code computes or persists.
        """
        span = self.spans.get(id(stage))
        with contextlib.ExitStack() as stack:
            if span is not None:
                if building:
                    stack.enter_context(warnings.catch_warnings())
                    warnings.filterwarnings("ignore", message="Dask annotations",
                                            category=UserWarning)
                stack.enter_context(dask.annotate(span=span))
            yield

    def output_done(self, stats: dict) -> None:
        if self.first_output is None:
            self.first_output = time.perf_counter() - self.started
        self.write_stats.append(stats)

    def result(self, executor: str, output_path: str | None, dataset=None) -> RunResult:
        from curator_dask.dropped import split_counts, sum_dropped

        records = [record.as_dict() for record in self.records]
        for barrier, reader in self.barrier_rows.items():
            rows = sum(r["rows_out"] for r in records if r["stage"] == reader)
            for record in records:
                if record["stage"] == barrier:
                    record["rows_out"] = rows
        all_stats = self.write_stats + self.skipped_stats
        files = sorted(f for s in all_stats for f in s["files"])
        stages = stage_metrics(records, self.layout.order(self.resources))
        dropped, counters = split_counts(sum_dropped(
            [*(s["dropped"] for s in all_stats), *self.barrier_dropped]))
        for metrics in stages:
            timeline = self.timelines.get(metrics.name)
            if timeline is not None:
                add_flow_metrics(metrics, timeline, records, self.started_wall)
        return RunResult(
            pipeline=self.layout.name, executor=executor, stages=stages,
            bottleneck=self.bottleneck,
            output_path=output_path, files=files,
            rows=sum(s["rows"] for s in all_stats), bytes=sum(s["bytes"] for s in all_stats),
            dropped=dropped, counters=counters,
            partitions=self.partitions, partitions_skipped=self.skipped,
            wall_seconds=time.perf_counter() - self.started,
            time_to_first_output=self.first_output, dataset=dataset, records=records,
            inputs=list(self.inputs), lost_workers=list(self.lost_workers),
        )


class Executor:
    """Base class: runs a pipeline's layout and returns a :class:`RunResult`.

    Subclasses say how one segment's chain is submitted and awaited
    (:meth:`run_segment`), what a run needs around it (:meth:`session`) and how kept
    partitions become a dataset (:meth:`frames`); segments, resume, barriers, records
    and the result are here.

    Parameters
    ----------
    resume : bool, default False
        Skip input partitions whose output part is already complete (see
        :mod:`curator_dask.stages.io_stages`); a pipeline needs a writer for this.
    cache_path : str, optional
        Where whole-dataset stages (barriers) keep their input and intermediate data.
        Default: beside the output, ``<output>.curator-cache``; without a writer a
        temporary directory (single machine only).
    progress : bool, default True
        Report progress: a bar on a terminal or in a notebook, else an INFO line of
        ``curator_dask.observe.progress`` every 10 s (see
        :mod:`curator_dask.observe.progress`).
    force : bool, default False
        Take over the lease of an output or cache directory whose run stopped
        heart-beating (:mod:`curator_dask.io.lease`); a live run's is always refused.
    """

    name = "executor"
    #: Whether ``run(report=...)`` saves distributed's performance report.
    writes_report = False

    def __init__(self, *, resume: bool = False, cache_path: str | None = None,
                 progress: bool = True, force: bool = False):
        self.resume = resume
        self.cache_path = cache_path
        self.progress = progress
        self.force = force

    # -- what an executor decides ----------------------------------------------------------
    def session(self, state: RunState, report: str | None):
        """A context manager around the run: set up before, tear down after."""
        raise NotImplementedError

    def run_segment(self, state: RunState, segment: Segment) -> None:
        """Run every partition of ``segment.indices`` through ``segment.steps``, handing
        each last step's result to its :meth:`Step.finish`."""
        raise NotImplementedError

    def frames(self, state: RunState, results: dict[int, object]) -> list:
        """Kept ``(frame, records)`` results (by first partition) as ``dd.from_delayed``
        input, in partition order."""
        raise NotImplementedError

    # -- the skeleton ------------------------------------------------------------------------
    def run(self, layout: Layout, report: str | None = None) -> RunResult:
        if self.resume and layout.writer is None:
            raise ValueError(f"pipeline {layout.name!r}: resume=True needs a writer stage, "
                             "whose completed parts are what a resume skips")
        state = RunState(layout, progress=Progress(enabled=self.progress))
        with run_guard(force=self.force) as state.guard:  # paths checked before any cluster
            state.cache = self.register_outputs(state.guard, layout, report)
            try:
                with state.progress.active(), self.session(state, report):
                    dataset = self._run(state)
            finally:
                state.progress.close()
        result = state.result(self.name, layout.writer.path if layout.writer else None,
                              dataset=dataset)
        result.report = report if self.writes_report else None
        return result

    def register_outputs(self, guard: OutputGuard, layout: Layout,
                         report: str | None = None) -> str | None:
        """Register with ``guard`` what a run of ``layout`` reads and every path it
        writes (refused, naming both, if one overlaps an input or another); the barriers'
        cache (None without barriers, or for a private temporary one)."""
        guard.add_inputs([layout.reader.input_paths()])
        options = layout.writer.storage_options if layout.writer is not None else None
        if report:
            guard.register(report, "performance report", kind="file")
        for path, what in (layout.writer.outputs() if layout.writer is not None else []):
            guard.register(path, what, storage_options=options)
        cache = self._cache_root(layout) if layout.barriers else None
        if cache is not None:
            guard.register(cache, "cache directory", storage_options=options)
        return cache

    def _run(self, state: RunState):
        layout = state.layout
        # The automatic blocksize fits the most memory-hungry stage, barriers included.
        ds = layout.reader.dataset(work=largest_working_set(
            s.working_set for s in layout.stages if s.kind in ("process", "barrier")))
        if state.cache is None and layout.barriers:  # no writer, no cache_path: a private one
            state.cache = atomic.make_temp_dir(f"curator-{key_prefix(layout.name)}-")
        cache = state.cache
        output = self._open_output(state, ds)
        source = Source(ds, layout.reader)
        for k, stages in enumerate(layout.segments):
            if k < len(layout.barriers):
                barrier = layout.barriers[k]
                directory = posixpath.join(cache, f"{k}-{key_prefix(layout.name_of(barrier))}")
                source = self._through_barrier(state, source, stages, barrier, directory,
                                               first=k == 0)
            elif output is not None:
                known = state.input_identity if source.dataset is ds else None
                sink = Sink(replace(output, source=plan_token(source.dataset, known),
                                    spec=replace(output.spec, schema=source.dataset.schema)),
                            layout.writer)
                self._segment(state, source, stages, sink, first=k == 0)
                layout.writer.finish(sink.output, state.write_stats + state.skipped_stats)
            else:
                return self._collect(state, self._segment(state, source, stages, None,
                                                          first=k == 0))
        return None

    def _segment(self, state: RunState, source: Source, stages: Sequence[ProcessingStage],
                 sink: Sink | None, first: bool) -> Segment:
        """Run one segment: skip what a resume finds complete, then the rest."""
        plan = source.plan
        indices = list(range(len(plan)))
        if sink is not None and self.resume:
            done = sink.output.completed()
            indices = [i for i in indices if i not in done]
            sink.found_complete(state, list({s["partition"]: s for s in done.values()}.values()))
            if first:
                state.skipped += len(plan) - len(indices)
            if done:
                logger.info("resume: %d of %d partitions already written, skipping them",
                            len(plan) - len(indices), len(plan))
        if first:
            state.partitions += len(plan)
        meta = source.dataset.df._meta
        for stage in stages:  # declared columns are checked here, before anything runs
            meta = stage.meta(meta)
        last = WriteStep(state, sink) if sink is not None else CollectStep(state)
        steps = [ReadStep(state, source), *(ProcessStep(state, s, s.batch_size) for s in stages),
                 last]
        partition_bytes = max((getattr(p, "nbytes", 0) for p in plan), default=0)
        per_worker = in_flight_per_worker(
            partition_bytes, largest_working_set(s.working_set for s in stages),
            worker_memory(state.client)) if state.client is not None else None
        segment = Segment(indices, steps, meta, per_worker)
        self.run_segment(state, segment)
        return segment

    def _collect(self, state: RunState, segment: Segment):
        """Without a writer: the final partitions as a dataset (held where they are)."""
        import dask
        import dask.dataframe as dd

        from curator_dask.dataset import DocumentDataset

        frames = self.frames(state, segment.steps[-1].results)
        # The partitions are typed already: convert-string would turn object columns
        # (embedding vectors) into their repr strings.
        with dask.config.set({"dataframe.convert-string": False}):
            df = (dd.from_delayed(frames, meta=segment.meta, verify_meta=False) if frames
                  else dd.from_pandas(segment.meta, npartitions=1))
        return DocumentDataset(df, sources=state.layout.reader.dataset().sources)

    def _through_barrier(self, state: RunState, source: Source, stages, barrier: WholeDatasetStage,
                         cache: str, first: bool) -> Source:
        """Stream the segment into the barrier's input, run the barrier (or reuse its
        finished output), and return its output as the next segment's source."""
        layout = state.layout
        name = layout.name_of(barrier)
        spill = state.register(InternalStage(f"{name}_input", "write"))
        # The spill is the executor's own: written by another pipeline, it starts over.
        identity = input_identity(source.dataset)
        output = ParquetWriter(posixpath.join(cache, "input"), mode="overwrite").prepare(
            identity, resume=self.resume, inputs=state.inputs,
            pipeline=layout.fingerprint(upto=barrier), restart_on_mismatch=True)
        sink = Sink(replace(output, source=plan_token(source.dataset, identity),
                            spec=replace(output.spec, schema=source.dataset.schema)),
                    spill, final=False)
        self._segment(state, source, stages, sink, first)
        state.barrier_dropped.extend(s["dropped"] for s in sink.stats)

        start = time.time()
        out_dir = posixpath.join(cache, "output")
        fs = output.fs
        # The barrier's output may be reused only by the pipeline (up to and including
        # the barrier) that computed it, from the same input.
        fingerprint = {"input": state.input_identity,
                       "pipeline": [*layout.fingerprint(upto=barrier), layout.entry(barrier)]}
        saved = (reusable(fs, out_dir, fingerprint, explain={"pipeline": pipeline_changes})
                 if self.resume else None)
        if saved is not None:
            out = DocumentDataset.read_parquet(out_dir, files_per_partition=1)
            removed = saved["stats"].get("dropped", {})
        else:
            ds_in = DocumentDataset.read_parquet(output.spec.path, files_per_partition=1)
            with state.in_span(barrier, building=True), phase(f"{layout.name}: {name}"):
                out = barrier.run(ds_in, posixpath.join(cache, "work"))
                with phase("write"):
                    out, removed = _materialize(out, out_dir)
                if fs.exists(out_dir):  # written here: its record keeps the drop counts
                    state.guard.check()
                    mark_complete(fs, out_dir, fingerprint=fingerprint, rows=0,
                                  files=len(out.plan or ()), stats={"dropped": removed})
        state.barrier_dropped.append(removed)
        stop = time.time()
        reread = state.register(InternalStage(f"{name}_output", "read"))
        state.records.append(TaskRecord(
            stage=name, partitions=len(out.plan), rows_in=sum(s["rows"] for s in sink.stats),
            rows_out=0, bytes=0, seconds=stop - start, start=start, stop=stop, worker="client"))
        state.barrier_rows[name] = reread.name
        return Source(out, reread)

    # -- shared helpers ----------------------------------------------------------------------
    def progress_bar(self, state: RunState, total: int, description: str | None = None):
        """The run's progress, moved on to a new stage of ``total`` partitions."""
        state.progress.stage(description or state.layout.name, total)
        return state.progress

    def _cache_root(self, layout: Layout) -> str | None:
        """``cache_path``, else beside the output; None: a private temporary one."""
        if self.cache_path is not None:
            return self.cache_path.rstrip("/")
        if layout.writer is not None:
            return layout.writer.path.rstrip("/") + ".curator-cache"
        return None

    def _open_output(self, state: RunState, ds):
        """Record what the run reads (checked against every output again) and prepare the
        writer's output (:meth:`WriterStage.prepare`; None without a writer)."""
        layout = state.layout
        state.inputs = [ds.sources] if ds.sources is not None else []
        state.guard.add_inputs(state.inputs)
        state.input_identity = input_identity(ds)
        writer = layout.writer
        if writer is None:
            return None
        return writer.prepare(state.input_identity, resume=self.resume,
                              pipeline=layout.fingerprint(), inputs=state.inputs)


def _materialize(out: DocumentDataset, directory: str) -> tuple:
    """A barrier's output as a dataset the next segment can read, and its drop counts.

    A barrier that returns a planned dataset (files with a reader) is read from as it
    is. Any other output is written to ``directory`` and read back one file a partition;
    its partitions carry the documents the barrier removed in their drop counts, which
    files do not keep: the counts come back here, so the run can report them.
    """
    from curator_dask.dropped import join_counts

    if out.partition_reader is not None and out.plan is not None:
        return out, {}
    written = out.to_parquet(directory, mode="overwrite")
    return (DocumentDataset.read_parquet(directory, files_per_partition=1),
            join_counts(written.dropped, written.counters))


def add_flow_metrics(metrics: StageMetrics, timeline: StageTimeline, records: list[dict],
                     started: float) -> None:
    """Fill a stage's streaming metrics: busy fraction, queue, cap and holdings over time.

    Times in the histories are seconds since ``started`` (the run's start, epoch seconds).
    """
    mine = [r for r in records if r["stage"] == metrics.name]
    metrics.busy_fraction = busy_fraction(mine, timeline)
    queue = timeline.mean_queue_length(until=max((r["stop"] for r in mine), default=None))
    metrics.mean_queue_length = round(queue, 3) if queue is not None else None
    metrics.cap_history = [(round(t - started, 3), cap) for t, cap in timeline.caps]
    metrics.in_flight_history = [(round(t - started, 3), n) for t, n in timeline.in_flight]


# -- on a cluster -----------------------------------------------------------------------------

class ClusterExecutor(Executor):
    """Base of the executors that run on a Dask cluster (batch and streaming).

    Before anything is submitted the stages' resources are checked against the workers;
    during the run distributed's performance report is recorded when asked for; after
    it, failed or not, every worker tears the stages down, and a failed run first
    releases its futures.
    """

    writes_report = True

    def __init__(self, *, resume: bool = False, client=None, cache_path: str | None = None,
                 progress: bool = True, force: bool = False):
        super().__init__(resume=resume, cache_path=cache_path, progress=progress, force=force)
        self.client = client

    def _client(self):
        if self.client is not None:
            return self.client
        from distributed import default_client

        try:
            return default_client()
        except ValueError:
            raise ValueError(
                f"{type(self).__name__} needs a Dask client: create one with "
                "curator_dask.get_client(), pass client=..., or debug in-process with "
                "LocalExecutor()"
            ) from None

    def workers(self, client, state: RunState) -> dict[str, dict]:
        """The workers' resources, checked against the stages before the run."""
        return worker_resources(client)

    def cleanup(self, state: RunState) -> None:
        """Called once the run is over, failed or not (and if the workers never came)."""

    @contextlib.contextmanager
    def session(self, state: RunState, report: str | None):
        client = state.client = self._client()
        try:
            state.place(self.workers(client, state))
        except BaseException:
            self.cleanup(state)
            raise
        if report:
            saved = state.guard.claim(report, "performance report")
            report_ctx = atomic.performance_report(saved.fs, saved.path)
        else:
            report_ctx = contextlib.nullcontext()
        try:
            with report_ctx, faults_explained(lambda: _partition_bytes(state), client):
                yield
        except BaseException as err:
            lost = scheduler_lost(err, client)
            # Before the error reaches the caller: its traceback holds the run's futures,
            # and the client holds the erred one's exception, so they would stay alive
            # (and their keys on the cluster) until the garbage collector breaks the cycle.
            # With the scheduler gone there is nothing to release: each call would wait
            # out the connect timeout before failing.
            if not lost:
                release_run(client, state.token)
            raise
        else:
            lost = False
            state.lost_workers = lost_workers(client, state.started_wall, state.token)
        finally:
            self.cleanup(state)
            if not (lost or scheduler_lost(None, client)):
                teardown_everywhere(client, state.layout.processing_stages, state.token)

    def frames(self, state, results):
        return [state.client.submit(runtime.frame_of, carried, key=f"frame-{state.token}-{i}")
                for i, carried in sorted(results.items())]


def _partition_bytes(state: RunState) -> int | None:
    """The largest input partition of the run (named when workers die for memory)."""
    plan = state.layout.reader.dataset().plan
    return max((p.nbytes for p in plan), default=None) if plan else None


def _offers(worker: dict, wanted: dict) -> bool:
    return all(worker.get(name, 0) >= amount for name, amount in wanted.items())


def check_placement(stages: Sequence[Stage], names: dict[int, str],
                    workers: dict[str, dict]) -> dict[int, dict]:
    """The Dask resources each stage's tasks will ask for, checked against the workers.

    A stage whose resources no worker offers raises :class:`ResourceUnavailableError`
    naming the stage and the resource, unless it has ``cpu_fallback = True`` and needs a
    GPU: then it runs with one CPU, and a warning says so.

    When no worker advertises any resource at all (a plain ``LocalCluster()``), there is
    no GPU worker to keep CPU work away from: CPU stages run unrestricted (``{}``) and
    a stage that needs a GPU fails as above.
    """
    if not workers:
        raise ResourceUnavailableError(
            "no workers are connected to the scheduler; start workers (or wait for them "
            "with client.wait_for_workers(n)) before running the pipeline"
        )
    unrestricted = not any(workers.values())
    offered = sorted({f"{k}={v:g}" for w in workers.values() for k, v in w.items()})
    resolved: dict[int, dict] = {}
    for stage in stages:
        resources: Resources = stage.resources
        wanted = resources.to_dask()
        if unrestricted and not resources.requires_gpu:
            wanted = {}
        elif not any(_offers(w, wanted) for w in workers.values()):
            fallback = {"CPU": 1.0}
            if (resources.requires_gpu and stage.cpu_fallback
                    and any(_offers(w, fallback) for w in workers.values())):
                logger.warning("stage %r asks for %s but no worker offers it; running it on "
                               "CPU (cpu_fallback=True)", names[id(stage)], resources)
                wanted = fallback
            else:
                missing = ", ".join(f"{k}={v:g}" for k, v in wanted.items())
                hint = ("start GPU workers (get_client(cluster_type='gpu' or 'mixed')) or "
                        "give the stage cpu_fallback=True" if resources.requires_gpu else
                        "give every CPU worker the resource: LocalCluster(resources="
                        "{'CPU': 1}), or start workers with --resources CPU=<threads> "
                        "(get_client() does both; for dask-jobqueue pass "
                        "worker_extra_args=['--resources', 'CPU=<cores>'])")
                raise ResourceUnavailableError(
                    f"stage {names[id(stage)]!r} asks for {missing} per task, but no worker "
                    f"offers that (workers offer: {', '.join(offered) or 'no resources'}); "
                    f"{hint}"
                )
        resolved[id(stage)] = wanted
    return resolved


def span_annotation(*tags: str) -> dict:
    """The annotation of a new span, to re-enter it for every submission of a stage.

    ``distributed.span`` makes a new span each time it is entered; a stage submits its
    tasks over the whole run, so the executor enters the span once and reuses it.
    """
    from distributed import span

    with span(*tags):
        return dict(dask.get_annotations()["span"])


def release_run(client, token: str) -> int:
    """Cancel every future of the run ``token`` that the client holds; how many.

    Every key of a run carries its token (:class:`Step`). Cancelling pops the futures'
    states from the client, so the scheduler forgets the keys at once, whatever still
    refers to the futures (a traceback, an ``as_completed``).
    """
    from distributed import Future

    keys = [key for key in list(client.futures) if token in str(key)]
    if keys:
        try:
            client.cancel([Future(key, client) for key in keys], reason="run failed")
        except Exception:  # releasing must not hide the run's own error
            logger.warning("could not release the failed run's %d futures", len(keys),
                           exc_info=True)
    return len(keys)


def raise_task_error(client, future) -> None:
    """Raise the error of a future that did not finish, explaining a cluster with no worker.

    distributed's :class:`~distributed.scheduler.NoWorkerError` names only a task and the
    timeout; :class:`NoWorkersError` (a subclass) adds which workers left and why.
    """
    try:
        future.result()
    except NoWorkerError as err:
        if isinstance(err, NoWorkersError):
            raise
        raise no_workers_error(client, err) from err


def no_workers_error(client, err: NoWorkerError) -> NoWorkersError:
    """A :class:`NoWorkersError` for ``err``, with the last workers' departures."""
    from dask.utils import key_split

    departures = []
    try:
        events = [e for _, e in client.get_events("all")
                  if isinstance(e, dict) and e.get("action") == "remove-worker"]
        for event in events[-4:]:
            worker = event.get("worker", "?")
            reasons = [e.get("reason") for _, e in client.get_events(worker)
                       if isinstance(e, dict) and e.get("action") == "closing-worker"]
            stimulus = str(event.get("stimulus_id", ""))
            if reasons:
                why = f"closed: {reasons[-1]}"
            elif stimulus.startswith("handle-worker-cleanup"):
                why = "connection lost: the process died or was killed"
            else:
                why = stimulus.rsplit("-", 1)[0] or "unknown"
            departures.append(f"{worker} ({why})")
    except Exception:  # the explanation is best effort; the error itself is not
        logger.debug("could not read the scheduler's worker events", exc_info=True)
    left = ("; the last workers to leave were " + ", ".join(departures)) if departures else ""
    message = (
        f"no worker was running for {err.timeout:g} s (the scheduler's no-workers timeout), "
        f"so task {err.task!r} of stage {key_split(err.task)!r} could not run{left}. "
        "Check the workers' logs (memory limit? killed?), start workers, or give "
        "get_client(no_workers_timeout=...) more time if they restart slowly")
    return NoWorkersError(err.task, err.timeout, message)


def teardown_everywhere(client, stages: Sequence[ProcessingStage], token: str | None = None,
                        wait: float = 30.0) -> None:
    """Call ``teardown()`` on every worker's live copy of each stage (ids the stages).

    With the run's ``token``, first wait (up to ``wait`` seconds) until no worker may
    still start or is still running one of the run's tasks: after a failure the other
    tasks are cancelled, but one already executing runs to its end and one queued on a
    worker may start before the cancellation arrives; torn down first, it would set its
    stage up again and hold it (a model, GPU memory) after the run.
    """
    if token is not None:
        deadline = time.monotonic() + wait
        while True:
            try:
                left = sum(client.run(runtime.unfinished_tasks, token).values())
            except Exception:  # a worker that left: nothing of the run is running there
                left = 0
            if not left or time.monotonic() > deadline:
                if left:
                    logger.warning("tearing down while %d task(s) of the run still run", left)
                break
            time.sleep(0.05)
    for stage in stages:
        try:
            client.run(teardown_stage, stage.stage_id)
        except Exception:  # a failing teardown must not hide the run's own error
            logger.warning("teardown of stage %r failed on some worker", stage.name,
                           exc_info=True)


__all__ += ["CollectStep", "InternalStage", "ProcessStep", "ReadStep", "RunState", "Segment",
            "Sink", "Source", "Step", "Task", "WriteStep", "batch_groups", "no_workers_error",
            "raise_task_error", "release_run", "span_annotation", "teardown_everywhere"]
