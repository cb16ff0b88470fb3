"""One writer per output at a time: a run holds a lease in each directory it writes.

A second run on a directory another live run is writing is refused, naming the first
(host, pid, run id, since when), before it deletes or writes anything; the first run's
output ends complete and unmixed. A lease whose process died on this host is taken over
at once; one that stopped heart-beating elsewhere only with ``force``; a live one never.
Every test checks the input bytes and, where a run completes, that every input id is in
the output once.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fsspec
import pytest
from conftest import wait_until
from fsspec.implementations.memory import MemoryFileSystem

from curator_dask import DocumentDataset
from curator_dask.cli.main import main
from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.executors import LocalExecutor
from curator_dask.io import atomic
from curator_dask.io.lease import (
    LEASE,
    STALE_AFTER_SECONDS,
    Lease,
    LeaseHolder,
    LeaseLostError,
    OutputInUseError,
)
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from reliability.conftest import (
    assert_exactly_once,
    completed_parts,
    output_ids,
    snapshot_bytes,
    write_corpus,
)

TESTS = str(Path(__file__).parent.parent)

# The first run: a pipeline slow enough (slow_upper, 1 KiB partitions) to be mid-write
# while the test starts a second one on the same output.
FIRST_RUN = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from curator_dask.executors import LocalExecutor
    from reliability.conftest import upper_pipeline

    upper_pipeline({source!r}, {out!r}).run(LocalExecutor(progress=False))
""")


def _writers(other: Path, out: Path, cache: Path) -> dict:
    """Every way a second run could write ``out`` (or use it as its cache)."""
    return {
        "to_parquet overwrite": lambda: DocumentDataset.read_jsonl(str(other)).to_parquet(
            str(out), mode="overwrite"),
        "to_jsonl overwrite_all": lambda: DocumentDataset.read_jsonl(str(other)).to_jsonl(
            str(out), mode="overwrite_all"),
        "pipeline writer": lambda: (
            Pipeline("second").add_stage(JsonlReader(str(other)))
            .add_stage(ParquetWriter(str(out), mode="overwrite"))
            .run(LocalExecutor(progress=False))),
        "exact dedup output": lambda: ExactDeduplicationWorkflow(
            str(other), str(out), str(cache), output_mode="overwrite").run(),
        "exact dedup cache": lambda: ExactDeduplicationWorkflow(
            str(other), str(cache), str(out)).run(),
        "fuzzy dedup cache": lambda: FuzzyDeduplicationWorkflow(str(other), str(out)).run(),
    }


@pytest.mark.slow
def test_a_second_run_on_an_output_being_written_is_refused_naming_the_first(tmp_path):
    corpus = write_corpus(tmp_path / "in")
    other = write_corpus(tmp_path / "other", n_docs=60, start=1000)
    out = tmp_path / "out"
    script = tmp_path / "first.py"
    script.write_text(FIRST_RUN.format(tests=TESTS, source=str(corpus.path), out=str(out)))
    first = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: completed_parts(out) >= 2 or first.poll() is not None,
                          timeout=120, interval=0.05), "the first run did not start writing"
        assert first.poll() is None, "the first run ended before the second started"
        holder = Lease(fsspec.filesystem("file"), str(out), run_id="reader").read()
        for name, write in _writers(other.path, out, tmp_path / "cache").items():
            with pytest.raises(OutputInUseError) as err:
                write()
            message = str(err.value)
            assert (f"run {holder.run_id[:12]}" in message and f"pid {first.pid}" in message
                    and f"host {socket.gethostname()}" in message), name
            assert "since " in message and str(out) in message, name
        assert first.poll() is None, "the refusals should come while the first run writes"
    finally:
        _, errors = first.communicate(timeout=120)
    assert first.returncode == 0, errors.decode()
    # The first run's output: complete, each of its documents once, none of the second's.
    assert_exactly_once(corpus.ids, output_ids(out))
    assert not (out / LEASE).exists()
    assert not (tmp_path / "cache").exists()
    corpus.assert_unchanged()
    other.assert_unchanged()


