"""A driver killed mid-run, then the same pipeline rerun with ``resume=True``: the parts
finished before the kill are kept as they are, the rest are written, and every input
document ends up in the output exactly once. The input files are left as they were.

The killed driver is a separate Python process connected to ``dask scheduler`` and
``dask worker`` processes (``process_cluster``), as a production driver would be.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import wait_until

from curator_dask.executors import StreamingExecutor
from curator_dask.stages.io_stages import JsonlReader
from reliability.conftest import (
    assert_exactly_once,
    completed_parts,
    output_ids,
    read_output,
    upper_pipeline,
    wait_for_idle_cluster,
    write_corpus,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

N_DOCS = 300

# The driver builds the pipeline with the function the rerun uses, so both runs are the
# same pipeline, stage for stage.
DRIVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from curator_dask.cluster import get_client
    from curator_dask.executors import StreamingExecutor
    from reliability.conftest import upper_pipeline

    if __name__ == "__main__":
        client = get_client(scheduler_address={address!r})
        upper_pipeline({source!r}, {out!r}).run(StreamingExecutor(max_in_flight=3, progress=False))
""")


def finished_parts(out) -> dict[str, int]:
    """Parts with a completion marker, and when each was last written (ns)."""
    return {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out)
            if n.startswith("part-") and (out / f".{n.split('.')[0]}.done").exists()}


def test_a_killed_driver_is_resumed_without_redoing_or_repeating_finished_parts(
        tmp_path, process_client, process_cluster):
    corpus = write_corpus(tmp_path / "in", N_DOCS, n_files=3)
    out = tmp_path / "out"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(tests=str(Path(__file__).parent.parent),
                                    address=process_cluster.address,
                                    source=str(corpus.path), out=str(out)))
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: completed_parts(out) >= 4 or driver.poll() is not None,
                   timeout=60, interval=0.02)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait(timeout=10)
    # Tasks the dead driver left running finish (a write completes its part) or are
    # released; only then is the output what a resume will find.
    assert wait_for_idle_cluster(process_client), "the dead driver's tasks did not end"
    finished = finished_parts(out)
    total = len(JsonlReader(str(corpus.path), blocksize="1KiB").dataset().plan)
    assert 4 <= len(finished) < total, "the driver should die mid-run"

    result = upper_pipeline(corpus.path, out).run(StreamingExecutor(resume=True, progress=False))
    assert result.partitions_skipped == len(finished)
    assert result.stage("slow_upper").partitions == total - len(finished)
    assert {n: os.stat(out / n).st_mtime_ns for n in finished} == finished  # kept as they were
    assert result.rows == N_DOCS
    assert_exactly_once(corpus.ids, output_ids(out), result.dropped)
    assert read_output(out)["text"].str.startswith("DOCUMENT").all()
    corpus.assert_unchanged()
