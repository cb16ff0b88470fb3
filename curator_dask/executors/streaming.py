"""StreamingExecutor: every input partition flows through the stages as a chain of futures.

For each input partition the executor submits one task per stage (``client.submit``
with the stage's resources and a per-stage key prefix ``<stage>-<run token>-<partition>``)
and a write task; the parts are written as they complete. Memory stays flat as data
grows because at most ``max_in_flight`` partitions are between the reader and the writer:
the scheduler never queues restricted tasks (DESIGN.md), so the executor keeps its own
window and refills it with ``as_completed``. Later stages get higher priority, so a
worker finishes partitions already in flight before it reads new ones.

Whole-dataset stages (dedup) are barriers: the partitions before one are streamed into
Parquet parts under the cache directory, the barrier runs on the whole of them, and the
stream goes on from its output.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import dask.dataframe as dd

from curator_dask.dataset import DocumentDataset
from curator_dask.executors import runtime
from curator_dask.executors.base import (
    Executor,
    Layout,
    RunState,
    span_annotation,
    teardown_everywhere,
)
from curator_dask.observe.progress import Progress
from curator_dask.resources import Resources
from curator_dask.stages.base import ProcessingStage, WholeDatasetStage, _key_prefix
from curator_dask.stages.io_stages import ParquetWriter, PreparedOutput, plan_token

__all__ = ["StreamingExecutor"]

logger = logging.getLogger(__name__)


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
        Input partitions allowed between the reader and the writer at once (default:
        twice the number of workers). It bounds cluster memory: roughly
        ``max_in_flight`` partitions' worth of data, whatever the dataset's size.
    resume : bool, default False
        Skip input partitions whose output part is complete from an earlier run (a
        completion marker is written after each part's atomic rename).
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
    """

    name = "streaming"

    def __init__(self, max_in_flight: int | None = None, resume: bool = False, *,
                 client=None, cache_path: str | None = None, progress: bool = True):
        super().__init__(resume=resume, cache_path=cache_path, progress=progress)
        if max_in_flight is not None and (not isinstance(max_in_flight, int) or max_in_flight < 1):
            raise ValueError(f"max_in_flight must be a positive integer, got {max_in_flight!r}")
        self.max_in_flight = max_in_flight
        self.client = client

    def __repr__(self) -> str:
        return f"StreamingExecutor(max_in_flight={self.max_in_flight}, resume={self.resume})"

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
        from curator_dask.cluster import worker_resources

        state = RunState(layout)
        state.setup(client, worker_resources(client))
        window = self.max_in_flight or 2 * max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
        if report:
            from distributed import performance_report

            report_ctx = performance_report(filename=report)
        else:
            report_ctx = nullcontext()
        try:
            with report_ctx:
                dataset = self._run(client, state, layout, window)
        finally:
            teardown_everywhere(client, layout.processing_stages)
        result = state.result(self.name, layout.writer.path if layout.writer else None,
                              dataset=dataset)
        result.report = report
        return result

    def _run(self, client, state: RunState, layout: Layout, window: int):
        ds = layout.reader.dataset()
        source = Source(ds, layout.reader)
        cache = self._cache_root(layout) if layout.barriers else None
        dataset = None
        for k, stages in enumerate(layout.segments):
            last = k == len(layout.barriers)
            if last:
                sink = None
                if layout.writer is not None:
                    output = layout.writer.prepare(plan_token(source.dataset), resume=self.resume)
                    sink = Sink(output, layout.writer)
                futures = self._stream(client, state, source, stages, sink, window,
                                       count_input=(k == 0))
                if sink is None:
                    dataset = self._collect(client, state, futures, source, stages)
            else:
                barrier = layout.barriers[k]
                barrier_cache = posixpath.join(cache, f"{k}-{_key_prefix(layout.name_of(barrier))}")
                source = self._through_barrier(client, state, layout, source, stages, barrier,
                                               barrier_cache, window, count_input=(k == 0))
        state.fill_barrier_rows()
        return dataset

    # -- one segment ---------------------------------------------------------------------
    def _stream(self, client, state: RunState, source: Source, stages: Sequence[ProcessingStage],
                sink: Sink | None, window: int, count_input: bool):
        """Stream every partition of ``source`` through ``stages`` into ``sink``.

        Without a sink, returns the final ``(frame, records)`` futures in partition order.
        """
        from distributed import as_completed

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
        unit = max([1, *(s.batch_size for s in stages)])
        window = max(window, unit)
        units = [indices[i:i + unit] for i in range(0, len(indices), unit)]
        progress = Progress(len(indices), f"{state.layout.name}", enabled=self.progress)
        results: dict[int, object] = {}
        in_flight: dict[object, int] = {}  # final future -> partitions it covers
        watcher = as_completed()
        next_unit = 0

        def submit_unit(unit_indices: list[int]) -> None:
            items = [(self._submit_read(client, state, source, i), (i,)) for i in unit_indices]
            for position, stage in enumerate(stages, start=1):
                submitted = []
                for group in batch_groups(items, stage.batch_size):
                    covered = tuple(i for _, idx in group for i in idx)
                    with state.in_span(stage):
                        future = client.submit(
                            runtime.stage_task, stage, state.layout.name_of(stage), covered,
                            *(f for f, _ in group), key=state.key(stage, covered[0]),
                            resources=state.resources[id(stage)], priority=position,
                        )
                    submitted.append((future, covered))
                items = submitted
            for future, covered in items:
                if sink is not None:
                    with state.in_span(sink.stage):
                        future = client.submit(
                            runtime.write_task, sink.output, state.name(sink.stage),
                            covered, future, key=state.key(sink.stage, covered[0]),
                            resources=state.resources[id(sink.stage)],
                            priority=len(stages) + 1,
                        )
                else:
                    results[covered[0]] = future
                    future = client.submit(runtime.records_of, future,
                                           key=f"records-{state.token}-{covered[0]}",
                                           priority=len(stages) + 1)
                in_flight[future] = len(covered)
                watcher.add(future)

        def fill() -> None:
            nonlocal next_unit
            while next_unit < len(units) and (
                not in_flight or sum(in_flight.values()) + len(units[next_unit]) <= window
            ):
                submit_unit(units[next_unit])
                next_unit += 1

        try:
            fill()
            for future in watcher:
                covered = in_flight.pop(future)
                value = future.result()  # raises the task's error, with its stage noted
                if sink is not None:
                    state.output_done(value)
                else:
                    state.records.extend(value)
                progress.update(covered)
                future.release()
                fill()
        except BaseException:
            for future in list(in_flight):
                future.cancel()
            raise
        finally:
            progress.close()
        if sink is None:
            return [results[i] for i in sorted(results)]
        return None

    def _submit_read(self, client, state: RunState, source: Source, index: int):
        stage = source.stage
        with state.in_span(stage):
            return client.submit(
                runtime.read_task, source.dataset.partition_reader, source.plan[index],
                state.name(stage), key=state.key(stage, index), resources=state.resources[id(stage)], priority=0,
            )

    def _collect(self, client, state: RunState, futures: list, source: Source,
                 stages: Sequence[ProcessingStage]) -> DocumentDataset:
        """A dataset over the final partitions, held in cluster memory."""
        meta = source.dataset.df._meta
        for stage in stages:
            meta = stage.meta(meta)
        frames = [client.submit(runtime.frame_of, f, key=f"frame-{state.token}-{i}")
                  for i, f in enumerate(futures)]
        return DocumentDataset(dd.from_delayed(frames, meta=meta, verify_meta=False))

    # -- barriers --------------------------------------------------------------------------
    def _register(self, state: RunState, internal: InternalStage) -> InternalStage:
        state.prefixes[id(internal)] = _key_prefix(internal.name)
        state.spans[id(internal)] = span_annotation(state.layout.name, internal.name)
        state.resources[id(internal)] = internal.resources.to_dask()
        return internal

    def _through_barrier(self, client, state: RunState, layout: Layout, source: Source,
                         stages, barrier: WholeDatasetStage, cache: str, window: int,
                         count_input: bool) -> Source:
        name = layout.name_of(barrier)
        spill = self._register(state, InternalStage(f"{name}_input"))
        writer = ParquetWriter(posixpath.join(cache, "input"), mode="overwrite")
        output = writer.prepare(plan_token(source.dataset), resume=self.resume)
        # The spilled parts are this run's intermediate data, not its output.
        saved = (list(state.write_stats), list(state.skipped_stats), state.first_output)
        self._stream(client, state, source, stages, Sink(output, spill), window, count_input)
        spilled = state.write_stats[len(saved[0]):] + state.skipped_stats[len(saved[1]):]
        spilled_rows = sum(s["rows"] for s in spilled)
        state.barrier_dropped.extend(s["dropped"] for s in spilled)
        state.write_stats, state.skipped_stats, state.first_output = saved

        start = time.time()
        done_marker = posixpath.join(cache, "output", ".complete")
        fs = output.fs
        if self.resume and fs.exists(done_marker):
            logger.info("resume: barrier %r output already complete, reusing it", name)
            out = DocumentDataset.read_parquet(posixpath.join(cache, "output"),
                                               files_per_partition=1)
        else:
            ds_in = DocumentDataset.read_parquet(output.spec.path, files_per_partition=1)
            with state.in_span(barrier, building=True):
                out = barrier.run(ds_in, posixpath.join(cache, "work"))
                if out.partition_reader is None or out.plan is None:
                    # Materialise the barrier's output so the next segment can stream it.
                    out.to_parquet(posixpath.join(cache, "output"), mode="overwrite")
                    out = DocumentDataset.read_parquet(posixpath.join(cache, "output"),
                                                       files_per_partition=1)
                    with fs.open(done_marker, "wb"):
                        pass
        stop = time.time()
        reread = self._register(state, InternalStage(f"{name}_output"))
        # rows_out is known once the next segment has read the barrier's output.
        state.records.append({
            "stage": name, "partitions": len(out.plan), "rows_in": spilled_rows,
            "rows_out": 0, "bytes": 0, "seconds": stop - start, "start": start, "stop": stop,
            "worker": "client", "rows_out_from": reread.name,
        })
        return Source(out, reread)
