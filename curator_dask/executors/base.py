"""What every executor shares: the run's layout, placement checks, keys, spans, teardown.

Facts from DESIGN.md that this module encodes:

- Only resources given at submission restrict tasks, so every task is submitted (or
  persisted) with its stage's resources, reader and writer included.
- A task whose resources no worker offers waits forever: placement is checked against
  the workers' advertised resources before anything is submitted.
- Spans group tasks by key prefix, and the scheduler keeps the placement of keys it has
  seen: each stage gets its own prefix and each run a fresh token.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import dask
from distributed.scheduler import NoWorkerError

from curator_dask.executors import runtime
from curator_dask.executors.balancing import StageTimeline, busy_fraction
from curator_dask.observe.progress import Progress
from curator_dask.observe.run_result import RunResult, StageMetrics, stage_metrics
from curator_dask.resources import Resources
from curator_dask.stages.base import (
    ProcessingStage,
    WholeDatasetStage,
    _key_prefix,
    teardown_stage,
)
from curator_dask.io.overlap import check_run_paths
from curator_dask.stages.io_stages import ReaderStage, WriterStage, plan_token

__all__ = ["Executor", "NoWorkersError", "ResourceUnavailableError", "Layout",
           "WorkerLifetimeError", "check_placement", "stage_kind"]

logger = logging.getLogger(__name__)


class ResourceUnavailableError(RuntimeError):
    """A stage asks for a resource that no worker of the cluster offers."""


class WorkerLifetimeError(ResourceUnavailableError):
    """A task ran longer than the workers live (``get_client(worker_lifetime=...)``).

    Recycling retires a worker only between tasks, so a task longer than the lifetime
    would keep its worker past it; the scheduler's recycler fails the task instead.
    """

    def __init__(self, key, seconds: float, lifetime: float, worker: str):
        super().__init__(key, seconds, lifetime, worker)
        self.key, self.seconds, self.lifetime, self.worker = key, seconds, lifetime, worker

    def __str__(self) -> str:
        from dask.utils import key_split

        return (f"stage {key_split(self.key)!r}: task {self.key!r} has run for "
                f"{self.seconds:.0f} s on {self.worker}, longer than the workers' lifetime "
                f"({self.lifetime:g} s, get_client(worker_lifetime=...)). Workers are "
                "recycled only between tasks; give worker_lifetime several times your "
                "longest task, make partitions smaller (files_per_partition, blocksize), "
                "or turn recycling off (worker_lifetime=None)")


class NoWorkersError(ResourceUnavailableError, NoWorkerError):
    """The cluster had no worker at all for longer than its no-workers timeout.

    A :class:`distributed.scheduler.NoWorkerError` (catch either) whose message says
    which workers left last, and why when the scheduler knows.
    """

    def __init__(self, task, timeout: float, message: str):
        super().__init__(task, timeout, message)

    def __str__(self) -> str:
        return self.args[2]


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
    def of(cls, name: str, stages: Sequence) -> Layout:
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
        seen: dict[str, int] = {}
        for stage in stages:
            base = stage.stage_name
            seen[base] = seen.get(base, 0) + 1
            layout.names[id(stage)] = base if seen[base] == 1 else f"{base}_{seen[base]}"
        return layout

    def name_of(self, stage) -> str:
        return self.names[id(stage)]

    def entry(self, stage) -> dict:
        """``{"name", "kind", "fingerprint"}`` of one stage, as a resume manifest keeps it."""
        return {"name": self.name_of(stage), "kind": stage_kind(stage),
                "fingerprint": stage.fingerprint()}

    def fingerprint(self, upto=None) -> list[dict]:
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
    def stages(self) -> list:
        out: list = [self.reader]
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
                         else str(getattr(stage, "resources", "")))
            out.append((self.name_of(stage), stage_kind(stage), shown))
        return out


def stage_kind(stage) -> str:
    """``"read"``, ``"write"``, ``"barrier"`` (a whole-dataset stage) or ``"process"``."""
    if isinstance(stage, ReaderStage):
        return "read"
    if isinstance(stage, WriterStage):
        return "write"
    if isinstance(stage, WholeDatasetStage):
        return "barrier"
    return "process"


def _offers(worker: dict, wanted: dict) -> bool:
    return all(worker.get(name, 0) >= amount for name, amount in wanted.items())


def check_placement(stages: Sequence, names: dict[int, str],
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
            if (resources.requires_gpu and getattr(stage, "cpu_fallback", False)
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


class Executor:
    """Base class: runs a pipeline's layout and returns a :class:`RunResult`.

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
    """

    name = "executor"

    def __init__(self, *, resume: bool = False, cache_path: str | None = None,
                 progress: bool = True):
        self.resume = resume
        self.cache_path = cache_path
        self.progress = progress

    def run(self, layout: Layout, report: str | None = None):
        raise NotImplementedError

    # -- shared helpers ----------------------------------------------------------------
    def _run_on_cluster(self, client, state: RunState, layout: Layout, report: str | None,
                        body, cleanup=None) -> RunResult:
        """Run ``body()`` under distributed's performance report (when asked for), then,
        whatever happened, ``cleanup()`` and teardown on every worker; the run's result."""
        if report:
            from distributed import performance_report

            report_ctx = performance_report(filename=report)
        else:
            report_ctx = contextlib.nullcontext()
        state.progress = Progress(enabled=self.progress)
        try:
            with report_ctx, state.progress.active():
                dataset = body()
        except BaseException:
            # Before the error reaches the caller: its traceback holds the run's futures,
            # and the client holds the erred one's exception, so they would stay alive
            # (and their keys on the cluster) until the garbage collector breaks the cycle.
            release_run(client, state.token)
            raise
        finally:
            state.progress.close()
            if cleanup is not None:
                cleanup()
            teardown_everywhere(client, layout.processing_stages, state.token)
        result = state.result(self.name, layout.writer.path if layout.writer else None,
                              dataset=dataset)
        result.report = report
        return result

    def _cache_root(self, layout: Layout) -> str:
        if self.cache_path is not None:
            return self.cache_path.rstrip("/")
        if layout.writer is not None:
            return layout.writer.path.rstrip("/") + ".curator-cache"
        return tempfile.mkdtemp(prefix=f"curator-{_key_prefix(layout.name)}-")

    def _open_output(self, state: RunState, ds, cache: str | None):
        """Check where the run will write against where it reads, then prepare the
        writer's output (or None without a writer), before any task is submitted.

        The output and the barrier cache must each stay clear of every input path and
        of each other; a resume must find a manifest with this run's fingerprint (input
        plan and pipeline), see :meth:`WriterStage.prepare`.
        """
        layout = state.layout
        state.cache = cache
        state.inputs = [ds.sources] if ds.sources is not None else []
        state.input_token = plan_token(ds)
        writer = layout.writer
        check_run_paths(state.inputs, output=writer.path if writer is not None else None,
                        cache=cache,
                        storage_options=writer.storage_options if writer is not None else None)
        if layout.writer is None:
            return None
        return layout.writer.prepare(state.input_token, resume=self.resume,
                                     pipeline=layout.fingerprint(), inputs=state.inputs)

    def _check_resume(self, layout: Layout) -> None:
        if self.resume and layout.writer is None:
            raise ValueError(f"pipeline {layout.name!r}: resume=True needs a writer stage, "
                             "whose completed parts are what a resume skips")


