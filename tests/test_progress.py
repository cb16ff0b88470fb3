"""Progress in every mode: one bar per run on a terminal, relabelled stage by stage; log
lines (parts done/total, docs/s, ETA) everywhere else, dedup phases and barriers included;
and the CLI logs them by default."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dask
import pytest
from conftest import docs, write_jsonl

from curator_dask import AddId, JsonlReader, ParquetWriter, Pipeline
from curator_dask.dedup import (
    ExactDeduplicationWorkflow,
    FuzzyDedupConfig,
    FuzzyDeduplicationWorkflow,
)
from curator_dask.dedup.stages import ExactDedup
from curator_dask.executors import LocalExecutor, StreamingExecutor
from curator_dask.observe import progress as progress_module
from curator_dask.observe.progress import Progress

ROOT = Path(__file__).parent.parent
LOGGER = "curator_dask.observe.progress"


@pytest.fixture
def corpus(tmp_path):
    rows = docs(60)
    write_jsonl(tmp_path / "in" / "a.jsonl", rows + rows[:20])  # 20 exact copies
    return tmp_path


@pytest.fixture
def fast_lines():
    with dask.config.set({"curator-dask.progress.interval": "50ms"}):
        yield


def progress_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def pipeline(corpus) -> Pipeline:
    return (Pipeline("p")
            .add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
            .add_stage(AddId())
            .add_stage(ExactDedup())
            .add_stage(ParquetWriter(str(corpus / "out"))))


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_a_log_line_gives_parts_done_docs_per_second_and_eta(caplog, fast_lines):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        progress = Progress(10, "p: word_count")
        assert not progress.interactive  # pytest's stderr is not a terminal
        progress.update(4, docs=400)
        # The progress logs on its own clock, also while nothing finishes.
        assert wait_for(lambda: any("ETA" in line for line in progress_lines(caplog)))
        progress.update(6, docs=600)
        progress.close()
    lines = progress_lines(caplog)
    line = next(line for line in lines if "ETA" in line)
    assert re.fullmatch(r"p: word_count: 4/10 parts \(40%\), [\d,]+ docs/s, ETA \d+:\d\d", line)
    assert re.fullmatch(r"p: word_count: 10/10 parts in \d+:\d\d, [\d,]+ docs/s", lines[-1])


def test_work_not_counted_in_parts_still_logs_what_runs(caplog, fast_lines):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        progress = Progress(enabled=True)
        with progress.active(), progress_module.phase("p: fuzzy_dedup"):
            assert wait_for(lambda: any("running for" in line
                                        for line in progress_lines(caplog)))
        progress.close()
    assert "p: fuzzy_dedup: running for 0:00" in progress_lines(caplog)


@pytest.mark.parametrize("make", [LocalExecutor, StreamingExecutor], ids=["local", "streaming"])
def test_each_stage_of_a_run_reports_under_its_own_label(corpus, caplog, fast_lines, make,
                                                         request):
    if make is StreamingExecutor:
        request.getfixturevalue("client")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        result = pipeline(corpus).run(make())
    assert result.rows == 60
    ends = [line for line in progress_lines(caplog) if " in " in line]
    labels = [line.split(": ", 1)[1].rsplit(": ", 1)[0] for line in ends]
    assert labels[0] == "read_jsonl -> add_id -> exact_dedup_input"
    assert "exact_dedup: identify" in labels and "exact_dedup: write" in labels
    assert labels[-1] == "exact_dedup_output -> write_parquet"
    partitions = result.partitions
    assert ends[0].startswith(f"p: read_jsonl -> add_id -> exact_dedup_input: {partitions}/"
                              f"{partitions} parts in ")
    assert re.search(r"identify: (\d+)/\1 tasks in", next(e for e in ends if "identify" in e))


def test_a_terminal_gets_one_bar_for_the_whole_run(corpus, capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "_interactive", lambda: True)
    result = pipeline(corpus).run(LocalExecutor())
    assert result.rows == 60
    err = capsys.readouterr().err
    # tqdm redraws its bar with "\r" and ends it with one newline when the run closes it.
    assert err.count("\n") == 1, err
    shown = [re.sub(r":\s+\d+%.*$", "", part).strip() for part in err.split("\r") if part]
    order = []
    for label in shown:
        if label and (not order or order[-1] != label):
            order.append(label)
    assert order[0] == "p: read_jsonl -> add_id -> exact_dedup_input"
    assert "p: exact_dedup: identify" in order
    assert order[-1] == "p: exact_dedup_output -> write_parquet"


@pytest.mark.parametrize("method", ["exact", "fuzzy"])
def test_dedup_workflows_report_each_phase(corpus, client, tmp_path, caplog, fast_lines, method):
    options = dict(input_path=str(corpus / "in"), output_path=str(tmp_path / "out"),
                   cache_path=str(tmp_path / "cache"), input_blocksize="1KiB")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        if method == "exact":
            # Small enough to run in one graph, then with the input staged in the cache.
            ExactDeduplicationWorkflow(**options).run()
            from curator_dask.dedup import held as held_input

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(held_input, "IN_MEMORY_FRACTION", 0.0)
                ExactDeduplicationWorkflow(**{**options, "output_path": str(tmp_path / "staged"),
                                              "cache_path": str(tmp_path / "cache-staged")}
                                           ).run()
            phases = ["exact dedup: identify, remove and write", "exact dedup: identify",
                      "exact dedup: remove and write"]
        else:
            FuzzyDeduplicationWorkflow(**options, perform_removal=True, char_ngrams=5).run()
            bands = FuzzyDedupConfig().num_bands  # all in one shuffle at this size
            phases = ["fuzzy dedup: minhash", f"fuzzy dedup: lsh: bands 0-{bands - 1} of {bands}",
                      "fuzzy dedup: components", "fuzzy dedup: removal"]
    ends = {}
    for line in progress_lines(caplog):
        found = re.fullmatch(r"(.*): (\d+)/(\d+) tasks in \d+:\d\d", line)
        if found:
            ends[found[1]] = (int(found[2]), int(found[3]))
    for phase in phases:
        done, total = ends[phase]  # the tasks of the phase's whole graph, counted
        assert done == total > 0, phase


@pytest.mark.slow
def test_the_command_logs_progress_when_its_output_is_a_file(corpus, tmp_path):
    (tmp_path / "p.yaml").write_text(textwrap.dedent(f"""
        executor: {{type: local}}
        reader: {{type: jsonl, path: {corpus / "in"}, blocksize: 1KiB}}
        stages: [AddId, ExactDedup]
        writer: {{type: parquet, path: {tmp_path / "cli-out"}}}
    """))
    with open(tmp_path / "log", "w") as log:
        ran = subprocess.run([sys.executable, "-m", "curator_dask.cli.main", "run",
                              str(tmp_path / "p.yaml")], stdout=log, stderr=subprocess.STDOUT,
                             cwd=tmp_path, timeout=240, check=False,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    text = (tmp_path / "log").read_text()
    assert ran.returncode == 0, text
    lines = [line for line in text.splitlines() if f" INFO {LOGGER}: " in line]
    assert any("p: read_jsonl -> add_id -> exact_dedup_input: " in line and " parts in " in line
               for line in lines), text
    assert any("exact_dedup_output -> write_parquet: " in line for line in lines), text
    assert not [line for line in text.splitlines() if " distributed." in line]


def test_fuzzy_dedup_in_a_pipeline_counts_the_tasks_of_finding_groups(corpus, client, caplog,
                                                                      fast_lines):
    from curator_dask.dedup.stages import FuzzyDedup

    p = (Pipeline("p")
         .add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
         .add_stage(AddId())
         .add_stage(FuzzyDedup(char_ngrams=5))
         .add_stage(ParquetWriter(str(corpus / "out"))))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        p.run(StreamingExecutor())
    found = [re.fullmatch(r"p: fuzzy_dedup: find groups: (\d+)/(\d+) tasks in \d+:\d\d", line)
             for line in progress_lines(caplog)]
    counts = [(int(m[1]), int(m[2])) for m in found if m]
    assert counts and all(done == total > 0 for done, total in counts)


def _slow_square(x: int) -> int:
    time.sleep(0.2)  # outlasts a few of the progress's 50 ms polls
    return x * x


def test_a_labelled_compute_lets_go_of_its_results_when_it_returns(client, fast_lines):
    # Nothing of a finished phase may stay on the cluster for the next phase to run
    # beside; with the garbage collector off, a reference cycle would keep it there.
    import gc

    parts = [dask.delayed(_slow_square, pure=False)(i) for i in range(3)]
    keys = {part.key for part in parts}

    def held() -> set:
        return keys & {key for worker in client.has_what().values() for key in worker}

    gc.disable()
    try:
        with progress_module.phase("squares"):
            assert progress_module.compute(*parts) == (0, 1, 4)
        assert wait_for(lambda: not held()), held()
    finally:
        gc.enable()
