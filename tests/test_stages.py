"""The stage API: decorator, copies, meta, composition, and setup once per worker process."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from conftest import docs, write_jsonl

from curator_dask import (
    AddId,
    DocumentDataset,
    ProcessingStage,
    Resources,
    Sequential,
    processing_stage,
)
from curator_dask.stages.ids import ROWS_PER_PARTITION_ID_SPACE


def dataset(n: int = 10, npartitions: int = 3) -> DocumentDataset:
    return DocumentDataset.from_pandas(pd.DataFrame(docs(n)), npartitions=npartitions)


@processing_stage(name="lower", resources=Resources(cpus=1))
def lower(df):
    return df.assign(text=df["text"].str.upper().str.lower())


@processing_stage(name="shout")
def shout(df):
    return df.assign(text=df["text"].str.upper())


def test_decorated_function_is_a_stage_with_name_and_resources():
    assert isinstance(lower, ProcessingStage)
    assert lower.name == "lower" and lower.resources == Resources(cpus=1)
    assert lower.batch_size == 1


def test_stage_call_is_lazy_and_keys_carry_the_stage_name():
    out = shout(dataset())
    assert isinstance(out, DocumentDataset)
    assert {k[0].split("-")[0] for k in out.df.__dask_keys__()} == {"shout"}
    assert out.df.compute()["text"].str.startswith("DOC").all()


def test_with_returns_a_modified_copy_and_leaves_the_original():
    gpu = shout.with_(name="shout-gpu", resources=Resources(gpus=0.5), batch_size=4)
    assert (gpu.name, gpu.resources.to_dask(), gpu.batch_size) == ("shout-gpu", {"GPU": 0.5}, 4)
    assert (shout.name, shout.resources.to_dask(), shout.batch_size) == ("shout", {"CPU": 1.0}, 1)
    assert gpu.stage_id != shout.stage_id
    with pytest.raises(ValueError, match="positive integer"):
        shout.with_(batch_size=0)


def test_a_stage_has_one_name_its_class_name_unless_one_is_set():
    class Untitled(ProcessingStage):
        def process(self, df):
            return df

    stage = Untitled()
    assert stage.name == "Untitled"
    stage.name = "mine"
    assert stage.name == "mine" and Untitled().name == "Untitled"
    stage.name = None
    assert stage.name == "Untitled"


def test_the_pipeline_and_its_run_name_stages_of_one_name_alike():
    from curator_dask import JsonlReader, Pipeline
    from curator_dask.dedup.stages import ExactDedup

    p = (Pipeline("twice").add_stage(JsonlReader("in/")).add_stage(AddId())
         .add_stage(shout).add_stage(ExactDedup()).add_stage(shout).add_stage(ExactDedup()))
    # Partition stages are renamed as they are added (they count drops under the name);
    # barriers keep theirs, and the run (whose stage names describe() shows) tells them
    # apart the same way.
    assert [s.name for s in p.stages] == ["read_jsonl", "add_id", "shout", "exact_dedup",
                                          "shout_2", "exact_dedup"]
    shown = [line.split()[1] for line in p.describe().splitlines()[1:]]
    assert shown == ["read_jsonl", "add_id", "shout", "exact_dedup", "shout_2",
                     "exact_dedup_2"]


def test_declared_output_columns_are_the_meta_and_process_never_sees_an_empty_frame():
    calls = []

    @processing_stage(name="score", output_columns={"score": "float64"}, removed_columns=["n"])
    def score(df):
        calls.append(len(df))
        if len(df) == 0:
            raise AssertionError("run on an empty frame to infer meta")
        return df.drop(columns=["n"]).assign(score=df["text"].str.len() / 10.0)

    out = score(dataset(6, 2))
    assert calls == []  # nothing ran while building
    assert list(out.df.columns) == ["text", "score"] and out.df.dtypes["score"] == "float64"
    assert out.df.compute()["score"].tolist() == [len(d["text"]) / 10.0 for d in docs(6)]


def test_removing_a_column_that_is_not_there_is_a_clear_error():
    stage = processing_stage(lambda df: df, name="drop", removed_columns=["nope"])
    with pytest.raises(KeyError, match=r"removes column.*'nope'.*input columns are"):
        stage(dataset())


def test_sequential_applies_stages_in_order():
    out = Sequential([shout, lower])(dataset()).df.compute()
    assert out["text"].str.startswith("doc").all()
    out = Sequential([lower, shout])(dataset()).df.compute()
    assert out["text"].str.startswith("DOC").all()
    assert Sequential([shout, Sequential([lower])]).flatten() == [shout, lower]


def test_stage_on_something_else_than_a_dataset():
    with pytest.raises(TypeError, match="takes a DocumentDataset"):
        shout(pd.DataFrame({"text": ["a"]}))


class CountingStage(ProcessingStage):
    """Writes one file per setup() call, named after the process that made it."""

    name = "counting"
    output_columns = {"pid": "int64"}

    def __init__(self, directory: str):
        self.directory = directory
        self.loaded = False

    def setup_on_node(self):
        with open(os.path.join(self.directory, f"node-{os.getpid()}"), "w"):
            pass

    def setup(self):
        with open(os.path.join(self.directory, f"setup-{os.getpid()}"), "w"):
            pass
        self.loaded = True

    def process(self, df):
        assert self.loaded, "process() before setup()"
        return df.assign(pid=os.getpid())


def test_setup_runs_once_per_worker_process_not_per_partition(tmp_path, client):
    marks = tmp_path / "marks"
    marks.mkdir()
    stage = CountingStage(str(marks))
    out = stage(dataset(200, npartitions=20)).df.compute()
    pids = set(out["pid"])
    setups = sorted(p.name for p in marks.iterdir() if p.name.startswith("setup-"))
    nodes = [p.name for p in marks.iterdir() if p.name.startswith("node-")]
    worker_pids = set(client.run(os.getpid).values())
    assert pids <= worker_pids and os.getpid() not in pids
    assert setups == sorted(f"setup-{pid}" for pid in pids)  # one per process that ran tasks
    assert len(nodes) == 1  # one host: setup_on_node ran once
    # A second run of the same stage object reuses the set-up copies.
    stage(dataset(50, npartitions=5)).df.compute()
    assert len([p for p in marks.iterdir() if p.name.startswith("setup-")]) == len(setups)


def test_add_id_is_unique_and_the_same_on_every_run(tmp_path):
    for i in range(3):
        write_jsonl(tmp_path / f"f{i}.jsonl", docs(40, start=40 * i))
    first = AddId()(DocumentDataset.read_jsonl(str(tmp_path), blocksize="1KiB")).df.compute()
    second = AddId()(DocumentDataset.read_jsonl(str(tmp_path), blocksize="1KiB")).df.compute()
    assert first["id"].dtype == "int64" and first["id"].is_unique
    pd.testing.assert_frame_equal(first, second)
    partition = first["id"] // ROWS_PER_PARTITION_ID_SPACE
    assert partition.is_monotonic_increasing and partition.nunique() > 3


def test_add_id_with_prefix():
    out = AddId("doc_id", id_prefix="cc")(dataset(4, 2)).df.compute()
    assert out["doc_id"].tolist() == ["cc-0000000000", "cc-0000000001",
                                     "cc-1000000000", "cc-1000000001"]
