"""Ctrl-C on ``curator-dask run``: the command exits 130 with one line that says what is
kept and how to go on, no worker prints a traceback, the parts finished before it are
complete, and a rerun with ``resume: true`` writes every document exactly once.

Ctrl-C in a terminal signals the whole foreground process group: the driver and the
worker processes of the local cluster it started. The test does the same (SIGINT to the
group of a command started in a session of its own).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

N_DOCS = 1200

PIPELINE = """
name: interrupted
cluster:
  n_workers: 1
  threads_per_worker: 1
executor:
  type: streaming
  resume: {resume}
reader:
  type: jsonl
  path: {source}
  blocksize: 2KiB
stages:
  - WordCountFilter:
      min_words: 5
  - RepeatedLinesFilter
writer:
  type: parquet
  path: {out}
"""

CLI = [sys.executable, "-m", "curator_dask.cli.main"]


def finished_parts(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob(".part-*.done")) if out.exists() else []


def test_ctrl_c_exits_130_keeps_finished_parts_and_a_resume_completes(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    with open(source / "docs.jsonl", "w") as f:
        for i in range(N_DOCS):
            f.write(json.dumps({"id": i, "text": f"document {i} " + "word " * 50}) + "\n")
    out = tmp_path / "out"
    config = tmp_path / "pipeline.yaml"
    config.write_text(PIPELINE.format(resume="false", source=source, out=out))

    run = subprocess.Popen([*CLI, "run", str(config)], cwd=tmp_path, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while (len(finished_parts(out)) < 2 and run.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before it could be interrupted"
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == 130, err
    assert "interrupted" in err and "resume: true" in err, err
    assert "Traceback" not in err, err

    kept = finished_parts(out)
    assert kept, "the parts finished before Ctrl-C were removed"
    kept_frames = {name: pd.read_parquet(out / f"{name[1:-len('.done')]}.parquet")
                   for name in kept}
    assert all(len(frame) for frame in kept_frames.values())

    config.write_text(PIPELINE.format(resume="true", source=source, out=out))
    resumed = subprocess.run([*CLI, "run", str(config)], cwd=tmp_path, text=True,
                             capture_output=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr
    ids = pd.read_parquet(out, columns=["id"])["id"].tolist()
    assert sorted(ids) == list(range(N_DOCS))  # every document once: none lost, none twice
    for name, frame in kept_frames.items():  # the finished parts were kept as they were
        again = pd.read_parquet(out / f"{name[1:-len('.done')]}.parquet")
        pd.testing.assert_frame_equal(again, frame)
