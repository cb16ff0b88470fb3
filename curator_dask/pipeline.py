"""Pipeline: a reader, stages and a writer, run by an executor on a Dask cluster.

Examples
--------
>>> from curator_dask import Resources, processing_stage
>>> from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
>>> @processing_stage(name="strip")
... def strip(df):
...     return df.assign(text=df["text"].str.strip())
>>> p = (Pipeline("clean", description="strip then write")
...      .add_stage(JsonlReader("in/"))
...      .add_stage(strip)
...      .add_stage(ParquetWriter("out/")))
>>> print(p.describe())
Pipeline 'clean': strip then write
  1. read_jsonl     CPU=1  reader
  2. strip          CPU=1  partition stage
  3. write_parquet  CPU=1  writer
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from curator_dask.compat import nemo_keywords
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.executors.base import Executor
from curator_dask.executors.layout import Layout
from curator_dask.observe.run_result import RunResult, StageMetrics
from curator_dask.stages.base import ProcessingStage, Sequential, WholeDatasetStage, unique_name
from curator_dask.stages.io_stages import ReaderStage, WriterStage

__all__ = ["Pipeline", "RunResult", "StageMetrics"]

logger = logging.getLogger(__name__)

_DESCRIBED_KINDS = {"read": "reader", "write": "writer", "barrier": "whole dataset (barrier)",
                    "process": "partition stage"}


class Pipeline:
    """An ordered list of stages: one reader, partition and whole-dataset stages, a writer.

    Parameters
    ----------
    name : str
        Shown in logs, progress bars and the dashboard (each stage's tasks are grouped
        in a span ``(name, stage name)``).
    description : str, optional
    stages : sequence, optional
        Stages to add in order, as :meth:`add_stage` adds them (NeMo Curator 1.x's
        ``Pipeline(name, stages=[...])``).
    """

    def __init__(self, name: str, description: str | None = "",
                 stages: Sequence | None = None):
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"a pipeline needs a non-empty name, got {name!r}")
        self.name = name
        self.description = description or ""
        self.stages: list = []
        #: The :class:`RunResult` of the latest :meth:`run`.
        self.last_result: RunResult | None = None
        for stage in stages or ():
            self.add_stage(stage)

    def add_stage(self, stage) -> Pipeline:
        """Append a stage; a :class:`Sequential` is flattened into its stages. Chainable.

        A partition stage named like one already in the pipeline is added as a copy
        named ``<name>_2`` (``_3``, ...), so that each counts its drops apart.
        """
        if isinstance(stage, Sequential):
            for inner in stage.flatten():
                self.add_stage(inner)
            return self
        if not isinstance(stage, (ReaderStage, WriterStage, ProcessingStage, WholeDatasetStage)):
            raise ArgumentTypeError(
                f"add_stage takes a reader, a ProcessingStage, a WholeDatasetStage, a writer "
                f"or a Sequential, got {type(stage).__name__}; wrap a function of one "
                "partition with @processing_stage"
            )
        if isinstance(stage, ReaderStage) and self.stages:
            raise InvalidArgumentError(f"pipeline {self.name!r}: a reader must be the first stage")
        if not isinstance(stage, ReaderStage) and not self.stages:
            raise InvalidArgumentError(f"pipeline {self.name!r}: add a reader (JsonlReader or "
                             f"ParquetReader) before {stage!r}")
        if self.stages and isinstance(self.stages[-1], WriterStage):
            raise InvalidArgumentError(f"pipeline {self.name!r}: nothing can follow the writer "
                             f"{self.stages[-1]!r}")
        if isinstance(stage, ProcessingStage):
            stage = self._uniquely_named(stage)
        self.stages.append(stage)
        return self

    def _uniquely_named(self, stage: ProcessingStage) -> ProcessingStage:
        """``stage``, or a copy named ``<name>_2``, ``_3``... if a stage of this pipeline
        has its name: stages count their drops under their name, and two counts under
        one name could not be told apart (the same object added twice included)."""
        name = unique_name(stage.name, [s.name for s in self.stages])
        if name == stage.name:
            return stage
        logger.info("pipeline %r: a stage is already named %r; naming this one %r",
                    self.name, stage.name, name)
        return stage.with_(name=name)

    def describe(self) -> str:
        """The stages in order, each with its resources."""
        layout = Layout.of(self.name, self.stages) if self.stages else None
        head = f"Pipeline {self.name!r}" + (f": {self.description}" if self.description else "")
        if layout is None:
            return head + "\n  (no stages)"
        rows = []
        for stage in self.stages:
            kind = _DESCRIBED_KINDS[stage.kind]
            if kind == "partition stage" and stage.batch_size > 1:
                kind += f", batch_size={stage.batch_size}"
            resources = str(stage.resources or "") or "-"
            rows.append((layout.name_of(stage), resources, kind))
        from curator_dask.observe.tables import text_table

        # Numbers right-aligned, so that the names still line up from stage 10 on.
        width = len(str(len(rows)))
        lines = text_table(None, rows).splitlines()
        return "\n".join([head, *(f"  {i:>{width}}. {line}"
                                   for i, line in enumerate(lines, start=1))])

    def __repr__(self) -> str:
        return f"<Pipeline {self.name!r}: {len(self.stages)} stages>"

    @nemo_keywords()
    def run(self, executor: Executor | None = None, report: str | None = None) -> RunResult:
        """Run the pipeline.

        Parameters
        ----------
        executor : Executor, optional
            Default: a :class:`~curator_dask.executors.StreamingExecutor` on the current
            Dask client, or a :class:`~curator_dask.executors.LocalExecutor` (in-process)
            when there is none.
        report : str, optional
            Save distributed's performance report (task stream, profiles) to this HTML
            file. Cluster executors only.

        Returns
        -------
        RunResult
            Per-stage metrics, the output files and drop counts; a pipeline without a
            writer holds its result in :attr:`RunResult.dataset` (in cluster memory).
            Iterating it gives one :class:`~curator_dask.observe.run_result.OutputTask`
            per output, as NeMo Curator 1.x's ``run()`` listed its output tasks. Also
            kept as :attr:`last_result`.
        """
        executor = executor if executor is not None else _default_executor()
        layout = Layout.of(self.name, self.stages)
        logger.debug("running %s with %r", self.describe(), executor)
        result = executor.run(layout, report=report)
        self.last_result = result
        return result


def _default_executor():
    from curator_dask.executors import LocalExecutor, StreamingExecutor

    try:
        from distributed import default_client

        default_client()
    except (ImportError, ValueError):
        logger.info("no Dask client: running in-process with LocalExecutor")
        return LocalExecutor()
    return StreamingExecutor()
