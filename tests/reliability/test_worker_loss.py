"""Workers lost mid-run, killed with SIGKILL or retired by adapt: every input document is
written exactly once, and the input files are left as they were.

The SIGKILL cases run on ``dask scheduler`` and ``dask worker`` processes without nannies
(``process_cluster``), so a killed worker stays dead; the fixture replaces it before the
next test.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import pandas as pd
import pytest
from conftest import WorkerWatch, wait_until

from curator_dask import processing_stage
from curator_dask.cluster import get_client
from curator_dask.executors import BatchExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from reliability.conftest import (
    assert_exactly_once,
    completed_parts,
    kill_a_worker_when,
    output_ids,
    read_output,
    upper_pipeline,
    write_corpus,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

N_DOCS = 420  # 6 files, about 25 partitions of 1 KiB


def assert_upper_cased_exactly_once(corpus, out, result) -> None:
    assert_exactly_once(corpus.ids, output_ids(out), result.dropped)
    assert read_output(out)["text"].str.startswith("DOCUMENT").all()
    corpus.assert_unchanged()


def test_a_worker_killed_mid_streaming_run_loses_and_duplicates_nothing(tmp_path,
                                                                        process_client):
    corpus = write_corpus(tmp_path / "in", N_DOCS, n_files=6)
    out = tmp_path / "out"
    victim = next(iter(process_client.run(os.getpid).values()))
    killer = kill_a_worker_when(lambda: completed_parts(out) >= 3, victim)
    result = upper_pipeline(corpus.path, out).run(
        StreamingExecutor(max_in_flight=6, progress=False))
    ended = time.time()
    killer.join()
    assert killer.killed_at is not None and killer.killed_at < ended  # killed mid-run
    assert victim not in process_client.run(os.getpid).values()
    assert result.partitions > 10 and result.rows == N_DOCS
    assert_upper_cased_exactly_once(corpus, out, result)
    # The loss is in the result and its summary, once, with what ran again.
    assert len(result.lost_workers) == 1, result.lost_workers
    retried = result.lost_workers[0]["retried"]
    assert set(retried) <= {"read_jsonl", "slow_upper", "write_parquet"}, retried
    assert "1 worker(s) lost during the run" in result.summary()


def test_a_worker_killed_mid_batch_run_loses_and_duplicates_nothing(tmp_path, process_client):
    corpus = write_corpus(tmp_path / "in", N_DOCS, n_files=6)
    out = tmp_path / "out"
    marks = tmp_path / "marks"
    marks.mkdir()

    @processing_stage(name="slow_mark")
    def slow_mark(df):
        time.sleep(0.15)
        (marks / f"{df['id'].iloc[0]}").touch()
        return df.assign(text=df["text"].str.upper())

    p = (Pipeline("worker-loss").add_stage(JsonlReader(str(corpus.path), blocksize="1KiB"))
         .add_stage(slow_mark).add_stage(ParquetWriter(str(out))))
    victim = next(iter(process_client.run(os.getpid).values()))
    killer = kill_a_worker_when(lambda: len(os.listdir(marks)) >= 4, victim)
    result = p.run(BatchExecutor(progress=False))
    ended = time.time()
    killer.join()
    assert killer.killed_at is not None and killer.killed_at < ended
    assert result.rows == N_DOCS
    assert_upper_cased_exactly_once(corpus, out, result)
    assert len(result.lost_workers) == 1, result.lost_workers


def test_streaming_and_batch_write_the_same_rows(tmp_path, process_client):
    # The reference the fault cases are held to: without faults both executors agree.
    corpus = write_corpus(tmp_path / "in", N_DOCS, n_files=6)
    streamed = upper_pipeline(corpus.path, tmp_path / "s").run(StreamingExecutor(progress=False))
    batched = upper_pipeline(corpus.path, tmp_path / "b").run(BatchExecutor(progress=False))
    assert_upper_cased_exactly_once(corpus, tmp_path / "s", streamed)
    assert_upper_cased_exactly_once(corpus, tmp_path / "b", batched)
    # Workers killed by earlier tests on this cluster are not this run's losses.
    assert streamed.lost_workers == [] and batched.lost_workers == []
    assert "lost" not in streamed.summary()
    s = read_output(tmp_path / "s").sort_values("id").reset_index(drop=True)
    b = read_output(tmp_path / "b").sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(s, b)


def test_workers_retired_by_adapt_mid_run_lose_and_duplicate_nothing(tmp_path):
    corpus = write_corpus(tmp_path / "in", N_DOCS, n_files=6)
    out = tmp_path / "out"
    fast = {"interval": "500ms", "wait_count": 1}
    client = get_client(n_workers=3, adaptive={"minimum": 1, "maximum": 3, **fast},
                        dashboard_address=None, silence_logs=logging.CRITICAL)
    with client, WorkerWatch(client) as watch:
        client.wait_for_workers(3)
        lowered = []

        def lower_the_maximum():
            # Mid-run, as a user would: adapt now wants one worker and retires two, each
            # holding partitions (running, waiting on it, or finished and not yet taken).
            wait_until(lambda: completed_parts(out) >= 4, timeout=60)
            lowered.append(time.time())
            client.cluster.adapt(minimum=1, maximum=1, **fast)

        thread = threading.Thread(target=lower_the_maximum, daemon=True)
        thread.start()
        result = upper_pipeline(corpus.path, out).run(StreamingExecutor(progress=False))
        ended = time.time()
        thread.join()
        log = list(client.cluster._adaptive.log)
    assert lowered and lowered[0] < ended
    # The retirement finished while the run was still going, and the run went on.
    assert 1 in watch.counts(lowered[0], ended)
    assert any(record["status"] == "down" for _, record in log)
    assert len(result.stage("slow_upper").workers) == 3  # the retired workers' work was kept
    assert result.rows == N_DOCS
    assert_upper_cased_exactly_once(corpus, out, result)
