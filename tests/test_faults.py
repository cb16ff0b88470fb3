"""Faults on real clusters: killed workers, recycled workers, a killed driver, resume.

The cluster is started the way production starts one: ``dask scheduler`` and
``dask worker --resources CPU=1`` processes (subprocesses of the test, on 127.0.0.1),
and pipelines connect to it by address. Workers run without a nanny so that SIGKILL
really removes one; the fixture starts a replacement before the next test.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import docs, write_jsonl

from curator_dask import processing_stage
from curator_dask.cluster import get_client
from curator_dask.executors import BatchExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

DASK = str(Path(sys.executable).parent / "dask")
N_DOCS = 600
WORKERS = 3

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _start_worker(address: str, log) -> subprocess.Popen:
    return subprocess.Popen(
        [DASK, "worker", address, "--nthreads", "1", "--resources", "CPU=1", "--no-nanny",
         "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", "1GiB"],
        stdout=log, stderr=log)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """``dask scheduler`` + 3 ``dask worker`` processes; yields (address, workers list)."""
    directory = tmp_path_factory.mktemp("cluster")
    scheduler_file = directory / "scheduler.json"
    log = open(directory / "cluster.log", "ab")
    scheduler = subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(scheduler_file)], stdout=log, stderr=log)
    workers: list[subprocess.Popen] = []
    try:
        deadline = time.time() + 30
        while not scheduler_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        workers.extend(_start_worker(address, log) for _ in range(WORKERS))
        yield address, workers, log
    finally:
        for proc in [*workers, scheduler]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*workers, scheduler]:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()


@pytest.fixture
def client(dask_cluster):
    """A client by address, with all 3 workers alive (replacing any killed one)."""
    address, workers, log = dask_cluster
    for i, proc in enumerate(workers):
        if proc.poll() is not None:
            workers[i] = _start_worker(address, log)
    client = get_client(scheduler_address=address)
    client.wait_for_workers(WORKERS, timeout=30)
    with client:
        yield client


@pytest.fixture
def corpus(tmp_path):
    for i in range(6):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(N_DOCS // 6, start=i * (N_DOCS // 6)))
    return tmp_path


@processing_stage(name="slow_upper")
def slow_upper(df):
    time.sleep(0.15)
    return df.assign(text=df["text"].str.upper())


def pipeline(corpus, out="out") -> Pipeline:
    return (Pipeline("faults")
            .add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
            .add_stage(slow_upper)
            .add_stage(ParquetWriter(str(corpus / out))))


def assert_every_document_exactly_once(path) -> None:
    out = pd.read_parquet(str(path))
    assert sorted(out["n"]) == list(range(N_DOCS))  # none missing, none twice
    assert out["text"].str.startswith("DOC").all()


def _markers(path) -> int:
    return sum(1 for n in os.listdir(path) if n.endswith(".done")) if os.path.isdir(path) else 0


def kill_a_worker_when(condition, pid: int) -> threading.Thread:
    def watch():
        deadline = time.time() + 60
        while not condition() and time.time() < deadline:
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_streaming_run_survives_a_worker_killed_mid_run(corpus, client):
    victim = next(iter(client.run(os.getpid).values()))
    out = corpus / "out"
    watcher = kill_a_worker_when(lambda: _markers(out) >= 3, victim)
    result = pipeline(corpus).run(StreamingExecutor(max_in_flight=6, progress=False))
    watcher.join()
    assert victim not in client.run(os.getpid).values()
    assert result.partitions > 10 and result.rows == N_DOCS
    assert_every_document_exactly_once(out)


def test_batch_run_survives_a_worker_killed_mid_run(corpus, client):
    victim = next(iter(client.run(os.getpid).values()))
    marks = corpus / "marks"
    marks.mkdir()

    @processing_stage(name="slow_mark")
    def slow_mark(df):
        time.sleep(0.15)
        (marks / f"{df['n'].iloc[0]}").touch()
        return df.assign(text=df["text"].str.upper())

    p = (Pipeline("faults").add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
         .add_stage(slow_mark).add_stage(ParquetWriter(str(corpus / "out"))))
    watcher = kill_a_worker_when(lambda: len(os.listdir(marks)) >= 4, victim)
    result = p.run(BatchExecutor(progress=False))
    watcher.join()
    assert result.rows == N_DOCS
    assert_every_document_exactly_once(corpus / "out")


def test_streaming_and_batch_give_the_same_rows(corpus, client):
    pipeline(corpus, out="s").run(StreamingExecutor(progress=False))
    pipeline(corpus, out="b").run(BatchExecutor(progress=False))
    streamed = pd.read_parquet(str(corpus / "s")).sort_values("n").reset_index(drop=True)
    batched = pd.read_parquet(str(corpus / "b")).sort_values("n").reset_index(drop=True)
    pd.testing.assert_frame_equal(streamed, batched)


DRIVER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from curator_dask import processing_stage
    from curator_dask.cluster import get_client
    from curator_dask.executors import StreamingExecutor
    from curator_dask.pipeline import Pipeline
    from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

    @processing_stage(name="slow_upper")
    def slow_upper(df):
        time.sleep(0.15)
        return df.assign(text=df["text"].str.upper())

    if __name__ == "__main__":
        client = get_client(scheduler_address={address!r})
        (Pipeline("faults").add_stage(JsonlReader({input!r}, blocksize="1KiB"))
         .add_stage(slow_upper).add_stage(ParquetWriter({output!r})))\\
            .run(StreamingExecutor(max_in_flight=3, progress=False))
""")


def test_a_killed_driver_is_resumed_without_redoing_finished_parts(corpus, client, dask_cluster):
    out = corpus / "out"
    script = corpus / "driver.py"
    script.write_text(DRIVER.format(tests=str(Path(__file__).parent), address=dask_cluster[0],
                                    input=str(corpus / "in"), output=str(out)))
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while _markers(out) < 4 and time.time() < deadline and driver.poll() is None:
            time.sleep(0.02)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait(timeout=10)
    # Tasks the dead driver left running may still write a part: wait (with a deadline)
    # until the scheduler has released them and no worker runs any.
    deadline = time.time() + 30
    while time.time() < deadline and (
            client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
            or sum(client.run(lambda dask_worker: len(dask_worker.state.executing)).values())):
        time.sleep(0.05)
    finished = {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out)
                if n.startswith("part-") and (out / f".{n.split('.')[0]}.done").exists()}
    total = len(JsonlReader(str(corpus / "in"), blocksize="1KiB").dataset().plan)
    assert 4 <= len(finished) < total, "the driver should die mid-run"

    result = pipeline(corpus).run(StreamingExecutor(resume=True, progress=False))
    assert result.partitions_skipped >= len(finished)
    assert result.stage("slow_upper").partitions == total - result.partitions_skipped
    assert {n: os.stat(out / n).st_mtime_ns for n in finished} == finished  # not recomputed
    assert result.rows == N_DOCS
    assert_every_document_exactly_once(out)


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
