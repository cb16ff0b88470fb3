"""Cluster faults that name their cause.

When a task's worker dies again and again, distributed ends the run with
``KilledWorker``, which names the task and the last worker, not why they died. The usual
cause is memory: each worker's nanny restarts its worker once it passes
``distributed.worker.memory.terminate`` (95%) of its memory limit, and records that on the
scheduler as a ``worker-restart-memory`` event (the worker's address, pid and resident
memory). :func:`explain_fault` reads those events, the workers' memory limits and the size
of the run's partitions, and turns the ``KilledWorker`` into a
:class:`WorkerMemoryError` that says which limit was passed, by how much, the partition
size, and what to change (``blocksize``, ``memory_limit``). A worker that died for another
reason (killed, its machine gone) is named as such.

The executors and the dedup workflows call it where a run fails (:func:`faults_explained`).

Examples
--------
>>> with faults_explained(partition_bytes=None):
...     pass
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from dask.utils import format_bytes

from curator_dask._keys import stage_of_key
from curator_dask.errors import CuratorError

__all__ = [
    "MEMORY_EVENT",
    "SchedulerLostError",
    "WorkerDiedError",
    "WorkerMemoryError",
    "explain_fault",
    "faults_explained",
    "lost_workers",
    "note_phase",
    "planned_partition_bytes",
    "scheduler_lost",
]

logger = logging.getLogger(__name__)

#: The scheduler event topic a nanny logs when it restarts its worker for memory.
MEMORY_EVENT = "worker-restart-memory"
#: The attribute an error carries with the phase it left (:func:`note_phase`).
_PHASE_ATTRIBUTE = "curator_phase"


def note_phase(error: BaseException, label: str) -> None:
    """Record on ``error`` the phase of a run it left (the innermost one: a phase the
    error already names is kept), so that :func:`explain_fault` can name it after the
    phase has ended."""
    if getattr(error, _PHASE_ATTRIBUTE, None) is None:
        # An error type with __slots__ takes no attribute: it goes unnamed.
        with contextlib.suppress(AttributeError):
            setattr(error, _PHASE_ATTRIBUTE, label)


class WorkerDiedError(CuratorError, RuntimeError):
    """A task whose worker died on every try (distributed's ``KilledWorker``), with why.

    ``task`` is the task's key, ``stage`` the stage it belongs to, ``tries`` how often
    it was tried, ``phase`` the phase of the run it failed in (None outside a phase).
    """

    def __init__(self, message: str, task=None, stage: str | None = None, tries: int = 0,
                 phase: str | None = None):
        self.task, self.stage, self.tries, self.phase = task, stage, tries, phase
        super().__init__(message)


class WorkerMemoryError(WorkerDiedError, MemoryError):
    """The workers that ran a task were restarted for passing their memory limit.

    ``memory_limit`` is the workers' limit in bytes, ``peak`` the most memory a worker
    held when it was restarted, ``partition_bytes`` the size of the run's partitions.
    """

    def __init__(self, message: str, task=None, stage: str | None = None, tries: int = 0,
                 memory_limit: int | None = None, peak: int | None = None,
                 partition_bytes: int | None = None, phase: str | None = None):
        self.memory_limit, self.peak, self.partition_bytes = memory_limit, peak, partition_bytes
        super().__init__(message, task, stage, tries, phase)


class SchedulerLostError(CuratorError, ConnectionError):
    """The client lost its connection to the scheduler mid-run (the scheduler process
    stopped, or its machine or the network to it was lost)."""


#: Client states once its connection to the scheduler is gone (or going).
_LOST_STATES = frozenset({"connecting", "closing", "closed", "failed"})


def scheduler_lost(error: BaseException | None, client) -> bool:
    """Whether ``error`` (or the client's state) says the scheduler is gone: distributed
    cancels every future with the reason ``scheduler-connection-lost`` the moment the
    connection drops, then tries to reconnect."""
    if error is not None and "scheduler-connection-lost" in str(error):
        return True
    status = getattr(client, "status", None)
    return str(getattr(status, "name", status)) in _LOST_STATES


def _scheduler_lost_error(client) -> SchedulerLostError:
    address = getattr(getattr(client, "scheduler", None), "address", None) or "its address"
    return SchedulerLostError(
        f"lost the connection to the scheduler at {address}: it stopped, or its machine "
        "or the network to it was lost. Finished parts are kept: start the scheduler (and "
        "its workers) again and rerun with resume=True ('resume: true' in a pipeline "
        "file's executor section)")


def lost_workers(client, since: float, token: str | None = None) -> list[dict]:
    """Workers the scheduler lost without being asked to (killed, crashed, restarted for
    memory) since ``since`` (epoch seconds), each with the tasks it was running that had to
    run again elsewhere, by stage: ``[{"worker": address, "retried": {stage: count}}]``.
    ``token`` keeps only one run's tasks. A worker retired on purpose (scaling down,
    recycling) is not lost. Empty where the scheduler's event log cannot be read."""
    try:
        events = client.get_events("all")
    except Exception:  # the scheduler is gone or busy: nothing to tell
        return []
    lost = []
    for when, event in events:
        if (when < since or not isinstance(event, dict)
                or event.get("action") != "remove-worker" or event.get("expected")):
            continue
        retried: dict[str, int] = {}
        for key in event.get("processing-tasks") or ():
            if token is None or token in str(key):
                stage = stage_of_key(key)
                retried[stage] = retried.get(stage, 0) + 1
        lost.append({"worker": str(event.get("worker")), "retried": retried})
    return lost



def _memory_restarts(client) -> list[dict]:
    try:
        return [event for _, event in client.get_events(MEMORY_EVENT)
                if isinstance(event, dict)]
    except Exception:  # the explanation is best effort; the error itself is not
        logger.debug("could not read the scheduler's memory events", exc_info=True)
        return []


#: Seconds the explanation waits for a worker to come back (its nanny restarting it) when
#: none is connected to tell its memory limit.
LIMIT_WAIT = 10


def _memory_limits(client) -> list[int]:
    """The workers' memory limits; when every worker is down (restarted for memory just
    now), those of the first to come back within :data:`LIMIT_WAIT` seconds."""
    from curator_dask._distributed import scheduler_workers

    def limits() -> list[int]:
        return [int(w.get("memory_limit") or 0) for w in scheduler_workers(client).values()]

    try:
        if not (found := limits()):
            client.wait_for_workers(1, timeout=LIMIT_WAIT)
            found = limits()
        return found
    except Exception:  # a scheduler that is gone, no worker back: the events alone must do
        return []


def planned_partition_bytes(plan) -> int | None:
    """The input bytes of the largest partition of a read plan (a list of
    :class:`~curator_dask.io.partitions.PartitionSpec`), as a fault names it; None without
    a plan.

    >>> from types import SimpleNamespace as Spec
    >>> planned_partition_bytes([Spec(nbytes=3), Spec(nbytes=7)]), planned_partition_bytes(None)
    (7, None)
    """
    if not isinstance(plan, (list, tuple)):
        return None
    return max((getattr(p, "nbytes", 0) or 0 for p in plan), default=0) or None


def explain_fault(error: BaseException, client, *, partition_bytes: int | None = None,
                  setting: str = "blocksize") -> BaseException:
    """``error`` with its cause named where it is a ``KilledWorker`` (else ``error``).

    ``partition_bytes`` is the size of the run's partitions (its blocksize), named in
    the advice with ``setting``, the parameter that sets it; the phase the error left
    (:func:`note_phase`) is named too.
    """
    from distributed.scheduler import KilledWorker

    if not isinstance(error, KilledWorker) or client is None:
        return error
    task, tries = error.task, error.allowed_failures + 1
    stage = stage_of_key(task)
    restarts = _memory_restarts(client)
    during = getattr(error, _PHASE_ATTRIBUTE, None)
    head = (f"task {task!r} of stage {stage!r}" + (f" in phase {during!r}" if during else "")
            + f" was tried {tries} time(s), and each time the worker running it died")
    size = (f"; the run's partitions are up to {format_bytes(partition_bytes)} "
            f"({setting})" if partition_bytes else "")
    if not restarts:
        return WorkerDiedError(
            f"{head}: not for passing its memory limit (no worker was restarted for "
            "memory), so it was killed from outside (the operating system's out-of-memory "
            "killer, a job scheduler, a signal) or its machine was lost. Look in the "
            f"workers' logs and the system log (dmesg) for why{size}. Finished parts are "
            "kept: rerun with resume=True", task, stage, tries, during)
    limits = [limit for limit in _memory_limits(client) if limit]
    limit = max(limits) if limits else None
    peak = max(int(e.get("rss") or 0) for e in restarts)
    shown = f" of {format_bytes(limit)}" if limit else ""
    smaller = (f" (for example {format_bytes(max(partition_bytes // 4, 1 << 20))})"
               if partition_bytes else "")
    return WorkerMemoryError(
        f"{head}: workers were restarted {len(restarts)} time(s) for passing 95% of their "
        f"memory limit{shown} (distributed.worker.memory.terminate; the most a worker held "
        f"was {format_bytes(peak)}){size}. Read smaller partitions: pass a smaller "
        f"{setting}{smaller}, or give each worker more memory (get_client(memory_limit=...)"
        ", or fewer threads per worker). Finished parts are kept: rerun with resume=True",
        task, stage, tries, limit, peak, partition_bytes, during)


#: Whether a :func:`faults_explained` is open around the code running now.
_GUARDED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "curator_dask_faults_guarded", default=False)


