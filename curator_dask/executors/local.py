"""LocalExecutor: the whole pipeline in this process, one partition after another.

No cluster, no pickling, no futures: ``setup()``, ``process()`` and ``teardown()`` run
right here, so a breakpoint or ``%debug`` in a notebook lands inside the stage. The
results are the same as on a cluster (same task bodies, same part names, same resume
markers); only the speed differs.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import replace

import dask.dataframe as dd

from curator_dask.dataset import DocumentDataset
from curator_dask.executors import runtime
from curator_dask.executors.base import (
    Executor,
    Layout,
    RunState,
    materialize_barrier_output,
    teardown_local,
)
from curator_dask.executors.streaming import batch_groups
from curator_dask.observe.progress import Progress, phase
from curator_dask.stages.base import _key_prefix
from curator_dask.stages.io_stages import ParquetWriter, plan_token

__all__ = ["LocalExecutor"]

logger = logging.getLogger(__name__)


class LocalExecutor(Executor):
    """Run a pipeline synchronously in this process (for debugging a stage).

    Parameters are those of :class:`~curator_dask.executors.base.Executor`. Stage
    ``batch_size`` is honoured as in the streaming executor.
    """

    name = "local"

    def __repr__(self) -> str:
        return f"LocalExecutor(resume={self.resume})"

    def run(self, layout: Layout, report: str | None = None):
        self._check_resume(layout)
        if report:
            logger.warning("LocalExecutor runs no Dask tasks: no performance report written")
        state = RunState(layout)
        state.resources = {id(s): s.resources.to_dask() for s in layout.stages
                           if hasattr(s, "resources")}
        state.progress = Progress(enabled=self.progress)
        try:
            with state.progress.active():
                dataset = self._run(state, layout)
        finally:
            state.progress.close()
            teardown_local(layout.processing_stages)
        return state.result(self.name, layout.writer.path if layout.writer else None,
                            dataset=dataset)

    def _run(self, state: RunState, layout: Layout):
        ds = layout.reader.dataset()
        reader_name = layout.name_of(layout.reader)
        cache = self._cache_root(layout) if layout.barriers else None
        final = self._open_output(state, ds, cache)
        for k, stages in enumerate(layout.segments):
            last = k == len(layout.barriers)
            output = None
            if last and final is not None:
                output = replace(final, source=plan_token(ds))
                writer_name = layout.name_of(layout.writer)
            elif not last:
                barrier = layout.barriers[k]
                barrier_cache = posixpath.join(cache, f"{k}-{_key_prefix(layout.name_of(barrier))}")
                token = plan_token(ds)
                output = ParquetWriter(posixpath.join(barrier_cache, "input"), mode="overwrite")\
                    .prepare(token, inputs=state.inputs, pipeline=layout.fingerprint(upto=barrier))
                output = replace(output, source=token)
                writer_name = f"{layout.name_of(layout.barriers[k])}_input"
            indices = list(range(len(ds.plan)))
            if k == 0:
                state.partitions += len(indices)
            if self.resume and last and output is not None:
                done = output.completed()
                state.skipped_stats.extend({s["partition"]: s for s in done.values()}.values())
                if k == 0:
                    state.skipped += sum(1 for i in indices if i in done)
                indices = [i for i in indices if i not in done]
            unit = max([1, *(s.batch_size for s in stages)])
            progress = state.progress
            names = [reader_name, *(layout.name_of(s) for s in stages),
                     *([writer_name] if output is not None else [])]
            progress.stage(f"{layout.name}: {' -> '.join(names)}", len(indices))
            frames = []
            for first in range(0, len(indices), unit):
                items = [(runtime.read_task(ds.partition_reader, ds.plan[i], reader_name), (i,))
                         for i in indices[first:first + unit]]
                for stage in stages:
                    items = [
                        (runtime.stage_task(stage, layout.name_of(stage),
                                            tuple(i for _, idx in g for i in idx),
                                            *(c for c, _ in g)),
                         tuple(i for _, idx in g for i in idx))
                        for g in batch_groups(items, stage.batch_size)
                    ]
                for carried, covered in items:
                    if output is not None:
                        stats = runtime.write_task(output, writer_name, covered, carried)
                        if last:
                            state.output_done(stats)
                        else:
                            state.records.extend(stats.pop("records"))
                            state.barrier_dropped.append(stats["dropped"])
                    else:
                        state.records.extend(carried[1])
                        frames.append(carried[0])
                progress.update(sum(len(covered) for _, covered in items),
                                docs=sum(len(carried[0]) for carried, _ in items))
            if not last:
                barrier = layout.barriers[k]
                start = time.time()
                with phase(f"{layout.name}: {layout.name_of(barrier)}"):
                    out = barrier.run(DocumentDataset.read_parquet(output.spec.path,
                                                                   files_per_partition=1),
                                      posixpath.join(barrier_cache, "work"))
                    with phase("write"):
                        out, removed = materialize_barrier_output(
                            out, posixpath.join(barrier_cache, "output"))
                state.barrier_dropped.append(removed)
                stop = time.time()
                reader_name = f"{layout.name_of(barrier)}_output"
                state.records.append({
                    "stage": layout.name_of(barrier), "partitions": len(out.plan),
                    "rows_in": sum(r["rows_in"] for r in state.records
                                   if r["stage"] == writer_name),
                    "rows_out": 0, "bytes": 0, "seconds": stop - start, "start": start,
                    "stop": stop, "worker": "local", "rows_out_from": reader_name,
                })
                ds = out
            elif output is None:
                meta = ds.df._meta
                for stage in stages:
                    meta = stage.meta(meta)
                state.fill_barrier_rows()
                if not frames:  # every partition skipped or none planned
                    return DocumentDataset(dd.from_pandas(meta, npartitions=1),
                                           sources=state.inputs[0] if state.inputs else None)
                return DocumentDataset(dd.from_delayed(
                    [_delayed(f) for f in frames], meta=meta, verify_meta=False),
                    sources=state.inputs[0] if state.inputs else None)
        state.fill_barrier_rows()
        return None


def _delayed(frame):
    import dask

    return dask.delayed(frame, pure=True)
