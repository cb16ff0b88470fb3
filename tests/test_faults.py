"""Workers recycled by ``worker_lifetime`` while a streaming run goes on.

Killed workers, a killed driver with resume, and adapt retiring workers are in the
data-safety catalog, tests/reliability/.
"""

from __future__ import annotations

import logging
import time

import pandas as pd
import pytest
from conftest import docs, write_jsonl

from curator_dask import processing_stage
from curator_dask.cluster import get_client
from curator_dask.executors import StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

N_DOCS = 600


@pytest.fixture
def corpus(tmp_path):
    for i in range(6):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(N_DOCS // 6, start=i * (N_DOCS // 6)))
    return tmp_path


def assert_every_document_exactly_once(path) -> None:
    out = pd.read_parquet(str(path))
    assert sorted(out["n"]) == list(range(N_DOCS))  # none missing, none twice
    assert out["text"].str.startswith("DOC").all()


@pytest.mark.slow
def test_streaming_run_survives_workers_recycled_by_worker_lifetime(corpus):
    # 30 partitions x 0.5 s on 2 workers keep the run going for at least 7.5 s, past the
    # first lifetime (5 s - 1 s stagger from the workers' start): the first worker has
    # handed its data over and left before the run ends, whatever the machine's speed
    # (its replacement may take longer to start on a busy machine). Batch runs, and the
    # guarantee that the cluster never empties, are in tests/reliability.
    @processing_stage(name="slower_upper")
    def slower_upper(df):
        time.sleep(0.5)
        return df.assign(text=df["text"].str.upper())

    client = get_client(n_workers=2, worker_lifetime="5s", worker_lifetime_stagger="1s",
                        dashboard_address=None, silence_logs=logging.CRITICAL)
    with client:
        first = set(client.scheduler_info(n_workers=-1)["workers"])
        p = (Pipeline("recycled").add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
             .add_stage(slower_upper).add_stage(ParquetWriter(str(corpus / "out"))))
        p.run(StreamingExecutor(progress=False))
        assert_every_document_exactly_once(corpus / "out")
        now = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.workers))
        assert first - set(now), "no worker was recycled"
