"""The scheduler killed mid-run: the driver stops at once with a ``SchedulerLostError``
that says the finished parts are kept and how to go on (instead of distributed's
"FutureCancelledError ... scheduler-connection-lost" after its 30 s reconnect timeout),
and a rerun with ``resume=True`` on a new scheduler writes every document exactly once.
"""

from __future__ import annotations

import subprocess
from contextlib import ExitStack

import pytest

from curator_dask import SchedulerLostError
from curator_dask.cluster import get_client
from curator_dask.executors import StreamingExecutor
from reliability.conftest import (
    assert_exactly_once,
    completed_parts,
    kill_a_worker_when,
    output_ids,
    scheduler_address,
    start_scheduler,
    start_worker,
    upper_pipeline,
    write_corpus,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def start_cluster(directory, stack: ExitStack) -> tuple[str, subprocess.Popen]:
    """A ``dask scheduler`` and one ``dask worker``, stopped when ``stack`` closes."""
    directory.mkdir()
    log = stack.enter_context(open(directory / "cluster.log", "ab"))  # noqa: SIM115 - closed by the stack
    scheduler = start_scheduler(directory / "scheduler.json", log)
    stack.callback(_stop, scheduler)
    address = scheduler_address(directory / "scheduler.json")
    worker = start_worker(address, log)
    stack.callback(_stop, worker)
    return address, scheduler


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_a_lost_scheduler_is_named_with_the_resume_hint_and_resume_completes(tmp_path):
    corpus = write_corpus(tmp_path / "in", 300, n_files=3)
    out = tmp_path / "out"
    with ExitStack() as stack:
        address, scheduler = start_cluster(tmp_path / "first", stack)
        client = get_client(scheduler_address=address)
        stack.callback(client.close)
        client.wait_for_workers(1, timeout=30)
        killer = kill_a_worker_when(lambda: completed_parts(out) >= 2, scheduler.pid)
        with pytest.raises(SchedulerLostError) as lost:
            upper_pipeline(corpus.path, out).run(
                StreamingExecutor(max_in_flight=2, progress=False))
        killer.join(timeout=10)
        assert killer.killed_at is not None, "the run ended before the scheduler was killed"
    message = str(lost.value)
    assert address in message and "resume=True" in message, message
    finished = completed_parts(out)
    assert finished >= 2

    with ExitStack() as stack:
        address, _ = start_cluster(tmp_path / "second", stack)
        client = get_client(scheduler_address=address)
        stack.callback(client.close)
        client.wait_for_workers(1, timeout=30)
        result = upper_pipeline(corpus.path, out).run(
            StreamingExecutor(resume=True, progress=False))
    assert result.partitions_skipped >= finished
    assert_exactly_once(corpus.ids, output_ids(out), result.dropped)
    corpus.assert_unchanged()
