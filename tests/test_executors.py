"""The executor skeleton: the three executors run the same chain, barriers and resume.

Each executor runs a pipeline with a batched stage and a whole-dataset stage between two
segments; every document ends in the output exactly once or in a drop count, under the
same part names. A resumed run reuses a finished barrier's output, whichever executor
wrote it.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
from conftest import docs, write_jsonl

from curator_dask import DocumentDataset, ProcessingStage, processing_stage
from curator_dask.dropped import record_dropped
from curator_dask.executors import BatchExecutor, LocalExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.base import WholeDatasetStage
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

EXECUTORS = {"local": LocalExecutor, "streaming": StreamingExecutor, "batch": BatchExecutor}
N_DOCS = 200


@processing_stage(name="drop_odd")
def drop_odd(df):
    keep = df["n"] % 2 == 0
    return record_dropped(df[keep], "odd", int((~keep).sum()))


class Batched(ProcessingStage):
    """Adds the rows of the process() call (3 partitions a call)."""

    name = "batched"
    batch_size = 3
    output_columns = {"call_rows": "int64"}

    def process(self, df):
        return df.assign(call_rows=len(df))


class KeepOnePerLength(WholeDatasetStage):
    """Keeps the first document of each text length; counts its runs in ``calls``."""

    name = "one_per_length"

    def __init__(self, calls: list):
        self.calls = calls

    def fingerprint(self) -> dict:
        return {"stage": "KeepOnePerLength", "params": {}}

    def run(self, ds, cache_path):
        self.calls.append(cache_path)
        df = ds.df.compute()
        length = df["text"].str.len()
        keep = ~length.duplicated()
        kept = record_dropped(df[keep.to_numpy()], "same_length", int((~keep).sum()))
        return DocumentDataset.from_pandas(kept, npartitions=1)


@pytest.fixture
def corpus(tmp_path):
    for i in range(4):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(N_DOCS // 4, start=i * N_DOCS // 4))
    return tmp_path


def pipeline(corpus, out, *stages) -> Pipeline:
    p = Pipeline("skeleton").add_stage(JsonlReader(str(corpus / "in"), blocksize="1KiB"))
    for stage in stages:
        p.add_stage(stage)
    return p.add_stage(ParquetWriter(str(corpus / out)))


def expected_after_barrier() -> list[int]:
    kept = pd.DataFrame(docs(N_DOCS))
    kept = kept[kept["n"] % 2 == 0]
    return sorted(kept[~kept["text"].str.len().duplicated()]["n"])


@pytest.mark.parametrize("executor", list(EXECUTORS))
def test_every_document_is_written_once_or_counted_whatever_the_executor(
        corpus, executor, request):
    if executor != "local":
        request.getfixturevalue("client")
    calls = []
    result = pipeline(corpus, "out", drop_odd, KeepOnePerLength(calls), Batched()).run(
        EXECUTORS[executor](cache_path=str(corpus / "cache"), progress=False))
    out = pd.read_parquet(str(corpus / "out"))
    kept = expected_after_barrier()
    assert sorted(out["n"]) == kept  # each kept document once
    assert len(out) + sum(result.dropped.values()) == N_DOCS
    assert result.dropped == {"odd": N_DOCS // 2, "same_length": N_DOCS // 2 - len(kept)}
    # The stream goes on from the barrier's one output partition: one part, one call.
    assert sorted(n for n in os.listdir(corpus / "out") if n.startswith("part-")) == [
        "part-00000.parquet"]
    assert out["call_rows"].tolist() == [len(kept)] * len(kept)
    assert len(calls) == 1 and sorted(os.listdir(corpus / "cache")) == ["0-one_per_length"]
    barrier = result.stage("one_per_length")
    assert (barrier.kind, barrier.rows_in, barrier.rows_out) == ("barrier", 100, len(kept))
    assert [(s.name, s.rows_in, s.rows_out) for s in result.stages if s.kind != "barrier"] == [
        ("read_jsonl", N_DOCS, N_DOCS), ("drop_odd", N_DOCS, N_DOCS // 2),
        ("batched", len(kept), len(kept)), ("write_parquet", len(kept), len(kept))]


@pytest.mark.parametrize("executor", list(EXECUTORS))
def test_a_resumed_run_reuses_the_finished_barrier_output_of_any_executor(
        corpus, executor, request):
    if executor != "local":
        request.getfixturevalue("client")
    make, cache, calls = EXECUTORS[executor], str(corpus / "cache"), []
    first = pipeline(corpus, "out1", drop_odd, KeepOnePerLength(calls), Batched()).run(
        make(cache_path=cache, progress=False))
    marker = next((corpus / "cache").glob("*/output/_COMPLETE.json"))
    stamp = os.stat(marker).st_mtime_ns
    # The same pipeline, resumed into a new output: the barrier's input parts and its
    # output are complete, so neither is computed again.
    second = pipeline(corpus, "out2", drop_odd, KeepOnePerLength(calls), Batched()).run(
        make(cache_path=cache, resume=True, progress=False))
    assert len(calls) == 1 and os.stat(marker).st_mtime_ns == stamp
    assert second.partitions_skipped == second.partitions == first.partitions
    assert second.stage("drop_odd").partitions == 0  # nothing before the barrier ran
    assert sorted(pd.read_parquet(str(corpus / "out2"))["n"]) == expected_after_barrier()
    assert second.dropped == first.dropped  # drops before and at the barrier, from the cache
