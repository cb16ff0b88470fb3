"""Placement and worker lifecycle on a real multi-process "mixed" cluster.

No GPU here: one worker advertising ``GPU=1, GPU_MEMORY_GB=80`` with 4 threads stands in
for a dask-cuda worker, beside two CPU workers, all under one scheduler, assembled by
``get_client(cluster_type="mixed")`` with the dask-cuda cluster swapped for the stand-in.
Each stage records the worker it ran on in a column, so the output says where every
task went.
"""

from __future__ import annotations

import logging
import os
import time
from functools import partial

import pandas as pd
import pytest
from conftest import docs, write_jsonl
from distributed import LocalCluster

from curator_dask import ProcessingStage, Resources, processing_stage
from curator_dask.cluster import client as cluster_module
from curator_dask.executors import (
    BatchExecutor,
    ResourceUnavailableError,
    StreamingExecutor,
)
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter


def _gpu_stand_in(n_gpu_workers, threads_per_worker, memory_limit, dashboard_address, protocol,
                  rmm_pool_size, enable_cudf_spill, worker_kwargs):
    return LocalCluster(n_workers=n_gpu_workers or 1, threads_per_worker=4, processes=True,
                        host="127.0.0.1", dashboard_address=dashboard_address,
                        resources={"GPU": 1, "GPU_MEMORY_GB": 80}, **worker_kwargs)