@pytest.mark.slow
def test_the_lease_of_a_killed_run_is_taken_over_at_once(tmp_path, caplog):
    corpus = write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, signal
        from curator_dask.io.guard import OutputGuard
        guard = OutputGuard()
        guard.register({str(out)!r}, "output directory")
        guard.__enter__()
        os.kill(os.getpid(), signal.SIGKILL)
        """)], capture_output=True, check=False)
    assert killed.returncode == -signal.SIGKILL and (out / LEASE).exists()
    dead = json.loads((out / LEASE).read_text())["pid"]
    with caplog.at_level(logging.WARNING, logger="curator_dask"):
        written = DocumentDataset.read_jsonl(str(corpus.path)).to_parquet(str(out))
    assert f"pid {dead}" in caplog.text and "its process is gone" in caplog.text
    assert_exactly_once(corpus.ids, output_ids(out), written.dropped)
    assert not (out / LEASE).exists()
    corpus.assert_unchanged()


def _lease_elsewhere(directory: Path, heartbeat_age: float) -> LeaseHolder:
    """A lease held by a run on another host, last heart-beating ``heartbeat_age`` ago."""
    now = time.time()
    holder = LeaseHolder(run_id="e" * 32, host=f"not-{socket.gethostname()}", pid=4242,
                         process_started=now - 7200, since=now - 3600,
                         heartbeat=now - heartbeat_age)
    directory.mkdir(parents=True, exist_ok=True)
    assert atomic.create_exclusive(fsspec.filesystem("file"), str(directory / LEASE),
                                   holder.to_bytes())
    return holder


def test_a_stale_lease_is_taken_over_only_with_force(tmp_path, corpus):
    out = tmp_path / "out"
    _lease_elsewhere(out, heartbeat_age=10 * STALE_AFTER_SECONDS)
    ds = DocumentDataset.read_jsonl(str(corpus.path))
    with pytest.raises(OutputInUseError) as err:
        ds.to_parquet(str(out))
    assert "no heartbeat for" in str(err.value) and "force=True (--force)" in str(err.value)
    assert sorted(p.name for p in out.iterdir()) == [LEASE]  # nothing written
    written = ds.to_parquet(str(out), force=True)
    assert_exactly_once(corpus.ids, output_ids(out), written.dropped)
    assert not (out / LEASE).exists()
    corpus.assert_unchanged()


@pytest.mark.parametrize("writer", list(_writers(Path("in"), Path("out"), Path("cache"))))
def test_a_live_lease_is_refused_even_with_force(tmp_path, corpus, writer):
    out, cache = tmp_path / "out", tmp_path / "cache"
    holder = _lease_elsewhere(out, heartbeat_age=0)
    before = snapshot_bytes(tmp_path)
    with pytest.raises(OutputInUseError) as err:
        _writers(corpus.path, out, cache)[writer]()
    assert f"run {holder.run_id[:12]}" in str(err.value) and holder.host in str(err.value)
    assert snapshot_bytes(tmp_path) == before  # nothing deleted, nothing written
    with pytest.raises(OutputInUseError):
        DocumentDataset.read_jsonl(str(corpus.path)).to_parquet(str(out), force=True)
    corpus.assert_unchanged()


@pytest.mark.slow
def test_the_command_line_takes_a_stale_lease_over_with_force(tmp_path, corpus, capsys):
    out = tmp_path / "out"
    _lease_elsewhere(out, heartbeat_age=10 * STALE_AFTER_SECONDS)
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(textwrap.dedent(f"""\
        executor: {{type: local, progress: false}}
        reader: {{type: jsonl, path: {corpus.path}}}
        stages: []
        writer: {{type: parquet, path: {out}}}
        """))
    assert main(["run", str(pipeline)]) == 1
    assert "--force" in capsys.readouterr().err
    assert main(["run", str(pipeline), "--force"]) == 0
    assert_exactly_once(corpus.ids, output_ids(out))
    corpus.assert_unchanged()


def test_a_run_whose_lease_was_taken_over_stops(tmp_path):
    fs = fsspec.filesystem("file")
    mine = Lease(fs, str(tmp_path / "out"), run_id="a" * 32)
    mine.acquire()
    mine.check()  # held: nothing to report
    thief = LeaseHolder.of_this_process("b" * 32, "output directory")
    atomic.write_bytes(fs, str(tmp_path / "out" / LEASE), thief.to_bytes())
    mine.heartbeat()
    with pytest.raises(LeaseLostError, match=f"run {'b' * 12}"):
        mine.check()
    mine.release()  # the other run's lease is left to it
    assert json.loads((tmp_path / "out" / LEASE).read_text())["run_id"] == "b" * 32


class _NoExclusiveCreate(MemoryFileSystem):
    """An in-memory filesystem without exclusive create, as fsspec's object stores."""

    protocol = "noexclusive"


@pytest.mark.slow
def test_without_exclusive_create_the_lease_is_read_back():
    fs = _NoExclusiveCreate()
    first = Lease(fs, "/leased/out", run_id="a" * 32)
    first.acquire()
    assert first.held
    second = Lease(fs, "/leased/out", run_id="b" * 32)
    with pytest.raises(OutputInUseError, match=f"run {'a' * 12}"):
        second.acquire()
    first.release()
    second.acquire()
    assert second.read().run_id == "b" * 32
    second.release()
    assert not fs.exists("/leased/out")
