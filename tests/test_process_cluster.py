"""Dedup on a cluster of separate processes, as on several machines: ``dask scheduler`` and
``dask worker`` started as commands on 127.0.0.1, the workflow connected by
``get_client(scheduler_file=...)``, partitions planned from the workers' own memory limits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import get_client
from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow, FuzzyDuplicates
from curator_dask.io.planner import memory_blocksize, worker_memory
from curator_dask.testing.fuzzy import planted_near_duplicates

WORKER_LIMIT = 2**30


@pytest.fixture
def process_cluster(tmp_path):
    """A scheduler and two one-thread workers of 1 GiB, each its own command."""
    scheduler_file = tmp_path / "scheduler.json"
    dask = str(Path(sys.executable).parent / "dask")
    log = open(tmp_path / "cluster.log", "wb")
    processes = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--dashboard-address", ":0", "--no-show",
                                   "--scheduler-file", str(scheduler_file)],
                                  stdout=log, stderr=log)]
    deadline = time.monotonic() + 60
    while not scheduler_file.exists():  # written once the scheduler listens
        assert time.monotonic() < deadline, (tmp_path / "cluster.log").read_text()
        time.sleep(0.1)
    processes += [subprocess.Popen([dask, "worker", "--scheduler-file", str(scheduler_file),
                                    "--nthreads", "1", "--memory-limit", str(WORKER_LIMIT),
                                    "--resources", "CPU=1", "--no-dashboard",
                                    "--local-directory", str(tmp_path / f"worker-{i}")],
                                   stdout=log, stderr=log) for i in range(2)]
    try:
        yield scheduler_file
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()


@pytest.mark.slow
def test_fuzzy_dedup_on_scheduler_and_worker_processes(tmp_path, process_cluster):
    corpus = planted_near_duplicates(40, variants=(0, 3), words=(200, 300),
                                     mutation_rates=(0.0, 0.003), seed=3)
    for f in range(4):
        write_jsonl(tmp_path / "in" / f"part{f}.jsonl",
                    [{"id": int(i), "text": t}
                     for i, t in zip(corpus.index[f::4], corpus["text"][f::4])])
    client = get_client(scheduler_file=str(process_cluster))
    try:
        client.wait_for_workers(2, timeout=120)
        # The plan sees the workers' limits, not this machine's memory.
        memory = worker_memory(client)
        assert (memory.workers, memory.threads, memory.limit) == (2, 1, WORKER_LIMIT)
        workflow = FuzzyDeduplicationWorkflow(str(tmp_path / "in"), cache_path=str(tmp_path / "c"),
                                              output_path=str(tmp_path / "out"),
                                              perform_removal=True)
        assert workflow.blocksize() <= memory_blocksize(5.0, memory)
        result = workflow.run()
        worker_pids = set(client.run(os.getpid).values())
    finally:
        client.close()
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids
    # The same documents as the in-memory algorithm on this process's threads.
    ds = workflow.read()
    groups = FuzzyDuplicates().identify(ds).df.compute(scheduler="threads")
    removed = set(groups.loc[groups["id"] != groups["group"], "id"])
    kept = sorted(pd.read_parquet(tmp_path / "out")["id"])
    assert kept == sorted(set(corpus.index) - removed)
    assert result.duplicate_documents == len(removed) > 0
