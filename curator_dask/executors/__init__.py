"""Executors: run a Pipeline on a Dask cluster (batch or streaming) or in-process.

- :class:`StreamingExecutor`: each input partition flows through all stages as a chain
  of futures; parts are written as they complete; bounded memory; ``resume=True``.
- :class:`BatchExecutor`: one stage at a time over the whole dataset.
- :class:`LocalExecutor`: everything in this process, for debugging a stage.
"""

from curator_dask.errors import NoWorkersError, ResourceUnavailableError, WorkerLifetimeError
from curator_dask.executors.base import Executor
from curator_dask.executors.batch import BatchExecutor
from curator_dask.executors.local import LocalExecutor
from curator_dask.executors.streaming import StreamingExecutor

__all__ = ["BatchExecutor", "Executor", "LocalExecutor", "NoWorkersError",
           "ResourceUnavailableError", "StreamingExecutor", "WorkerLifetimeError"]
