"""LocalExecutor: the whole pipeline in this process, one partition after another.

No cluster, no pickling, no futures: ``setup()``, ``process()`` and ``teardown()`` run
right here, so a breakpoint or ``%debug`` in a notebook lands inside the stage. The
results are the same as on a cluster (the same steps and task bodies, part names and
resume markers, see :mod:`curator_dask.executors.base`); only the speed differs.
"""

from __future__ import annotations

import contextlib
import logging

import dask

from curator_dask.executors.base import Executor
from curator_dask.executors.state import RunState
from curator_dask.executors.steps import Segment
from curator_dask.observe.progress import chain_label
from curator_dask.stages.base import teardown_stage
from curator_dask.task_names import stage_task_name

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

    @contextlib.contextmanager
    def session(self, state: RunState, report: str | None):
        if report:
            logger.warning("LocalExecutor runs no Dask tasks: no performance report written")
        try:
            yield
        finally:
            for stage in state.layout.processing_stages:
                teardown_stage(stage.stage_id)

    def run_segment(self, state: RunState, segment: Segment) -> None:
        """Each ``unit`` of partitions (the largest batch) through every step in turn."""
        indices, unit, last = segment.indices, segment.unit, segment.steps[-1]
        progress = self.progress_bar(state, len(indices), chain_label(
            state.layout.name, [step.name for step in segment.steps]))
        for first in range(0, len(indices), unit):
            items = [(None, (i,)) for i in indices[first:first + unit]]
            for step in segment.steps:
                items = [(task.func(*task.args), task.covered) for task in step.tasks(items)]
            for value, covered in items:
                records = last.finish(state, value)
                progress.update(len(covered), docs=records[-1].rows_out if records else 0)

    def kept(self, state, results):
        prefix = stage_task_name(state.layout.name, "output")
        return [dask.delayed(part, name=f"{prefix}-{state.token}-{i}")
                for i, part in sorted(results.items())]
