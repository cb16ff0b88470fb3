"""The base of every error curator-dask raises on purpose.

Every exception class the project defines derives from :class:`CuratorError`, so one
``except CuratorError`` catches them all. Each also keeps the builtin base it always had
(an :class:`~curator_dask.io.errors.InputError` is still a :class:`ValueError`, a
:class:`ResourceUnavailableError` still a :class:`RuntimeError`),
so code written against those bases keeps working.

Examples
--------
>>> from curator_dask import CuratorError
>>> from curator_dask.io.errors import MalformedLineError
>>> error = MalformedLineError("a.jsonl", 3, "Expecting value")
>>> isinstance(error, CuratorError), isinstance(error, ValueError)
(True, True)
"""

from __future__ import annotations

from dask.utils import key_split
from distributed.scheduler import NoWorkerError

__all__ = ["CuratorError", "NoWorkersError", "ResourceUnavailableError", "WorkerLifetimeError"]


def _restore(cls: type[CuratorError], args: tuple, state: dict) -> CuratorError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class CuratorError(Exception):
    """Base class of every error curator-dask raises on purpose.

    Catch it to handle any of the project's errors (bad input, unavailable resources,
    configuration mistakes, model directories, ...) while letting unexpected failures
    (bugs, interrupts) through.
    """

    def __reduce__(self):
        # Subclasses' constructors take the parts of the message, not the message: rebuild
        # from the arguments and attributes instead of calling __init__ again, so an error
        # raised on a Dask worker reaches the client intact (type, message, attributes).
        return _restore, (type(self), self.args, self.__dict__)


# -- errors of running a pipeline on a cluster ------------------------------------------------

class ResourceUnavailableError(CuratorError, RuntimeError):
    """A stage asks for a resource that no worker of the cluster offers."""


class WorkerLifetimeError(ResourceUnavailableError):
    """A task ran longer than the workers live (``get_client(worker_lifetime=...)``).

    Recycling retires a worker only between tasks, so a task longer than the lifetime
    would keep its worker past it; the scheduler's recycler fails the task instead.
    """

    def __init__(self, key, seconds: float, lifetime: float, worker: str):
        super().__init__(key, seconds, lifetime, worker)
        self.key, self.seconds, self.lifetime, self.worker = key, seconds, lifetime, worker

    def __str__(self) -> str:
        return (f"stage {key_split(self.key)!r}: task {self.key!r} has run for "
                f"{self.seconds:.0f} s on {self.worker}, longer than the workers' lifetime "
                f"({self.lifetime:g} s, get_client(worker_lifetime=...)). Workers are "
                "recycled only between tasks; give worker_lifetime several times your "
                "longest task, make partitions smaller (files_per_partition, blocksize), "
                "or turn recycling off (worker_lifetime=None)")


class NoWorkersError(ResourceUnavailableError, NoWorkerError):
    """The cluster had no worker at all for longer than its no-workers timeout.

    A :class:`distributed.scheduler.NoWorkerError` (catch either) whose message says
    which workers left last, and why when the scheduler knows.
    """

    def __init__(self, task, timeout: float, message: str):
        super().__init__(task, timeout, message)

    def __str__(self) -> str:
        return self.args[2]
