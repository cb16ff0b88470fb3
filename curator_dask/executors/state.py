"""The bookkeeping of one run: keys, resources, spans, timings, records and results."""

from __future__ import annotations

import contextlib
import time
import uuid
import warnings
from dataclasses import dataclass, field

import dask

from curator_dask.executors.balancing import StageTimeline, busy_fraction
from curator_dask.executors.layout import InternalStage, Layout
from curator_dask.executors.placement import check_placement, span_annotation
from curator_dask.io.guard import OutputGuard
from curator_dask.observe.progress import Progress
from curator_dask.observe.run_result import RunResult, StageMetrics, TaskRecord, stage_metrics
from curator_dask.stages.base import Stage
from curator_dask.task_names import stage_task_name

__all__ = ["RunState", "add_flow_metrics"]


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
        """Give a stage (of the layout, or an :class:`InternalStage`) its key prefix
        (``<stage>/<kind>``: ``word_count/process``, ``fuzzy_dedup/input``), its
        resources and, on a cluster (:meth:`place`), its span."""
        name = self.layout.name_of(stage)
        self.prefixes[id(stage)] = (stage_task_name(stage.barrier, stage.phase)
                                    if isinstance(stage, InternalStage)
                                    else stage_task_name(name, stage.kind))
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
