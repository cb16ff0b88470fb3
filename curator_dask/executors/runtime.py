"""Task bodies the executors run on workers (or in-process for the LocalExecutor).

Every task takes and returns a :class:`~curator_dask.partition.Partition`: the frame,
its drop counts and counters, and the records of the work done on it so far. A record
(:class:`~curator_dask.partition.TaskRecord`) is one task's rows in and out, bytes,
seconds and worker; records ride with the data to the writer, whose stats carry them
back to the client. Each task also adds its work to the worker's Prometheus counters.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence

from curator_dask._distributed import UNFINISHED_TASK_STATES, worker_task_states
from curator_dask.io.writers import write_part
from curator_dask.observe.prometheus import count_stage_work
from curator_dask.partition import Partition, PlannedRead, TaskRecord
from curator_dask.stages.base import ProcessingStage, run_stage
from curator_dask.stages.io_stages import PreparedOutput

__all__ = [
    "read_task",
    "records_of",
    "stage_task",
    "unfinished_tasks",
    "where_am_i",
    "write_task",
]


def where_am_i() -> str:
    """The address of the worker running this task, or ``local:<host>:<pid>``."""
    try:
        from distributed import get_worker

        return get_worker().address
    except ValueError:  # not in a worker: the LocalExecutor
        return f"local:{socket.gethostname()}:{os.getpid()}"


def unfinished_tasks(token: str, dask_worker=None) -> int:
    """How many of the run ``token``'s tasks this worker may still start or is running.

    Run with ``client.run``. A task cancelled while it executes keeps running to its end
    (a thread cannot be interrupted), and one already queued on the worker may start
    before the cancellation reaches it: teardown waits for both, so that no task sets a
    stage up again after the run has torn it down.
    """
    return sum(1 for key, state in worker_task_states(dask_worker)
               if token in str(key) and state in UNFINISHED_TASK_STATES)


def _nbytes(df) -> int:
    try:
        return int(df.memory_usage(deep=True, index=False).sum())
    except Exception:  # a frame type without memory_usage: size unknown
        return 0


def _record(stage: str, indices: Sequence[int], rows_in: int, df, start: float,
            stop: float) -> TaskRecord:
    count_stage_work(stage, rows_in, stop - start, len(indices))
    return TaskRecord(stage=stage, index=indices[0], partitions=len(indices), rows_in=rows_in,
                      rows_out=len(df), bytes=_nbytes(df), seconds=stop - start, start=start,
                      stop=stop, worker=where_am_i())


def _note(err: BaseException, stage: str, indices: Sequence[int]) -> None:
    err.add_note(f"curator-dask: stage {stage!r} failed on input partition(s) "
                 f"{list(indices)}")


def read_task(read: PlannedRead, spec, stage: str) -> Partition:
    """Read one planned partition (``read``: a source's
    :attr:`~curator_dask.io.source.PartitionSource.read`)."""
    start = time.time()
    try:
        part = read(spec)
    except Exception as err:
        _note(err, stage, [spec.index])
        raise
    stop = time.time()
    return part.with_records([_record(stage, [spec.index], len(part), part.frame, start, stop)])


def stage_task(stage: ProcessingStage, display_name: str, indices: Sequence[int],
               *inputs: Partition) -> Partition:
    """Run a stage on one partition, or on a batch of them concatenated.

    ``indices`` are the input partitions the data came from; a stage that needs the
    partition index gets the first one.
    """
    part = Partition.concat(inputs)
    start = time.time()
    try:
        out = run_stage(part, stage, indices[0])
    except Exception as err:
        _note(err, display_name, indices)
        raise
    stop = time.time()
    return out.with_records([_record(display_name, indices, len(part), out.frame, start, stop)])


def write_task(output: PreparedOutput, stage: str, indices: Sequence[int],
               *inputs: Partition) -> dict:
    """Write one part (a batch of partitions concatenated); returns its stats and records."""
    part = Partition.concat(inputs)
    start = time.time()
    try:
        stats = write_part(part, output.spec, output.fs, list(indices), source=output.source)
    except Exception as err:
        _note(err, stage, indices)
        raise
    stop = time.time()
    record = _record(stage, indices, len(part), part.frame, start, stop)
    record.bytes = stats["bytes"]
    stats["records"] = [*part.records, record]
    return stats


def records_of(part: Partition) -> list[TaskRecord]:
    """The records of a partition."""
    return part.records
