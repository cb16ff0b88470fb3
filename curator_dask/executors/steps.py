"""One segment: the chain of steps each input partition goes through.

:class:`ReadStep` reads a planned partition, one :class:`ProcessStep` per stage runs the
stage (``batch_size`` consecutive partitions concatenated), and :class:`WriteStep` writes
the part (or, without a writer, :class:`CollectStep` keeps the partition). The steps say
what each task is; an executor only decides how a partition's chain is submitted and
awaited (:meth:`~curator_dask.executors.base.Executor.run_segment`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from curator_dask.executors import runtime
from curator_dask.executors.state import RunState
from curator_dask.io.source import PartitionSource
from curator_dask.observe.run_result import TaskRecord
from curator_dask.stages.base import Stage
from curator_dask.stages.io_stages import PreparedOutput
from curator_dask.task_names import stage_task_name

__all__ = ["CollectStep", "ProcessStep", "ReadStep", "Segment", "Sink", "Source", "Step",
           "Task", "WriteStep", "batch_groups"]


@dataclass
class Source:
    """Input partitions of a segment: a planned input and the stage that reads it (the
    pipeline's reader, or the :class:`InternalStage` reading a barrier's output)."""

    input: PartitionSource
    stage: Stage

    @property
    def plan(self) -> list:
        return self.input.plan


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
        prefix = (state.prefixes[id(stage)] if stage is not None
                  else stage_task_name(state.layout.name, "records"))
        self.prefix = f"{prefix}-{state.token}"  # the token: how release_run finds them

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
        read, plan = self.source.input.read, self.source.plan
        return [Task(runtime.read_task, (read, plan[i], self.name), f"{self.prefix}-{i}", (i,))
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
