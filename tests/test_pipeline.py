"""Pipeline: building, describing, and running with the local, streaming and batch executors."""

from __future__ import annotations

import json
import os
import time

import pandas as pd
import pytest
from conftest import docs, write_jsonl

from curator_dask import DocumentDataset, ProcessingStage, Sequential, processing_stage
from curator_dask.dropped import record_dropped
from curator_dask.executors import BatchExecutor, LocalExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline, RunResult
from curator_dask.stages.base import WholeDatasetStage
from curator_dask.stages.io_stages import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter


@processing_stage(name="upper")
def upper(df):
    return df.assign(text=df["text"].str.upper())


@processing_stage(name="drop_odd")
def drop_odd(df):
    keep = df["n"] % 2 == 0
    return record_dropped(df[keep], "odd", int((~keep).sum()))


@pytest.fixture
def corpus(tmp_path):
    """200 documents in 4 files; blocksize 1KiB makes 12 partitions."""
    for i in range(4):
        write_jsonl(tmp_path / "in" / f"f{i}.jsonl", docs(50, start=50 * i))
    return tmp_path


def pipeline(corpus, *stages, out="out", writer=ParquetWriter, **writer_options) -> Pipeline:
    p = Pipeline("test", description="test pipeline").add_stage(
        JsonlReader(str(corpus / "in"), blocksize="1KiB"))
    for stage in stages:
        p.add_stage(stage)
    if writer is not None:
        p.add_stage(writer(str(corpus / out), **writer_options))
    return p


def read_output(path) -> pd.DataFrame:
    return pd.read_parquet(str(path)).sort_values("n").reset_index(drop=True)


# -- building ---------------------------------------------------------------------------

def test_describe_lists_every_stage_with_its_resources(corpus):
    from curator_dask import Resources

    gpu_upper = upper.with_(name="upper_gpu", resources=Resources(gpus=0.5), batch_size=4)
    p = pipeline(corpus, Sequential([upper, drop_odd]), gpu_upper)
    assert [getattr(s, "name", None) for s in p.stages] == [
        "read_jsonl", "upper", "drop_odd", "upper_gpu", "write_parquet"]
    text = p.describe()
    assert text.splitlines()[0] == "Pipeline 'test': test pipeline"
    assert "upper_gpu      GPU=0.5  partition stage, batch_size=4" in text
    assert "1. read_jsonl" in text and "5. write_parquet  CPU=1" in text


def test_stages_must_be_in_reader_stages_writer_order(corpus):
    with pytest.raises(ValueError, match="add a reader"):
        Pipeline("p").add_stage(upper)
    p = pipeline(corpus)
    with pytest.raises(ValueError, match="nothing can follow the writer"):
        p.add_stage(upper)
    with pytest.raises(TypeError, match="@processing_stage"):
        Pipeline("p").add_stage(lambda df: df)


# -- the local executor -------------------------------------------------------------------

def test_local_executor_writes_one_part_per_input_partition_and_reports_stages(corpus):
    result = pipeline(corpus, upper, drop_odd).run(LocalExecutor(progress=False))
    assert isinstance(result, RunResult)
    out = read_output(corpus / "out")
    assert out["n"].tolist() == list(range(0, 200, 2))
    assert out["text"].str.startswith("DOC").all()
    names = sorted(os.listdir(corpus / "out"))
    parts = [n for n in names if n.startswith("part-")]
    assert parts == [f"part-{i:05d}.parquet" for i in range(12)]
    assert result.partitions == 12 and result.rows == 100 and result.dropped == {"odd": 100}
    by_name = {s.name: s for s in result.stages}
    assert list(by_name) == ["read_jsonl", "upper", "drop_odd", "write_parquet"]
    assert (by_name["drop_odd"].rows_in, by_name["drop_odd"].rows_out) == (200, 100)
    assert by_name["upper"].partitions == 12 and by_name["upper"].busy_seconds > 0
    assert by_name["write_parquet"].bytes == result.bytes > 0
    assert result.time_to_first_output <= result.wall_seconds


def test_without_a_writer_run_returns_a_dataset(corpus):
    p = pipeline(corpus, drop_odd, writer=None)
    result = p.run(LocalExecutor(progress=False))
    ds = result.dataset
    assert isinstance(ds, DocumentDataset) and ds.npartitions == 12
    assert sorted(ds.df.compute()["n"]) == list(range(0, 200, 2))
    assert p.last_result.stage("drop_odd").rows_out == 100


class BatchSizes(ProcessingStage):
    """Records how many rows and partitions each process() call got."""

    name = "batched"
    batch_size = 4
    output_columns = {"call_rows": "int64"}

    def process(self, df):
        return df.assign(call_rows=len(df))


