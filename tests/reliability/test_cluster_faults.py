"""Cluster faults name their cause: a task whose workers are restarted for passing their
memory limit ends the run with a ``WorkerMemoryError`` that says which limit, how much
a worker held, the partition size and what to change; a worker killed from outside is
named as such. Inputs stay byte for byte.
"""

from __future__ import annotations

import logging
import os
import signal

import numpy as np
import pytest
from distributed import Client, LocalCluster

from curator_dask import processing_stage
from curator_dask.executors import BatchExecutor, StreamingExecutor
from curator_dask.faults import WorkerDiedError, WorkerMemoryError, faults_explained
from curator_dask.observe.progress import phase
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from reliability.conftest import write_corpus

LIMIT = 600 * 2**20


@pytest.fixture
def small_workers():
    """2 workers of 600 MiB each, whose tasks are given up after one retry."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1,
                          "distributed.worker.memory.monitor-interval": "10ms"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=LIMIT,
                         processes=True, host="127.0.0.1", dashboard_address=None,
                         resources={"CPU": 1}, silence_logs=logging.CRITICAL) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)
        yield client


def hold_twice_the_limit():
    """Holds twice a worker's memory limit, touched page by page, for a while."""
    import time

    block = np.ones(2 * LIMIT // 8)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the nanny restarts the worker before this ends
        block[::512] += 1


@processing_stage(name="hog")
def hog(df):
    hold_twice_the_limit()
    return df


@processing_stage(name="suicide")
def suicide(df):
    os.kill(os.getpid(), signal.SIGKILL)
    return df


@pytest.mark.slow
@pytest.mark.parametrize("make", [StreamingExecutor, BatchExecutor])
def test_workers_restarted_for_memory_are_named_with_the_limit_and_the_fix(
        tmp_path, small_workers, make):
    corpus = write_corpus(tmp_path / "in", n_docs=20, n_files=1)
    pipeline = (Pipeline("hungry").add_stage(JsonlReader(str(corpus.path)))
                .add_stage(hog).add_stage(ParquetWriter(str(tmp_path / "out"))))
    with pytest.raises(WorkerMemoryError) as caught:
        pipeline.run(make(client=small_workers, progress=False))
    error = caught.value
    message = str(error)
    assert error.stage == "hog" and error.memory_limit == LIMIT
    assert error.peak > 0.9 * LIMIT and error.partition_bytes == corpus.path.joinpath(
        "f00.jsonl").stat().st_size
    for words in ("memory limit", "600.00 MiB", "blocksize", "memory_limit", "resume=True"):
        assert words in message, message
    corpus.assert_unchanged()


@pytest.mark.slow
def test_a_worker_killed_from_outside_is_named_as_such(tmp_path, small_workers):
    corpus = write_corpus(tmp_path / "in", n_docs=20, n_files=1)
    pipeline = (Pipeline("killed").add_stage(JsonlReader(str(corpus.path)))
                .add_stage(suicide).add_stage(ParquetWriter(str(tmp_path / "out"))))
    with pytest.raises(WorkerDiedError) as caught:
        pipeline.run(StreamingExecutor(client=small_workers, progress=False))
    assert not isinstance(caught.value, WorkerMemoryError)
    assert "killed from outside" in str(caught.value) and caught.value.stage == "suicide"
    corpus.assert_unchanged()


@pytest.mark.slow
def test_a_phase_whose_workers_die_for_memory_is_named_with_its_setting(small_workers):
    # A dedup workflow's phase computes a graph; the error leaves the phase before it
    # is explained, and still names it, and the workflow's own parameter.
    with (pytest.raises(WorkerMemoryError) as caught,
          faults_explained(64 * 2**20, small_workers, setting="input_blocksize"),
          phase("fuzzy dedup"), phase("minhash")):
        small_workers.submit(hold_twice_the_limit, key="minhash-0").result()
    error = caught.value
    assert error.phase == "fuzzy dedup: minhash" and error.stage == "minhash"
    for words in ("'fuzzy dedup: minhash'", "64.00 MiB (input_blocksize)",
                  "smaller input_blocksize", "600.00 MiB"):
        assert words in str(error), str(error)


def _hog_partition(df):
    hold_twice_the_limit()
    return df


def _write(ds, out):
    return ds.to_parquet(str(out))


def _exact_api(ds, out):
    from curator_dask.dedup import ExactDuplicates

    return ExactDuplicates().identify(ds).to_parquet(str(out))


def _fuzzy_api(ds, out):
    from curator_dask.dedup import FuzzyDuplicates

    return FuzzyDuplicates(char_ngrams=5, num_bands=4, minhashes_per_band=2).identify(ds)


def _blend(ds, out):
    from curator_dask.training import blend_datasets

    return blend_datasets(10, [ds, ds], [0.5, 0.5], names=["a", "b"])


@pytest.mark.slow
@pytest.mark.parametrize("call", [_write, _exact_api, _fuzzy_api, _blend])
def test_the_api_path_names_workers_that_die_for_memory_with_the_fix(
        tmp_path, small_workers, call):
    # Outside any executor or workflow: the calls a notebook makes. A dataset's write
    # computes through the one lower-layer compute, a dedup or blend call enters the
    # library through its scope: both name the fault, with the dataset's partition size.
    from curator_dask import DocumentDataset

    corpus = write_corpus(tmp_path / "in", n_docs=20, n_files=2)
    ds = DocumentDataset.read_jsonl(str(corpus.path), files_per_partition=1)
    hungry = ds.map_partitions(_hog_partition, meta=ds.df._meta, token="hungry")
    with pytest.raises(WorkerMemoryError) as caught:
        call(hungry, tmp_path / "out")
    error = caught.value
    largest = max(f.stat().st_size for f in corpus.files)
    assert error.stage == "hungry" and error.memory_limit == LIMIT and error.phase is None
    if call is _exact_api:
        # The dataset being written is the duplicate list, derived: no planned size.
        assert error.partition_bytes is None and "(blocksize)" not in str(error)
    else:
        assert error.partition_bytes == largest and "(blocksize)" in str(error)
    for words in ("memory limit", "600.00 MiB", "smaller blocksize", "memory_limit"):
        assert words in str(error), str(error)
    corpus.assert_unchanged()
