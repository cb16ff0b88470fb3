"""Resume checks what it resumes: the output's manifest records a fingerprint of the input
plan and of the pipeline, and a rerun with ``resume=True`` whose fingerprint differs is
refused, naming what changed, before anything is deleted or written.

The kill-free form of an interrupted run: a complete run, then the parts (and completion
markers) of the last partitions deleted, as if the driver had died before writing them.
The same holds for the executors' barrier caches (a barrier output is reused only by the
pipeline that computed it) and the dedup workflows' caches and outputs.

Every test checks that the input files are byte for byte what they were, and, where a run
completes, that every input id is in the output exactly once or in a drop count.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from curator_dask import processing_stage
from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.dedup.stages import ExactDedup
from curator_dask.dropped import record_dropped
from curator_dask.executors import BatchExecutor, LocalExecutor, StreamingExecutor
from curator_dask.executors.layout import Layout
from curator_dask.io import ResumeMismatchError
from curator_dask.pipeline import Pipeline
from curator_dask.resources import Resources
from curator_dask.stages.filters import ScoreFilter, WordCountFilter
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

N_DOCS = 300
EXECUTORS = {"streaming": StreamingExecutor, "batch": BatchExecutor, "local": LocalExecutor}


# -- helpers ---------------------------------------------------------------------------------

def write_corpus(root: Path) -> Path:
    """``N_DOCS`` documents in 3 files; document ``i`` has ``2 + i % 7`` words."""
    raw = root / "raw"
    raw.mkdir(parents=True)
    for f in range(3):
        rows = [{"id": i, "text": f"document {i} " + "word " * (i % 7)}
                for i in range(f * 100, (f + 1) * 100)]
        (raw / f"f{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return raw


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def words(i: int) -> int:
    return 2 + i % 7


def assert_exactly_once(output: Path, dropped: dict, keep, total: int = N_DOCS) -> None:
    """The output holds exactly the ids ``keep`` accepts, once each; the rest are counted."""
    ids = pd.read_parquet(output)["id"].tolist()
    assert sorted(ids) == [i for i in range(total) if keep(i)]
    assert len(ids) + sum(dropped.values()) == total


@pytest.fixture
def corpus(tmp_path):
    raw = write_corpus(tmp_path)
    return raw, snapshot(raw)


def word_count(min_words: int) -> ScoreFilter:
    return ScoreFilter(WordCountFilter(min_words=min_words))


@processing_stage(name="keep")
def keep_even(df):
    keep = df["id"] % 2 == 0
    return record_dropped(df[keep], "odd", int((~keep).sum()))


def _edited_keep():
    """``keep_even`` as it is after someone edits its source file and reruns."""
    namespace = {"processing_stage": processing_stage, "record_dropped": record_dropped}
    exec(compile('@processing_stage(name="keep")\n'
                 'def keep_even(df):\n'
                 '    keep = df["id"] % 3 == 0\n'
                 '    return record_dropped(df[keep], "odd", int((~keep).sum()))\n',
                 __file__, "exec"), namespace)
    return namespace["keep_even"]


@processing_stage(name="shout")
def shout(df):
    return df.assign(text=df["text"].str.upper())


def pipeline(raw: Path, out: Path, *stages, mode: str = "error") -> Pipeline:
    p = Pipeline("resume").add_stage(JsonlReader(str(raw), blocksize="2KiB"))
    for stage in stages:
        p.add_stage(stage)
    return p.add_stage(ParquetWriter(str(out), mode=mode))


def interrupt(out: Path, keep_parts: int) -> dict[str, int]:
    """Delete every part after the first ``keep_parts`` (as if the run had died); the
    kept parts' modification times."""
    parts = sorted(p.name for p in out.iterdir() if p.name.startswith("part-"))
    assert len(parts) > keep_parts
    for name in parts[keep_parts:]:
        (out / name).unlink()
        (out / f".{name.split('.')[0]}.done").unlink()
    return {n: os.stat(out / n).st_mtime_ns for n in parts[:keep_parts]}


# -- a changed pipeline is refused, naming what changed -----------------------------------------

