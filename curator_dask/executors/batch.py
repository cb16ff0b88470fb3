"""BatchExecutor: one stage at a time over the whole dataset.

Each stage's tasks are built as one layer of delayed calls on the previous layer's
futures and persisted with the stage's resources (``client.persist(layer,
resources=...)``); the executor waits for the whole layer before the next one starts.
Because every layer is persisted on its own, the resources given at persist restrict
exactly that stage's tasks: the ``key_split`` function form of ``resources=`` that a
single multi-layer graph would need (DESIGN.md) is not required, and each layer's keys
are new (``<stage>-<run token>-<partition>``), so none inherits an earlier placement.

Memory grows with the dataset (a whole stage's output is held at once); it is the
baseline the streaming executor is measured against, and the simplest to reason about.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import dask
import dask.dataframe as dd

from curator_dask.dataset import DocumentDataset
from curator_dask.executors import runtime
from curator_dask.executors.base import Executor, Layout, RunState, raise_task_error
from curator_dask.executors.streaming import StreamingExecutor, batch_groups
from curator_dask.observe.progress import phase
from curator_dask.stages.io_stages import plan_token

__all__ = ["BatchExecutor"]

logger = logging.getLogger(__name__)


class BatchExecutor(Executor):
    """Run a pipeline stage by stage, each stage over all partitions before the next.

    Parameters
    ----------
    resume : bool, default False
        Skip input partitions whose output part is complete from an earlier run.
    client : distributed.Client, optional
        Default: the current client.
    cache_path, progress
        See :class:`~curator_dask.executors.base.Executor`.
    """

    name = "batch"

    def __init__(self, resume: bool = False, *, client=None, cache_path: str | None = None,
                 progress: bool = True):
        super().__init__(resume=resume, cache_path=cache_path, progress=progress)
        self.client = client

    def __repr__(self) -> str:
        return f"BatchExecutor(resume={self.resume})"

    _client = StreamingExecutor._client

    def run(self, layout: Layout, report: str | None = None):
        self._check_resume(layout)
        client = self._client()
        from curator_dask.cluster import worker_resources

        state = RunState(layout)
        state.setup(client, worker_resources(client))
        return self._run_on_cluster(client, state, layout, report,
                                    lambda: self._run(client, state, layout))

    def _layer(self, client, state: RunState, stage, calls: list[tuple], desc: str) -> list:
        """Persist one stage's tasks with its resources; wait for all; return the futures.

        ``calls`` are ``(function, args, covered partitions)``.
        """
        from distributed import as_completed, futures_of

        delayed = [dask.delayed(func, pure=False)(*args, dask_key_name=state.key(stage, covered[0]))
                   for func, args, covered in calls]
        with state.in_span(stage):
            persisted = client.persist(delayed, resources=state.resources.get(id(stage)))
        futures = [futures_of(d)[0] for d in persisted]
        state.progress.stage(desc, len(futures))
        try:
            for future in as_completed(futures):
                if future.status == "error":
                    raise_task_error(client, future)  # the task's error, its stage noted
                state.progress.update(1)
        except BaseException:
            client.cancel(futures)
            raise
        return futures

    def _run(self, client, state: RunState, layout: Layout):
        ds = layout.reader.dataset()
        name = layout.name
        indices = list(range(len(ds.plan)))
        state.partitions = len(indices)
        cache = self._cache_root(layout) if layout.barriers else None
        output = self._open_output(state, ds, cache)
        if output is not None:
            # Parts after a barrier come from its output, held in memory: marked as such,
            # they are resumed only by a run that computes that output again the same way.
            output = replace(output, source=(plan_token(ds) if not layout.barriers
                                             else "batch-barrier-output"))
            if self.resume:
                done = output.completed()
                state.skipped_stats.extend({s["partition"]: s for s in done.values()}.values())
                state.skipped = sum(1 for i in indices if i in done)
                # Partitions are skipped from the start only when no barrier follows:
                # a barrier needs every partition.
                if not layout.barriers:
                    indices = [i for i in indices if i not in done]
        reader = layout.reader
        futures = self._layer(
            client, state, reader,
            [(runtime.read_task, (ds.partition_reader, ds.plan[i], layout.name_of(reader)), (i,))
             for i in indices], f"{name}: {layout.name_of(reader)}")
        items = list(zip(futures, [(i,) for i in indices]))
        meta = ds.df._meta
        for k, stages in enumerate(layout.segments):
            for stage in stages:
                calls = []
                for group in batch_groups(items, stage.batch_size):
                    covered = tuple(i for _, idx in group for i in idx)
                    calls.append((runtime.stage_task,
                                  (stage, layout.name_of(stage), covered, *(f for f, _ in group)),
                                  covered))
                futures = self._layer(client, state, stage, calls,
                                      f"{name}: {layout.name_of(stage)}")
                items = list(zip(futures, [c for _, _, c in calls]))
                meta = stage.meta(meta)
            if k < len(layout.barriers):
                items, meta = self._barrier(client, state, layout, layout.barriers[k], items, meta)
        if output is not None:
            writer = layout.writer
            calls = [(runtime.write_task, (output, layout.name_of(writer), covered, f), covered)
                     for f, covered in items]
            if self.resume and layout.barriers:
                done = output.completed()
                state.skipped_stats = []
                calls = [c for c in calls if c[2][0] not in done]
            futures = self._layer(client, state, writer, calls, f"{name}: {layout.name_of(writer)}")
            for stats in client.gather(futures):
                state.output_done(stats)
            state.fill_barrier_rows()
            return None
        for records in client.gather([client.submit(runtime.records_of, f) for f, _ in items]):
            state.records.extend(records)
        state.fill_barrier_rows()
        frames = [client.submit(runtime.frame_of, f, key=f"frame-{state.token}-{c[0]}")
                  for f, c in items]
        return DocumentDataset(dd.from_delayed(frames, meta=meta, verify_meta=False),
                               sources=ds.sources)

    def _barrier(self, client, state: RunState, layout: Layout, barrier, items, meta):
        import posixpath
        import time

        from curator_dask.stages.base import _key_prefix

        records = client.gather([client.submit(runtime.records_of, f) for f, _ in items])
        for recs in records:
            state.records.extend(recs)
        rows_in = sum(recs[-1]["rows_out"] for recs in records if recs)
        # Counted here, the drops so far leave the partitions before the barrier, as they
        # do in the streaming executor, whose barrier reads its input from files: the
        # barrier's output then carries only what the barrier removed.
        state.barrier_dropped.extend(client.gather(
            [client.submit(runtime.dropped_of, f) for f, _ in items]))
        name = layout.name_of(barrier)
        # Keys with the run's token, so that a failed run releases them.
        prefix = f"{_key_prefix(name)}_input-{state.token}"
        frames = [client.submit(runtime.bare_frame_of, f, key=f"{prefix}-{c[0]}")
                  for f, c in items]
        ds_in = DocumentDataset(dd.from_delayed(frames, meta=meta, verify_meta=False))
        cache = posixpath.join(state.cache, f"batch-{_key_prefix(name)}")
        start = time.time()
        with state.in_span(barrier, building=True), phase(f"{layout.name}: {name}"):
            out = barrier.run(ds_in, cache)
            # The barrier's own graph (shuffles) runs unrestricted: it is not a stage with
            # resources, and P2P shuffles place their own tasks.
            prefix = f"{_key_prefix(name)}_output-{state.token}"
            parts = [dask.delayed(runtime.carry)(d, dask_key_name=f"{prefix}-{i}")
                     for i, d in enumerate(out.df.to_delayed())]
            persisted = client.persist(parts)
        from distributed import as_completed, futures_of

        futures = [futures_of(d)[0] for d in persisted]
        state.progress.stage(f"{layout.name}: {name}: remove", len(futures))
        for _ in as_completed(futures):
            state.progress.update(1)
        for f in futures:
            if f.status == "error":
                raise_task_error(client, f)
        stop = time.time()
        lengths = client.gather([client.submit(lambda c: len(c[0]), f) for f in futures])
        state.records.append({
            "stage": name, "partitions": len(futures), "rows_in": rows_in,
            "rows_out": sum(lengths), "bytes": 0, "seconds": stop - start, "start": start,
            "stop": stop, "worker": "client",
        })
        # The next stages start afresh from the barrier's partitions; ids of those
        # partitions follow the barrier's output order.
        return [(f, (i,)) for i, f in enumerate(futures)], out.df._meta
