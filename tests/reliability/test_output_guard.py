"""One guard for every path a run writes: never on, in or around an input, never on, in or
around another output of the same run, refused before anything is written, naming both.

The writers and side outputs tried: ``to_parquet``/``to_jsonl``, the pipeline writers, the
executors' barrier cache, the curation report (``write_report``, ``report:`` and
``--report``), distributed's performance report (``performance_report:``), and the dedup
workflows' output and cache. Each test checks that the input is byte for byte what it
was, and where a run completes, that every input id is in the output once or in a drop
count.
"""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.cli.main import main
from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.dedup.stages import ExactDedup
from curator_dask.executors import LocalExecutor
from curator_dask.io import OutputOverlapsInputError
from curator_dask.io.guard import OutputCollisionError, OutputGuard
from curator_dask.io.overlap import input_paths
from curator_dask.observe.report import write_report
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, JsonlWriter, ParquetWriter
from reliability.conftest import assert_exactly_once, output_ids, snapshot_bytes

# -- the guard itself, over generated paths ------------------------------------------------------

_ROOT = Path(tempfile.mkdtemp(prefix="guard-paths-"))
segments = st.lists(st.sampled_from(["a", "b", "ab", "a.b"]), min_size=1, max_size=3)


def _overlap(one: tuple[str, ...], other: tuple[str, ...]) -> bool:
    a, b = PurePosixPath(*one), PurePosixPath(*other)
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


@settings(max_examples=200, deadline=None)
@given(read=segments, written=segments, report=segments)
def test_the_guard_refuses_exactly_the_paths_that_overlap(read, written, report):
    # Compared by path components, independently of the guard: "a" and "ab" are apart,
    # "a" and "a/b" overlap.
    guard = OutputGuard([input_paths(str(_ROOT.joinpath(*read)))])
    output = str(_ROOT.joinpath(*written))
    if _overlap(written, read):
        with pytest.raises(OutputOverlapsInputError) as err:
            guard.register(output, "output directory")
        assert output in str(err.value) and str(_ROOT.joinpath(*read)) in str(err.value)
        return
    guard.register(output, "output directory")
    target = str(_ROOT.joinpath(*report))
    if _overlap(report, read) or _overlap(report, written):
        with pytest.raises(OutputOverlapsInputError) as err:
            guard.register(target, "report", kind="file")
        assert target in str(err.value)
    else:
        guard.register(target, "report", kind="file")
    assert not any(_ROOT.iterdir())  # registering writes nothing


# -- every writer against the input ------------------------------------------------------------

def _pipeline(source: Path, out: Path, writer=ParquetWriter, barrier: bool = False) -> Pipeline:
    p = Pipeline("guarded").add_stage(JsonlReader(str(source), blocksize="4KiB"))
    if barrier:
        p.add_stage(ExactDedup())
    return p.add_stage(writer(str(out), mode="overwrite"))


