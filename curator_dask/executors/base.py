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
   matches (:mod:`~curator_dask.executors.barriers`).
4. **Report and teardown.** Task records (:class:`~curator_dask.observe.run_result.TaskRecord`)
   ride with the data to the writer; the run's :class:`~curator_dask.observe.run_result.RunResult`
   sums them per stage. Whatever happens, every stage is torn down where it was set up,
   and a failed run releases its futures before the error reaches the caller.

The pipeline cut for execution is :mod:`~curator_dask.executors.layout`, the steps
:mod:`~curator_dask.executors.steps`, a run's bookkeeping
:mod:`~curator_dask.executors.state`; what runs on a cluster is in
:mod:`~curator_dask.executors.on_cluster` and :mod:`~curator_dask.executors.placement`.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from dataclasses import replace

from curator_dask.dataset import DocumentDataset
from curator_dask.errors import InvalidArgumentError
from curator_dask.executors.barriers import barrier_input, run_barrier
from curator_dask.executors.layout import Layout
from curator_dask.executors.state import RunState
from curator_dask.executors.steps import (
    CollectStep,
    ProcessStep,
    ReadStep,
    Segment,
    Sink,
    Source,
    WriteStep,
)
from curator_dask.io import atomic
from curator_dask.io.guard import OutputGuard, run_guard
from curator_dask.io.planner import in_flight_per_worker, largest_working_set, worker_memory
from curator_dask.io.source import PartitionSource
from curator_dask.observe.progress import Progress
from curator_dask.observe.run_result import RunResult
from curator_dask.stages.base import ProcessingStage, key_prefix

__all__ = ["Executor"]

logger = logging.getLogger(__name__)


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

    def kept(self, state: RunState, results: dict[int, object]) -> list:
        """Kept partitions (results by first partition) as ``Delayed`` values or futures
        of :class:`~curator_dask.partition.Partition`, in partition order."""
        raise NotImplementedError

    # -- the skeleton ------------------------------------------------------------------------
    def run(self, layout: Layout, report: str | None = None) -> RunResult:
        if self.resume and layout.writer is None:
            raise InvalidArgumentError(
                f"pipeline {layout.name!r}: resume=True needs a writer stage, "
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
        read = layout.reader.source(work=largest_working_set(
            s.working_set for s in layout.stages if s.kind in ("process", "barrier")))
        if state.cache is None and layout.barriers:  # no writer, no cache_path: a private one
            state.cache = atomic.make_temp_dir(f"curator-{key_prefix(layout.name)}-")
        cache = state.cache
        output = self._open_output(state, read)
        source = Source(read, layout.reader)
        for k, stages in enumerate(layout.segments):
            if k < len(layout.barriers):
                barrier = layout.barriers[k]
                directory = posixpath.join(cache, f"{k}-{key_prefix(layout.name_of(barrier))}")
                # The segment streams into the barrier's input, the barrier runs (or its
                # finished output is reused), and its output is the next segment's source.
                sink = barrier_input(state, source, barrier, directory, resume=self.resume)
                self._segment(state, source, stages, sink, first=k == 0)
                source = run_barrier(state, sink, barrier, directory, resume=self.resume)
            elif output is not None:
                sink = Sink(replace(output, source=source.input.token(),
                                    spec=replace(output.spec, schema=source.input.schema)),
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
        meta = source.input.meta
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

    def _collect(self, state: RunState, segment: Segment) -> DocumentDataset:
        """Without a writer: the final partitions as a dataset (held where they are)."""
        return DocumentDataset.from_partitions(self.kept(state, segment.steps[-1].results),
                                               segment.meta,
                                               sources=state.layout.reader.source().sources)

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

    def _open_output(self, state: RunState, read: PartitionSource):
        """Record what the run reads (checked against every output again) and prepare the
        writer's output (:meth:`WriterStage.prepare`; None without a writer)."""
        layout = state.layout
        state.inputs = [read.sources] if read.sources is not None else []
        state.guard.add_inputs(state.inputs)
        state.input_identity = read.identity()
        writer = layout.writer
        if writer is None:
            return None
        return writer.prepare(state.input_identity, resume=self.resume,
                              pipeline=layout.fingerprint(), inputs=state.inputs)

