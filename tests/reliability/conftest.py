"""What the data-safety catalog shares: corpora with unique ids, byte snapshots of the
input, the exactly-once check, and a cluster of killable worker processes.

Every case asserts the same two outcomes: each input document is in the output exactly
once or in a drop count (:func:`assert_exactly_once`), and the input files are byte for
byte what they were (:meth:`Corpus.assert_unchanged`). Fixtures need no import; helpers
are imported as ``from reliability.conftest import ...``. The LocalCluster fixtures
(``cluster``, ``client``), ``wait_until``, ``Sampler`` and ``WorkerWatch`` come from
``tests/conftest.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from conftest import wait_until, write_jsonl

from curator_dask import processing_stage
from curator_dask.cluster import get_client
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

DASK = str(Path(sys.executable).parent / "dask")
WORKERS = 3


# -- corpora -------------------------------------------------------------------------

def document(i: int) -> dict:
    """Document ``i``: its id and a text that no other document has."""
    return {"id": i, "text": f"document {i} " + "word " * (i % 7)}


def snapshot_bytes(root) -> dict[str, str]:
    """sha256 of every file under ``root`` (hidden ones too), by relative path."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def assert_bytes_unchanged(root, before: Mapping[str, str]) -> None:
    """No file under ``root`` was changed, removed or added since ``before``."""
    after = snapshot_bytes(root)
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    removed = sorted(before.keys() - after.keys())
    added = sorted(after.keys() - before.keys())
    assert not (changed or removed or added), (
        f"the input under {root} was modified: changed {changed}, removed {removed}, "
        f"added {added}")


@dataclass
class Corpus:
    """Input files written by :func:`write_corpus`, and their bytes when written."""

    path: Path
    ids: list[int]
    files: list[Path]
    snapshot: dict[str, str]

    def assert_unchanged(self) -> None:
        assert_bytes_unchanged(self.path, self.snapshot)

    def resnapshot(self) -> None:
        """Take the files as they are now as the input (after breaking one on purpose)."""
        self.snapshot = snapshot_bytes(self.path)