def test_batch_size_hands_that_many_partitions_to_one_call(corpus):
    result = pipeline(corpus, BatchSizes()).run(LocalExecutor(progress=False))
    out = read_output(corpus / "out")
    assert len(out) == 200
    # 12 partitions in batches of 4: three calls, three parts named after each batch's first.
    assert out["call_rows"].nunique() <= 3 and out.groupby("call_rows").size().sum() == 200
    parts = sorted(n for n in os.listdir(corpus / "out") if n.startswith("part-"))
    assert parts == ["part-00000.parquet", "part-00004.parquet", "part-00008.parquet"]
    assert result.stage("batched").partitions == 12


def test_a_failing_stage_names_itself_and_the_partition(corpus):
    @processing_stage(name="explode")
    def explode(df):
        if (df["n"] == 123).any():
            raise ValueError("bad document")
        return df

    with pytest.raises(ValueError, match="bad document") as info:
        pipeline(corpus, explode).run(LocalExecutor(progress=False))
    assert any("stage 'explode' failed on input partition(s)" in n
               for n in getattr(info.value, "__notes__", []))


# -- on a cluster ---------------------------------------------------------------------------

def test_streaming_and_batch_write_the_same_rows_as_local(corpus, client):
    local = pipeline(corpus, upper, drop_odd, out="local").run(LocalExecutor(progress=False))
    streaming = pipeline(corpus, upper, drop_odd, out="streaming").run(
        StreamingExecutor(max_in_flight=3, progress=False))
    batch = pipeline(corpus, upper, drop_odd, out="batch").run(BatchExecutor(progress=False))
    expected = read_output(corpus / "local")
    for name in ("streaming", "batch"):
        pd.testing.assert_frame_equal(read_output(corpus / name), expected)
    for result in (local, streaming, batch):
        assert result.rows == 100 and result.dropped == {"odd": 100}
        assert [(s.name, s.partitions, s.rows_in, s.rows_out) for s in result.stages] == [
            ("read_jsonl", 12, 200, 200), ("upper", 12, 200, 200), ("drop_odd", 12, 200, 100),
            ("write_parquet", 12, 100, 100)]
    workers = set(client.scheduler_info(n_workers=-1)["workers"])
    assert set(streaming.stage("upper").workers) <= workers


def test_streaming_keeps_at_most_max_in_flight_partitions_between_reader_and_writer(
        corpus, client):
    # Each partition, as it enters the stage, counts the partitions that have entered it
    # and the parts already written: the difference is a lower bound of what is between
    # the reader and the writer at that moment. The first partition waits (polling, with
    # a deadline) until a second one enters (on the other worker: each offers one CPU), so
    # the bound is reached, not just respected.
    entered, out = corpus / "entered", corpus / "out"
    entered.mkdir()

    @processing_stage(name="gate", output_columns={"in_flight": "int64"})
    def gate(df):
        (entered / str(df["n"].iloc[0])).touch()
        deadline = time.monotonic() + 30
        while len(os.listdir(entered)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        written = sum(n.startswith("part-") for n in os.listdir(out)) if out.exists() else 0
        return df.assign(in_flight=len(os.listdir(entered)) - written)

    result = pipeline(corpus, gate).run(StreamingExecutor(max_in_flight=2, progress=False))
    assert result.rows == 200
    seen = read_output(out).groupby("in_flight").size()
    assert seen.index.max() == 2, seen  # two at once, and never more


def test_streaming_without_a_writer_returns_a_dataset_in_cluster_memory(corpus, client):
    p = pipeline(corpus, drop_odd, writer=None)
    ds = p.run(StreamingExecutor(progress=False)).dataset
    assert ds.npartitions == 12
    assert sorted(ds.df.compute()["n"]) == list(range(0, 200, 2))


def test_streaming_groups_each_stage_in_its_own_span_with_its_own_key_prefix(corpus, client):
    pipeline(corpus, upper, drop_odd).run(StreamingExecutor(progress=False))

    def span_names(dask_scheduler):
        spans = dask_scheduler.extensions["spans"].spans.values()
        return [(s.name, sorted({g.name for g in s.groups})) for s in spans]

    found = dict((tuple(name), groups) for name, groups in client.run_on_scheduler(span_names)
                 if name[:1] == ("test",))
    assert found[("test", "upper")] == ["upper/process"]
    assert found[("test", "drop_odd")] == ["drop_odd/process"]
    assert found[("test", "read_jsonl")] == ["read_jsonl/read"]
    assert found[("test", "write_parquet")] == ["write_parquet/write"]


def test_batch_size_in_streaming(corpus, client):
    pipeline(corpus, BatchSizes()).run(StreamingExecutor(progress=False))
    parts = sorted(n for n in os.listdir(corpus / "out") if n.startswith("part-"))
    assert parts == ["part-00000.parquet", "part-00004.parquet", "part-00008.parquet"]
    assert len(read_output(corpus / "out")) == 200


def test_a_failing_stage_fails_the_streaming_run_with_its_error(corpus, client):
    @processing_stage(name="explode")
    def explode(df):
        raise RuntimeError("model exploded")

    with pytest.raises(RuntimeError, match="model exploded") as info:
        pipeline(corpus, explode).run(StreamingExecutor(progress=False))
    assert any("stage 'explode'" in n for n in getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("make", [StreamingExecutor, BatchExecutor])
def test_performance_report_is_saved(corpus, client, make):
    report = corpus / "report.html"
    result = pipeline(corpus, upper).run(make(progress=False), report=str(report))
    assert result.report == str(report)
    assert report.exists() and "Dask Performance Report" in report.read_text()


# -- resume --------------------------------------------------------------------------------

def _markers(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".done"))


@pytest.mark.parametrize("executor", ["local", "streaming", "batch"])
def test_resume_skips_finished_parts_and_redoes_the_rest(corpus, executor, request):
    if executor != "local":
        request.getfixturevalue("client")
    make = {"local": LocalExecutor, "streaming": StreamingExecutor, "batch": BatchExecutor}[
        executor
    ]
    pipeline(corpus, drop_odd).run(make(progress=False))
    out = corpus / "out"
    assert len(_markers(out)) == 12
    # Lose parts 3 and 7 (as if the run had died before writing them).
    for i in (3, 7):
        os.remove(out / f"part-{i:05d}.parquet")
        os.remove(out / f".part-{i:05d}.done")
    before = {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out) if n.startswith("part-")}
    result = pipeline(corpus, drop_odd).run(make(resume=True, progress=False))
    after = {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out) if n.startswith("part-")}
    assert {n: after[n] for n in before} == before  # finished parts untouched
    assert sorted(set(after) - set(before)) == ["part-00003.parquet", "part-00007.parquet"]
    assert (result.partitions, result.partitions_skipped) == (12, 10)
    assert result.stage("drop_odd").partitions == 2
    assert result.rows == 100 and result.dropped == {"odd": 100}
    assert read_output(out)["n"].tolist() == list(range(0, 200, 2))


