"""Declared columns: every stage states what it reads, adds and removes, and is held to it.

A stage whose output has a column it did not declare (or lacks a declared one) fails
with its name and the declaration to add, interactively and in a pipeline; a stage that
reads a column the input lacks is refused before anything runs. NeMo Curator 1.x stages
declare the same with ``inputs()``/``outputs()``, which are read as NeMo spells them.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import docs, write_jsonl

from curator_dask import DocumentDataset, ProcessingStage, processing_stage
from curator_dask.executors import LocalExecutor
from curator_dask.executors.layout import InternalStage
from curator_dask.pipeline import Pipeline
from curator_dask.stages.base import Stage, WholeDatasetStage
from curator_dask.stages.columns import ColumnNotFoundError, UndeclaredColumnError
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter


def dataset(n: int = 6, npartitions: int = 2) -> DocumentDataset:
    return DocumentDataset.from_pandas(pd.DataFrame(docs(n)), npartitions=npartitions)


@processing_stage(name="chars")
def chars_undeclared(df):
    return df.assign(chars=df["text"].str.len())


def test_every_stage_kind_states_name_kind_resources_and_columns():
    stages = [JsonlReader("in/"), chars_undeclared, ParquetWriter("out/"),
              WholeDatasetStage(), InternalStage("dedup", "write")]
    assert [s.kind for s in stages] == ["read", "process", "write", "barrier", "write"]
    assert [s.name for s in stages] == [
        "read_jsonl", "chars", "write_parquet", "WholeDatasetStage", "dedup_input"]
    assert all(isinstance(s, Stage) for s in stages)
    assert [str(s.resources) if s.resources else None for s in stages] == [
        "CPU=1", "CPU=1", "CPU=1", None, "CPU=1"]
    assert all(s.input_columns == () and s.removed_columns == () for s in stages[:2])
    writer = ParquetWriter("out/", write_to_filename=True, filename_field="source")
    assert writer.input_columns == ["source"]


def test_an_undeclared_output_column_fails_interactively_with_the_fix():
    with pytest.raises(UndeclaredColumnError,
                       match=r"stage 'chars' returned column 'chars' that it does not declare: "
                             r"add output_columns=\{'chars': 'Int64'\}"):
        chars_undeclared(dataset()).df.compute()


def test_an_undeclared_output_column_fails_a_pipeline_naming_the_stage_and_partition(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", docs(20))
    p = (Pipeline("cols").add_stage(JsonlReader(str(tmp_path / "in")))
         .add_stage(chars_undeclared).add_stage(ParquetWriter(str(tmp_path / "out"))))
    with pytest.raises(UndeclaredColumnError, match="add output_columns") as info:
        p.run(LocalExecutor(progress=False))
    assert any("stage 'chars' failed on input partition(s) [0]" in note
               for note in info.value.__notes__)
    assert not list((tmp_path / "out").glob("part-*"))  # nothing written


def test_a_declared_column_the_output_lacks_fails_and_a_declared_one_passes():
    @processing_stage(name="forgetful", output_columns={"score": "float64"})
    def forgetful(df):
        return df

    with pytest.raises(UndeclaredColumnError,
                       match="stage 'forgetful' did not return column 'score' that it declares"):
        forgetful(dataset()).df.compute()

    @processing_stage(name="renamer", output_columns={"body": "str"}, removed_columns=["text"])
    def renamer(df):
        return df.rename(columns={"text": "body"})

    out = renamer(dataset()).df.compute()
    assert sorted(out.columns) == ["body", "n"]


def test_a_stage_reading_a_column_the_input_lacks_is_refused_before_anything_runs(tmp_path):
    calls = []

    class ReadsBody(ProcessingStage):
        name = "reads_body"
        input_columns = ("body",)

        def process(self, df):
            calls.append(len(df))
            return df

    with pytest.raises(ColumnNotFoundError, match=r"stage 'reads_body' reads column 'body', "
                       r"which the input does not have; the input columns are \['text', 'n'\]"):
        ReadsBody()(dataset())
    write_jsonl(tmp_path / "in" / "a.jsonl", docs(20))
    p = (Pipeline("cols").add_stage(JsonlReader(str(tmp_path / "in"))).add_stage(ReadsBody())
         .add_stage(ParquetWriter(str(tmp_path / "out"))))
    with pytest.raises(KeyError, match="reads column 'body'"):  # a KeyError, as pandas'
        p.run(LocalExecutor(progress=False))
    assert calls == []


class NemoStyle(ProcessingStage):
    """A stage written as for NeMo Curator 1.x."""

    name = "nemo_style"
    output_columns = {"length": "int64"}

    def __init__(self, text_field: str = "text"):
        self.text_field = text_field

    def inputs(self):
        return ["data"], [self.text_field]

    def outputs(self):
        return ["data"], [self.text_field, "length"]

    def process(self, df):
        return df.assign(length=df[self.text_field].str.len().astype("int64"))


def test_nemo_curator_inputs_and_outputs_are_read_as_nemo_spells_them():
    out = NemoStyle()(dataset()).df.compute()
    assert out["length"].tolist() == [len(d["text"]) for d in docs(6)]
    with pytest.raises(ColumnNotFoundError,
                       match=r"stage 'nemo_style' reads column 'body'.*Pass text_field="):
        NemoStyle(text_field="body")(dataset())
    assert ProcessingStage.inputs(NemoStyle()) == (["data"], [])  # ours: input_columns


def test_nemo_outputs_without_a_dtype_or_other_task_attributes_are_refused_with_the_fix():
    class NoDtype(NemoStyle):
        output_columns = {}

    with pytest.raises(TypeError, match=r"outputs\(\) names column 'length' without a dtype; "
                                        r"declare what the stage adds with "
                                        r"output_columns=\{'length': <dtype>\}"):
        NoDtype()(dataset())

    class Metadata(NemoStyle):
        def inputs(self):
            return ["data", "_metadata"], ["text"]

    with pytest.raises(TypeError, match=r"names task attributes \['_metadata'\].*input_columns="):
        Metadata()(dataset())