def write_corpus(directory, n_docs: int = 300, n_files: int = 3, fmt: str = "jsonl",
                 start: int = 0) -> Corpus:
    """``n_docs`` documents with ids ``start, start + 1, ...`` in ``n_files`` files.

    Call :meth:`Corpus.resnapshot` after changing the files on purpose (a bad line).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = list(range(start, start + n_docs))
    per_file = -(-n_docs // n_files)
    files = []
    for k in range(n_files):
        rows = [document(i) for i in ids[k * per_file:(k + 1) * per_file]]
        path = directory / f"f{k:02d}.{fmt}"
        if fmt == "jsonl":
            write_jsonl(path, rows)
        elif fmt == "parquet":
            frame = pd.DataFrame(rows, columns=["id", "text"]).astype({"id": "int64"})
            frame.to_parquet(path, index=False)
        else:
            raise ValueError(f"fmt must be 'jsonl' or 'parquet', got {fmt!r}")
        files.append(path)
    return Corpus(directory, ids, files, snapshot_bytes(directory))


def replace_line(path, line: int, text: bytes) -> None:
    """Replace line ``line`` (1-based) of a JSONL file with ``text``."""
    lines = Path(path).read_bytes().split(b"\n")
    lines[line - 1] = text
    Path(path).write_bytes(b"\n".join(lines))


def line_ids(path) -> list[int]:
    """The ids of a JSONL file, line by line (as written by :func:`write_corpus`)."""
    return [json.loads(line)["id"] for line in Path(path).read_text().splitlines()]


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    """300 documents (ids 0-299) in three JSONL files under ``tmp_path / "in"``."""
    return write_corpus(tmp_path / "in")


# -- outputs -------------------------------------------------------------------------

def read_output(path) -> pd.DataFrame:
    """Every visible part under an output directory (Parquet or JSONL), concatenated."""
    path = Path(path)
    parts = sorted(p for p in path.rglob("*") if p.is_file()
                   and not any(s.startswith(".") for s in p.relative_to(path).parts))
    frames = []
    for part in parts:
        if part.suffix == ".parquet":
            frames.append(pd.read_parquet(part))
        elif part.stat().st_size:
            frames.append(pd.read_json(part, lines=True))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def output_ids(path, id_field: str = "id") -> list[int]:
    out = read_output(path)
    return out[id_field].tolist() if len(out) else []


def assert_exactly_once(input_ids: Iterable, output_ids: Iterable,
                        dropped_counts: Mapping[str, int] | None = None) -> None:
    """Every input id is in the output exactly once, or accounted for by a drop count.

    No id is written twice, the output holds no id that was not in the input, and the
    ids missing from the output are as many as the drop counts say were dropped.
    """
    input_ids, output_ids = list(input_ids), list(output_ids)
    repeated = sorted(i for i, c in Counter(input_ids).items() if c > 1)
    assert not repeated, f"the check needs unique input ids; repeated: {repeated[:10]}"
    written = Counter(output_ids)
    dropped = dict(dropped_counts or {})
    duplicated = sorted(i for i, c in written.items() if c > 1)
    strangers = sorted(set(written) - set(input_ids))
    missing = sorted(set(input_ids) - set(written))
    problems = []
    if duplicated:
        problems.append(f"{len(duplicated)} id(s) written more than once: {duplicated[:10]}")
    if strangers:
        problems.append(f"{len(strangers)} id(s) not in the input: {strangers[:10]}")
    if len(missing) != sum(dropped.values()):
        problems.append(f"{len(missing)} input id(s) missing from the output "
                        f"({missing[:10]}), but the drop counts account for "
                        f"{sum(dropped.values())} ({dropped})")
    assert not problems, "; ".join(problems)


def completed_parts(out) -> int:
    """Output parts with a completion marker (``.part-00042.done``)."""
    return (sum(1 for n in os.listdir(out) if n.endswith(".done"))
            if os.path.isdir(out) else 0)


@processing_stage(name="slow_upper")
def slow_upper(df):
    """Upper-cases the text, slowly enough that a run lasts while a fault is injected.

    Shared by the tests and the driver scripts they start, so a rerun's pipeline is the
    killed run's pipeline, stage for stage.
    """
    time.sleep(0.15)
    return df.assign(text=df["text"].str.upper())


def upper_pipeline(source, out, *, blocksize: str = "1KiB") -> Pipeline:
    """Read JSONL in small partitions, :data:`slow_upper`, write Parquet."""
    return (Pipeline("upper").add_stage(JsonlReader(str(source), blocksize=blocksize))
            .add_stage(slow_upper).add_stage(ParquetWriter(str(out))))


# -- a cluster of killable worker processes ------------------------------------------

def start_worker(address: str, log) -> subprocess.Popen:
    """A ``dask worker`` without a nanny, so that SIGKILL really removes it."""
    return subprocess.Popen(
        [DASK, "worker", address, "--nthreads", "1", "--resources", "CPU=1", "--no-nanny",
         "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", "1GiB"],
        stdout=log, stderr=log)


def start_scheduler(scheduler_file, log) -> subprocess.Popen:
    """A ``dask scheduler`` on 127.0.0.1 that writes its address to ``scheduler_file``."""
    return subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(scheduler_file)], stdout=log, stderr=log)


def scheduler_address(scheduler_file) -> str:
    """The address a scheduler started by :func:`start_scheduler` wrote, once it has."""
    assert wait_until(scheduler_file.exists, timeout=30, interval=0.1), \
        "the scheduler did not start"
    return json.loads(scheduler_file.read_text())["address"]


@dataclass
class ProcessCluster:
    address: str
    workers: list[subprocess.Popen]
    log: object


@pytest.fixture(scope="module")
def process_cluster(tmp_path_factory):
    """``dask scheduler`` and 3 ``dask worker`` processes on 127.0.0.1, as production
    starts them; pipelines connect by address."""
    directory = tmp_path_factory.mktemp("cluster")
    scheduler_file = directory / "scheduler.json"
    # Open for the cluster's whole life: the scheduler and workers write to it until
    # the fixture stops them and closes it.
    log = open(directory / "cluster.log", "ab")  # noqa: SIM115
    scheduler = start_scheduler(scheduler_file, log)
    workers: list[subprocess.Popen] = []
    try:
        address = scheduler_address(scheduler_file)
        workers.extend(start_worker(address, log) for _ in range(WORKERS))
        yield ProcessCluster(address, workers, log)
    finally:
        # Workers first: a worker whose scheduler is gone retries it before it exits.
        for group in (workers, [scheduler]):
            for proc in group:
                if proc.poll() is None:
                    proc.terminate()
            for proc in group:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        log.close()


@pytest.fixture
def process_client(process_cluster):
    """A client by address with all 3 workers alive (a killed one is replaced first)."""
    workers = process_cluster.workers
    for i, proc in enumerate(workers):
        if proc.poll() is not None:
            workers[i] = start_worker(process_cluster.address, process_cluster.log)
    client = get_client(scheduler_address=process_cluster.address)
    client.wait_for_workers(WORKERS, timeout=30)
    with client:
        yield client


class Killer(threading.Thread):
    """SIGKILLs process ``pid`` as soon as ``condition()`` holds (polled in a thread);
    ``killed_at`` is when (epoch seconds)."""

    def __init__(self, condition, pid: int, timeout: float = 60):
        super().__init__(daemon=True)
        self.condition, self.pid, self.timeout = condition, pid, timeout
        self.killed_at: float | None = None

    def run(self):
        wait_until(self.condition, timeout=self.timeout, interval=0.02)
        os.kill(self.pid, signal.SIGKILL)
        self.killed_at = time.time()


def kill_a_worker_when(condition, pid: int, timeout: float = 60) -> Killer:
    killer = Killer(condition, pid, timeout)
    killer.start()
    return killer


def wait_for_idle_cluster(client, timeout: float = 90) -> bool:
    """Wait until the scheduler holds no task and no worker runs one: what a killed
    driver left behind has finished or was released."""
    def idle():
        held = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        # Lambdas travel by value: the processes cannot import this module.
        running = client.run(lambda dask_worker: len(dask_worker.active_threads))
        return not held and not sum(running.values())

    return wait_until(idle, timeout=timeout, interval=0.1)