def test_without_resume_an_existing_output_is_refused_unless_overwritten(corpus):
    pipeline(corpus).run(LocalExecutor(progress=False))
    with pytest.raises(FileExistsError, match="mode='overwrite'"):
        pipeline(corpus).run(LocalExecutor(progress=False))
    result = pipeline(corpus, mode="overwrite").run(LocalExecutor(progress=False))
    assert result.rows == 200


def test_resume_against_other_input_is_refused(corpus):
    pipeline(corpus).run(LocalExecutor(progress=False))
    write_jsonl(corpus / "in" / "f9.jsonl", docs(5, start=900))
    with pytest.raises(ValueError, match="different input"):
        pipeline(corpus).run(LocalExecutor(resume=True, progress=False))


# -- barriers ------------------------------------------------------------------------------

class KeepFirstOfEachLength(WholeDatasetStage):
    """A toy whole-dataset stage: keeps one document per text length (like a dedup)."""

    name = "dedup_length"

    def run(self, ds, cache_path):
        os.makedirs(cache_path, exist_ok=True)
        df = ds.df.compute()
        keep = df.assign(length=df["text"].str.len()).drop_duplicates("length")
        with open(os.path.join(cache_path, "kept.json"), "w") as f:
            json.dump(sorted(keep["n"].tolist()), f)
        return DocumentDataset.from_pandas(keep.drop(columns=["length"]), npartitions=3)


@pytest.mark.parametrize("executor", ["local", "streaming", "batch"])
def test_whole_dataset_stage_is_a_barrier_between_streaming_segments(corpus, executor, request):
    if executor != "local":
        request.getfixturevalue("client")
    make = {"local": LocalExecutor, "streaming": StreamingExecutor, "batch": BatchExecutor}[
        executor
    ]
    cache = corpus / "cache"
    result = pipeline(corpus, drop_odd, KeepFirstOfEachLength(), upper).run(
        make(cache_path=str(cache), progress=False))
    out = read_output(corpus / "out")
    expected = pd.DataFrame(docs(200))
    expected = expected[expected["n"] % 2 == 0]
    expected = expected.assign(length=expected["text"].str.len()).drop_duplicates("length")
    assert out["n"].tolist() == sorted(expected["n"])
    assert out["text"].str.startswith("DOC").all()
    barrier = result.stage("dedup_length")
    assert (barrier.rows_in, barrier.rows_out) == (100, len(expected))
    assert result.stage("upper").rows_in == len(expected)
    assert result.dropped == {"odd": 100}


