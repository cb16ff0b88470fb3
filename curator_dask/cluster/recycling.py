"""Worker recycling: ``get_client(worker_lifetime=...)`` and the :class:`WorkerRecycler` plugin.

distributed's own ``lifetime`` retires each worker on its own random clock, and two that
meet at once take the cluster down; :class:`WorkerRecycler` retires them one at a time
from the scheduler: never the last running worker, and the next only once the previous
one's replacement is up.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from dask.utils import parse_timedelta
from distributed.core import Status
from distributed.diagnostics.plugin import SchedulerPlugin
from tornado.ioloop import PeriodicCallback

from curator_dask._distributed import executing_seconds, fail_running_task, last_heartbeat
from curator_dask.errors import InvalidArgumentError, WorkerLifetimeError

__all__ = ["MIN_WORKER_LIFETIME", "WorkerRecycler"]

logger = logging.getLogger(__name__)

#: Shortest ``worker_lifetime`` accepted. A worker process needs about 3 s to start here
#: (importing pandas, pyarrow and distributed, then registering), so below 2 s a worker
#: would spend longer starting than working, which is never what recycling is for; it is
#: also how ``worker_lifetime=1`` (meant as an hour, read as seconds) is caught.
MIN_WORKER_LIFETIME = 2.0


def recycler_for(lifetime, stagger, restart, max_retiring) -> WorkerRecycler | None:
    """The recycler for ``get_client``'s lifetime options, checked; None without one.

    Examples
    --------
    >>> r = recycler_for("10s", None, True, 1)
    >>> (r.lifetime, r.stagger, r.restart, r.max_retiring)
    (10.0, 1.0, True, 1)
    >>> recycler_for(None, None, True, 1) is None
    True
    """
    if lifetime is None:
        return None
    seconds = (float(lifetime) if isinstance(lifetime, (int, float))
               else parse_timedelta(lifetime, default="seconds"))
    if not seconds >= MIN_WORKER_LIFETIME:
        raise InvalidArgumentError(
            f"worker_lifetime={lifetime!r} is too short: a worker needs seconds to start, "
            f"so lifetimes under {MIN_WORKER_LIFETIME:g} s recycle workers faster than they "
            "can work. Give a duration like '1 hour' (a plain number counts seconds), "
            "several times as long as your longest task, or None to turn recycling off")
    stagger = seconds / 10 if stagger is None else parse_timedelta(stagger, default="seconds")
    if not 0 <= stagger < seconds:
        raise InvalidArgumentError(f"worker_lifetime_stagger={stagger!r} must be at least 0 and "
                                   f"shorter than worker_lifetime ({seconds:g} s)")
    bad_count = isinstance(max_retiring, bool) or not isinstance(max_retiring, (int, float))
    if bad_count or not ((max_retiring >= 1 and float(max_retiring).is_integer())
                         or 0 < max_retiring < 1):
        raise InvalidArgumentError(
            f"worker_lifetime_max_retiring={max_retiring!r} must be a whole number of "
            "workers (1, 2, ...) or a fraction of them between 0 and 1 (0.25)")
    return WorkerRecycler(seconds, stagger=stagger, restart=bool(restart),
                          max_retiring=int(max_retiring) if max_retiring >= 1 else max_retiring)


class WorkerRecycler(SchedulerPlugin):
    """Scheduler plugin: recycle workers after a lifetime, one at a time, never the last.

    distributed's own ``lifetime`` gives each worker a clock of its own: workers that reach
    it together all retire at once, none is left to take their data, and the cluster is
    empty until the nannies have restarted them. Here the scheduler decides instead. Every
    ``interval`` it looks for workers past their lifetime and recycles one when

    - fewer than ``max_retiring`` workers are recycling (retiring, or waiting for their
      replacement to come up), and
    - at least one other worker is running and not recycling.

    Recycling a worker: it stops taking tasks and its data moves to the other workers
    (``Scheduler.retire_workers``); the tasks it is running finish; then it closes through
    its own graceful path and its nanny starts a replacement (with ``restart``). The next
    worker is recycled only once that replacement is up (or after ``replacement_timeout``).
    When the data cannot move (the other workers are paused), the worker goes back to
    work and is tried again later. A recycled worker's tasks are rescheduled without
    counting as failures.

    A task that runs longer than the lifetime would keep its worker past it; such a task
    fails with :class:`~curator_dask.errors.WorkerLifetimeError`, which names it, its
    stage and the lifetime.

    Parameters
    ----------
    lifetime : float
        Seconds a worker lives, counted from when it joined.
    stagger : float, default 0
        The workers present when the plugin starts get first lifetimes spread evenly over
        ``[lifetime - stagger, lifetime]`` (in the order of their names).
    restart : bool, default True
        Recycled workers are restarted by their nanny; False: they are not, and the last
        running worker is kept.
    max_retiring : int or float, default 1
        Workers recycling at once: a count, or a fraction (below 1) of the workers.
    replacement_timeout : float, optional
        How long the next recycling waits for a replacement (default: the lifetime, at
        least a minute).
    """

    name = "curator-dask-recycler"

    def __init__(self, lifetime: float, *, stagger: float = 0.0, restart: bool = True,
                 max_retiring: int | float = 1, replacement_timeout: float | None = None):
        self.lifetime = float(lifetime)
        self.stagger = float(stagger)
        self.restart = bool(restart)
        self.max_retiring = max_retiring
        self.replacement_timeout = (max(60.0, self.lifetime) if replacement_timeout is None
                                    else float(replacement_timeout))
        self.interval = min(1.0, max(0.05, self.lifetime / 20))
        self.scheduler = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        self.due: dict[str, float] = {}  # worker address -> when its lifetime ends
        self.recycling: dict[str, asyncio.Task] = {}
        self.refused: set = set()  # keys failed for outliving the lifetime
        now = time.time()
        first = sorted(scheduler.workers.values(), key=lambda ws: str(ws.name))
        for i, ws in enumerate(first):
            spread = self.stagger * i / (len(first) - 1) if len(first) > 1 else 0.0
            self.due[ws.address] = now + self.lifetime - spread
        self._callback = PeriodicCallback(self.check, self.interval * 1000)
        self._callback.start()

    async def close(self) -> None:
        callback = getattr(self, "_callback", None)
        if callback is not None:
            callback.stop()
        for task in list(getattr(self, "recycling", {}).values()):
            task.cancel()

    def add_worker(self, scheduler, worker: str) -> None:
        self.due[worker] = time.time() + self.lifetime

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        self.due.pop(worker, None)

    def valid_workers_downscaling(self, scheduler, workers: list) -> list:
        """Downscaling (adapt) may not take the last running worker that is not recycling."""
        candidates = [ws for ws in workers if ws.address not in self.recycling]
        staying = [ws for ws in scheduler.running
                   if ws.address not in self.recycling and ws not in candidates]
        if staying:
            return candidates
        spare = [ws for ws in candidates if ws in scheduler.running]
        return [ws for ws in candidates if ws is not spare[0]] if spare else candidates

    # -- deciding ------------------------------------------------------------------------
    def allowed(self) -> int:
        """Workers that may be recycling at once now."""
        if self.max_retiring >= 1:
            return int(self.max_retiring)
        return max(1, math.floor(self.max_retiring * len(self.scheduler.workers)))

    def check(self) -> None:
        """Refuse tasks that outlive the lifetime; start recycling the workers due."""
        scheduler = self.scheduler
        if scheduler is None or scheduler.status != Status.running:
            return
        self.refuse_long_tasks()
        now = time.time()
        due = sorted((when, address) for address, when in self.due.items()
                     if when <= now and address not in self.recycling)
        for _, address in due:
            available = [ws for ws in scheduler.running if ws.address not in self.recycling]
            if len(self.recycling) >= self.allowed() or len(available) < 2:
                return
            ws = scheduler.workers.get(address)
            if ws is None or ws not in available:
                continue  # paused, or retiring for another reason: not now
            self.recycling[address] = asyncio.ensure_future(self.recycle(address))

    def refuse_long_tasks(self) -> None:
        """Fail every task that has run longer than the lifetime (as its worker reports)."""
        for ws in list(self.scheduler.workers.values()):
            for ts, seconds in executing_seconds(ws).items():
                if seconds <= self.lifetime or ts.key in self.refused:
                    continue
                error = WorkerLifetimeError(ts.key, seconds, self.lifetime, ws.address)
                if fail_running_task(self.scheduler, ts, ws, error,
                                     stimulus_id=f"worker-lifetime-exceeded-{time.time()}"):
                    self.refused.add(ts.key)
                    logger.error("%s", error)

    # -- recycling one worker ----------------------------------------------------------------
    async def recycle(self, address: str) -> None:
        scheduler = self.scheduler
        try:
            name = scheduler.workers[address].name
            logger.info("recycling worker %s (%r) after its lifetime of %.0f s", address,
                        name, self.lifetime)
            retired = await scheduler.retire_workers(
                workers=[address], close_workers=False, remove=False,
                stimulus_id=f"worker-lifetime-{time.time()}")
            if address not in retired:
                # Its data had nowhere to go (the other workers are paused); the
                # scheduler put it back to work. Try again a little later.
                if address in self.due:
                    self.due[address] = time.time() + min(self.lifetime / 4, 10.0)
                return
            await self._tasks_finished(address)
            logger.debug("worker %s has handed its data over and finished its tasks", address)
            if address in scheduler.workers:
                await scheduler.broadcast(
                    msg={"op": "run", "function": _dumps(_close_for_recycling),
                         "args": _dumps((self.restart,)), "wait": False},
                    workers=[address], on_error="ignore")
            deadline = time.monotonic() + self.replacement_timeout
            while address in scheduler.workers and time.monotonic() < deadline:
                await asyncio.sleep(self.interval)
            logger.debug("worker %s has left", address)
            if not self.restart:
                return
            while time.monotonic() < deadline:
                if any(ws.name == name and ws.status == Status.running
                       for ws in scheduler.workers.values()):
                    logger.debug("worker %r is back", name)
                    return
                await asyncio.sleep(self.interval)
            logger.warning("worker %r was recycled and has not come back within %.0f s; "
                           "recycling goes on without it", name, self.replacement_timeout)
        except asyncio.CancelledError:
            raise
        except Exception:  # recycling must never take the scheduler down
            logger.exception("recycling worker %s failed", address)
        finally:
            self.recycling.pop(address, None)

    async def _tasks_finished(self, address: str) -> None:
        """Wait until the worker runs no task but refused ones, as a fresh heartbeat says.

        A retiring worker starts no new task; the scheduler learns what it runs from its
        heartbeats, so one that arrived after the retirement is waited for.
        """
        since = time.time()
        while True:
            ws = self.scheduler.workers.get(address)
            if ws is None:
                return
            if (last_heartbeat(ws) > since
                    and not {ts.key for ts in executing_seconds(ws)} - self.refused):
                return
            await asyncio.sleep(self.interval)


def _dumps(value) -> bytes:
    from distributed.protocol.pickle import dumps

    return dumps(value)


async def _close_for_recycling(restart: bool, dask_worker=None) -> None:
    """Run on a worker: leave the cluster gracefully; its nanny restarts it (``restart``).

    The steps of ``Worker.close_gracefully`` (which distributed's ``lifetime`` takes), for
    a worker that is closing gracefully already (and on which that method would wait
    forever): it retires itself at the scheduler, handing over any data it made since,
    then closes without its nanny, which starts a fresh worker.
    """
    await dask_worker.scheduler.retire_workers(
        workers=[dask_worker.address], close_workers=False, remove=True,
        stimulus_id=f"worker-lifetime-{time.time()}")
    await dask_worker.close(nanny=not restart, reason="worker-lifetime-reached")
