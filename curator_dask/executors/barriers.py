"""Whole-dataset stages (barriers) inside a streamed run.

A whole-dataset stage needs all of its input: the segment before it writes its parts as
Parquet under the run's cache directory (``<cache>/<k>-<stage>/input``,
:func:`barrier_input`), the stage runs on them, its output is kept in ``output`` with a
completion record of the input and the pipeline up to the stage, and the next segment
reads from there (:func:`run_barrier`). A resumed run skips input parts already written
and reuses an output whose record matches (:func:`~curator_dask.io.output_state.reusable`).
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import replace

from curator_dask.dataset import DocumentDataset
from curator_dask.dropped import counting, join_counts
from curator_dask.executors.layout import InternalStage
from curator_dask.executors.state import RunState
from curator_dask.executors.steps import Sink, Source
from curator_dask.io.output_state import mark_complete, reusable
from curator_dask.io.source import PartitionSource, plan_parquet
from curator_dask.observe.progress import phase
from curator_dask.observe.run_result import TaskRecord
from curator_dask.stages.base import WholeDatasetStage
from curator_dask.stages.fingerprint import pipeline_changes
from curator_dask.stages.io_stages import ParquetWriter
from curator_dask.task_names import task_scope

__all__ = ["barrier_input", "run_barrier"]

logger = logging.getLogger(__name__)


def barrier_input(state: RunState, source: Source, barrier: WholeDatasetStage, cache: str, *,
                  resume: bool) -> Sink:
    """Where the segment before ``barrier`` writes its parts: ``<cache>/input``, prepared
    (resumed when its manifest matches, else started over: it is the executor's own)."""
    layout = state.layout
    spill = state.register(InternalStage(layout.name_of(barrier), "write"))
    output = ParquetWriter(posixpath.join(cache, "input"), mode="overwrite").prepare(
        source.input.identity(), resume=resume, inputs=state.inputs,
        pipeline=layout.fingerprint(upto=barrier), restart_on_mismatch=True)
    return Sink(replace(output, source=source.input.token(),
                        spec=replace(output.spec, schema=source.input.schema)),
                spill, final=False)


def run_barrier(state: RunState, sink: Sink, barrier: WholeDatasetStage, cache: str, *,
                resume: bool) -> Source:
    """Run ``barrier`` on its written input (or reuse its finished output); its output
    as the next segment's source."""
    layout = state.layout
    name = layout.name_of(barrier)
    state.barrier_dropped.extend(s["dropped"] for s in sink.stats)
    start = time.time()
    out_dir = posixpath.join(cache, "output")
    fs = sink.output.fs
    # The barrier's output may be reused only by the pipeline (up to and including
    # the barrier) that computed it, from the same input.
    fingerprint = {"input": state.input_identity,
                   "pipeline": [*layout.fingerprint(upto=barrier), layout.entry(barrier)]}
    saved = (reusable(fs, out_dir, fingerprint, explain={"pipeline": pipeline_changes})
             if resume else None)
    if saved is not None:
        out = plan_parquet(out_dir, files_per_partition=1)
        removed = saved["stats"].get("dropped", {})
    else:
        with state.in_span(barrier, building=True), phase(f"{layout.name}: {name}"), \
                task_scope(name):
            ds_in = DocumentDataset.read_parquet(sink.output.spec.path, files_per_partition=1)
            with counting() as tally:  # what the stage records on the client
                out = barrier.run(ds_in, posixpath.join(cache, "work"))
            with phase("write"):
                out, removed = _materialize(out.with_counts(tally.dropped, tally.counters),
                                            out_dir)
            if fs.exists(out_dir):  # written here: its record keeps the drop counts
                state.guard.check()
                mark_complete(fs, out_dir, fingerprint=fingerprint, rows=0,
                              files=len(out.plan), stats={"dropped": removed})
    state.barrier_dropped.append(removed)
    stop = time.time()
    reread = state.register(InternalStage(name, "read"))
    state.records.append(TaskRecord(
        stage=name, partitions=len(out.plan), rows_in=sum(s["rows"] for s in sink.stats),
        rows_out=0, bytes=0, seconds=stop - start, start=start, stop=stop, worker="client"))
    state.barrier_rows[name] = reread.name
    return Source(out, reread)


def _materialize(out: DocumentDataset, directory: str) -> tuple[PartitionSource, dict]:
    """A barrier's output as a source the next segment can read, and its drop counts.

    An output read from a planned input, with steps since that need nothing but the
    partition (a stage, a function), is streamed from that input: each partition read
    and run through the steps in one task (:meth:`DocumentDataset.stream_source`). Any
    other output is written to ``directory`` and read back one file a partition;
    its partitions carry the documents the barrier removed in their drop counts, which
    files do not keep: the counts come back here, so the run can report them.
    """
    stream, why_not = out.stream_source()
    if stream is not None:
        return stream, {}
    logger.debug("the output is written to %s and read back: %s", directory, why_not)
    written = out.to_parquet(directory, mode="overwrite")
    return (plan_parquet(directory, files_per_partition=1),
            join_counts(written.dropped, written.counters))