@pytest.mark.parametrize("executor", ["local", "streaming", "batch"])
def test_drops_before_and_at_a_dedup_barrier_are_each_counted_once(tmp_path, executor, request):
    from curator_dask import AddId
    from curator_dask.dedup.stages import ExactDedup

    if executor != "local":
        request.getfixturevalue("client")
    make = {"local": LocalExecutor, "streaming": StreamingExecutor, "batch": BatchExecutor}[
        executor
    ]
    # 60 documents, then exact copies of the first 30: 45 odd ones are filtered out before
    # the barrier, and of the even ones left, the 15 copies are exact duplicates.
    write_jsonl(tmp_path / "in" / "a.jsonl", docs(60) + docs(30))
    p = (Pipeline("counts").add_stage(JsonlReader(str(tmp_path / "in"), blocksize="1KiB"))
         .add_stage(AddId()).add_stage(drop_odd).add_stage(ExactDedup())
         .add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = p.run(make(cache_path=str(tmp_path / "cache"), progress=False))
    out = read_output(tmp_path / "out")
    assert out["n"].tolist() == list(range(0, 60, 2))
    assert result.dropped == {"odd": 45, "exact_duplicate": 15}
    assert len(out) + sum(result.dropped.values()) == 90


def test_jsonl_writer_and_parquet_reader(corpus):
    pipeline(corpus, writer=JsonlWriter, out="jsonl", compression="gzip").run(
        LocalExecutor(progress=False))
    assert sorted(n for n in os.listdir(corpus / "jsonl") if n.startswith("part-"))[0] == \
        "part-00000.jsonl.gz"
    p = (Pipeline("again").add_stage(JsonlReader(str(corpus / "jsonl")))
         .add_stage(ParquetWriter(str(corpus / "pq"))))
    p.run(LocalExecutor(progress=False))
    q = (Pipeline("pq").add_stage(ParquetReader(str(corpus / "pq"), files_per_partition=4))
         .add_stage(upper))
    ds = q.run(LocalExecutor(progress=False)).dataset
    assert sorted(ds.df.compute()["n"]) == list(range(200))


# -- monitoring ------------------------------------------------------------------------------

def _metric(text: str, name: str, stage: str) -> float:
    for line in text.splitlines():
        if line.startswith(f'{name}{{stage="{stage}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_workers_serve_stage_counters_at_their_metrics_endpoint(corpus, client):
    import urllib.request

    pytest.importorskip("prometheus_client")
    stage = upper.with_(name="counted")
    result = pipeline(corpus, stage).run(StreamingExecutor(progress=False))
    rows = partitions = seconds = 0.0
    for info in client.scheduler_info(n_workers=-1)["workers"].values():
        port = info["services"]["dashboard"]
        text = urllib.request.urlopen(f"http://{info['host']}:{port}/metrics", timeout=10).read()
        text = text.decode()
        rows += _metric(text, "curator_stage_rows_total", "counted")
        partitions += _metric(text, "curator_stage_partitions_total", "counted")
        seconds += _metric(text, "curator_stage_seconds_total", "counted")
    assert (rows, partitions) == (200, 12)
    assert seconds == pytest.approx(result.stage("counted").busy_seconds, rel=1e-6)


def test_progress_bar_counts_partitions(corpus, monkeypatch):
    from curator_dask.observe import progress as progress_module

    bars = []
    real = progress_module.Progress

    class Recording(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append(self)

        def close(self):
            self.shown_at_close = None if self._bar is None else self._bar.n
            super().close()

    monkeypatch.setattr(progress_module, "_interactive", lambda: True)
    monkeypatch.setattr("curator_dask.executors.base.Progress", Recording)
    pipeline(corpus).run(LocalExecutor())
    # One progress for the run; its bar showed all 12 partitions when the run closed it.
    assert [(b.total, b.done, b.shown_at_close) for b in bars] == [(12, 12, 12)]


def test_describe_keeps_its_columns_aligned_from_stage_10_on():
    @processing_stage(name="step")
    def step(df):
        return df

    p = Pipeline("long").add_stage(JsonlReader("in/"))
    for _ in range(10):
        p.add_stage(step)  # named step, step_2, ... step_10
    p.add_stage(ParquetWriter("out/"))
    lines = p.describe().splitlines()[1:]
    assert [line.split()[0] for line in lines] == [f"{i}." for i in range(1, 13)]
    name_at = {line.index(line.split()[1]) for line in lines}
    resources_at = {line.index("CPU=1") for line in lines}
    assert len(name_at) == 1 and len(resources_at) == 1
