"""The parts of distributed's private or undocumented API that curator-dask relies on.

Each use is one small function here, so that a distributed release that changes one of
them breaks one function, and ``tests/test_distributed_compat.py`` (one test per function,
on a real LocalCluster) names the attribute that changed. Everything else in the package
uses only distributed's public API.

Checked on distributed 2026.8.0 (and written against the 2024.x-2026.x releases, whose
``Client``, ``SpecCluster``, ``Scheduler``, ``WorkerState`` and worker state machine have
these attributes unchanged).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from distributed.core import Status

__all__ = ["UNFINISHED_TASK_STATES", "bound_shuffle_buffers", "correct_cluster_state",
           "executing_seconds", "fail_running_task", "hand_cluster_to_client",
           "last_heartbeat", "name_new_workers", "own_adaptive_target", "scheduler_workers",
           "set_adaptive_target", "shuffle_buffer_limits", "worker_memory_limit",
           "worker_paused",
           "worker_task_states"]

#: Worker task states (``distributed.worker_state_machine.TaskStateState``) in which a
#: task may still start or is still running.
UNFINISHED_TASK_STATES = frozenset({"waiting", "ready", "constrained", "executing",
                                    "long-running", "fetch", "flight", "cancelled",
                                    "resumed"})


def scheduler_workers(client) -> dict[str, dict]:
    """``{address: info}`` of every worker the scheduler knows now (``nthreads``,
    ``resources``, ``memory_limit``, ``status``, ...), asked of the scheduler itself.

    Not ``client.scheduler_info(n_workers=-1)["workers"]``: that returns the client's
    cached identity, which the client's own periodic refresh (every
    ``distributed.client.scheduler-info-interval``, asking for no workers) may replace
    between the fetch and the return, so on a busy machine it is sometimes empty.
    Relies on the scheduler's ``identity(n_workers=...)`` RPC handler, which
    ``Client.scheduler_info`` calls and its docstring points to. Checked on distributed
    2026.8.0.
    """
    return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def hand_cluster_to_client(client) -> None:
    """Make ``client.close()`` close the cluster the client was created on.

    Relies on ``Client._start_arg``: ``Client.close`` closes ``client.cluster`` exactly
    when the client was created without an address (``_start_arg is None``), as
    ``Client()`` does with the LocalCluster it starts itself. Checked on distributed
    2026.8.0.
    """
    client._start_arg = None


def name_new_workers(cluster, name: Callable[[int], str]) -> None:
    """Name the workers ``cluster.scale``/``adapt`` add as ``name(number)``.

    Relies on ``SpecCluster._new_worker_name(i)``, which ``SpecCluster.new_worker_spec``
    calls for the name of each worker it adds. Checked on distributed 2026.8.0.
    """
    cluster._new_worker_name = name


def correct_cluster_state(cluster) -> None:
    """Start (or stop) workers until they match ``cluster.worker_spec``; blocks until done.

    Relies on ``SpecCluster._correct_state``, the coroutine ``scale`` runs after editing
    ``worker_spec``; calling it directly adds workers with the names and options the
    caller put in ``worker_spec``, which ``scale`` cannot. Checked on distributed 2026.8.0.
    """
    cluster.sync(cluster._correct_state)


def own_adaptive_target(scheduler) -> Callable[..., int]:
    """The scheduler class's own ``adaptive_target``, bound to ``scheduler``.

    Not a wrapper an earlier plugin may have installed on the instance. Relies on
    ``Scheduler.adaptive_target(target_duration=None) -> int``, the number of workers
    every autoscaler (``Adaptive``, dask-jobqueue, dask-kubernetes) asks the scheduler
    for. Checked on distributed 2026.8.0.
    """
    return type(scheduler).adaptive_target.__get__(scheduler)


def set_adaptive_target(scheduler, target: Callable[..., int]) -> None:
    """Make ``target`` what autoscalers get when they ask ``scheduler`` for its target.

    Relies on autoscalers reaching the method through the scheduler's ``adaptive_target``
    attribute (in-process) or its ``handlers["adaptive_target"]`` RPC handler (through a
    comm, as ``Adaptive`` does): both are replaced. Checked on distributed 2026.8.0.
    """
    scheduler.adaptive_target = target
    scheduler.handlers["adaptive_target"] = target


def executing_seconds(worker_state) -> dict:
    """``{TaskState: seconds}`` of the tasks a worker runs, as its last heartbeat said.

    Relies on ``WorkerState.executing`` (scheduler side), which heartbeats fill with how
    long each executing task has run. Checked on distributed 2026.8.0.
    """
    return dict(worker_state.executing)


def last_heartbeat(worker_state) -> float:
    """When the scheduler last heard from a worker (``time()`` seconds).

    Relies on ``WorkerState.last_seen``, set on each heartbeat. Checked on distributed
    2026.8.0.
    """
    return worker_state.last_seen


def fail_running_task(scheduler, ts, worker_state, error: BaseException,
                      stimulus_id: str) -> bool:
    """Fail task ``ts`` with ``error`` as if its worker had raised it; whether it did.

    Only a task the scheduler still has processing on ``worker_state`` is failed (False
    otherwise). Its futures raise ``error``; the worker's own later result is ignored.
    Relies on ``TaskState.processing_on`` and ``TaskState.run_id`` and on
    ``Scheduler.handle_task_erred`` (the handler of a worker's ``task-erred`` message).
    Checked on distributed 2026.8.0.
    """
    from distributed.protocol.pickle import dumps

    if ts.state != "processing" or ts.processing_on is not worker_state:
        return False
    scheduler.handle_task_erred(
        key=ts.key, worker=worker_state.address, run_id=ts.run_id, stimulus_id=stimulus_id,
        exception=dumps(error), traceback=None, exception_text=str(error),
        traceback_text="")
    return True


def worker_task_states(dask_worker) -> Iterator[tuple[object, str]]:
    """``(key, state)`` of every task a worker knows of, in its own state machine.

    Run on the worker (``client.run``). Relies on ``Worker.state.tasks`` (a
    ``WorkerState`` of ``distributed.worker_state_machine``, keyed by task key, whose
    tasks have a ``state`` among ``TaskStateState``). Checked on distributed 2026.8.0.
    """
    for key, task in list(dask_worker.state.tasks.items()):
        yield key, task.state


def worker_memory_limit(dask_worker) -> int | None:
    """A worker's memory limit in bytes (None: it has none), read on the worker.

    Relies on ``Worker.memory_manager.memory_limit`` (a
    ``distributed.worker_memory.WorkerMemoryManager``; 0 or None without a limit).
    Checked on distributed 2026.8.0.
    """
    return int(dask_worker.memory_manager.memory_limit or 0) or None


def _shuffle_limiters(dask_worker) -> dict[str, object] | None:
    shuffle = dask_worker.extensions.get("shuffle")
    if shuffle is None:
        return None
    return {"comm": shuffle.memory_limiter_comms, "disk": shuffle.memory_limiter_disk}


def shuffle_buffer_limits(dask_worker) -> dict[str, int | None] | None:
    """``{"comm": bytes, "disk": bytes}``: what a worker's P2P shuffles may buffer in memory
    for sending and for staging to disk (None: unbounded), or None on a worker without
    P2P shuffling. Run on the worker (``client.run``).

    Relies on ``Worker.extensions["shuffle"]`` (``ShuffleWorkerPlugin``) and its
    ``memory_limiter_comms`` / ``memory_limiter_disk`` (``ResourceLimiter``): made once
    per worker from ``distributed.p2p.comm.buffer`` / ``distributed.p2p.storage.buffer``
    when the worker starts, and handed to every shuffle run, whose buffers read their
    ``limit`` on every put. Checked on distributed 2026.8.0.
    """
    limiters = _shuffle_limiters(dask_worker)
    if limiters is None:
        return None
    return {name: limiter.limit for name, limiter in limiters.items()}


def bound_shuffle_buffers(dask_worker, limit: int) -> dict[str, int | None] | None:
    """Lower each of a worker's P2P shuffle buffers (see :func:`shuffle_buffer_limits`)
    to at most ``limit`` bytes, for the runs under way and those to come; return the
    limits now (None on a worker without P2P shuffling). A buffer already smaller keeps
    its size. Checked on distributed 2026.8.0.
    """
    limiters = _shuffle_limiters(dask_worker)
    if limiters is None:
        return None
    for limiter in limiters.values():
        limiter.limit = limit if limiter.limit is None else min(limiter.limit, limit)
    return shuffle_buffer_limits(dask_worker)


def worker_paused(dask_worker) -> bool:
    """Whether a worker is paused (for memory, or by hand): it runs no new task.

    Relies on ``Worker.status`` and ``distributed.core.Status.paused``. Checked on
    distributed 2026.8.0.
    """
    return dask_worker.status == Status.paused