@contextmanager
def faults_explained(partition_bytes: int | Callable[[], int | None] | None = None,
                     client=None, setting: str = "blocksize", *,
                     fallback: bool = False) -> Iterator[None]:
    """Around a run on a cluster: a ``KilledWorker`` leaves it as :func:`explain_fault`
    names it, and the loss of the scheduler as a :class:`SchedulerLostError` with the
    resume hint. ``partition_bytes`` may be a function, called only on a failure;
    ``client`` defaults to the current ``distributed`` client; ``setting`` is the
    parameter that sets the partition size.

    A run's own guard (an executor's, a workflow's, a dedup method's) knows its input
    and its setting; the computes below it open a ``fallback`` guard, which names a
    fault only where no other guard is open (a dataset's write from a notebook), and
    otherwise leaves it to the run's."""
    if fallback and _GUARDED.get():
        yield
        return
    token = _GUARDED.set(True)
    try:
        yield
    except Exception as err:
        from distributed.scheduler import KilledWorker

        if client is not None and scheduler_lost(err, client):
            raise _scheduler_lost_error(client) from err
        if not isinstance(err, KilledWorker):
            raise
        if client is None:
            from distributed import default_client

            try:
                client = default_client()
            except ValueError:
                raise err from None
        size = partition_bytes() if callable(partition_bytes) else partition_bytes
        raise explain_fault(err, client, partition_bytes=size, setting=setting) from err
    finally:
        _GUARDED.reset(token)