#: Each way of writing, given the input directory and the path to write.
WRITERS = {
    "to_parquet": lambda raw, path: DocumentDataset.read_jsonl(str(raw)).to_parquet(
        str(path), mode="overwrite"),
    "to_jsonl": lambda raw, path: DocumentDataset.read_jsonl(str(raw)).to_jsonl(
        str(path), mode="overwrite_all"),
    "parquet_writer": lambda raw, path: _pipeline(raw, path).run(LocalExecutor(progress=False)),
    "jsonl_writer": lambda raw, path: _pipeline(raw, path, JsonlWriter).run(
        LocalExecutor(progress=False)),
    "barrier_cache": lambda raw, path: _pipeline(raw, raw.parent / "out", barrier=True).run(
        LocalExecutor(cache_path=str(path), progress=False)),
    "exact_output": lambda raw, path: ExactDeduplicationWorkflow(
        str(raw), str(path), str(raw.parent / "cache"), output_mode="overwrite").run(),
    "exact_cache": lambda raw, path: ExactDeduplicationWorkflow(
        str(raw), str(raw.parent / "out"), str(path)).run(),
    "fuzzy_cache": lambda raw, path: FuzzyDeduplicationWorkflow(str(raw), str(path)).run(),
}
#: Where each writer is pointed: the input directory, inside it, onto an input file, around.
TARGETS = {
    "the input": lambda raw: raw,
    "inside the input": lambda raw: raw / "sub",
    "an input file": lambda raw: raw / "f01.jsonl",
    "around the input": lambda raw: raw.parent,
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_refuses_a_path_on_in_or_around_its_input(corpus, writer, target):
    path = TARGETS[target](corpus.path)
    everything = snapshot_bytes(corpus.path.parent)
    with pytest.raises(OutputOverlapsInputError) as err:
        WRITERS[writer](corpus.path, path)
    assert str(path) in str(err.value) and str(corpus.path) in str(err.value)
    corpus.assert_unchanged()
    assert snapshot_bytes(corpus.path.parent) == everything  # nothing written anywhere


# -- side outputs against the input and against each other ---------------------------------------

def _pipeline_file(directory: Path, raw: Path, out: Path, **extra: str) -> Path:
    lines = "".join(f"{key}: {value}\n" for key, value in extra.items())
    path = directory / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        executor: {{type: local, progress: false}}
        reader: {{type: jsonl, path: {raw}, blocksize: 4KiB}}
        stages: [WhitespaceNormalizer]
        writer: {{type: parquet, path: {out}, mode: overwrite}}
        """) + lines)
    return path


#: Side outputs of a pipeline file that collide: the key, where it points (given the input
#: and output directories), and the other path the refusal names.
COLLISIONS = {
    "report on an input file": ("report", lambda raw, out: raw / "f00.jsonl", "input"),
    "report inside the output": ("report", lambda raw, out: out / "report.html", "output"),
    "report around the output": ("report", lambda raw, out: out.parent, "output"),
    "performance report on an input file": (
        "performance_report", lambda raw, out: raw / "f02.jsonl", "input"),
    "performance report inside the output": (
        "performance_report", lambda raw, out: out / "dask.html", "output"),
}


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize("case", list(COLLISIONS))
def test_a_pipeline_file_whose_side_output_collides_is_a_usage_error(tmp_path, corpus, capsys,
                                                                     case, dry_run):
    key, where, other = COLLISIONS[case]
    out = tmp_path / "run" / "out"
    path = where(corpus.path, out)
    pipeline = _pipeline_file(tmp_path, corpus.path, out, **{key: path})
    everything = snapshot_bytes(tmp_path)
    assert main(["run", str(pipeline), *(["--dry-run"] if dry_run else [])]) == 2
    err = capsys.readouterr().err
    named = corpus.path if other == "input" else out
    assert f"{str(path)!r}" in err and f"{str(named)!r}" in err
    corpus.assert_unchanged()
    assert snapshot_bytes(tmp_path) == everything and not out.exists()


def test_a_report_on_a_finished_part_is_refused_and_the_part_kept(tmp_path, corpus, capsys):
    # The example: `report: out/part-00000.parquet` replaced a finished part while
    # its marker stayed.
    out = tmp_path / "out"
    assert main(["run", str(_pipeline_file(tmp_path, corpus.path, out))]) == 0
    capsys.readouterr()
    written = snapshot_bytes(out)
    part = out / "part-00000.parquet"
    assert main(["run", str(_pipeline_file(tmp_path, corpus.path, out, report=part))]) == 2
    err = capsys.readouterr().err
    assert f"output directory {str(out)!r} contains the report {str(part)!r}" in err
    assert snapshot_bytes(out) == written  # the part, its marker and the manifest as they were
    assert_exactly_once(corpus.ids, output_ids(out))
    corpus.assert_unchanged()


def test_the_performance_report_and_the_curation_report_may_not_be_one_file(tmp_path, corpus,
                                                                          capsys):
    out, report = tmp_path / "out", tmp_path / "report.html"
    pipeline = _pipeline_file(tmp_path, corpus.path, out, report=report,
                              performance_report=report)
    assert main(["run", str(pipeline), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"performance report {str(report)!r} is the report {str(report)!r}" in err


@pytest.mark.slow
def test_a_report_beside_the_output_is_written_and_every_document_kept(tmp_path, corpus, capsys):
    out, report = tmp_path / "out", tmp_path / "reports" / "run.html"
    assert main(["run", str(_pipeline_file(tmp_path, corpus.path, out)),
                 "--report", str(report)]) == 0
    assert report.read_text().startswith("<!DOCTYPE html>")
    assert_exactly_once(corpus.ids, output_ids(out))
    corpus.assert_unchanged()


@pytest.mark.slow
def test_write_report_refuses_the_runs_input_and_output(tmp_path, corpus):
    out = tmp_path / "out"
    result = _pipeline(corpus.path, out).run(LocalExecutor(progress=False))
    written = snapshot_bytes(out)
    with pytest.raises(OutputOverlapsInputError, match="the input path"):
        write_report(result, corpus.path / "f00.jsonl")
    with pytest.raises(OutputCollisionError, match="contains the report"):
        write_report(result, out / "part-00000.parquet")
    corpus.assert_unchanged()
    assert snapshot_bytes(out) == written
    assert Path(write_report(result, tmp_path / "report.html")).exists()
    assert_exactly_once(corpus.ids, output_ids(out), result.dropped)


@pytest.mark.parametrize("cache, output", [("out/cache", "out"), ("c", "c/out")])
def test_a_cache_and_an_output_of_one_run_may_not_nest(tmp_path, corpus, cache, output):
    with pytest.raises(OutputCollisionError) as err:
        _pipeline(corpus.path, tmp_path / output, barrier=True).run(
            LocalExecutor(cache_path=str(tmp_path / cache), progress=False))
    assert str(tmp_path / cache) in str(err.value) and str(tmp_path / output) in str(err.value)
    assert not (tmp_path / output).exists() and not (tmp_path / cache).exists()
    corpus.assert_unchanged()
