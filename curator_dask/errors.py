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

from distributed.scheduler import NoWorkerError

from curator_dask._keys import stage_of_key

__all__ = ["ArgumentTypeError", "ComputationError", "CuratorError", "InvalidArgumentError",
           "MissingDependencyError", "MissingFileError", "NameNotFoundError", "NoWorkersError",
           "ResourceUnavailableError", "RunStateError", "WorkerLifetimeError"]


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


# -- the kinds of deliberate error every layer raises ------------------------------------------

class InvalidArgumentError(CuratorError, ValueError):
    """An argument's value is not one the callable takes: out of its range, not one of
    its choices, or in conflict with another argument. The message names the argument,
    the value and what to give instead."""


class ArgumentTypeError(CuratorError, TypeError):
    """An argument of a type the callable does not take (a pandas frame where a dataset
    is needed, a string where a list is), or a partition of a backend a stage does not
    work on."""


class MissingDependencyError(CuratorError, ImportError):
    """A feature needs an optional package that is not installed; the message names the
    extra to install (``pip install 'curator-dask[dedup]'``)."""


class MissingFileError(CuratorError, FileNotFoundError):
    """A file the project needs (a model, a script to rewrite, a record a rerun reads) is
    not where it was looked for."""


class NameNotFoundError(CuratorError, KeyError):
    """A name looked up is not there (a stage of a run, a parameter of a stage, a column,
    a field of a record); the message lists the names there are."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class RunStateError(CuratorError, RuntimeError):
    """Something that needs a run in progress was called outside one, or the other way
    round (a guard entered twice)."""


class ComputationError(CuratorError, RuntimeError):
    """A computation could not finish as asked (an iteration that did not converge)."""


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
        return (f"stage {stage_of_key(self.key)!r}: task {self.key!r} has run for "
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
