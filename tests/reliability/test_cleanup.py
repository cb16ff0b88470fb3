"""What a run leaves behind: no node-setup files on the workers' hosts, and after a failed
run no task of it on the scheduler, without waiting for the garbage collector.

One 2-worker LocalCluster for the module; its worker processes get a temporary directory
of their own (``TMPDIR``), so that everything a run leaves there can be seen.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time

import pandas as pd
import pytest
from conftest import docs, write_jsonl

from curator_dask import ProcessingStage
from curator_dask.cluster import get_client
from curator_dask.executors import BatchExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.base import NODE_SETUP_PREFIX
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

N_FILES, PER_FILE = 8, 25  # one partition per file


@pytest.fixture(scope="module")
def workers_tmpdir(tmp_path_factory):
    return tmp_path_factory.mktemp("workers-tmp")


@pytest.fixture(scope="module")
def client(workers_tmpdir):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(workers_tmpdir))  # worker processes inherit it
        client = get_client(n_workers=2, dashboard_address=None, silence_logs=logging.ERROR)
    with client:
        yield client


@pytest.fixture
def corpus(tmp_path):
    for i in range(N_FILES):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(PER_FILE, start=i * PER_FILE))
    return tmp_path


class NodeSetupProbe(ProcessingStage):
    """Counts its node setups in ``log``, noting the temporary directory and whether its
    marker directory was there; fails on partition ``fail_on``."""

    name = "node_setup_probe"
    needs_partition_index = True

    def __init__(self, log, fail_on: int | None = None):
        self.log, self.fail_on = str(log), fail_on

    def setup_on_node(self):
        tmp = tempfile.gettempdir()
        markers = [n for n in os.listdir(tmp) if n.startswith(NODE_SETUP_PREFIX)]
        with open(self.log, "a") as out:
            out.write(f"{tmp}\t{len(markers)}\n")

    def process(self, df, partition_index):
        if partition_index == self.fail_on:
            raise ValueError(f"bad partition {partition_index}")
        time.sleep(0.05)
        return df


def pipeline(corpus, stage) -> Pipeline:
    return (Pipeline("cleanup")
            .add_stage(JsonlReader(str(corpus / "in"), files_per_partition=1))
            .add_stage(stage).add_stage(ParquetWriter(str(corpus / "out"))))


def node_setup_files(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith(NODE_SETUP_PREFIX))


def scheduler_keys(client) -> list:
    return client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks))


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor])
def test_a_run_leaves_no_node_setup_files_and_sets_each_host_up_once(
        client, corpus, workers_tmpdir, executor):
    log = corpus / "node-setups.tsv"
    result = pipeline(corpus, NodeSetupProbe(log)).run(executor(progress=False))
    assert result.rows == N_FILES * PER_FILE
    # Both workers share one host: one node setup, while its marker directory existed,
    # in the workers' own temporary directory.
    assert log.read_text().splitlines() == [f"{workers_tmpdir}\t1"]
    assert node_setup_files(workers_tmpdir) == []


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor])
def test_a_failed_run_releases_its_tasks_before_the_error_reaches_the_caller(
        client, corpus, workers_tmpdir, executor):
    with pytest.raises(ValueError, match="bad partition 3") as caught:
        pipeline(corpus, NodeSetupProbe(corpus / "log", fail_on=3)).run(
            executor(progress=False))
    # The error (held here, as a notebook or a caller's except block would) and its
    # traceback are alive: nothing may keep the run's tasks on the cluster through them.
    assert "node_setup_probe" in str(caught.value.__notes__)
    assert wait_for(lambda: not scheduler_keys(client)), scheduler_keys(client)
    assert client.who_has() == {}
    assert node_setup_files(workers_tmpdir) == []
    # What was written before the failure is whole: complete parts only.
    if (corpus / "out").exists():
        for part in (corpus / "out").glob("part-*.parquet"):
            assert len(pd.read_parquet(part)) == PER_FILE
