"""Dedup on a cluster of separate processes, as on several machines: ``dask scheduler`` and
``dask worker`` started as commands on 127.0.0.1, the workflow connected by address,
partitions and shuffle buffers planned from the workers' own memory limits.
"""

from __future__ import annotations

import os

import dask
import pandas as pd
import pytest
from conftest import wait_until, write_jsonl
from dask.utils import parse_bytes
from test_semantic_dedup import clustered, planted_pairs_found, write_parquet

from curator_dask._distributed import shuffle_buffer_limits
from curator_dask.dedup import SemanticDeduplicationWorkflow
from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow, FuzzyDuplicates
from curator_dask.dedup.semantic.duplicates import DUPLICATE_OF_FIELD, GROUP_FIELD
from curator_dask.io.planner import (
    WORKING_SETS,
    memory_blocksize,
    shuffle_buffer_bytes,
    worker_memory,
)
from curator_dask.testing.fuzzy import planted_near_duplicates
from reliability.conftest import WORKERS, start_worker


@pytest.mark.slow
def test_fuzzy_dedup_on_scheduler_and_worker_processes(tmp_path, process_client):
    corpus = planted_near_duplicates(40, variants=(0, 3), words=(200, 300),
                                     mutation_rates=(0.0, 0.003), seed=3)
    for f in range(4):
        write_jsonl(tmp_path / "in" / f"part{f}.jsonl",
                    [{"id": int(i), "text": t}
                     for i, t in zip(corpus.index[f::4], corpus["text"][f::4], strict=True)])
    # The plan sees the workers' limits (1 GiB each), not this machine's memory.
    memory = worker_memory(process_client)
    assert (memory.workers, memory.threads, memory.limit) == (WORKERS, 1, 2**30)
    workflow = FuzzyDeduplicationWorkflow(str(tmp_path / "in"), cache_path=str(tmp_path / "c"),
                                          output_path=str(tmp_path / "out"),
                                          perform_removal=True)
    assert workflow.blocksize() <= memory_blocksize(WORKING_SETS["minhash"], memory)
    result = workflow.run()
    assert os.getpid() not in process_client.run(os.getpid).values()
    # The same documents as the in-memory algorithm finds.
    groups = FuzzyDuplicates().identify(workflow.read()).df.compute()
    removed = set(groups.loc[groups["id"] != groups["group"], "id"])
    kept = sorted(pd.read_parquet(tmp_path / "out")["id"])
    assert kept == sorted(set(corpus.index) - removed)
    assert result.duplicate_documents == len(removed) > 0


@pytest.mark.slow
def test_semantic_dedup_shuffles_within_buffers_planned_from_each_workers_memory(
        tmp_path, process_cluster, process_client):
    # distributed's own buffers, from its config; the plan bounds each by the workers'
    # memory limit (1 GiB: the sending buffer, 1 GiB by default, shrinks).
    configured = {"comm": parse_bytes(dask.config.get("distributed.p2p.comm.buffer")),
                  "disk": parse_bytes(dask.config.get("distributed.p2p.storage.buffer"))}
    planned = shuffle_buffer_bytes(worker_memory(process_client).limit)
    expected = {name: min(size, planned) for name, size in configured.items()}
    assert expected != configured
    # A worker that joins after get_client gets its buffers planned too.
    late = start_worker(process_cluster.address, process_cluster.log)
    try:
        process_client.wait_for_workers(WORKERS + 1, timeout=60)

        def every_worker_planned():
            limits = process_client.run(shuffle_buffer_limits)
            return len(limits) == WORKERS + 1 and all(v == expected for v in limits.values())

        assert wait_until(every_worker_planned, timeout=30), \
            process_client.run(shuffle_buffer_limits)
        frame = clustered(seed=5)
        write_parquet(frame.drop(columns=["of"]), tmp_path / "in", parts=4)
        result = SemanticDeduplicationWorkflow(
            str(tmp_path / "in"), str(tmp_path / "cache"), str(tmp_path / "out"),
            input_filetype="parquet", n_clusters=6, perform_removal=True).run()
    finally:
        late.terminate()
        late.wait(timeout=30)
    # One of each planted pair of near copies, and nothing else, is removed; every other
    # document is written once.
    kept = pd.read_parquet(tmp_path / "out")["id"]
    removed = pd.read_parquet(result.pairs_path).rename(columns={DUPLICATE_OF_FIELD: GROUP_FIELD})
    assert planted_pairs_found(frame, removed) == 1.0
    assert result.duplicate_documents == len(removed) == (frame["of"] >= 0).sum()
    assert kept.is_unique and set(kept).isdisjoint(removed["id"])
    assert set(kept) | set(removed["id"]) == set(frame["id"])
