"""Output names taken from the data (``write_to_filename``) never leave the output
directory: a name that would is an error naming it, and nothing is written outside.
"""

from __future__ import annotations

import pytest

from curator_dask import DocumentDataset
from curator_dask.executors import StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages import processing_stage
from curator_dask.stages.io_stages import JsonlReader, JsonlWriter
from reliability.conftest import snapshot_bytes, write_corpus

ABSOLUTE = "<absolute path beside the output>"


def outside(root, out: str) -> dict[str, str]:
    """The files under ``root`` that are not under its ``out`` directory."""
    return {k: v for k, v in snapshot_bytes(root).items() if not k.startswith(out + "/")}


@pytest.mark.parametrize("name", ["../escape.jsonl", "a/../../x.jsonl", ABSOLUTE])
def test_write_to_filename_refuses_names_outside_the_output(tmp_path, name):
    if name == ABSOLUTE:
        name = str(tmp_path / "work" / "victim.jsonl")
    corpus = write_corpus(tmp_path / "in", 30)
    ds = DocumentDataset.read_jsonl(str(corpus.path), add_filename=True, files_per_partition=1)
    ds = DocumentDataset(ds.df.assign(file_name=name), plan=ds.plan)
    before = outside(tmp_path, "work/out")
    with pytest.raises(ValueError, match="would be written outside the output directory") as err:
        ds.to_jsonl(str(tmp_path / "work" / "out"), write_to_filename=True)
    assert repr(name) in str(err.value)
    assert outside(tmp_path, "work/out") == before  # nothing written beside the output
    corpus.assert_unchanged()


def test_a_pipeline_writer_refuses_them_too(tmp_path, client):
    corpus = write_corpus(tmp_path / "in", 30)

    @processing_stage(name="rename")
    def rename(df):
        return df.assign(file_name="../escape.jsonl")

    before = outside(tmp_path, "work/out")
    p = (Pipeline("escape")
         .add_stage(JsonlReader(str(corpus.path), add_filename=True, files_per_partition=1))
         .add_stage(rename)
         .add_stage(JsonlWriter(str(tmp_path / "work" / "out"), write_to_filename=True)))
    with pytest.raises(ValueError, match=r"'\.\./escape\.jsonl'.*outside the output directory"):
        p.run(StreamingExecutor(progress=False))
    assert outside(tmp_path, "work/out") == before
    corpus.assert_unchanged()
