"""Adaptive clusters on real LocalClusters: grow with a streaming run, shrink after, keep
GPU workers while needed. Workers retired by adapt mid-run lose and duplicate nothing:
tests/reliability/test_worker_loss.py.

Each test starts its own cluster with ``get_client(adaptive=...)``: adapt checks every
500 ms, so workers join and leave within seconds. Worker processes take a few seconds to
start on a busy machine, so runs are long enough (sleeping stages) to outlast that.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import pandas as pd
import pytest
from conftest import docs, wait_until, write_jsonl
from distributed import LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin

from curator_dask import Resources, processing_stage
from curator_dask.cluster import add_cpu_workers, get_client, worker_resources
from curator_dask.cluster import client as cluster_module
from curator_dask.executors import StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

pytestmark = pytest.mark.timeout(120)

N_DOCS = 800  # 8 files, ~40 partitions of 1 KiB
FAST = {"interval": "500ms", "wait_count": 1}


@pytest.fixture
def corpus(tmp_path):
    for i in range(8):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(N_DOCS // 8, start=i * (N_DOCS // 8)))
    return tmp_path


@processing_stage(name="heavy")
def heavy(df):
    time.sleep(0.4)
    return df.assign(text=df["text"].str.upper())


def pipeline(corpus, *stages) -> Pipeline:
    p = Pipeline("adaptive").add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
    for stage in stages:
        p.add_stage(stage)
    return p.add_stage(ParquetWriter(str(corpus / "out")))


def assert_every_document_exactly_once(path) -> None:
    out = pd.read_parquet(str(path))
    assert sorted(out["n"]) == list(range(N_DOCS))  # none missing, none twice
    assert out["text"].str.startswith("DOC").all()


class JoinedWorkers(SchedulerPlugin):
    """Records the resources of every worker that joins, as it joins."""

    name = "test-joined-workers"

    def __init__(self):
        self.resources: list[dict] = []

    def add_worker(self, scheduler, worker) -> None:
        self.resources.append(dict(scheduler.workers[worker].resources))


@pytest.mark.slow
def test_an_adaptive_cluster_grows_for_a_streaming_run_and_shrinks_after(corpus):
    client = get_client(n_workers=1, adaptive={"minimum": 1, "maximum": 3, "target_duration": "2s",
                                               **FAST},
                        dashboard_address=None, silence_logs=logging.CRITICAL)
    scheduler = client.cluster.scheduler  # a local cluster's scheduler runs in this process
    joined = JoinedWorkers()
    client.cluster.loop.add_callback(scheduler.add_plugin, joined)
    with client:
        assert wait_until(lambda: joined.name in scheduler.plugins, timeout=10)
        result = pipeline(corpus, heavy).run(StreamingExecutor(progress=False))
        # About 16 s of work for one worker; the run's backlog makes adapt ask for more,
        # and the workers it started took partitions.
        assert len(result.stage("heavy").workers) > 1
        assert wait_until(lambda: len(worker_resources(client)) == 1, timeout=30)
    # Workers that adapt started advertise what the first one did.
    assert joined.resources and all(r == {"CPU": 1} for r in joined.resources)
    assert result.rows == N_DOCS
    assert_every_document_exactly_once(corpus / "out")


@processing_stage(name="gpu_model", resources=Resources(gpus=1),
                  output_columns={"score": "float64"})
def gpu_model(df):
    time.sleep(0.1)
    return df.assign(score=df["n"] / 10.0)


def workers_to_close_all(dask_scheduler):
    return dask_scheduler.workers_to_close(n=len(dask_scheduler.workers))


@pytest.mark.slow
def test_gpu_workers_are_not_retired_while_a_gpu_stage_has_work_waiting(corpus):
    # A cluster the user made (as with dask-jobqueue): one GPU stand-in, one CPU worker.
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, resources={"GPU": 1, "GPU_MEMORY_GB": 80},
                           silence_logs=logging.CRITICAL)
    add_cpu_workers(cluster, 1, silence_logs=logging.CRITICAL)
    with cluster:
        # minimum == maximum: adapt keeps two workers, so what it would retire can be asked
        # of the scheduler (Scheduler.workers_to_close, which every autoscaler uses).
        client = get_client(cluster=cluster, adaptive={"minimum": 2, "maximum": 2, **FAST})
        client.wait_for_workers(2)
        gpu = next(a for a, r in worker_resources(client).items() if "GPU" in r)
        cpu = next(a for a, r in worker_resources(client).items() if "CPU" in r)
        during = []

        def probe_mid_run():
            wait_until(lambda: os.path.isdir(corpus / "out") and sum(
                n.endswith(".done") for n in os.listdir(corpus / "out")) >= 3, timeout=60)
            during.append(client.run_on_scheduler(workers_to_close_all))

        thread = threading.Thread(target=probe_mid_run, daemon=True)
        thread.start()
        pipeline(corpus, gpu_model).run(StreamingExecutor(progress=False, client=client))
        thread.join()
        after = client.run_on_scheduler(workers_to_close_all)
        client.close()
        assert cluster.status.name == "running"  # a cluster passed in is not the client's
    assert during == [[cpu]]  # CPU workers may go mid-run; the GPU worker may not
    assert sorted(after) == sorted([cpu, gpu])  # no GPU work left: it may go too


def _gpu_stand_in(n_gpu_workers, threads_per_worker, memory_limit, dashboard_address, protocol,
                  rmm_pool_size, enable_cudf_spill, worker_kwargs):
    return LocalCluster(n_workers=n_gpu_workers or 1, threads_per_worker=1, processes=True,
                        host="127.0.0.1", dashboard_address=dashboard_address,
                        resources={"GPU": 1, "GPU_MEMORY_GB": 80}, **worker_kwargs)


@pytest.mark.slow
def test_adapt_on_a_mixed_cluster_starts_cpu_workers_and_keeps_the_gpu_ones(monkeypatch):
    monkeypatch.setattr(cluster_module, "_gpu_cluster", _gpu_stand_in)
    client = get_client(cluster_type="mixed", n_workers=1, n_gpu_workers=1,
                        adaptive={"minimum": 3, "maximum": 3, **FAST},
                        dashboard_address=None, silence_logs=logging.CRITICAL)
    with client:
        client.wait_for_workers(3, timeout=60)  # adapt started the third
        kinds = sorted(tuple(r) for r in worker_resources(client).values())
        assert kinds == [("CPU",), ("CPU",), ("GPU", "GPU_MEMORY_GB")]
        gpu = next(a for a, r in worker_resources(client).items() if "GPU" in r)
        # dask-cuda cannot start a second worker per GPU: the GPU workers are kept always.
        assert gpu not in client.run_on_scheduler(workers_to_close_all)


def test_adaptive_options_are_checked():
    with pytest.raises(ValueError, match=r"unknown option.*minimum, maximum"):
        get_client(adaptive={"max": 4})
    with pytest.raises(ValueError, match="pass cluster="):
        get_client(scheduler_address="tcp://127.0.0.1:1", adaptive={"maximum": 4})
    with pytest.raises(ValueError, match="below its minimum"):
        get_client(adaptive={"minimum": 4, "maximum": 2})
