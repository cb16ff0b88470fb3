"""Shared fixtures: real files on disk and a real multi-process Dask cluster."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

#: NeMo Curator scripts kept as data for the migration tests (tests/test_migrate_scripts.py):
#: never collected, since they import nemo_curator and some start clusters at import.
collect_ignore = ["nemo_scripts"]


@pytest.fixture(scope="session")
def cluster():
    """A LocalCluster of 2 worker processes on 127.0.0.1, advertising CPU=1 each."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, resources={"CPU": 1},
                      silence_logs=logging.ERROR) as cluster:
        yield cluster


@pytest.fixture
def client(cluster):
    """A client on the shared cluster; it is the default scheduler inside the test."""
    from distributed import Client

    with Client(cluster) as client:
        yield client


@pytest.fixture
def sync_scheduler(request):
    """Dask's in-process scheduler for the test (small graphs run fastest there), unless
    the test uses the shared cluster's ``client``."""
    if "client" in request.fixturenames:
        yield
        return
    import dask

    with dask.config.set(scheduler="sync"):
        yield


def write_jsonl(path, rows) -> None:
    """Write rows (dicts) as JSONL, creating parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def docs(n: int, start: int = 0, prefix: str = "doc") -> list[dict]:
    """``n`` distinct documents with a text and a number."""
    return [{"text": f"{prefix} {i} " + "word " * (i % 7), "n": i} for i in range(start, start + n)]


def wait_until(condition, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``condition()`` until it is true or ``timeout`` seconds pass; its last value."""
    deadline = time.time() + timeout
    while not condition() and time.time() < deadline:
        time.sleep(interval)
    return condition()


class Sampler:
    """Calls ``fn`` every ``interval`` seconds in a thread inside a ``with`` block;
    ``samples`` holds ``(time, value)`` pairs."""

    def __init__(self, fn, interval: float):
        self.fn, self.interval, self.samples = fn, interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.time(), self.fn()))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class WorkerWatch(Sampler):
    """Samples ``{address: resources}`` of the cluster's workers every 0.2 s."""

    def __init__(self, client):
        from curator_dask.cluster import worker_resources

        super().__init__(lambda: worker_resources(client), 0.2)

    def counts(self, start=0.0, end=float("inf")) -> list[int]:
        return [len(w) for t, w in self.samples if start <= t <= end]
