"""BatchExecutor: one stage at a time over the whole dataset.

Each step's tasks are one layer of delayed calls on the previous layer's futures,
persisted with the stage's resources (``client.persist(layer, resources=...)``); the
executor waits for the whole layer before the next one starts. Because every layer is
persisted on its own, the resources given at persist restrict exactly that stage's
tasks, and each layer's keys are new (``<stage>/<kind>-<run token>-<partition>``), so none
inherits an earlier placement.

Memory grows with the dataset (a whole stage's output is held at once); it is the
baseline the streaming executor is measured against, and the simplest to reason about.
Segments, resume and barriers are the skeleton's (:mod:`curator_dask.executors.base`).
"""

from __future__ import annotations

import logging

import dask

from curator_dask.executors.on_cluster import ClusterExecutor, raise_task_error
from curator_dask.executors.state import RunState
from curator_dask.executors.steps import Segment

__all__ = ["BatchExecutor"]

logger = logging.getLogger(__name__)


class BatchExecutor(ClusterExecutor):
    """Run a pipeline stage by stage, each stage over all partitions before the next.

    Parameters
    ----------
    resume : bool, default False
        Skip input partitions whose output part is complete from an earlier run.
    client : distributed.Client, optional
        Default: the current client.
    cache_path, progress, force
        See :class:`~curator_dask.executors.base.Executor`.
    """

    name = "batch"

    def __init__(self, resume: bool = False, *, client=None, cache_path: str | None = None,
                 progress: bool = True, force: bool = False):
        super().__init__(resume=resume, client=client, cache_path=cache_path,
                         progress=progress, force=force)

    def __repr__(self) -> str:
        return f"BatchExecutor(resume={self.resume})"

    def run_segment(self, state: RunState, segment: Segment) -> None:
        from distributed import as_completed, futures_of

        client, items = state.client, [(None, (i,)) for i in segment.indices]
        for step in segment.steps:
            tasks = step.tasks(items)
            if not tasks:  # a resume found every part complete
                return
            layer = [dask.delayed(task.func, pure=False)(*task.args, dask_key_name=task.key)
                     for task in tasks]
            with state.in_span(step.stage):
                futures = [futures_of(d)[0] for d in
                           client.persist(layer, resources=step.resources)]
            progress = self.progress_bar(state, len(futures) if step.capped else 0,
                                         f"{state.layout.name}: {step.name}")
            try:
                for future in as_completed(futures):
                    if future.status == "error":
                        raise_task_error(client, future)  # the task's error, its stage noted
                    progress.update(1)
            except BaseException:
                client.cancel(futures)
                raise
            items = [(future, task.covered) for future, task in zip(futures, tasks, strict=True)]
        for value in client.gather([future for future, _ in items]):
            segment.steps[-1].finish(state, value)
