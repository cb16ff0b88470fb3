"""What a pipeline run did: per-stage metrics and the output, as plain data.

Each task of a run returns, beside its partition, one record of its own work (rows in
and out, bytes, seconds, the worker). Records travel with the partition to the writer,
so a partition recomputed after a worker died is counted once: only the surviving copy
reaches the end. :func:`stage_metrics` sums them per stage.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from curator_dask.errors import NameNotFoundError
from curator_dask.partition import TaskRecord

__all__ = [
    "OutputTask",
    "RunResult",
    "StageMetrics",
    "TaskRecord",
    "describe_lost_workers",
    "format_stages",
    "stage_metrics",
]


@dataclass
class StageMetrics:
    """One stage's work in a run.

    ``busy_seconds`` sums the time its tasks ran (over all workers); ``span_seconds``
    is the wall time from its first task's start to its last task's end; throughput is
    rows in per busy second.

    The streaming executor adds how the stage flowed (None or empty for other executors):

    - ``busy_fraction``: share of the stage's worker slots busy with its tasks, from the
      end of warm-up (the first partition through every stage) to its last task;
    - ``mean_queue_length``: partitions waiting in front of it after warm-up (finished
      by the stage before, or submitted to it beyond its slots), time-averaged;
    - ``cap_history``: ``(seconds since the run started, cap)`` each time its cap changed,
      a cap being how many partitions it may hold (tasks submitted to it plus outputs not
      yet taken by the next stage);
    - ``in_flight_history``: ``(seconds since the run started, partitions held)`` sampled
      every 0.25 s.
    """

    name: str
    kind: str = "process"
    resources: str = ""
    partitions: int = 0
    rows_in: int = 0
    rows_out: int = 0
    bytes: int = 0
    busy_seconds: float = 0.0
    span_seconds: float = 0.0
    workers: list[str] = field(default_factory=list, repr=False)
    busy_fraction: float | None = None
    mean_queue_length: float | None = None
    cap_history: list[tuple[float, int]] = field(default_factory=list, repr=False)
    in_flight_history: list[tuple[float, int]] = field(default_factory=list, repr=False)

    @property
    def throughput(self) -> float:
        """Rows in per busy second (0 when the stage did no timed work)."""
        return self.rows_in / self.busy_seconds if self.busy_seconds > 0 else 0.0

    def __repr__(self) -> str:
        return (f"StageMetrics({self.name!r}, partitions={self.partitions}, "
                f"rows_in={self.rows_in}, rows_out={self.rows_out}, bytes={self.bytes}, "
                f"busy_seconds={self.busy_seconds:.3f}, throughput={self.throughput:,.0f} rows/s)")


@dataclass(frozen=True)
class OutputTask:
    """One output of a run, as NeMo Curator 1.x's ``Pipeline.run()`` listed its tasks.

    ``data`` is a list with the path of one written part (a writer's output, as NeMo
    Curator's ``FileGroupTask``), or, for a pipeline without a writer, one partition as a
    pandas frame (as its ``DocumentBatch``). ``num_items`` counts the files or rows.
    """

    task_id: str
    data: object

    @property
    def num_items(self) -> int:
        return len(self.data)


@dataclass
class RunResult:
    """The outcome of :meth:`Pipeline.run`.

    Iterating it gives the run's outputs as :class:`OutputTask` objects (one per written
    part, or per partition without a writer), the way NeMo Curator 1.x's ``run()``
    returned its output tasks: ``[task.data for task in pipeline.run()]`` lists the files.

    Attributes
    ----------
    stages : list of StageMetrics
        In pipeline order, reader and writer included.
    output_path, files, rows, bytes
        What the writer produced (files of parts skipped by a resume included).
    dropped : dict
        Documents dropped upstream of the writer, by reason.
    counters : dict
        Events counted upstream of the writer that dropped no document (entities
        redacted by type, documents split), by name; named after their stage as drop
        reasons are (``pii_redactor.EMAIL_ADDRESS``).
    partitions, partitions_skipped : int
        Input partitions of the run, and those a resume found already written.
    wall_seconds, time_to_first_output : float
        The run's wall time, and the time until the first output part was complete.
    dataset : DocumentDataset or None
        For a pipeline without a writer: the result, held in cluster memory.
    bottleneck : str or None
        Streaming with balancing: the stage the executor found slowest (its last plan).
    """

    pipeline: str
    executor: str
    stages: list[StageMetrics]
    output_path: str | None = None
    files: list[str] = field(default_factory=list, repr=False)
    rows: int = 0
    bytes: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    partitions: int = 0
    partitions_skipped: int = 0
    wall_seconds: float = 0.0
    time_to_first_output: float | None = None
    report: str | None = None
    dataset: object = field(default=None, repr=False)
    #: One record per task (stage, rows, seconds, start/stop, worker), for analysis.
    records: list[dict] = field(default_factory=list, repr=False)
    bottleneck: str | None = None
    #: What the run read (:class:`~curator_dask.io.overlap.InputPaths`): a report written
    #: later is kept clear of it.
    inputs: list = field(default_factory=list, repr=False)
    #: Workers lost mid-run (killed, crashed, restarted for memory), each with the tasks
    #: that ran again elsewhere by stage: ``[{"worker": ..., "retried": {stage: n}}]``.
    lost_workers: list[dict] = field(default_factory=list)

    def __iter__(self) -> Iterator[OutputTask]:
        if self.output_path is not None or self.dataset is None:
            for i, path in enumerate(self.files):
                yield OutputTask(task_id=f"{self.pipeline}-{i:05d}", data=[path])
            return
        frame = self.dataset.df
        for i in range(frame.npartitions):  # computed one at a time, as iterated
            yield OutputTask(task_id=f"{self.pipeline}-{i:05d}",
                             data=frame.get_partition(i).compute())

    def __len__(self) -> int:
        if self.output_path is not None or self.dataset is None:
            return len(self.files)
        return self.dataset.df.npartitions

    def stage(self, name: str) -> StageMetrics:
        """The metrics of the stage called ``name``."""
        for s in self.stages:
            if s.name == name:
                return s
        raise NameNotFoundError(
            f"no stage {name!r} in this run; stages: {[s.name for s in self.stages]}")

    def summary(self) -> str:
        """A table of the stages, for logs and terminals (and a line on the workers the
        run lost, if it lost any)."""
        lost = describe_lost_workers(self.lost_workers)
        return format_stages(self.stages) + (f"\n{lost}" if lost else "")


def stage_metrics(records: Iterable[Mapping],
                  order: list[tuple[str, str, str]]) -> list[StageMetrics]:
    """Sum task records per stage, in ``order`` (name, kind, resources)."""
    by_stage: dict[str, list[Mapping]] = defaultdict(list)
    for record in records:
        by_stage[record["stage"]].append(record)
    out = []
    for name, kind, resources in order:
        recs = by_stage.get(name, [])
        metrics = StageMetrics(name=name, kind=kind, resources=resources)
        if recs:
            metrics.partitions = sum(r["partitions"] for r in recs)
            metrics.rows_in = sum(r["rows_in"] for r in recs)
            metrics.rows_out = sum(r["rows_out"] for r in recs)
            metrics.bytes = sum(r["bytes"] for r in recs)
            metrics.busy_seconds = sum(r["seconds"] for r in recs)
            metrics.span_seconds = max(r["stop"] for r in recs) - min(r["start"] for r in recs)
            metrics.workers = sorted({r["worker"] for r in recs})
        out.append(metrics)
    return out


def format_stages(stages: list[StageMetrics]) -> str:
    """A text table of stages; streaming runs add busy fraction and mean queue columns."""
    header = ("stage", "resources", "partitions", "rows in", "rows out", "MB", "busy s",
              "rows/s")
    rows = [(s.name, s.resources, str(s.partitions), f"{s.rows_in:,}", f"{s.rows_out:,}",
             f"{s.bytes / 1e6:,.1f}", f"{s.busy_seconds:.2f}", f"{s.throughput:,.0f}")
            for s in stages]
    if any(s.busy_fraction is not None for s in stages):
        header += ("busy %", "queue")
        rows = [(*r, "-" if s.busy_fraction is None else f"{100 * s.busy_fraction:.1f}",
                 "-" if s.mean_queue_length is None else f"{s.mean_queue_length:.2f}")
                for r, s in zip(rows, stages, strict=True)]
    from curator_dask.observe.tables import text_table

    return text_table(header, rows)


def describe_lost_workers(lost: list[dict]) -> str | None:
    """One line on the workers a run lost, or None where it lost none."""
    if not lost:
        return None
    retried: dict[str, int] = {}
    for worker in lost:
        for stage, count in worker["retried"].items():
            retried[stage] = retried.get(stage, 0) + count
    tasks = (", ".join(f"{stage} {count}" for stage, count in sorted(retried.items()))
             or "none running")
    return (f"{len(lost)} worker(s) lost during the run and their tasks ran again "
            f"elsewhere (tasks retried: {tasks}); every document is still counted once. "
            "The workers' logs say why they stopped")