@dataclass
class RunState:
    """Bookkeeping of one run on a cluster: keys, resources, spans, timings, results."""

    layout: Layout
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    resources: dict[int, dict] = field(default_factory=dict)
    spans: dict[int, dict] = field(default_factory=dict)
    prefixes: dict[int, str] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    started_wall: float = field(default_factory=time.time)
    first_output: float | None = None
    records: list[dict] = field(default_factory=list)
    write_stats: list[dict] = field(default_factory=list)
    skipped_stats: list[dict] = field(default_factory=list)
    partitions: int = 0
    skipped: int = 0
    #: Drop counts of partitions that went into a whole-dataset stage (which does not
    #: carry partition attributes through).
    barrier_dropped: list[dict] = field(default_factory=list)
    #: Streaming: each stage's cap, partitions held, queue and slots over the run.
    timelines: dict[str, StageTimeline] = field(default_factory=dict)
    #: Streaming with balancing: the stage the last plan found slowest.
    bottleneck: str | None = None
    #: Where the run reads from (writes must keep clear of them), and its input plan.
    inputs: list = field(default_factory=list)
    input_token: str = ""
    #: The directory barriers keep their data in (None without barriers).
    cache: str | None = None
    #: The workers' advertised resources when the run started (``check_placement``).
    workers: dict[str, dict] = field(default_factory=dict)
    #: The run's one progress bar (or log lines), moved on from stage to stage.
    progress: Progress = field(default_factory=lambda: Progress(enabled=False))

    def setup(self, client, workers: dict[str, dict]) -> None:
        layout = self.layout
        for stage in layout.processing_stages:
            # Fix each stage's identity before it is pickled, so every task's copy maps to
            # the same worker-side instance (set up once per process, torn down by id).
            stage.stage_id  # noqa: B018
        placed = [s for s in layout.stages if not isinstance(s, WholeDatasetStage)]
        self.workers = workers
        self.resources = check_placement(placed, layout.names, workers)
        for stage in layout.stages:
            name = layout.name_of(stage)
            self.prefixes[id(stage)] = _key_prefix(name)
            self.spans[id(stage)] = span_annotation(layout.name, name)

    def name(self, stage) -> str:
        """The stage's unique name in this run (executor-internal stages use their own)."""
        return self.layout.names.get(id(stage)) or stage.stage_name

    def fill_barrier_rows(self) -> None:
        """A barrier's rows out are the rows read back from its output."""
        for record in self.records:
            source = record.pop("rows_out_from", None)
            if source is not None:
                record["rows_out"] = sum(r["rows_out"] for r in self.records
                                         if r["stage"] == source)

    def key(self, stage, index: int) -> str:
        return f"{self.prefixes[id(stage)]}-{self.token}-{index}"

    @contextlib.contextmanager
    def in_span(self, stage, building: bool = False):
        """Tag what is submitted inside with the stage's span.

        ``building=True`` around code that also builds dataframes (a whole-dataset
        stage): dask warns that annotations are ignored while building, which is
        expected; the span still applies to what that code computes or persists.
        """
        with contextlib.ExitStack() as stack:
            if building:
                stack.enter_context(warnings.catch_warnings())
                warnings.filterwarnings("ignore", message="Dask annotations",
                                        category=UserWarning)
            stack.enter_context(dask.annotate(span=self.spans[id(stage)]))
            yield

    def output_done(self, stats: dict) -> None:
        if self.first_output is None:
            self.first_output = time.perf_counter() - self.started
        self.records.extend(stats.pop("records", []))
        self.write_stats.append(stats)

    def result(self, executor: str, output_path: str | None, dataset=None) -> RunResult:
        from curator_dask.dropped import split_counts, sum_dropped

        all_stats = self.write_stats + self.skipped_stats
        files = sorted(f for s in all_stats for f in s["files"])
        stages = stage_metrics(self.records, self.layout.order(self.resources))
        dropped, counters = split_counts(sum_dropped(
            [*(s["dropped"] for s in all_stats), *self.barrier_dropped]))
        for metrics in stages:
            timeline = self.timelines.get(metrics.name)
            if timeline is not None:
                add_flow_metrics(metrics, timeline, self.records, self.started_wall)
        return RunResult(
            pipeline=self.layout.name, executor=executor, stages=stages,
            bottleneck=self.bottleneck,
            output_path=output_path, files=files,
            rows=sum(s["rows"] for s in all_stats), bytes=sum(s["bytes"] for s in all_stats),
            dropped=dropped, counters=counters,
            partitions=self.partitions, partitions_skipped=self.skipped,
            wall_seconds=time.perf_counter() - self.started,
            time_to_first_output=self.first_output, dataset=dataset, records=self.records,
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


def release_run(client, token: str) -> int:
    """Cancel every future of the run ``token`` that the client holds; how many.

    Every key of a run carries its token (:meth:`RunState.key`). Cancelling pops the
    futures' states from the client, so the scheduler forgets the keys at once, whatever
    still refers to the futures (a traceback, an ``as_completed``).
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


def teardown_everywhere(client, stages: Sequence, token: str | None = None,
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
        if not isinstance(stage, ProcessingStage):
            continue
        try:
            client.run(teardown_stage, stage.stage_id)
        except Exception:  # a failing teardown must not hide the run's own error
            logger.warning("teardown of stage %r failed on some worker", stage.stage_name,
                           exc_info=True)


def materialize_barrier_output(out, directory: str) -> tuple:
    """The barrier's output as a dataset the next segment can stream, and its drop counts.

    A barrier that returns a planned dataset (files with a reader) is streamed from as it
    is. Any other output is written to ``directory`` and read back one file a partition.
    Its partitions carry the documents the barrier removed in their drop counts, which
    files do not keep: the counts come back here, so the run can report them.
    """
    from curator_dask.dataset import DocumentDataset
    from curator_dask.dropped import join_counts

    if out.partition_reader is not None and out.plan is not None:
        return out, {}
    written = out.to_parquet(directory, mode="overwrite")
    return (DocumentDataset.read_parquet(directory, files_per_partition=1),
            join_counts(written.dropped, written.counters))


def teardown_local(stages: Sequence) -> None:
    for stage in stages:
        if isinstance(stage, ProcessingStage):
            teardown_stage(stage.stage_id)


__all__ += ["RunState", "materialize_barrier_output", "no_workers_error", "raise_task_error",
            "release_run", "span_annotation", "teardown_everywhere", "teardown_local"]
