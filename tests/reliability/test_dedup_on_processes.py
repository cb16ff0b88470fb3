"""Dedup on a cluster of separate processes, as on several machines: ``dask scheduler`` and
``dask worker`` started as commands on 127.0.0.1, the workflow connected by address,
partitions planned from the workers' own memory limits.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow, FuzzyDuplicates
from curator_dask.io.planner import WORKING_SETS, memory_blocksize, worker_memory
from curator_dask.testing.fuzzy import planted_near_duplicates
from reliability.conftest import WORKERS


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