CHANGES = {
    "filter_removed": ((word_count(5),), (), "stage 'word_count' was removed", lambda i: True),
    "parameter_changed": ((word_count(5),), (word_count(3),),
                          "stage 'word_count': filter_obj.min_words 5 -> 3",
                          lambda i: words(i) >= 3),
    "function_edited": ((keep_even,), (_edited_keep(),), "stage 'keep': function code changed",
                        lambda i: i % 3 == 0),
    "stage_added": ((word_count(5),), (word_count(5), shout), "stage 'shout' was added",
                    lambda i: words(i) >= 5),
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("executor", ["streaming", "batch"])
def test_resume_refuses_a_changed_pipeline_and_names_the_change(tmp_path, corpus, client,
                                                                 change, executor):
    raw, before = corpus
    first, second, named, keep = CHANGES[change]
    make = EXECUTORS[executor]
    out = tmp_path / "out"
    pipeline(raw, out, *first).run(make(progress=False))
    interrupt(out, keep_parts=4)
    written = snapshot(out)
    with pytest.raises(ResumeMismatchError) as err:
        pipeline(raw, out, *second).run(make(resume=True, progress=False))
    assert named in str(err.value)
    assert "resume=False and mode='overwrite'" in str(err.value)
    assert snapshot(out) == written  # nothing deleted, nothing mixed in
    # The way out the message offers: start over.
    result = pipeline(raw, out, *second, mode="overwrite").run(make(progress=False))
    assert_exactly_once(out, result.dropped, keep)
    assert snapshot(raw) == before


def test_resume_refuses_other_input(tmp_path, corpus):
    raw, before = corpus
    out = tmp_path / "out"
    pipeline(raw, out, word_count(5)).run(LocalExecutor(progress=False))
    interrupt(out, keep_parts=2)
    (raw / "f0.jsonl").write_text((raw / "f0.jsonl").read_text() + '{"id": 999, "text": "x"}\n')
    with pytest.raises(ResumeMismatchError, match="different input"):
        pipeline(raw, out, word_count(5)).run(LocalExecutor(resume=True, progress=False))
    assert snapshot(raw) != before  # (changed by the test itself, not by the run)


# -- the same pipeline resumes, whatever executor wrote it ------------------------------------

@pytest.mark.parametrize("first, then", [("streaming", "batch"), ("batch", "local"),
                                         ("local", "streaming")])
def test_the_fingerprint_is_the_same_under_every_executor(tmp_path, corpus, client, first, then):
    raw, before = corpus
    out = tmp_path / "out"
    pipeline(raw, out, word_count(5), keep_even).run(EXECUTORS[first](progress=False))
    kept = interrupt(out, keep_parts=3)
    # New stage objects, renamed, on other resources, in batches: the same computation.
    again = (word_count(5).with_(name="words", resources=Resources(cpus=1), batch_size=2),
             keep_even.with_(resources=Resources(cpus=0.5)))
    result = pipeline(raw, out, *again).run(EXECUTORS[then](resume=True, progress=False))
    assert result.partitions_skipped == 3
    assert {n: os.stat(out / n).st_mtime_ns for n in kept} == kept  # not rewritten
    assert_exactly_once(out, {**result.dropped}, lambda i: words(i) >= 5 and i % 2 == 0)
    assert snapshot(raw) == before


def test_a_pipeline_fingerprint_leaves_out_names_resources_and_batch_sizes(tmp_path, corpus):
    raw, _ = corpus
    plain = Layout.of("a", pipeline(raw, tmp_path / "o", word_count(5), keep_even).stages)
    moved = Layout.of("b", pipeline(raw, tmp_path / "p", word_count(5).with_(
        name="w", resources=Resources(gpus=1), batch_size=8), keep_even).stages)
    strip = [{k: v for k, v in e.items() if k != "name"} for e in plain.fingerprint()]
    assert strip == [{k: v for k, v in e.items() if k != "name"} for e in moved.fingerprint()]
    changed = Layout.of("c", pipeline(raw, tmp_path / "o", word_count(6), keep_even).stages)
    assert plain.fingerprint() != changed.fingerprint()


# -- barrier caches are tied to the pipeline before them -------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("executor", ["streaming", "local"])
def test_a_barrier_output_is_never_reused_by_another_pipeline(tmp_path, corpus, client,
                                                             executor):
    raw, before = corpus
    make, cache = EXECUTORS[executor], tmp_path / "cache"
    first = pipeline(raw, tmp_path / "out1", word_count(5), ExactDedup())
    first.run(make(cache_path=str(cache), progress=False))
    # Another filter before the barrier, the same cache, resume=True: the barrier's
    # output must be computed again from what the new filter keeps.
    second = pipeline(raw, tmp_path / "out2", word_count(3), ExactDedup())
    result = second.run(make(cache_path=str(cache), resume=True, progress=False))
    assert_exactly_once(tmp_path / "out2", result.dropped, lambda i: words(i) >= 3)
    assert snapshot(raw) == before


@pytest.mark.slow
def test_a_barrier_output_is_reused_by_the_same_pipeline(tmp_path, corpus, client):
    raw, before = corpus
    cache = tmp_path / "cache"
    pipeline(raw, tmp_path / "out1", word_count(5), ExactDedup()).run(
        StreamingExecutor(cache_path=str(cache), progress=False))
    marker = next(cache.glob("*/output/_COMPLETE.json"))
    stamp = os.stat(marker).st_mtime_ns
    result = pipeline(raw, tmp_path / "out2", word_count(5), ExactDedup()).run(
        StreamingExecutor(cache_path=str(cache), resume=True, progress=False))
    assert os.stat(marker).st_mtime_ns == stamp  # reused, not computed again
    assert_exactly_once(tmp_path / "out2", result.dropped, lambda i: words(i) >= 5)
    assert snapshot(raw) == before


# -- dedup workflows -----------------------------------------------------------------------------

def test_exact_dedup_refuses_to_replace_output_of_other_input(tmp_path, corpus, client):
    raw, _ = corpus
    out, cache = tmp_path / "out", tmp_path / "cache"
    ExactDeduplicationWorkflow(str(raw), str(out), str(cache)).run()
    # New input: a copy of document 0's text under a new id.
    (raw / "f3.jsonl").write_text(json.dumps({"id": 1000, "text": "document 0 "}) + "\n")
    before, written = snapshot(raw), snapshot(out)
    with pytest.raises(ResumeMismatchError) as err:
        ExactDeduplicationWorkflow(str(raw), str(out), str(cache)).run()
    assert "the input files changed (3 -> 4 files" in str(err.value)
    assert "output_mode='overwrite'" in str(err.value)
    assert snapshot(out) == written
    result = ExactDeduplicationWorkflow(str(raw), str(out), str(cache),
                                        output_mode="overwrite").run()
    ids = pd.read_parquet(out)["id"].tolist()
    assert sorted(ids) == list(range(N_DOCS))  # 1000 is a copy of 0, which is kept
    assert result.output.dropped == {"exact_duplicate": 1}
    assert len(ids) + result.duplicate_documents == N_DOCS + 1
    assert snapshot(raw) == before


def test_a_recomputed_cache_directory_never_mixes_two_fingerprints(tmp_path, corpus, client):
    raw, before = corpus
    out, cache = tmp_path / "out", tmp_path / "cache"
    # The list has one part per hash partition: 4, then 1 from other input partitions.
    ExactDeduplicationWorkflow(str(raw), str(out), str(cache), input_blocksize="2KiB",
                               hash_partitions=4).run()
    phase = cache / "exact_duplicates"
    many = sorted(p.name for p in phase.glob("part-*"))
    result = ExactDeduplicationWorkflow(str(raw), str(out), str(cache), input_blocksize="8KiB",
                                        hash_partitions=1, output_mode="overwrite").run()
    assert not result.identify_from_cache
    marker = json.loads((phase / "_COMPLETE.json").read_text())
    manifest = json.loads((phase / ".curator-output.json").read_text())
    parts = sorted(p.name for p in phase.glob("part-*"))
    assert len(parts) == marker["files"] < len(many)  # the old parts are gone, not mixed
    assert marker["fingerprint"] == manifest["fingerprint"]
    assert marker["fingerprint"]["input_blocksize"] == 8 * 1024
    assert sorted(pd.read_parquet(out)["id"]) == list(range(N_DOCS))
    assert snapshot(raw) == before


def test_fuzzy_dedup_refuses_to_replace_output_of_other_parameters(tmp_path, corpus, client):
    raw, before = corpus
    out, cache = tmp_path / "out", tmp_path / "cache"

    def run(**options):
        return FuzzyDeduplicationWorkflow(str(raw), str(cache), str(out), perform_removal=True,
                                          num_bands=4, minhashes_per_band=3, **options).run()

    run(char_ngrams=5)
    written = snapshot(out)
    with pytest.raises(ResumeMismatchError, match=r"minhash\.char_ngrams 5 -> 6"):
        run(char_ngrams=6)
    assert snapshot(out) == written
    result = run(char_ngrams=6, output_mode="overwrite")
    kept = pd.read_parquet(out)["id"].tolist()
    assert len(kept) == len(set(kept))
    assert len(kept) + result.output.dropped.get("fuzzy_duplicate", 0) == N_DOCS
    assert snapshot(raw) == before
