"""Worker recycling (``get_client(worker_lifetime=...)``) never empties the cluster.

Each test starts its own 2-worker LocalCluster. A scheduler plugin records how many
workers are running after every change of a worker's status and every worker that joins
or leaves, so "never zero" is checked at every moment the number could change, not at
sampled times.
"""

from __future__ import annotations

import logging
import threading
import time

import pandas as pd
import pytest
from conftest import docs, write_jsonl
from distributed import Event
from distributed.core import Status
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.scheduler import NoWorkerError

from curator_dask import processing_stage
from curator_dask.cluster import MIN_WORKER_LIFETIME, get_client
from curator_dask.cluster.recycling import recycler_for
from curator_dask.executors import (
    BatchExecutor,
    NoWorkersError,
    StreamingExecutor,
    WorkerLifetimeError,
)
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

N_DOCS = 600  # 6 files of 100 documents, 1 KiB blocks: 30 partitions
LIFETIME = 4.0  # s; the first worker is due at 3.6 s (stagger 0.4 s)


class RunningWorkers(SchedulerPlugin):
    """Records ``(time, running workers, what happened)`` at every change of the workers."""

    name = "test-running-workers"

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.records: list[tuple[float, int, str]] = []
        self.note("start")

    def note(self, what: str) -> None:
        running = sum(ws.status == Status.running for ws in self.scheduler.workers.values())
        self.records.append((time.time(), running, what))

    def add_worker(self, scheduler, worker) -> None:
        self.note("add-worker")

    def log_event(self, topic, msg) -> None:
        # Worker status changes are logged after the status is set and removals after the
        # worker is gone, so the count here is the one that holds from now on.
        if isinstance(msg, dict) and msg.get("action") in ("worker-status-change",
                                                           "remove-worker"):
            self.note(f"{msg['action']}:{msg.get('status', '')}")

    def retirements(self, start: float, stop: float) -> int:
        return sum(1 for t, _, what in self.records
                   if start <= t <= stop and what == "worker-status-change:closing_gracefully")


@pytest.fixture
def corpus(tmp_path):
    for i in range(6):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(N_DOCS // 6, start=i * (N_DOCS // 6)))
    return tmp_path


@processing_stage(name="slow_upper")
def slow_upper(df):
    time.sleep(0.5)  # 30 partitions on 2 workers: the run lasts at least 7.5 s
    return df.assign(text=df["text"].str.upper())


def pipeline(corpus, *stages) -> Pipeline:
    p = Pipeline("recycled").add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
    for stage in stages:
        p.add_stage(stage)
    return p.add_stage(ParquetWriter(str(corpus / "out")))


def recycling_client(**kwargs):
    client = get_client(n_workers=2, worker_lifetime=LIFETIME, dashboard_address=None,
                        silence_logs=logging.CRITICAL, **kwargs)
    scheduler = client.cluster.scheduler  # a local cluster's scheduler runs in this process
    watch = RunningWorkers(scheduler)
    client.cluster.loop.add_callback(scheduler.add_plugin, watch)
    return client, watch


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor])
def test_runs_under_short_worker_lifetimes_keep_every_document_and_a_running_worker(
        corpus, executor):
    client, watch = recycling_client()
    with client:
        start = time.time()
        result = pipeline(corpus, slow_upper).run(executor(progress=False))
        stop = time.time()
    out = pd.read_parquet(str(corpus / "out"))
    assert sorted(out["n"]) == list(range(N_DOCS))  # none missing, none twice
    assert out["text"].str.startswith("DOC").all()
    assert result.rows == N_DOCS
    # The run outlasts the first lifetime (3.6 s) by construction: recycling began in it.
    assert watch.retirements(start, stop) >= 1
    # Until the run ended (closing the cluster afterwards removes every worker).
    assert min(running for t, running, _ in watch.records if t <= stop) >= 1, watch.records


def test_lifetimes_too_short_to_be_useful_are_refused_before_anything_starts():
    for lifetime in ("1s", 1, 0, -5):
        with pytest.raises(ValueError, match=r"worker_lifetime=.* is too short.*'1 hour'"):
            get_client(n_workers=2, worker_lifetime=lifetime, dashboard_address=None)
    with pytest.raises(ValueError, match="worker_lifetime_max_retiring"):
        get_client(n_workers=2, worker_lifetime="1 hour", worker_lifetime_max_retiring=0)
    with pytest.raises(ValueError, match="use worker_lifetime= instead"):
        get_client(n_workers=2, lifetime="1 hour", dashboard_address=None)
    # The documented minimum is where refusal ends: just under it is refused, it is not.
    with pytest.raises(ValueError, match="too short"):
        get_client(n_workers=2, worker_lifetime=MIN_WORKER_LIFETIME * 0.99)
    assert recycler_for(MIN_WORKER_LIFETIME, None, True, 1).lifetime == MIN_WORKER_LIFETIME


def test_a_task_longer_than_the_lifetime_fails_the_run_naming_the_stage(corpus):
    # The task waits for an event that is set only once the run has failed: it outlives
    # any lifetime, on a machine of any speed, and never for a fixed time.
    @processing_stage(name="outlives_workers")
    def outlives_workers(df):
        Event("outlived").wait(timeout=120)
        return df

    client, _ = recycling_client()
    with client:
        try:
            with pytest.raises(WorkerLifetimeError,
                               match=r"stage 'outlives_workers'.*longer than the workers' "
                                     r"lifetime \(4 s"):
                pipeline(corpus, outlives_workers).run(StreamingExecutor(progress=False))
        finally:
            Event("outlived", client=client).set()


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor])
def test_a_run_whose_workers_all_leave_fails_with_no_workers_error_naming_them(
        corpus, executor):
    out = corpus / "out"
    client = get_client(n_workers=2, dashboard_address=None, silence_logs=logging.CRITICAL,
                        no_workers_timeout="2s")
    with client:
        addresses = set(client.scheduler_info(n_workers=-1)["workers"])

        def close_every_worker_once_work_started():
            deadline = time.time() + 60
            while time.time() < deadline and not client.run_on_scheduler(
                    lambda dask_scheduler: any(ts.state == "memory"
                                               for ts in dask_scheduler.tasks.values())):
                time.sleep(0.05)
            client.cluster.scale(0)

        closer = threading.Thread(target=close_every_worker_once_work_started, daemon=True)
        closer.start()
        with pytest.raises(NoWorkerError) as caught:
            pipeline(corpus, slow_upper).run(executor(progress=False))
        closer.join()
    assert isinstance(caught.value, NoWorkersError)
    message = str(caught.value)
    assert "no worker was running for 2 s" in message
    assert any(address in message for address in addresses), message
    # The failed run did not pass for complete, and lost nothing: resumed on a new
    # cluster, it writes what was missing, every document exactly once.
    with get_client(n_workers=2, dashboard_address=None, silence_logs=logging.CRITICAL):
        result = pipeline(corpus, slow_upper).run(executor(resume=True, progress=False))
    assert result.partitions_skipped < result.partitions
    written = pd.read_parquet(str(out))
    assert sorted(written["n"]) == list(range(N_DOCS))  # none missing, none twice
