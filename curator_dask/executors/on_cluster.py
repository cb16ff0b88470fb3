"""What the executors that run on a Dask cluster (batch and streaming) share.

:class:`ClusterExecutor` checks the stages' resources against the workers before
anything is submitted (:mod:`curator_dask.executors.placement`), records distributed's
performance report when asked for, and after the run, failed or not, tears the stages
down on every worker, a failed run first releasing its futures. The functions below
release a run, explain a cluster left without workers, and tear stages down.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

from distributed.scheduler import NoWorkerError

from curator_dask.cluster import worker_resources
from curator_dask.errors import InvalidArgumentError, NoWorkersError
from curator_dask.executors import runtime
from curator_dask.executors.base import Executor
from curator_dask.executors.state import RunState
from curator_dask.faults import faults_explained, lost_workers, scheduler_lost
from curator_dask.io import atomic
from curator_dask.stages.base import ProcessingStage, teardown_stage
from curator_dask.task_names import stage_of_key

__all__ = ["ClusterExecutor", "no_workers_error", "raise_task_error", "release_run",
           "teardown_everywhere"]

logger = logging.getLogger(__name__)


class ClusterExecutor(Executor):
    """Base of the executors that run on a Dask cluster (batch and streaming).

    Before anything is submitted the stages' resources are checked against the workers;
    during the run distributed's performance report is recorded when asked for; after
    it, failed or not, every worker tears the stages down, and a failed run first
    releases its futures.
    """

    writes_report = True

    def __init__(self, *, resume: bool = False, client=None, cache_path: str | None = None,
                 progress: bool = True, force: bool = False):
        super().__init__(resume=resume, cache_path=cache_path, progress=progress, force=force)
        self.client = client

    def _client(self):
        if self.client is not None:
            return self.client
        from distributed import default_client

        try:
            return default_client()
        except ValueError:
            raise InvalidArgumentError(
                f"{type(self).__name__} needs a Dask client: create one with "
                "curator_dask.get_client(), pass client=..., or debug in-process with "
                "LocalExecutor()"
            ) from None

    def workers(self, client, state: RunState) -> dict[str, dict]:
        """The workers' resources, checked against the stages before the run."""
        return worker_resources(client)

    def cleanup(self, state: RunState) -> None:
        """Called once the run is over, failed or not (and if the workers never came)."""

    @contextlib.contextmanager
    def session(self, state: RunState, report: str | None):
        client = state.client = self._client()
        try:
            state.place(self.workers(client, state))
        except BaseException:
            self.cleanup(state)
            raise
        if report:
            saved = state.guard.claim(report, "performance report")
            report_ctx = atomic.performance_report(saved.fs, saved.path)
        else:
            report_ctx = contextlib.nullcontext()
        try:
            with report_ctx, faults_explained(lambda: _partition_bytes(state), client):
                yield
        except BaseException as err:
            lost = scheduler_lost(err, client)
            # Before the error reaches the caller: its traceback holds the run's futures,
            # and the client holds the erred one's exception, so they would stay alive
            # (and their keys on the cluster) until the garbage collector breaks the cycle.
            # With the scheduler gone there is nothing to release: each call would wait
            # out the connect timeout before failing.
            if not lost:
                release_run(client, state.token)
            raise
        else:
            lost = False
            state.lost_workers = lost_workers(client, state.started_wall, state.token)
        finally:
            self.cleanup(state)
            if not (lost or scheduler_lost(None, client)):
                teardown_everywhere(client, state.layout.processing_stages, state.token)

    def kept(self, state, results):
        return [part for _, part in sorted(results.items())]


def _partition_bytes(state: RunState) -> int | None:
    """The largest input partition of the run (named when workers die for memory)."""
    return state.layout.reader.source().max_partition_bytes


def release_run(client, token: str) -> int:
    """Cancel every future of the run ``token`` that the client holds; how many.

    Every key of a run carries its token (:class:`Step`). Cancelling pops the futures'
    states from the client, so the scheduler forgets the keys at once, whatever still
    refers to the futures (a traceback, an ``as_completed``).
    """
    from distributed import Future

    keys = [key for key in list(client.futures) if token in str(key)]
    if keys:
        try:
            client.cancel([Future(key, client) for key in keys], reason="run failed")
        except Exception:  # releasing must not hide the run's own error
            logger.warning("could not release the failed run's %d futures", len(keys),
                           exc_info=True)
    return len(keys)


def raise_task_error(client, future) -> None:
    """Raise the error of a future that did not finish, explaining a cluster with no worker.

    distributed's :class:`~distributed.scheduler.NoWorkerError` names only a task and the
    timeout; :class:`NoWorkersError` (a subclass) adds which workers left and why.
    """
    try:
        future.result()
    except NoWorkerError as err:
        if isinstance(err, NoWorkersError):
            raise
        raise no_workers_error(client, err) from err


def no_workers_error(client, err: NoWorkerError) -> NoWorkersError:
    """A :class:`NoWorkersError` for ``err``, with the last workers' departures."""
    departures = []
    try:
        events = [e for _, e in client.get_events("all")
                  if isinstance(e, dict) and e.get("action") == "remove-worker"]
        for event in events[-4:]:
            worker = event.get("worker", "?")
            reasons = [e.get("reason") for _, e in client.get_events(worker)
                       if isinstance(e, dict) and e.get("action") == "closing-worker"]
            stimulus = str(event.get("stimulus_id", ""))
            if reasons:
                why = f"closed: {reasons[-1]}"
            elif stimulus.startswith("handle-worker-cleanup"):
                why = "connection lost: the process died or was killed"
            else:
                why = stimulus.rsplit("-", 1)[0] or "unknown"
            departures.append(f"{worker} ({why})")
    except Exception:  # the explanation is best effort; the error itself is not
        logger.debug("could not read the scheduler's worker events", exc_info=True)
    left = ("; the last workers to leave were " + ", ".join(departures)) if departures else ""
    message = (
        f"no worker was running for {err.timeout:g} s (the scheduler's no-workers timeout), "
        f"so task {err.task!r} of stage {stage_of_key(err.task)!r} could not run{left}. "
        "Check the workers' logs (memory limit? killed?), start workers, or give "
        "get_client(no_workers_timeout=...) more time if they restart slowly")
    return NoWorkersError(err.task, err.timeout, message)


def teardown_everywhere(client, stages: Sequence[ProcessingStage], token: str | None = None,
                        wait: float = 30.0) -> None:
    """Call ``teardown()`` on every worker's live copy of each stage (ids the stages).

    With the run's ``token``, first wait (up to ``wait`` seconds) until no worker may
    still start or is still running one of the run's tasks: after a failure the other
    tasks are cancelled, but one already executing runs to its end and one queued on a
    worker may start before the cancellation arrives; torn down first, it would set its
    stage up again and hold it (a model, GPU memory) after the run.
    """
    if token is not None:
        deadline = time.monotonic() + wait
        while True:
            try:
                left = sum(client.run(runtime.unfinished_tasks, token).values())
            except Exception:  # a worker that left: nothing of the run is running there
                left = 0
            if not left or time.monotonic() > deadline:
                if left:
                    logger.warning("tearing down while %d task(s) of the run still run", left)
                break
            time.sleep(0.05)
    for stage in stages:
        try:
            client.run(teardown_stage, stage.stage_id)
        except Exception:  # a failing teardown must not hide the run's own error
            logger.warning("teardown of stage %r failed on some worker", stage.name,
                           exc_info=True)
