"""dask-jobqueue clusters passed as ``get_client(cluster=...)``: adapt grows them with a
streaming run and shrinks them after, and their workers advertise resources themselves.

dask-jobqueue's ``LocalCluster`` is a real ``JobQueueCluster`` whose jobs run the worker
command of a ``SLURMCluster``'s job script as local processes, so scaling, adapt and
``worker_extra_args`` go through dask-jobqueue's own code. A job
takes a few seconds to start its worker on a busy machine; the runs outlast that.
"""

from __future__ import annotations

import logging
import time

import pytest
from conftest import WorkerWatch, docs, wait_until, write_jsonl
from dask_jobqueue.local import LocalCluster as JobQueueLocalCluster
from test_adaptive import FAST, N_DOCS, assert_every_document_exactly_once, heavy, pipeline

from curator_dask.cluster import DEMAND_KEY, get_client, worker_resources
from curator_dask.executors import StreamingExecutor

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def corpus(tmp_path):
    for i in range(8):  # ~40 partitions of 1 KiB, as in test_adaptive
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(N_DOCS // 8, start=i * (N_DOCS // 8)))
    return tmp_path


def jobqueue_cluster(*worker_extra_args: str) -> JobQueueLocalCluster:
    """No workers until adapt or scale asks; each job starts one worker of one thread."""
    return JobQueueLocalCluster(
        cores=1, processes=1, memory="2GB", worker_extra_args=list(worker_extra_args),
        scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0"},
        silence_logs=logging.CRITICAL)


@pytest.mark.slow
def test_a_jobqueue_cluster_grows_from_no_workers_for_a_streaming_run_and_back(corpus):
    with jobqueue_cluster("--resources", "CPU=1") as cluster:
        client = get_client(cluster=cluster, adaptive={"minimum": 0, "maximum": 2,
                                                       "target_duration": "2s", **FAST})
        with client, WorkerWatch(client) as watch:
            assert worker_resources(client) == {}
            # The run asks for a first job, then its backlog (about 16 s of work for one
            # worker) makes adapt submit a second.
            started = time.time()
            result = pipeline(corpus, heavy).run(StreamingExecutor(progress=False,
                                                                   client=client))
            assert max(watch.counts(started, time.time())) == 2
            assert len(result.stage("heavy").workers) == 2  # both jobs took partitions
            assert wait_until(lambda: worker_resources(client) == {}, timeout=60)
        assert cluster.status.name == "running"  # a cluster passed in is not the client's
    # Every worker a job started advertised what worker_extra_args gave it.
    advertised = {tuple(r.items()) for _, w in watch.samples for r in w.values()}
    assert advertised == {(("CPU", 1),)}
    assert result.rows == N_DOCS
    assert_every_document_exactly_once(corpus / "out")


@pytest.mark.slow
def test_jobqueue_workers_without_resources_run_cpu_stages_unrestricted(corpus):
    # No worker_extra_args=["--resources", "CPU=1"]: no worker advertises any resource,
    # so there is no GPU worker to keep CPU work off, and the CPU stages run anywhere.
    with jobqueue_cluster() as cluster:
        client = get_client(cluster=cluster, adaptive={"minimum": 0, "maximum": 1, **FAST})
        with client:
            result = pipeline(corpus, heavy).run(
                StreamingExecutor(progress=False, client=client))
            assert result.stage("heavy").resources == "unrestricted"
            # The run asked adapt for a worker, and withdrew its demand when it was over,
            # so adapt gives the worker back (minimum 0).
            demand = client.get_metadata([DEMAND_KEY], default={})
            assert all(v is None for v in demand.values()), demand
            assert wait_until(lambda: worker_resources(client) == {}, timeout=30)
    assert result.rows == N_DOCS
    assert_every_document_exactly_once(corpus / "out")


def test_adapt_knows_which_resources_jobqueue_workers_will_offer():
    # From worker_extra_args, or from dask-jobqueue's configuration (then only its job
    # script says): a GPU stage's backlog must not make adapt submit CPU jobs.
    import dask

    from curator_dask.cluster.adaptive import resources_adapt_starts

    with jobqueue_cluster("--resources", "CPU=1") as cluster:
        assert resources_adapt_starts(cluster) == {"CPU"}
    with (dask.config.set({"jobqueue.local.worker-extra-args": ["--resources", "GPU=1,CPU=4"]}),
          JobQueueLocalCluster(  # no worker_extra_args: the configuration's apply
              cores=1, processes=1, memory="2GB", silence_logs=logging.CRITICAL,
              scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0"}) as cluster):
        assert "--resources GPU=1,CPU=4" in cluster.job_script()
        assert resources_adapt_starts(cluster) == {"GPU", "CPU"}
    with jobqueue_cluster() as cluster:
        # Unknown: every stage counts as one the jobs can run.
        assert resources_adapt_starts(cluster) is None