@pytest.fixture(scope="module")
def mixed():
    """A client on 1 GPU stand-in worker (4 threads) + 2 CPU workers (1 thread each)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cluster_module, "_gpu_cluster", _gpu_stand_in)
        client = cluster_module.get_client(cluster_type="mixed", n_workers=2, n_gpu_workers=1,
                                           dashboard_address=None, silence_logs=logging.ERROR)
    client.wait_for_workers(3)
    with client:
        workers = cluster_module.worker_resources(client)
        gpu = [a for a, r in workers.items() if "GPU" in r]
        assert len(gpu) == 1 and len(workers) == 3
        client.gpu_worker = gpu[0]
        yield client


@pytest.fixture
def corpus(tmp_path):
    for i in range(4):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(30, start=30 * i))
    return tmp_path


def worker_address() -> str:
    from distributed import get_worker

    return get_worker().address


@processing_stage(name="tokenize", output_columns={"cpu_worker": "str"})
def tokenize(df):
    return df.assign(cpu_worker=worker_address())


@processing_stage(name="classify", resources=Resources(gpus=0.5),
                  output_columns={"gpu_worker": "str"})
def classify(df):
    return df.assign(gpu_worker=worker_address())


def run(corpus, *stages, executor, out="out"):
    p = Pipeline("placement").add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
    for stage in stages:
        p.add_stage(stage)
    p.add_stage(ParquetWriter(str(corpus / out)))
    result = p.run(executor)
    return result, pd.read_parquet(str(corpus / out))


@pytest.mark.parametrize("make", [partial(StreamingExecutor, lend=False), BatchExecutor],
                         ids=["StreamingExecutor", "BatchExecutor"])
@pytest.mark.slow
def test_gpu_stages_run_only_on_gpu_workers_and_cpu_stages_never_do(corpus, mixed, make):
    result, out = run(corpus, tokenize, classify, executor=make(progress=False))
    assert len(out) == 120
    assert set(out["gpu_worker"]) == {mixed.gpu_worker}
    assert mixed.gpu_worker not in set(out["cpu_worker"])
    # Reader and writer ask for CPU too (unless balancing lends them a GPU worker's spare
    # slots, see test_balancing).
    for name in ("read_jsonl", "tokenize", "write_parquet"):
        assert mixed.gpu_worker not in result.stage(name).workers, name
    assert result.stage("classify").workers == [mixed.gpu_worker]


def _max_overlap(intervals) -> int:
    return max(sum(1 for lo, hi in intervals if lo <= t < hi) for t, _ in intervals)


def _run_together(directory: str, wanted: int, deadline: float = 30.0) -> None:
    """Stay running until ``wanted`` tasks have been running at once (or ``deadline``
    seconds have passed): each task leaves a file while it runs; the first to count
    ``wanted`` of them marks the rendezvous as reached for all later tasks."""
    mine = os.path.join(directory, f"running-{os.getpid()}-{time.time_ns()}")
    reached = os.path.join(directory, "reached")
    open(mine, "w").close()
    try:
        stop = time.monotonic() + deadline
        while not os.path.exists(reached) and time.monotonic() < stop:
            if sum(n.startswith("running-") for n in os.listdir(directory)) >= wanted:
                open(reached, "w").close()
                break
            time.sleep(0.01)
    finally:
        os.remove(mine)


@pytest.mark.slow
@pytest.mark.parametrize(("gpus", "expected"), [(0.25, 4), (1, 1)])
def test_fractional_gpus_pack_tasks_onto_one_gpu_worker(corpus, mixed, tmp_path, gpus, expected):
    # The first tasks wait for each other until `expected` run at once: with 1/4 GPU a
    # task, four must be able to (else they would wait for the deadline and overlap
    # less); with a whole GPU, never more than one does, whatever the timing.
    rendezvous = str(tmp_path / "rendezvous")
    os.mkdir(rendezvous)

    @processing_stage(name=f"model_{int(gpus * 100)}", resources=Resources(gpus=gpus),
                      output_columns={"t0": "float64", "t1": "float64"})
    def model(df):
        start = time.time()
        _run_together(rendezvous, expected)
        return df.assign(t0=start, t1=time.time())

    result, out = run(corpus, model, executor=StreamingExecutor(max_in_flight=12, progress=False))
    intervals = list(out.groupby(["t0", "t1"]).size().index)
    assert len(intervals) == result.partitions >= 8
    assert _max_overlap(intervals) == expected
    assert result.stage(model.name).workers == [mixed.gpu_worker]


@pytest.mark.slow
def test_a_resource_no_worker_offers_fails_before_any_task_is_submitted(corpus, mixed):
    from distributed import get_task_stream

    big = classify.with_(name="big_model", resources=Resources(gpu_memory_gb=100))
    with get_task_stream(mixed) as stream, pytest.raises(
            ResourceUnavailableError,
            match=r"stage 'big_model' asks for GPU_MEMORY_GB=100.*GPU_MEMORY_GB=80"):
        run(corpus, tokenize, big, executor=StreamingExecutor(progress=False))
    assert [t for t in stream.data if t["key"][0].startswith(("read_jsonl", "tokenize"))] == []
    assert not (corpus / "out").exists()  # nothing was started


def test_a_gpu_stage_with_cpu_fallback_runs_on_a_cpu_only_cluster(corpus, client, caplog):
    # Without the fallback it is refused: tests/reliability/test_refused_before_running.py.
    fallback = classify.with_(name="classify_anywhere")
    fallback.cpu_fallback = True
    with caplog.at_level(logging.WARNING, logger="curator_dask"):
        result, out = run(corpus, fallback, executor=BatchExecutor(progress=False), out="fb")
    assert len(out) == 120
    assert result.stage("classify_anywhere").resources == "CPU=1"
    assert "running it on CPU (cpu_fallback=True)" in caplog.text


class Lifecycle(ProcessingStage):
    """Leaves one file per lifecycle call, named after the call and the process."""

    output_columns = {"pid": "int64"}

    def __init__(self, directory: str, name: str = "lifecycle", fail_on: int | None = None,
                 resources: Resources | None = None):
        self.directory, self.name, self.fail_on = directory, name, fail_on
        self.resources = resources if resources is not None else Resources()

    def _mark(self, what: str) -> None:
        with open(os.path.join(self.directory, f"{what}-{os.getpid()}-{time.time_ns()}"), "w"):
            pass

    def setup_on_node(self):
        self._mark("node")

    def setup(self):
        self._mark("setup")

    def process(self, df):
        if self.fail_on is not None and (df["n"] == self.fail_on).any():
            raise RuntimeError("stage failed on purpose")
        return df.assign(pid=os.getpid())

    def teardown(self):
        self._mark("teardown")


def _calls(directory) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for name in os.listdir(directory):
        what, pid, ns = name.split("-")
        out.setdefault(what, []).append((int(pid), int(ns)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("make", [StreamingExecutor, BatchExecutor])
def test_setup_once_per_worker_process_node_setup_first_teardown_at_the_end(
        corpus, mixed, tmp_path, make):
    marks = tmp_path / "marks"
    marks.mkdir()
    cpu_stage = Lifecycle(str(marks))
    _result, out = run(corpus, cpu_stage, executor=make(progress=False))
    calls = _calls(marks)
    pids = set(out["pid"])
    cpu_pids = set(mixed.run(os.getpid, workers=[a for a in mixed.scheduler_info(n_workers=-1)
                                                  ["workers"] if a != mixed.gpu_worker]).values())
    assert pids <= cpu_pids
    assert sorted(p for p, _ in calls["setup"]) == sorted(pids)  # once per process that ran it
    assert len(calls["node"]) == 1  # one host
    assert calls["node"][0][1] <= min(ns for _, ns in calls["setup"])
    assert sorted(p for p, _ in calls["teardown"]) == sorted(pids)
    assert min(ns for _, ns in calls["teardown"]) >= max(ns for _, ns in calls["setup"])


@pytest.mark.slow
@pytest.mark.parametrize("make", [StreamingExecutor, BatchExecutor])
def test_teardown_runs_on_every_worker_also_when_the_run_fails(corpus, mixed, tmp_path, make):
    marks = tmp_path / "marks"
    marks.mkdir()
    healthy = Lifecycle(str(marks), name="healthy")
    failing = Lifecycle(str(tmp_path), name="failing", fail_on=100)
    (tmp_path / "failing").mkdir()
    failing.directory = str(tmp_path / "failing")
    with pytest.raises(RuntimeError, match="failed on purpose"):
        run(corpus, healthy, failing, executor=make(progress=False))
    calls = _calls(marks)
    assert calls["setup"] and sorted(p for p, _ in calls["teardown"]) == sorted(
        p for p, _ in calls["setup"])
    failing_calls = _calls(tmp_path / "failing")
    assert sorted(p for p, _ in failing_calls["teardown"]) == sorted(
        p for p, _ in failing_calls["setup"])


@pytest.fixture(scope="module")
def plain():
    """A client on a plain LocalCluster: 2 worker processes that advertise no resource."""
    from distributed import Client

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(2)
        assert set(map(tuple, cluster_module.worker_resources(client).values())) == {()}
        yield client


@pytest.mark.slow
@pytest.mark.parametrize("make", [StreamingExecutor, BatchExecutor],
                         ids=["StreamingExecutor", "BatchExecutor"])
def test_workers_without_resources_run_cpu_stages_unrestricted(corpus, plain, make):
    from curator_dask import AddId
    from curator_dask.dedup.stages import ExactDedup

    # A barrier too: the executor's own tasks around it (spill, re-read) must not ask for
    # a resource nobody offers either, or they would wait forever.
    result, out = run(corpus, AddId(), tokenize, ExactDedup(),
                      executor=make(progress=False, client=plain))
    assert len(out) == 120 and out["id"].is_unique
    assert result.stage("tokenize").resources == "unrestricted"
    assert set(out["cpu_worker"]) <= set(cluster_module.worker_resources(plain))


def test_a_gpu_stage_on_workers_without_resources_still_fails_at_once(corpus, plain):
    with pytest.raises(ResourceUnavailableError,
                       match=r"'classify' asks for GPU=0.5.*workers offer: no resources"):
        run(corpus, tokenize, classify, executor=StreamingExecutor(progress=False, client=plain))
    assert not (corpus / "out").exists()  # refused before anything was submitted


def test_cpu_work_on_a_cluster_whose_workers_offer_other_resources_names_the_fix():
    from curator_dask.executors.placement import check_placement

    # Some resources are advertised (a GPU worker), but no worker offers CPU: running CPU
    # stages anywhere would put them on the GPU worker, so this stays an error.
    with pytest.raises(ResourceUnavailableError,
                       match=r"stage 'tokenize' asks for CPU=1 .*GPU=1.*"
                             r"LocalCluster\(resources=\{'CPU': 1\}\)"):
        check_placement([tokenize], {id(tokenize): "tokenize"},
                        {"tcp://a:1": {"GPU": 1}, "tcp://b:1": {}})
